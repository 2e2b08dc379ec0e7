"""replicated-produce's rounds against a real 3-broker cluster: each measured run writes a topic of its own,
and that topic's files are gone before the next run starts, so no run shares the page cache with what the
round's earlier runs wrote (docs/profiles/rf3-throughput.md, "Session 12")."""

import os
import re

from benchmarks import replicated_produce

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-\d+$")


def topics_on_disk(root) -> set[str]:
    """Topics that have a partition directory in any broker's log dir under the cluster's root."""
    return {match["topic"] for path in root.glob("broker-*/*") if path.is_dir()
            and (match := PARTITION_DIR.match(path.name))}  # fmt: skip


async def test_each_measured_run_writes_its_own_topic_deleted_before_the_next_run(tmp_path, monkeypatch):
    root = tmp_path / "round"
    started = []
    produce = replicated_produce.produce

    def recording_produce(bootstrap, topic, value, count, **options):
        started.append((topic, count, topics_on_disk(root) - {topic}))
        return produce(bootstrap, topic, value, count, **options)

    monkeypatch.setattr(replicated_produce, "produce", recording_produce)
    measured = await replicated_produce.produce_round(root, os.urandom(replicated_produce.VALUE_BYTES), 300, 100,
                                                      reverse=True)
    warm_ups, runs = started[:2], started[2:]
    assert [(topic, count) for topic, count, _ in warm_ups] == [("rf3", 100), ("rf1", 100)]
    # reverse=True: the runs in reverse order of RUNS, each into its own topic, the warm-ups' topics the only
    # others on disk when it starts.
    assert [(topic, count) for topic, count, _ in runs] == [
        ("run-rf1-not-idempotent", 300), ("run-rf3-not-idempotent", 300), ("run-rf1", 300), ("run-rf3", 300)]
    assert all(others == {"rf3", "rf1"} for _, _, others in runs), runs
    assert list(measured) == list(reversed(replicated_produce.RUNS))
    assert all(rate > 0 and broker_cpu >= 0 and client_cpu >= 0 for rate, broker_cpu, client_cpu in measured.values())
    assert not root.exists()  # the round's cluster directory goes with it
