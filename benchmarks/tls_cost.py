"""What TLS and SASL cost: produce and consume throughput, and the broker's CPU per GiB, over a SASL_SSL
listener (SCRAM-SHA-512) against a PLAINTEXT listener of the same broker, in the same run; and SCRAM
authentications per second, with TLS (SASL_SSL) and without (SASL_PLAINTEXT), and the broker's CPU per login.

One broker process serves both listeners, so page cache, log and machine are shared; each protocol writes
its own topic and reads it back with a confluent-kafka consumer (PLAINTEXT fetches use sendfile, TLS ones the
copy path). CPU is the broker's utime + stime over each phase. `python -m benchmarks.tls_cost [--mib N]`.
"""

import argparse
import asyncio
import functools
import os
import shutil
import ssl
import tempfile
import time
from pathlib import Path

import confluent_kafka
import trustme

from replog.client.admin import Admin, NewTopic
from replog.client.connection import Connection
from replog.client.security import ClientSecurity, SaslCredentials
from replog.harness.broker_process import BrokerProcess
from replog.server.credential_store import scram_credential_line

from .harness import MiB, cpu_seconds

VALUE_BYTES = 1024
USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"
HOST = "127.0.0.1"


def start_broker(root: Path) -> tuple[BrokerProcess, str]:
    """A broker with PLAINTEXT and SASL_SSL listeners; returns it and the CA file clients trust."""
    ca = trustme.CA()
    ca.issue_cert(HOST).private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    ca_file = str(root / "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    (root / "scram").write_text(scram_credential_line(USER, MECHANISM, PASSWORD) + "\n")
    broker = BrokerProcess(root / "logs", output=root / "broker.out")
    broker.overrides.update({
        "listeners": f"PLAINTEXT://{HOST}:{broker.port},SASL_SSL://{HOST}:0,SASL_PLAINTEXT://{HOST}:0",
        "ssl.keystore.location": str(root / "server.pem"),
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.scram.credentials.file": str(root / "scram"),
    })
    broker.start()
    return broker, ca_file


def client_config(broker: BrokerProcess, listener: str, ca_file: str) -> dict:
    config = {"bootstrap.servers": f"{HOST}:{broker.ready.listener_ports[listener]}"}
    if listener == "SASL_SSL":
        config |= {"security.protocol": "SASL_SSL", "ssl.ca.location": ca_file, "sasl.mechanism": MECHANISM,
                   "sasl.username": USER, "sasl.password": PASSWORD}
    return config


def produce(config: dict, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({**config, "linger.ms": 5, "batch.size": 1_000_000, "acks": 1,
                                         "queue.buffering.max.kbytes": 256 * 1024})
    value = os.urandom(VALUE_BYTES)
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def consume(config: dict, topic: str, count: int) -> None:
    consumer = confluent_kafka.Consumer({**config, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                                         "fetch.max.bytes": 50 * MiB, "max.partition.fetch.bytes": 8 * MiB})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = 0
    deadline = time.monotonic() + 300
    while seen < count:
        assert time.monotonic() < deadline, f"consumed {seen} of {count}"
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            seen += 1
    consumer.close()


def measure(broker: BrokerProcess, action) -> tuple[float, float]:
    """Wall seconds and broker CPU seconds of action()."""
    cpu_before, started = cpu_seconds([broker.ready.pid]), time.perf_counter()
    action()
    return time.perf_counter() - started, cpu_seconds([broker.ready.pid]) - cpu_before


async def scram_logins(port: int, tls: ssl.SSLContext | None, seconds: float) -> int:
    """Full connections (TLS handshake if tls, ApiVersions, SCRAM exchange) one after another for `seconds`;
    returns how many. The client's PBKDF2 (4096 iterations) runs in this process, not the broker's."""
    security = ClientSecurity(tls, SaslCredentials(MECHANISM, USER, PASSWORD))
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        connection = Connection(HOST, port, security=security)
        await connection.connect()
        connection.close()
        done += 1
    return done


def login_rows(broker: BrokerProcess, ca_file: str, seconds: float) -> list[dict]:
    rows = []
    for listener, tls in (("SASL_SSL", ssl.create_default_context(cafile=ca_file)), ("SASL_PLAINTEXT", None)):
        port = broker.ready.listener_ports[listener]
        cpu_before, started = cpu_seconds([broker.ready.pid]), time.perf_counter()
        logins = asyncio.run(scram_logins(port, tls, seconds))
        wall, cpu = time.perf_counter() - started, cpu_seconds([broker.ready.pid]) - cpu_before
        rows.append({"listener": listener, "phase": f"{MECHANISM} logins/s", "MiB/s": logins / wall,
                     "broker CPU s/GiB": float("nan"), "broker CPU ms/login": 1000 * cpu / logins})
    return rows


def run(mib: int) -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="replog-tls-cost-"))
    broker, ca_file = start_broker(root)
    count = mib * MiB // VALUE_BYTES
    gib = count * VALUE_BYTES / (1024 * MiB)
    rows = []
    try:
        for listener in ("PLAINTEXT", "SASL_SSL"):
            config = client_config(broker, listener, ca_file)
            topic = f"bench-{listener.lower()}"
            asyncio.run(_create_topic(f"{HOST}:{broker.port}", topic))
            for phase, action in (("produce", produce), ("consume", consume)):
                wall, cpu = measure(broker, functools.partial(action, config, topic, count))
                rows.append({"listener": listener, "phase": phase, "MiB/s": mib / wall, "broker CPU s/GiB": cpu / gib})
        rows += login_rows(broker, ca_file, 3.0)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


async def _create_topic(bootstrap: str, topic: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB produced and consumed per listener")
    args = parser.parse_args()
    print(f"{'listener':<15} {'phase':<24} {'MiB/s (or /s)':>14} {'broker CPU s/GiB':>17} {'broker CPU ms/login':>20}")
    for row in run(args.mib):
        per_login = f"{row['broker CPU ms/login']:>20.2f}" if "broker CPU ms/login" in row else f"{'':>20}"
        print(f"{row['listener']:<15} {row['phase']:<24} {row['MiB/s']:>14.1f} {row['broker CPU s/GiB']:>17.2f} "
              f"{per_login}")


if __name__ == "__main__":
    main()
