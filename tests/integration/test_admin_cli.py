"""`replog configs`, `replog topics alter`, `replog delete-records` and `replog leader-election` against a real
broker: Kafka's tools' flags, file formats and messages; bad input exits non-zero with Kafka's error name."""

import json
import subprocess
import sys

import pytest

from replog.cli_admin import parse_add_config, split_config_list

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 60


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize(("text", "expected"), [
    ("retention.ms=1000,segment.ms=2000", {"retention.ms": "1000", "segment.ms": "2000"}),
    ("leader.replication.throttled.replicas=[0:1,1:2],retention.ms=5",
     {"leader.replication.throttled.replicas": "0:1,1:2", "retention.ms": "5"}),
])
def test_add_config_syntax_of_kafka_configs(text, expected):
    assert parse_add_config(text) == expected


def test_unbalanced_brackets_are_refused():
    with pytest.raises(ValueError, match="unbalanced"):
        split_config_list("a=[1,2")


def test_admin_commands_against_a_broker(broker, tmp_path):
    server = ["--bootstrap-server", broker.bootstrap]
    assert run("topics", "create", *server, "--topic", "admin-cli").returncode == 0
    lines = b"".join(b"line %d\n" % i for i in range(50))
    assert run("produce", "admin-cli", *server, stdin=lines).returncode == 0  # one partition: all in 0
    altered = run("configs", *server, "--alter", "--entity-type", "topics", "--entity-name", "admin-cli",
                  "--add-config", "retention.ms=1000,max.message.bytes=5000")
    assert altered.returncode == 0, altered.stderr
    assert b"Completed updating config for topic admin-cli." in altered.stdout
    described = run("configs", *server, "--describe", "--entity-type", "topics", "--entity-name", "admin-cli")
    assert b"  retention.ms=1000 sensitive=false" in described.stdout
    assert b"segment.ms" not in described.stdout  # defaults are not dynamic configs
    topic = run("topics", "describe", *server, "--topic", "admin-cli")
    assert b"Configs: max.message.bytes=5000,retention.ms=1000" in topic.stdout
    deleted = run("configs", *server, "--alter", "--entity-type", "topics", "--entity-name", "admin-cli",
                  "--delete-config", "retention.ms")
    assert deleted.returncode == 0, deleted.stderr
    topic = run("topics", "describe", *server, "--topic", "admin-cli")
    assert b"Configs: max.message.bytes=5000\n" in topic.stdout
    bad = run("configs", *server, "--alter", "--entity-type", "topics", "--entity-name", "admin-cli",
              "--add-config", "retention.ms=never")
    assert bad.returncode != 0 and b"INVALID_CONFIG" in bad.stderr and b"retention.ms" in bad.stderr

    grown = run("topics", "alter", *server, "--topic", "admin-cli", "--partitions", "3")
    assert grown.returncode == 0, grown.stderr
    assert b"PartitionCount: 3" in run("topics", "describe", *server, "--topic", "admin-cli").stdout
    shrunk = run("topics", "alter", *server, "--topic", "admin-cli", "--partitions", "2")
    assert shrunk.returncode != 0 and b"INVALID_PARTITIONS" in shrunk.stderr

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "admin-cli", "partition": 0, "offset": 20}],
                                   "version": 1}))
    trimmed = run("delete-records", *server, "--offset-json-file", str(offsets))
    assert trimmed.returncode == 0, trimmed.stderr
    assert b"partition: admin-cli-0\tlow_watermark: 20" in trimmed.stdout

    elected = run("leader-election", *server, "--election-type", "preferred", "--topic", "admin-cli",
                  "--partition", "0")
    assert elected.returncode == 0, elected.stderr
    assert b"Valid replica already elected for partitions admin-cli-0" in elected.stdout
    unknown = run("leader-election", *server, "--election-type", "preferred", "--topic", "nope", "--partition", "0")
    assert unknown.returncode != 0 and b"UNKNOWN_TOPIC_OR_PARTITION" in unknown.stdout
