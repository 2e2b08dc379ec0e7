"""Smoke test of the pieces the replication benchmarks measure with (the clusters themselves are the
integration tests' business): percentiles, per-process CPU time, the loopback round-trip baseline, and how
replicated-produce turns its runs into figures."""

import json
import os
import time

from benchmarks import replicated_produce
from benchmarks.baselines import echo_server, loopback_round_trips
from benchmarks.harness import cpu_seconds, percentile, thread_cpu_seconds
from benchmarks.replicated_latency import (
    VARIANTS,
    WINDOWS,
    BusyCores,
    ClientLatencies,
    case_name,
    window_percentiles,
)


def test_percentile_is_nearest_rank():
    ordered = list(range(1, 1001))
    assert percentile(ordered, 0.5) == 501
    assert percentile(ordered, 0.99) == 991
    assert percentile(ordered, 0.999) == 1000
    assert percentile([7], 0.999) == 7


def test_window_percentiles_summarise_consecutive_slices_in_microseconds():
    latencies_ns = [1000] * 100 + [2000] * 100 + [3000] * 100
    stats = window_percentiles(latencies_ns)
    assert WINDOWS == 3
    assert stats["p50"].samples == [1.0, 2.0, 3.0]
    assert stats["p50"].median == 2.0


def _librdkafka_stats(*brokers: tuple[int, int, int]) -> str:
    """A statistics document as librdkafka's stats_cb passes it: (nodeid, int_latency p50, p99) per broker."""
    window = {"min": 0, "max": 0, "avg": 0, "sum": 0, "cnt": 0, "p50": 0, "p99": 0}
    return json.dumps({"brokers": {
        f"broker-{node_id}": {"nodeid": node_id, "int_latency": {**window, "cnt": 10, "p50": p50, "p99": p99},
                              "outbuf_latency": window, "rtt": window}
        for node_id, p50, p99 in brokers}})


def test_client_latencies_keep_the_measured_windows_of_the_brokers_produced_to():
    latencies = ClientLatencies()
    latencies.on_stats(_librdkafka_stats((1, 999, 999)))  # before the measured stretch is known: dropped
    latencies.from_ns, latencies.until_ns = time.perf_counter_ns(), time.perf_counter_ns() + 60 * 10**9
    latencies.on_stats(_librdkafka_stats((-1, 999, 999), (1, 100, 400), (2, 300, 800)))  # -1: bootstrap entry
    latencies.on_stats(_librdkafka_stats((1, 200, 600)))
    # outbuf_latency and rtt had no samples (cnt 0): not reported rather than reported as zero
    assert latencies.summary() == {"int_latency": {"p50": 200, "p99": 600}}
    latencies.until_ns = time.perf_counter_ns() - 1  # the stretch is over: later windows are dropped
    latencies.on_stats(_librdkafka_stats((1, 5000, 9000)))
    assert latencies.summary() == {"int_latency": {"p50": 200, "p99": 600}}


def test_cpu_seconds_counts_this_process_busy_time():
    before = cpu_seconds([os.getpid()])
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert cpu_seconds([os.getpid()]) - before >= 0.03  # clock ticks are 10 ms


def test_thread_cpu_seconds_sees_a_millisecond_that_clock_ticks_round_away():
    before = thread_cpu_seconds([os.getpid()])
    deadline = time.thread_time() + 0.002
    while time.thread_time() < deadline:
        pass
    assert 0.002 <= thread_cpu_seconds([os.getpid()]) - before < 1.0


def test_loopback_round_trips_echo_every_message():
    with echo_server() as address:
        times = loopback_round_trips(address, 1024, 200)
    assert len(times) == 200
    assert all(t > 0 for t in times)


def test_replicated_produce_figures_pair_each_producer_with_its_own_rf1_run():
    # Two rounds; per run (bytes/s, broker CPU-s/GiB, client CPU-s/GiB).
    samples = [
        {"RF=3": (200.0, 3.0, 8.0), "RF=1": (800.0, 0.7, 2.0),
         "RF=3 not idempotent": (380.0, 3.2, 1.5), "RF=1 not idempotent": (900.0, 0.6, 1.5)},
        {"RF=3": (220.0, 3.4, 10.0), "RF=1": (700.0, 0.9, 2.2),
         "RF=3 not idempotent": (400.0, 3.0, 2.5), "RF=1 not idempotent": (1000.0, 0.8, 1.3)},
    ]  # fmt: skip
    results = {(r.case, r.baseline): r for r in replicated_produce.results(samples, 5000.0, 6000.0, 1024)}

    idempotent = results["RF=3 acks=all, 3 partitions, 1 KiB", "RF=1, same cluster"]
    assert (idempotent.value.median, idempotent.baseline_value) == (210.0, 750.0)
    assert idempotent.extra["client_cpu_s_per_gib"] == 9.0
    plain = results["RF=3 acks=all, not idempotent, 3 partitions, 1 KiB", "RF=1 not idempotent, same cluster"]
    assert (plain.value.median, plain.baseline_value) == (390.0, 950.0)
    assert plain.extra["cpu_s_per_gib"] == 3.1
    client = results["RF=3 client CPU (producer process)", "not idempotent"]
    assert (client.value.samples, client.baseline_value) == ([8.0, 10.0], 2.0)
    broker = results["RF=3 broker CPU (3 brokers)", "RF=1"]
    assert (broker.value.median, broker.baseline_value) == (3.2, 0.8)
    plain_broker = results["RF=3 not idempotent, broker CPU (3 brokers)", "RF=1 not idempotent"]
    assert (plain_broker.value.samples, plain_broker.baseline_value) == ([3.2, 3.0], 0.7)


def test_busy_cores_divide_the_cpu_used_between_the_marks_by_the_wall_time():
    readings = iter([(10.0, 100.0, 7.0), (12.0, 103.0, 8.5)])  # (clock s, brokers' CPU s, own CPU s)
    current = next(readings)
    busy = BusyCores([11, 12, 13], broker_cpu=lambda pids: current[1], own_cpu=lambda: current[2],
                     clock=lambda: current[0])  # fmt: skip
    assert busy.summary() == {}  # no stretch yet
    busy.mark()
    assert busy.marked and busy.summary() == {}
    current = next(readings)
    busy.mark()
    assert busy.summary() == {"brokers": 1.5, "bench_process": 0.75}


def test_each_latency_producer_has_its_own_case_names_and_the_first_keeps_the_earlier_ones():
    names = {variant: case_name(10e6, variant, "p99") for variant in VARIANTS}
    assert names == {
        VARIANTS[0]: "RF=3 acks=all, 10 MB/s, p99",
        VARIANTS[1]: "RF=3 acks=all, 10 MB/s, linger 0 ms, p99",
        VARIANTS[2]: "RF=3 acks=all, 10 MB/s, linger 0 ms, not idempotent, p99",
    }
    assert [(v.linger_ms, v.idempotent) for v in VARIANTS] == [(5, True), (0, True), (0, False)]
