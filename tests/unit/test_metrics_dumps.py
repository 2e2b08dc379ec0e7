"""Metrics dump files: rotation by size, the file budget, line framing, arrays encoded item by item, and the
dumper writing its lines off the event loop, one write at a time (docs/metrics-dumps.md)."""

import asyncio
import json
import threading

import pytest

from replog.metrics.config import MetricsConfig, split_metrics_config
from replog.metrics.dump_writer import MAX_PENDING_EVENTS, DumpWriter, MetricsDumper, encode_line
from replog.metrics.encoded_array import ArrayUpdate, EncodedArray
from replog.metrics.latency import LatencyHistogram


def read_lines(writer: DumpWriter) -> list[dict]:
    return [json.loads(line) for path in writer.files() for line in path.read_text().splitlines()]


def test_a_new_file_starts_before_a_write_would_pass_max_bytes_and_old_ones_go(tmp_path):
    line = encode_line("broker", 1, 0, {"pad": "x" * 20})
    writer = DumpWriter(tmp_path, max_bytes=2 * len(line) + 10, max_files=3)  # two lines fit, three do not
    for n in range(9):
        writer.write([line], now_ms=1_000 + n)
    files = writer.files()
    assert [p.name for p in files] == ["metrics-0000000001004.jsonl", "metrics-0000000001006.jsonl",
                                       "metrics-0000000001008.jsonl"]
    assert [p.stat().st_size for p in files] == [2 * len(line), 2 * len(line), len(line)]


def test_a_write_larger_than_max_bytes_still_goes_to_a_file_of_its_own(tmp_path):
    writer = DumpWriter(tmp_path, max_bytes=10, max_files=5)
    writer.write([b'{"a":1}\n'], now_ms=5)
    writer.write([encode_line("broker", 1, 0, {"pad": "y" * 50})], now_ms=5)  # same ms: the next name
    assert [p.name for p in writer.files()] == ["metrics-0000000000005.jsonl", "metrics-0000000000006.jsonl"]


def test_lines_carry_version_kind_time_and_node():
    assert json.loads(encode_line("isr_change", 2, 77, {"topic": "t"})) == {
        "v": 1, "kind": "isr_change", "ts_ms": 77, "node_id": 2, "topic": "t"}
    assert encode_line("start", 1, 0, {}).endswith(b"}\n")


