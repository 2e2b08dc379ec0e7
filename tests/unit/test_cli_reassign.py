"""The pure parts of `replog reassign`: kafka-reassign-partitions' JSON files, the --generate proposal and the
throttled-replicas configs --execute --throttle sets."""

import json

import pytest

from replog.cli_reassign import format_reassignment, parse_reassignment, propose, throttled_replicas


def test_reassignment_file_round_trips():
    text = format_reassignment({("t", 1): (4, 2), ("t", 0): (1, 2)})
    assert json.loads(text) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [4, 2], "log_dirs": ["any", "any"]}]}
    assert parse_reassignment(text, "f") == {("t", 0): (1, 2), ("t", 1): (4, 2)}


@pytest.mark.parametrize(("document", "said"), [
    ('{"version":1,"partitions":[]}', "no partitions"),
    ('{"version":1}', "not a kafka-reassign-partitions file"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data"]}]}', "only \"any\""),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}', "differ in length"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "appears twice"),
    ("not json", "not a kafka-reassign-partitions file"),
])
def test_bad_reassignment_files_are_refused(document, said):
    with pytest.raises(ValueError, match=said):
        parse_reassignment(document, "f")


def test_generate_spreads_each_topic_over_the_broker_list_with_its_replication_factor():
    current = {("a", 0): (1, 2), ("a", 1): (2, 1), ("b", 0): (1,)}
    proposed = propose(current, [3, 4, 5], {3: None, 4: None, 5: None})
    assert set(proposed) == set(current)
    assert all(len(proposed[k]) == len(current[k]) and set(proposed[k]) <= {3, 4, 5} for k in current)
    with pytest.raises(ValueError, match="topic a"):
        propose(current, [3], {3: None})  # replication factor 2 over one broker


def test_throttle_marks_current_replicas_as_leaders_and_new_ones_as_followers():
    current = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("u", 0): (1,)}
    target = {("t", 0): (4, 2, 3), ("t", 1): (2, 3, 1), ("u", 0): (2,)}
    assert throttled_replicas(current, target) == {
        "t": {"leader.replication.throttled.replicas": "0:1,0:2,0:3,1:2,1:3,1:1",
              "follower.replication.throttled.replicas": "0:4"},
        "u": {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}}
