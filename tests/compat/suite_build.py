"""Building librdkafka 2.15.0's test-runner for `make compat`, once per source and recipe.

The build lands in build/librdkafka-2.15.0-<key>/, where the key hashes the vendored tarball and the build
steps, so a second `make compat` reuses it and a new tarball or a changed recipe builds afresh (and removes
the stale tree). The recipe builds only what the suite runs: the C and C++ libraries and the test-runner.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

SUITE_NAME = "librdkafka-2.15.0"
BUILT_STAMP_NAME = ".replog-compat-built"
BUILD_JOBS = f"-j{os.cpu_count() or 1}"  # one compiler per core: the build is CPU-bound
CONFIGURE = [
    "./configure",
    # Neither an HTTP client (OIDC), SASL/GSSAPI nor TLS: test.conf holds only bootstrap.servers, and the one
    # listed test that sets ssl.* properties (0004) is local-only, which -L skips.
    "--disable-curl", "--disable-gssapi", "--disable-ssl",
    # -O0 instead of -O2 roughly halves the compile; the suite checks what the client sends and receives,
    # which the optimiser does not change. zlib, snappy and lz4 (0017's codecs) stay; -g stays for backtraces.
    "--disable-optimization",
]
BUILD_STEPS = (
    CONFIGURE,
    ["make", BUILD_JOBS, "libs"],  # src/ and src-cpp/: the test-runner links both
    ["make", BUILD_JOBS, "-C", "tests", "test-runner"],  # not the examples, docs or tools
)


def build_key(tarball: Path, steps: tuple[list[str], ...] = BUILD_STEPS) -> str:
    """What the build depends on: the source tarball's bytes and the recipe (the job count aside)."""
    digest = hashlib.sha256()
    with open(tarball, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    digest.update(repr([[arg for arg in step if arg != BUILD_JOBS] for step in steps]).encode())
    return digest.hexdigest()[:16]


def suite_dir(build_dir: Path, key: str) -> Path:
    return build_dir / f"{SUITE_NAME}-{key}"


def is_built(source_dir: Path) -> bool:
    return (source_dir / BUILT_STAMP_NAME).exists()


def build_suite(tarball: Path, build_dir: Path,
                steps: tuple[list[str], ...] = BUILD_STEPS) -> tuple[Path, float | None]:
    """The built tree for this tarball and recipe, and the seconds building it took (None: it was there)."""
    if not tarball.is_file():
        raise SystemExit(f"compat: {tarball} is missing: the vendored sources live in ../shared/vendor/")
    source_dir = suite_dir(build_dir, build_key(tarball, steps))
    if is_built(source_dir):
        return source_dir, None
    started = time.monotonic()
    # Older keys' trees and a build that stopped halfway: each is several hundred MB and never used again.
    for stale in build_dir.glob(f"{SUITE_NAME}*"):
        shutil.rmtree(stale, ignore_errors=True)
    source_dir.mkdir(parents=True)
    subprocess.run(["tar", "-xzf", str(tarball), "-C", str(source_dir), "--strip-components=1"], check=True)
    build_log = build_dir / "librdkafka-build.log"
    # Under `make compat` the parent make's jobserver settings would reach these makes without its pipes.
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    with open(build_log, "wb") as out:
        for step in steps:
            print(f"compat: {' '.join(step)}", flush=True)
            if subprocess.run(step, cwd=source_dir, env=env, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                tail = "\n".join(build_log.read_text(errors="replace").splitlines()[-30:])
                raise SystemExit(f"compat: building librdkafka failed at `{' '.join(step)}`:\n{tail}")
    (source_dir / BUILT_STAMP_NAME).touch()
    return source_dir, time.monotonic() - started
