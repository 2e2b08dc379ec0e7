"""The `replog` command line against a real broker process."""

import subprocess
import sys

CLI = [sys.executable, "-m", "replog"]
TIMEOUT_S = 60


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=TIMEOUT_S)


def test_topics_produce_consume(broker):
    server = ["--bootstrap-server", broker.bootstrap]
    created = run(
        "topics", "create", *server, "--topic", "cli", "--partitions", "2", "--replication-factor", "1"
    )
    assert created.returncode == 0, created.stderr
    listed = run("topics", "list", *server)
    assert listed.stdout.split() == [b"cli"]
    described = run("topics", "describe", *server, "--topic", "cli")
    assert described.returncode == 0, described.stderr
    assert b"PartitionCount: 2" in described.stdout
    assert b"Partition: 1\tLeader: 1\tReplicas: 1\tIsr: 1" in described.stdout
    lines = b"".join(b"k%d:line %d\n" % (i, i) for i in range(100))
    produced = run("produce", "cli", *server, "--property", "parse.key=true", "--property", "key.separator=:",
                   "--compression-type", "zstd", stdin=lines)  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = run(
        "consume", "cli", *server, "--from-beginning", "--max-messages", "100", "--timeout-ms", "20000"
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(b"line %d" % i for i in range(100))
    one = run("consume", "cli", *server, "--partition", "0", "--offset", "0", "--max-messages", "1",
              "--property", "print.key=true", "--timeout-ms", "20000")  # fmt: skip
    key, _, value = one.stdout.strip().partition(b"\t")
    assert key.startswith(b"k")
    assert value == b"line " + key[1:]


def test_errors_exit_non_zero(broker):
    server = ["--bootstrap-server", broker.bootstrap]
    assert run("topics", "create", *server, "--topic", "dup").returncode == 0
    again = run("topics", "create", *server, "--topic", "dup")
    assert again.returncode != 0
    assert b"TOPIC_ALREADY_EXISTS" in again.stderr
    missing = run("topics", "create", *server)
    assert missing.returncode != 0
    assert b"--topic" in missing.stderr
    unreachable = run("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert unreachable.returncode != 0
    assert b"error:" in unreachable.stderr
    bad_port = run("topics", "list", "--bootstrap-server", "127.0.0.1:99999")
    assert bad_port.returncode != 0
    assert b"port 99999 is not in 1-65535" in bad_port.stderr
    assert b"Traceback" not in bad_port.stderr


def test_consume_from_an_offset_past_the_end_says_so_and_starts_at_the_end(broker):
    server = ["--bootstrap-server", broker.bootstrap]
    assert run("topics", "create", *server, "--topic", "short", "--partitions", "1").returncode == 0
    assert run("produce", "short", *server, stdin=b"".join(b"old %d\n" % i for i in range(5))).returncode == 0
    consumer = subprocess.Popen([*CLI, "consume", "short", *server, "--partition", "0", "--offset", "999999",
                                 "--max-messages", "1", "--timeout-ms", "20000"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        notice = consumer.stderr.readline()
        assert notice == b"offset 999999 is out of range for short-0 (log start 0, end 5); starting at the end (5)\n"
        assert run("produce", "short", *server, stdin=b"new\n").returncode == 0
        out, _ = consumer.communicate(timeout=TIMEOUT_S)
    finally:
        consumer.kill()
    assert out == b"new\n"
