"""The crash loop's explanation of a duplicate, from a cluster directory laid out as LocalCluster leaves it."""

from replog.chaos.duplicate_origins import (
    Copy,
    duplicated_values,
    explain,
    find_copies,
    leaders_by_epoch,
    round_after,
)
from replog.protocol.records import build_batch

PID = 8589934592


def _write_replica(log_dir, partition, batches):
    """batches: (base offset, producer epoch, base sequence, leader epoch, timestamp, values)."""
    directory = log_dir / f"crash-{partition}"
    directory.mkdir(parents=True)
    data = bytearray()
    for base_offset, epoch, sequence, leader_epoch, timestamp, values in batches:
        batch = bytearray(build_batch([(None, v.encode(), [], timestamp) for v in values], producer_id=PID,
                                      producer_epoch=epoch, base_sequence=sequence))
        batch[0:8] = base_offset.to_bytes(8, "big")
        batch[12:16] = leader_epoch.to_bytes(4, "big")  # partitionLeaderEpoch (not under the CRC)
        data += batch
    (directory / "00000000000000000000.log").write_bytes(data)


def test_an_epoch_bump_resend_is_named_with_both_batches_their_leaders_and_rounds(tmp_path):
    _write_replica(tmp_path / "broker-1", 2, [
        (4789, 0, 1635, 2, 1_000, ["all0-6542"]),
        (4790, 0, 1636, 2, 1_010, ["all0-6546"]),
        (4791, 0, 1637, 2, 1_020, ["all0-6550"]),  # not wanted: read once
        (4895, 1, 0, 3, 1_010, ["all0-6546", "all0-6550x"]),
    ])
    (tmp_path / "broker-3.out").write_text("2026 INFO replog.broker.replica_manager: crash-2: leader in epoch 2, "
                                           "ISR [3, 1, 2]\n")
    (tmp_path / "broker-1.out").write_text("... crash-2: leader in epoch 3, ISR [1, 2]\nother-2: leader in epoch 3\n")
    read = {2: [(4789, "all0-6542"), (4790, "all0-6546"), (4791, "all0-6550"), (4895, "all0-6546"),
                (4896, "all0-6550x")]}
    wanted = duplicated_values(read, limit=5)
    assert wanted == {"all0-6546": {(2, 4790), (2, 4895)}}
    copies = find_copies(tmp_path / "broker-1", "crash", wanted, bytes.decode)
    assert copies == {"all0-6546": [Copy(2, 4790, PID, 0, 1636, 2, 1_010), Copy(2, 4895, PID, 1, 0, 3, 1_010)]}
    leaders = leaders_by_epoch(tmp_path, "crash")
    assert leaders == {(2, 2): 3, (2, 3): 1}
    [line] = explain(copies, leaders, kill_times_ms=[(1, 500), (2, 1_500)])
    assert line == (f"'all0-6546' (produced before the kill of round #2): 2/4790: producer {PID} epoch 0 base "
                    f"sequence 1636, leader epoch 2 (broker 3); 2/4895: producer {PID} epoch 1 base sequence 0, "
                    "leader epoch 3 (broker 1) -> re-sent at sequence 0 after a producer epoch bump (KIP-360): see "
                    "the writer's EOS log")


def test_copies_within_one_producer_epoch_get_no_epoch_bump_verdict():
    copies = {"v": [Copy(0, 10, PID, 0, 5, 1, 0), Copy(0, 12, PID, 0, 5, 2, 0)]}
    [line] = explain(copies, {}, [])
    assert line == (f"'v' (produced after the last kill): 0/10: producer {PID} epoch 0 base sequence 5, leader "
                    f"epoch 1 (broker ?); 0/12: producer {PID} epoch 0 base sequence 5, leader epoch 2 (broker ?)")


def test_the_round_of_a_write_is_the_first_killed_after_it():
    kills = [(1, 100), (2, 200), (3, 300)]
    assert [round_after(t, kills) for t in (50, 100, 150, 300, 301)] == [1, 1, 2, 3, None]
