"""SASL users for tests: a broker's credential file and PLAIN JAAS line for a set of users, and confluent-kafka
clients logging in with SASL (the configuration, and the outcome of producing one record: delivered, refused,
or the login failing)."""

import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from replog.server.credential_store import scram_credential_line

HOST = "127.0.0.1"
DEADLINE_S = 30.0


def write_scram_credentials(path: Path, users: Mapping[str, str]) -> Path:
    """sasl.scram.credentials.file with a SCRAM-SHA-256 and a SCRAM-SHA-512 credential for each user."""
    path.write_text("".join(f"{scram_credential_line(user, mechanism, password)}\n"
                            for user, password in users.items() for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")))
    return path


def plain_jaas(users: Mapping[str, str]) -> str:
    """A PLAIN listener's sasl.jaas.config with these users and passwords."""
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{user}="{password}"' for user, password in users.items()) + ";")


def sasl_config(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"bootstrap.servers": f"{HOST}:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def produce_one(config: dict, topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered), or the client's authentication error."""
    errors: list = []
    producer = Producer({**config, "message.timeout.ms": 10_000, "error_cb": errors.append})
    outcome: list = []
    producer.produce(topic, b"value", on_delivery=lambda err, msg: outcome.append(err))
    deadline = time.monotonic() + DEADLINE_S
    while not outcome and time.monotonic() < deadline:
        producer.poll(0.1)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert outcome, "no delivery report"
    return outcome[0]
