"""The Prometheus endpoint over real sockets, serving the controller's gauges computed from its metadata."""

import asyncio
import dataclasses
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from replog.controller.cluster import BrokerRegistration, ClusterMetadata
from replog.controller.leadership import without_broker
from replog.controller.metrics import ControllerCollector, controller_gauges, controller_snapshot
from replog.metrics.http_server import MAX_REQUEST_HEAD_BYTES, start_metrics_server


def metadata_with_a_leaderless_partition() -> ClusterMetadata:
    metadata = ClusterMetadata()
    for broker_id in (1, 2, 3):
        metadata.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id))
    metadata.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]}, {})
    metadata.create_topic("solo", {0: [3]}, {})
    # Broker 3 is fenced: it leaves both ISRs of "t", and "solo", only on it, is left without a leader.
    metadata.add_broker(dataclasses.replace(metadata.brokers[3], fenced=True))
    partitions = [p for topic in metadata.topics.values() for p in topic.partitions.values()]
    metadata.apply(without_broker(partitions, 3, [1, 2], lambda topic: False))
    return metadata


def test_controller_gauges_count_offline_partitions_and_fenced_brokers():
    metadata = metadata_with_a_leaderless_partition()
    gauges = controller_gauges(metadata, controller_epoch=4, active=True)
    assert (gauges.offline_partitions_count, gauges.global_partition_count, gauges.global_topic_count) == (1, 3, 2)
    assert (gauges.fenced_broker_count, gauges.active_broker_count, gauges.active_controller_count) == (1, 2, 1)
    assert gauges.preferred_replica_imbalance_count == 1  # solo-0: its preferred replica, 3, leads nothing
    kind, fields = controller_snapshot(metadata, 4, active=True)
    assert kind == "controller" and fields["controller"]["controller_epoch"] == 4
    assert [b["fenced"] for b in fields["brokers"]] == [False, False, True]


def test_a_standby_controller_reports_no_active_controller_and_the_same_partition_gauges():
    metadata = metadata_with_a_leaderless_partition()
    standby, active = (controller_gauges(metadata, controller_epoch=4, active=a) for a in (False, True))
    assert (standby.active_controller_count, active.active_controller_count) == (0, 1)
    assert standby.offline_partitions_count == active.offline_partitions_count == 1
    assert controller_snapshot(metadata, 4, active=False)[1]["controller"]["active_controller_count"] == 0


async def http_get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()  # the server closes after one answer
    writer.close()
    return answer


async def test_get_metrics_serves_prometheus_text_and_other_paths_are_not_found():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControllerCollector(SimpleNamespace(metadata=metadata_with_a_leaderless_partition(),
                                                          controller_epoch=2, active=True)))
    server = await start_metrics_server("127.0.0.1", 0, registry)
    port = server.sockets[0].getsockname()[1]
    try:
        answer = await http_get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK") and b"text/plain" in head
        assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
        assert b"kafka_controller_kafkacontroller_offlinepartitionscount 1.0" in body
        assert b"kafka_controller_kafkacontroller_activecontrollercount 1.0" in body
        assert (await http_get(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await http_get(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        # A request head past the bound is dropped unanswered, and the server keeps serving.
        assert await http_get(port, b"GET /" + b"a" * MAX_REQUEST_HEAD_BYTES + b" HTTP/1.1\r\n\r\n") == b""
        assert (await http_get(port, b"GET /metrics HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200")
    finally:
        server.close()
        await server.wait_closed()
