"""Codec cost without sockets: kio against the hand-written Produce/Fetch codecs on the hot paths.

ProduceRequest v9 decode: kio reads from a read-only memoryview and copies every record set into bytes;
the hand-written decoder hands back memoryviews into the frame. FetchResponse v12 encode: kio needs the
records as bytes, i.e. a pread() from the segment file; the hand-written encoder returns a list of parts
with the file slice passed through for sendfile. Times are per call (µs/op), best-of-timeit style.
"""

import os
import tempfile
import timeit
from dataclasses import dataclass

from replog.protocol.apis import ApiKey
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
)
from replog.protocol.messages import decode_request, encode_response
from replog.protocol.produce import (
    ProducePartitionData,
    ProduceRequestData,
    ProduceTopicData,
    decode_produce_request,
    encode_produce_request,
)
from replog.protocol.records import build_batch

from .harness import Result, Stats

NAME = "codec"
PRODUCE_VERSION = 9
FETCH_VERSION = 12
RECORD_VALUE_BYTES = 1024
TOPIC = "bench-topic"


@dataclass
class FileSlice:
    """What the log hands the fetch encoder: a range of an open segment file."""

    file: object
    position: int
    length: int


def record_set(size: int) -> bytes:
    """One uncompressed v2 batch of 1 KiB values, about `size` bytes long."""
    value = os.urandom(RECORD_VALUE_BYTES)
    count = max(1, size // (RECORD_VALUE_BYTES + 16))
    return build_batch([(None, value, (), 1_700_000_000_000)] * count)


def produce_frame(partitions: int, records: bytes) -> bytearray:
    topic = ProduceTopicData(TOPIC, [ProducePartitionData(i, memoryview(records)) for i in range(partitions)])
    parts = encode_produce_request(PRODUCE_VERSION, ProduceRequestData(None, 1, 30_000, [topic]))
    return bytearray(b"".join(parts))


@dataclass(frozen=True)
class Sampling:
    repeats: int
    sample_s: float  # a sample lasts at least this long (timeit's autorange: 0.2 s)


# Quick mode (CI's smoke test, figures not quoted): shorter samples, as the sizes are the same.
FULL_SAMPLING, QUICK_SAMPLING = Sampling(repeats=7, sample_s=0.2), Sampling(repeats=2, sample_s=0.05)


def per_call_us(call, sampling: Sampling) -> Stats:
    """timeit-style: calls per sample doubled until a sample lasts sampling.sample_s, µs per call."""
    timer = timeit.Timer(call)
    number = 1
    while timer.timeit(number) < sampling.sample_s:
        number *= 2
    samples = timer.repeat(repeat=sampling.repeats, number=number)
    return Stats.of([s / number * 1e6 for s in samples])


def produce_decode_results(partitions: int, size: int, sampling: Sampling) -> list[Result]:
    frame = produce_frame(partitions, record_set(size))
    handwritten = per_call_us(lambda: decode_produce_request(PRODUCE_VERSION, frame, 0), sampling)
    kio = per_call_us(lambda: decode_request(ApiKey.PRODUCE, PRODUCE_VERSION, frame, 0), sampling)
    case = f"Produce v{PRODUCE_VERSION} decode, {partitions}p x {size // 1024} KiB"
    return [
        Result(NAME, f"{case}, hand-written", "us/op", handwritten, "kio", kio.median),
        Result(NAME, f"{case}, kio", "us/op", kio, "kio", kio.median),
    ]


def fetch_response_dict(partitions: int, records: bytes) -> dict:
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {"topic": TOPIC, "partitions": [partition_dict(i, records) for i in range(partitions)]}
        ],
    }


def partition_dict(index: int, records: bytes) -> dict:
    return {
        "partition_index": index,
        "error_code": 0,
        "high_watermark": 1_000_000,
        "last_stable_offset": 1_000_000,
        "log_start_offset": 0,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }


def fetch_encode_results(partitions: int, size: int, segment, sampling: Sampling) -> list[Result]:
    length = os.fstat(segment.fileno()).st_size

    def kio_from_file() -> bytes:
        records = os.pread(segment.fileno(), length, 0)  # kio needs bytes: the copy the log would make
        return encode_response(ApiKey.FETCH, FETCH_VERSION, fetch_response_dict(partitions, records))

    def handwritten() -> list:
        topic = FetchTopicResult(
            TOPIC, [fetch_partition(i, FileSlice(segment, 0, length)) for i in range(partitions)]
        )
        return encode_fetch_response(FETCH_VERSION, FetchResponseData([topic]))

    in_memory = os.pread(segment.fileno(), length, 0)
    kio = per_call_us(kio_from_file, sampling)
    kio_bytes_in_hand = per_call_us(
        lambda: encode_response(ApiKey.FETCH, FETCH_VERSION, fetch_response_dict(partitions, in_memory)),
        sampling,
    )
    case = f"Fetch v{FETCH_VERSION} encode, {partitions}p x {size // 1024} KiB"
    return [
        Result(
            NAME,
            f"{case}, hand-written (file slice)",
            "us/op",
            per_call_us(handwritten, sampling),
            "kio",
            kio.median,
        ),
        Result(NAME, f"{case}, kio (pread + encode)", "us/op", kio, "kio", kio.median),
        Result(NAME, f"{case}, kio (bytes in hand)", "us/op", kio_bytes_in_hand, "kio", kio.median),
    ]


def fetch_partition(index: int, records) -> FetchPartitionResult:
    return FetchPartitionResult(index, high_watermark=1_000_000, last_stable_offset=1_000_000, log_start_offset=0,
                                records=records)  # fmt: skip


def run(quick: bool, workdir) -> list[Result]:
    sampling = QUICK_SAMPLING if quick else FULL_SAMPLING
    sizes = [1024 * 1024] if quick else [16 * 1024, 1024 * 1024]  # quick: the size where the paths differ most
    results = []
    for size in sizes:
        for partitions in (1, 10):
            results += produce_decode_results(partitions, size, sampling)
    for size in sizes:
        with tempfile.NamedTemporaryFile(dir=workdir) as segment:
            segment.write(record_set(size))
            segment.flush()
            for partitions in (1, 10):
                results += fetch_encode_results(partitions, size, segment, sampling)
    return results
