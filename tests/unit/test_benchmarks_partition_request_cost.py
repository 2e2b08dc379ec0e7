"""The partition-request-cost benchmark measures what it says: both operations complete on a real
ReplicaManager (the benchmark asserts it) and every round yields a CPU time."""

from benchmarks.partition_request_cost import measure


async def test_each_round_times_an_idle_fetch_and_a_committed_acks_all_produce(tmp_path):
    idle, produce = await measure(tmp_path, partitions=3, rounds=2)
    assert len(idle) == len(produce) == 2
    assert all(seconds > 0 for seconds in idle + produce)
