"""benchmarks/consume_catchup.py's confluent-kafka reader, driven against a fake consumer (no broker)."""

import pytest

from benchmarks import consume_catchup


class FakeMessage:
    def __init__(self, value: bytes) -> None:
        self._value = value

    def error(self):
        return None

    def value(self) -> bytes:
        return self._value


class FakeConsumer:
    """Holds `available` messages; records how many each consume() call asked for."""

    asked: list[int] = []
    available = 0

    def __init__(self, config: dict) -> None:
        self.config = config

    def assign(self, partitions) -> None:
        self.partitions = partitions

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        FakeConsumer.asked.append(num_messages)
        # The real consume() blocks for `timeout` while fewer than num_messages are available: a call asking
        # for more than is left costs a whole timeout at the end of every run.
        assert num_messages <= FakeConsumer.available, "would wait out the timeout"
        FakeConsumer.available -= num_messages
        return [FakeMessage(b"v" * 10) for _ in range(num_messages)]

    def close(self) -> None:
        pass


@pytest.fixture
def fake_consumer(monkeypatch):
    monkeypatch.setattr(consume_catchup.confluent_kafka, "Consumer", FakeConsumer)
    FakeConsumer.asked = []
    return FakeConsumer


def test_confluent_catchup_never_asks_for_more_records_than_remain(fake_consumer):
    fake_consumer.available = 25_001
    rate = consume_catchup.confluent_catchup("127.0.0.1:9092", 25_001)
    assert fake_consumer.asked == [10_000, 10_000, 5_001]
    assert fake_consumer.available == 0
    assert rate > 0


def test_page_cache_residency_reports_a_file_just_written_as_resident(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * (1 << 20))
    summary = consume_catchup.page_cache_residency([path])
    assert summary == "100.0% of 1 MiB resident" or summary == "fincore not available"


def test_page_cache_residency_of_no_files_says_so():
    assert consume_catchup.page_cache_residency([]) == "no segment files"
