"""The pure pieces the failover benchmark reads its results with (the clusters themselves are the
integration tests' business): what a failover changed on the controller, and the brokers' warning lines."""

import dataclasses
import uuid

from benchmarks.failover import changed_partitions, log_problems, max_gap
from replog.controller.registry import new_partition

TOPIC_ID = uuid.uuid4()


def registrations(layout):
    return {("t", p): new_partition("t", TOPIC_ID, p, replicas) for p, replicas in layout.items()}


def moved(registration, leader, isr, epoch_step=1):
    return dataclasses.replace(
        registration,
        leader=leader,
        isr=isr,
        leader_epoch=registration.leader_epoch + epoch_step,
        partition_epoch=registration.partition_epoch + epoch_step,
    )


def test_a_fenced_broker_leaves_every_isr_and_its_leaderships_move_cleanly():
    before = registrations({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    after = {
        ("t", 0): moved(before[("t", 0)], 2, (2, 3)),
        ("t", 1): dataclasses.replace(before[("t", 1)], isr=(2, 3), partition_epoch=1),
        ("t", 2): dataclasses.replace(before[("t", 2)], isr=(3, 2), partition_epoch=1),
    }
    counts = changed_partitions(before, after, 1, victim_reachable=False)
    assert counts == {
        "changed": 3,
        "moved": 1,
        "unclean_or_skipped_epoch": 0,
        "leader_and_isr_partition_states": 6,
        "new_leaders": {"2": 1},
        "still_victim_in_isr": 0,
    }
    # In a controlled shutdown the broker still gets its LeaderAndIsr: one more state per partition.
    assert changed_partitions(before, after, 1, victim_reachable=True)["leader_and_isr_partition_states"] == 9


def test_an_election_skipping_an_epoch_or_leaving_the_isr_is_counted():
    before = registrations({0: [1, 2, 3], 1: [1, 2, 3]})
    before[("t", 1)] = dataclasses.replace(before[("t", 1)], isr=(1, 2))
    after = {
        ("t", 0): moved(before[("t", 0)], 2, (2, 3), epoch_step=2),
        ("t", 1): moved(before[("t", 1)], 3, (3,)),
    }
    counts = changed_partitions(before, after, 1, victim_reachable=False)
    assert counts["moved"] == 2
    assert counts["unclean_or_skipped_epoch"] == 2


def test_unchanged_partitions_are_not_counted():
    before = registrations({0: [2, 3, 1]})
    counts = changed_partitions(before, dict(before), 1, victim_reachable=False)
    assert counts["changed"] == counts["moved"] == counts["leader_and_isr_partition_states"] == 0
    assert counts["still_victim_in_isr"] == 1


def test_log_problems_counts_levels_and_keeps_distinct_messages_once():
    text = "\n".join(
        [
            "2026-11-22 10:00:00,001 INFO replog.broker.server: replog broker 2 listening on 127.0.0.1:1",
            "2026-11-22 10:00:01,001 WARNING replog.fetcher: fetch from 127.0.0.1:33023 failed",
            "2026-11-22 10:00:02,001 WARNING replog.fetcher: fetch from 127.0.0.1:33023 failed",
            "2026-11-22 10:00:03,001 WARNING replog.fetcher: fetch from 127.0.0.1:40000 failed",
            "2026-11-22 10:00:04,001 ERROR replog.server.connection: handler crashed",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
        ]
    )
    problems = log_problems(text)
    assert problems["counts"] == {"WARNING": 3, "ERROR": 1, "Traceback": 1}
    assert problems["first"] == [
        "WARNING replog.fetcher: fetch from 127.0.0.1:33023 failed",
        "ERROR replog.server.connection: handler crashed",
    ]
    assert log_problems("", samples=1) == {"counts": {}, "first": []}


def test_max_gap_is_the_longest_interval_between_consecutive_times():
    assert max_gap([1.0, 3.0, 3.5, 7.0]) == 3.5
    assert max_gap([5.0]) == max_gap([]) == 0.0