def test_an_encoded_array_is_the_whole_array_encoded_after_each_change_but_encodes_only_the_changes():
    array, expected = EncodedArray(), {}
    steps = [
        {"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}},
        {},
        {"b": {"n": 20, "s": "\u00e9"}},  # replaced in place
        {"a": None, "d": [1, 2]},  # removed, and a new one last
        {"a": {"n": 10}, "zz": None},  # back, last now; removing what is not there changes nothing
    ]
    for changes in steps:
        for key, item in changes.items():
            if item is None:
                expected.pop(key, None)
            else:
                expected[key] = item
        assert array.apply(changes) == json.dumps(list(expected.values()), separators=(",", ":")).encode()
    assert (array.items_encoded, len(array)) == (6, 4)


def test_a_line_with_an_array_update_is_the_line_with_the_whole_array():
    array = EncodedArray()
    array.apply({0: {"p": 0}, 1: {"p": 1}})
    fields = {"broker": {"x": 1}, "partitions": ArrayUpdate(array, {1: {"p": 11}}), "after": "y"}
    assert encode_line("broker", 3, 9, fields) == encode_line(
        "broker", 3, 9, {"broker": {"x": 1}, "partitions": [{"p": 0}, {"p": 11}], "after": "y"})


async def test_the_dumper_writes_start_events_and_snapshots_in_a_worker_thread(tmp_path):
    writer = DumpWriter(tmp_path, max_bytes=1 << 20, max_files=2)
    writing_threads = []
    original_write = writer.write

    def recording_write(lines, now_ms):
        writing_threads.append(threading.get_ident())
        original_write(lines, now_ms)

    writer.write = recording_write
    snapshots = iter(range(100))
    dumper = MetricsDumper(writer, node_id=4, role="broker", interval_ms=10,
                           snapshot=lambda now_ms: ("broker", {"n": next(snapshots)}))
    dumper.event("isr_change", {"topic": "t"})
    await dumper.dump_once()
    await dumper.dump_once()
    kinds = [(line["kind"], line.get("n")) for line in read_lines(writer)]
    assert kinds == [("start", None), ("isr_change", None), ("broker", 0), ("broker", 1)]
    assert all(line["node_id"] == 4 and line["v"] == 1 for line in read_lines(writer))
    assert read_lines(writer)[2]["started_ms"] == dumper.started_ms
    assert threading.get_ident() not in writing_threads


async def test_the_dumper_ticks_until_stopped_and_writes_a_last_snapshot(tmp_path):
    writer = DumpWriter(tmp_path, max_bytes=1 << 20, max_files=2)
    dumper = MetricsDumper(writer, node_id=1, role="controller", interval_ms=5,
                           snapshot=lambda now_ms: ("controller", {}))
    dumper.start()
    while sum(1 for line in read_lines(writer) if line["kind"] == "controller") < 3:
        await asyncio.sleep(0.005)
    await dumper.stop()
    written = len(read_lines(writer))
    await asyncio.sleep(0.03)
    assert len(read_lines(writer)) == written  # stopped: no more ticks


async def test_a_dump_cancelled_while_writing_finishes_its_write_before_the_next_one_starts(tmp_path):
    writer = DumpWriter(tmp_path, max_bytes=1 << 20, max_files=2)
    release, original_write = threading.Event(), writer.write

    def slow_write(lines, now_ms):
        release.wait(timeout=10)
        original_write(lines, now_ms)

    writer.write = slow_write
    snapshots = iter(range(100))
    dumper = MetricsDumper(writer, node_id=1, role="broker", interval_ms=10,
                           snapshot=lambda now_ms: ("broker", {"n": next(snapshots)}))
    first = asyncio.create_task(dumper.dump_once())
    while dumper._writing is None:
        await asyncio.sleep(0)
    first.cancel()  # as stop() cancels the periodic task: the thread's write goes on
    second = asyncio.create_task(dumper.dump_once())
    await asyncio.sleep(0.01)
    assert next(snapshots) == 1  # the second dump has not taken its snapshot: it waits for the first write
    release.set()
    await second
    assert [line.get("n") for line in read_lines(writer)] == [None, 0, 2]


def test_events_past_the_queue_bound_are_dropped_and_counted(tmp_path):
    dumper = MetricsDumper(DumpWriter(tmp_path, max_bytes=1 << 20, max_files=2), node_id=1, role="broker",
                           interval_ms=1000, snapshot=lambda now_ms: ("broker", {}))
    for _ in range(MAX_PENDING_EVENTS + 5):  # the start line is already queued
        dumper.event("isr_change", {})
    assert dumper.dropped_events == 6


def test_metrics_keys_are_split_from_the_rest():
    config, rest = split_metrics_config({"metrics.port": "0", "metrics.dump.interval.ms": "250",
                                         "metrics.dump.dir": "/d", "node.id": "3"})
    assert config == MetricsConfig(port=0, dump_interval_ms=250, dump_dir=config.dump_dir)
    assert str(config.dump_dir) == "/d" and rest == {"node.id": "3"}
    with pytest.raises(ValueError, match="metrics.port"):
        split_metrics_config({"metrics.port": "99999"})
    with pytest.raises(ValueError, match="metrics.dump.max.files"):
        split_metrics_config({"metrics.dump.max.files": "many"})


def test_latency_buckets_are_cumulative_and_end_with_inf():
    histogram = LatencyHistogram()
    for ms in (0.05, 0.9, 1.0, 7, 60_000):
        histogram.observe(ms)
    buckets = dict(histogram.cumulative_buckets())
    assert (buckets["0.1"], buckets["1.0"], buckets["10.0"], buckets["30000.0"], buckets["+Inf"]) == (1, 3, 4, 4, 5)
    assert histogram.count == 5 and histogram.sum_ms == pytest.approx(60_008.95)
