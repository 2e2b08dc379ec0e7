"""confluent-kafka clients logging in with SASL, for the tests of SCRAM users: the configuration, and the outcome
of producing one record (delivered, refused, or the login failing)."""

import time

from confluent_kafka import KafkaError, Producer

HOST = "127.0.0.1"
DEADLINE_S = 30.0


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
