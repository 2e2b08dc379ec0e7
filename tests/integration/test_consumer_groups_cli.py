"""`replog consumer-groups` against a live broker: list, describe with lag, delete (issue 15, item 5)."""

import pytest

from replog.cli import EXIT_ERROR, EXIT_OK, main
from tests.interop.test_consumer_groups import create_topic_with_records


def test_list_describe_with_lag_and_delete(group_broker, capsys):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = group_broker.bootstrap
    ends = create_topic_with_records(bootstrap, "lagging", count=300)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "lagger",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                         "client.id": "lag-client"})
    consumer.subscribe(["lagging"])
    read = []
    while len(read) < 100:
        read += consumer.consume(100 - len(read), timeout=0.5)
    consumer.commit(asynchronous=False)
    committed = {p: 0 for p in range(3)}
    for msg in read:
        committed[msg.partition()] = max(committed[msg.partition()], msg.offset() + 1)
    try:
        capsys.readouterr()
        assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--list"]) == EXIT_OK
        assert capsys.readouterr().out.split() == ["lagger"]

        assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "lagger"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "Consumer group 'lagger': state Stable, 1 member(s)"
        assert lines[2].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"]
        for line in lines[3:]:
            _, topic, partition, current, end, lag, member, host, client = line.split()
            p = int(partition)
            expected_current = str(committed[p]) if committed[p] else "-"
            expected_lag = str(ends[p] - committed[p]) if committed[p] else "-"
            assert (topic, current, end, lag) == ("lagging", expected_current, str(ends[p]), expected_lag)
            assert (host, client) == ("/127.0.0.1", "lag-client") and member.startswith("lag-client-")
        assert len(lines) == 3 + 3

        assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "lagger"]) == 1
        assert "NON_EMPTY_GROUP" in capsys.readouterr().err
    finally:
        consumer.close()
    assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "lagger"]) == 0
    assert main(["consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "lagger"]) == EXIT_ERROR
    assert "GROUP_ID_NOT_FOUND" in capsys.readouterr().err
