import stat

import pytest

from replog.log.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile, write_atomically
from replog.log.errors import CorruptCheckpointError


def test_offset_checkpoint_round_trip(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    offsets = {("orders", 0): 10, ("orders", 1): 0, ("a-b", 12): 99}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    assert path.read_text() == "0\n3\na-b 12 99\norders 0 10\norders 1 0\n"
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt 0\n", "0\n1\nt zero 1\n"],
)
def test_malformed_checkpoint_raises(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_overwrite_is_atomic_replace(tmp_path):
    path = tmp_path / "cp"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("t", 0): 1})
    inode = path.stat().st_ino
    checkpoint.write({("t", 0): 2})
    assert path.stat().st_ino != inode  # a new file renamed over, never rewritten in place
    assert checkpoint.read() == {("t", 0): 2}


def test_write_atomically_creates_with_the_mode_even_over_a_leftover_tmp_file(tmp_path):
    target = tmp_path / "controller.properties"
    leftover = tmp_path / "controller.properties.tmp"
    leftover.write_text("half-written")
    leftover.chmod(0o644)
    write_atomically(target, b"secret\n", 0o600)
    assert target.read_bytes() == b"secret\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controller.properties"]
