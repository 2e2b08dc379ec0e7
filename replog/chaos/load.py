"""The load of a chaos run: producer threads writing unique values and a reader consuming while the faults
go on."""

import threading
from collections import Counter
from collections.abc import Callable

import confluent_kafka

from .chaos_run_config import (
    ASSIGNMENT,
    CONSUME_BATCH,
    CONSUME_POLL_S,
    CONSUMER_CONFIG,
    FLUSH_TIMEOUT_S,
    PRODUCER_CONFIG,
    RECORDS_PER_SECOND,
    TOPIC,
)


class LoadProducer(threading.Thread):
    """One producer writing `<name>-<n>` round-robin over the topic's partitions at a steady rate until told
    to stop, then flushing; its delivery reports are the history's acknowledgements and failures. The chaos
    run's defaults: an idempotent acks=all producer of `chaos`; the crash loop passes its own."""

    def __init__(self, name: str, bootstrap: str, stop: threading.Event, *, topic: str = TOPIC,
                 partitions: int = len(ASSIGNMENT), config: dict = PRODUCER_CONFIG,
                 records_per_second: float = RECORDS_PER_SECOND, encode: Callable[[str], bytes] = str.encode,
                 decode: Callable[[bytes], str] = bytes.decode) -> None:  # fmt: skip
        super().__init__(name=f"load-{name}", daemon=True)
        self.prefix = name
        self.bootstrap = bootstrap
        self.stop = stop
        self.topic, self.partitions, self.config = topic, partitions, config
        self.interval = 1 / records_per_second
        self.encode, self.decode = encode, decode
        self.attempted: list[str] = []
        self.acknowledged: dict[str, tuple[int, int]] = {}
        self.failed: dict[str, str] = {}
        self.fatal: list[str] = []

    def run(self) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, **self.config,
                                             "error_cb": self._on_error})
        n = 0
        while not self.stop.is_set() and not self.fatal:
            value = f"{self.prefix}-{n}"
            try:
                producer.produce(self.topic, self.encode(value), partition=n % self.partitions,
                                 on_delivery=self._on_delivery)
            except BufferError:  # librdkafka's queue is full: serve delivery reports, then try again
                producer.poll(self.interval)
                continue
            except confluent_kafka.KafkaException as e:  # a fatal error: this producer can do no more
                self.fatal.append(str(e))
                break
            self.attempted.append(value)
            n += 1
            producer.poll(0)
            self.stop.wait(self.interval)
        producer.flush(FLUSH_TIMEOUT_S)

    def _on_delivery(self, err, msg) -> None:
        value = self.decode(msg.value())
        if err is None:
            self.acknowledged[value] = (msg.partition(), msg.offset())
        else:
            self.failed[value] = err.name()

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal.append(str(err))


class LiveReader(threading.Thread):
    """A consumer reading every partition from the start while the faults go on (read_committed: what it
    sees is below the HW, so the final read must hold it at the same offsets)."""

    def __init__(self, bootstrap: str, stop: threading.Event, security: dict[str, str] | None = None) -> None:
        """security: librdkafka's security.protocol, sasl.* and ssl.* keys (a secured cluster's)."""
        super().__init__(name="chaos-reader", daemon=True)
        self.bootstrap = bootstrap
        self.security = security or {}
        self.stop = stop
        self.read: dict[int, list[tuple[int, str]]] = {p: [] for p in ASSIGNMENT}
        self.errors: Counter = Counter()

    def run(self) -> None:
        # auto.offset.reset=error: an offset the reader reached is below the HW, so it can never be out of
        # range at any later leader; if it is, that is a finding, not something to paper over.
        consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, **CONSUMER_CONFIG, **self.security,
                                             "group.id": "replog-chaos-live-reader", "auto.offset.reset": "error",
                                             "isolation.level": "read_committed"})
        try:
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                             for p in ASSIGNMENT])
            while not self.stop.is_set():
                for msg in consumer.consume(CONSUME_BATCH, CONSUME_POLL_S):
                    if msg.error() is None:
                        self.read[msg.partition()].append((msg.offset(), msg.value().decode(errors="replace")))
                    else:
                        self.errors[msg.error().name()] += 1
        finally:
            consumer.close()
