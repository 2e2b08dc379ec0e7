"""make compat's librdkafka build: one tree per source and recipe, reused, rebuilt when either changes."""

import tarfile

import pytest

from tests.compat.suite_build import BUILD_JOBS, SUITE_NAME, build_key, build_suite, is_built

# Stands in for configure and make: appends a line per run, so a test can count the builds.
COUNTING_STEPS = (["sh", "-c", "echo built >> runs.txt"],)


def make_tarball(path, content: bytes):
    """A tarball shaped like the vendored one: everything under one top-level directory."""
    source = path.parent / "src" / SUITE_NAME
    source.mkdir(parents=True, exist_ok=True)
    (source / "configure").write_bytes(content)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(source, arcname=SUITE_NAME)
    return path


def runs_in(tree) -> int:
    return len((tree / "runs.txt").read_text().splitlines())


def test_the_key_follows_the_tarball_and_the_recipe_but_not_the_job_count(tmp_path):
    tarball = make_tarball(tmp_path / "a.tar.gz", b"one")
    key = build_key(tarball, COUNTING_STEPS)
    assert build_key(tarball, COUNTING_STEPS) == key
    assert build_key(tarball, (["sh", "-c", "true"],)) != key
    assert build_key(tarball, (["make", BUILD_JOBS],)) == build_key(tarball, (["make"],))
    assert build_key(make_tarball(tmp_path / "b.tar.gz", b"two"), COUNTING_STEPS) != key


def test_a_second_build_reuses_the_finished_tree(tmp_path):
    tarball = make_tarball(tmp_path / "suite.tar.gz", b"one")
    tree, seconds = build_suite(tarball, tmp_path / "build", COUNTING_STEPS)
    assert seconds is not None and is_built(tree)
    assert (tree / "configure").read_bytes() == b"one"  # unpacked into the keyed tree, not beside it
    assert build_suite(tarball, tmp_path / "build", COUNTING_STEPS) == (tree, None)
    assert runs_in(tree) == 1


def test_a_new_tarball_builds_afresh_and_removes_the_stale_tree(tmp_path):
    build_dir = tmp_path / "build"
    old_tree, _ = build_suite(make_tarball(tmp_path / "old.tar.gz", b"one"), build_dir, COUNTING_STEPS)
    unfinished = build_dir / f"{SUITE_NAME}-unfinished"
    unfinished.mkdir()
    new_tree, seconds = build_suite(make_tarball(tmp_path / "new.tar.gz", b"two"), build_dir, COUNTING_STEPS)
    assert seconds is not None and new_tree != old_tree
    assert (new_tree / "configure").read_bytes() == b"two" and runs_in(new_tree) == 1
    assert sorted(build_dir.glob(f"{SUITE_NAME}*")) == [new_tree]


def test_a_failed_step_is_reported_and_leaves_no_finished_build(tmp_path):
    tarball = make_tarball(tmp_path / "suite.tar.gz", b"one")
    with pytest.raises(SystemExit, match="building librdkafka failed at `sh -c echo broken; exit 2`"):
        build_suite(tarball, tmp_path / "build", (["sh", "-c", "echo broken; exit 2"],))
    assert not any(is_built(tree) for tree in (tmp_path / "build").glob(f"{SUITE_NAME}*"))
