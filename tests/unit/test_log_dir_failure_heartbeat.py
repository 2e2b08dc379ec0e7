"""A broker's lifecycle manager reports a failed log dir to a real in-process controller at once, in a
BrokerHeartbeat v1's OfflineLogDirs (KIP-858), not at the next heartbeat interval; the controller then
moves the leaderships of the replicas in it. A FakeBroker answers the controller's LeaderAndIsr."""

import uuid

from kio.schema.errors import ErrorCode

from replog.broker.lifecycle import BrokerIdentity, BrokerLifecycleManager
from replog.server.inter_broker import open_inter_broker_connection

from ..conditions import wait_until
from .test_broker_lifecycle import controller, fake_brokers  # noqa: F401  (fixtures)
from .test_controller_fakes import HOST, SECRET

# Far beyond the test's patience: only the prompt heartbeat after the failure can tell the controller.
HEARTBEAT_INTERVAL_MS = 600_000


async def test_a_failed_dir_is_reported_at_once_and_its_leadership_moves(controller, fake_brokers):  # noqa: F811
    offline_dirs: list[uuid.UUID] = []

    async def connect():
        return await open_inter_broker_connection(HOST, controller.port, client_id="lifecycle", username="broker",
                                                  secret=SECRET, request_timeout_ms=5_000)

    lifecycles = {
        broker_id: BrokerLifecycleManager(
            BrokerIdentity(broker_id, "replog-cluster", HOST, fake.port), connect,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, has_metadata=lambda epoch: True,
            offline_log_dirs=(lambda: offline_dirs) if broker_id == 1 else tuple)
        for broker_id, fake in fake_brokers.items()}
    for lifecycle in lifecycles.values():
        lifecycle.start()
    try:
        await wait_until(lambda: controller.metadata.active_broker_ids() == [1, 2], "both brokers unfenced")
        await controller.create_topic("t", {0: [1, 2], 1: [1, 2]})
        fake_brokers[1].partition_error[("t", 0)] = ErrorCode.kafka_storage_error

        offline_dirs.append(uuid.uuid4())
        lifecycles[1].propagate_directory_failure()
        await wait_until(lambda: controller.registration("t", 0).leader == 2, "t-0 to move to broker 2")
        assert controller.registration("t", 0).isr == (2,)
        assert controller.registration("t", 1).leader == 1  # in a healthy dir
        assert not controller.metadata.brokers[1].fenced
    finally:
        for lifecycle in lifecycles.values():
            await lifecycle.stop()
