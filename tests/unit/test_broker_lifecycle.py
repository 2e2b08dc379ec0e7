"""BrokerLifecycleManager against a real in-process ClusterController: registration, staying fenced until
the metadata arrived, the controlled-shutdown handshake, and registering again when the controller has
forgotten the broker. A FakeBroker stands in for the broker's listener the controller connects back to."""

import dataclasses
import shutil
import time

import pytest

from replog.broker.lifecycle import BrokerIdentity, BrokerLifecycleManager
from replog.controller.channel import ChannelConfig
from replog.controller.server import ClusterController, ControllerConfig
from replog.protocol.apis import ApiKey
from replog.server.inter_broker import open_inter_broker_connection

from ..conditions import wait_until
from .test_controller_fakes import HOST, SECRET, FakeBroker

HEARTBEAT_INTERVAL_MS = 20


@pytest.fixture
async def controller(tmp_path):
    ctl = ClusterController(ControllerConfig(inter_broker_secret=SECRET, metadata_log_dir=tmp_path / "metadata",
                                             channel=ChannelConfig(retry_backoff_ms=5, retry_backoff_max_ms=20)))
    await ctl.start()
    yield ctl
    await ctl.stop()


@pytest.fixture
async def fake_brokers():
    fakes = {i: await FakeBroker(i).start() for i in (1, 2)}
    yield fakes
    for fake in fakes.values():
        await fake.stop()


def lifecycle_for(fake: FakeBroker, controller_port: int, **settings) -> BrokerLifecycleManager:
    def has_metadata(epoch: int) -> bool:
        return any(r.broker_epoch == epoch for r in fake.requests(ApiKey.UPDATE_METADATA))

    async def connect():
        return await open_inter_broker_connection(HOST, controller_port, client_id="lifecycle", username="broker",
                                                  secret=SECRET, request_timeout_ms=5_000)

    return BrokerLifecycleManager(BrokerIdentity(fake.broker_id, "replog-cluster", HOST, fake.port), connect,
                                  heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, has_metadata=has_metadata, **settings)


async def test_registers_and_is_unfenced_only_once_it_has_the_metadata(controller, fake_brokers):
    fake = fake_brokers[1]
    fake.stall_next[ApiKey.UPDATE_METADATA] = 1  # the controller's metadata does not arrive (yet)
    heartbeats = []
    answer = controller.broker_heartbeat
    controller.broker_heartbeat = lambda *args, **kwargs: (heartbeats.append(kwargs), answer(*args, **kwargs))[1]
    lifecycle = lifecycle_for(fake, controller.port)
    lifecycle.start()
    try:
        await wait_until(lambda: len(fake.stalled) == 1, "the stalled UpdateMetadata")
        await wait_until(lambda: len(heartbeats) >= 3, "a few heartbeats")
        assert all(h["want_fence"] for h in heartbeats), heartbeats
        assert controller.metadata.brokers[1].fenced and lifecycle.is_fenced
        fake.close_connections()  # the controller resends the UpdateMetadata on a new connection
        await wait_until(lambda: not lifecycle.is_fenced, "unfencing")
        assert not controller.metadata.brokers[1].fenced
        assert controller.metadata.brokers[1].epoch == lifecycle.broker_epoch
    finally:
        await lifecycle.stop()


async def test_controlled_shutdown_returns_once_leadership_moved(controller, fake_brokers):
    lifecycles = {i: lifecycle_for(fake, controller.port) for i, fake in fake_brokers.items()}
    for lifecycle in lifecycles.values():
        lifecycle.start()
    try:
        await wait_until(lambda: controller.metadata.active_broker_ids() == [1, 2], "both brokers unfenced")
        await controller.create_topic("moving", {0: [1, 2]})
        assert await lifecycles[1].controlled_shutdown(5_000)
        moved = controller.registration("moving", 0)
        assert (moved.leader, moved.isr) == (2, (2,))
        assert controller.metadata.brokers[1].fenced
        leader_and_isr = fake_brokers[2].requests(ApiKey.LEADER_AND_ISR)[-1]
        assert leader_and_isr.topic_states[0].partition_states[0].leader == 2
    finally:
        for lifecycle in lifecycles.values():
            await lifecycle.stop()


async def test_a_broker_that_never_registered_shuts_down_at_once(fake_brokers):
    lifecycle = lifecycle_for(fake_brokers[1], 1)  # never started: nothing to hand over
    assert await lifecycle.controlled_shutdown(1)


async def test_registers_again_when_the_controller_forgot_its_epoch(controller, fake_brokers, tmp_path):
    lifecycle = lifecycle_for(fake_brokers[1], controller.port)
    lifecycle.start()
    try:
        await wait_until(lambda: not lifecycle.is_fenced, "first unfencing")
        # A controller whose metadata log was lost comes back on the same port: heartbeats are refused as
        # STALE_BROKER_EPOCH (until then they fail and are retried), and the broker registers again.
        config = dataclasses.replace(controller.config, port=controller.port)
        await controller.stop()
        shutil.rmtree(config.metadata_log_dir)
        replacement = ClusterController(config)
        await replacement.start()
        try:
            await wait_until(lambda: 1 in replacement.metadata.brokers and not replacement.metadata.brokers[1].fenced,
                             "registration with the new controller")
            assert replacement.metadata.brokers[1].epoch == lifecycle.broker_epoch
        finally:
            await replacement.stop()
    finally:
        await lifecycle.stop()


async def test_a_controlled_shutdown_stops_trying_a_gone_controller_after_its_retries(controller, fake_brokers):
    """controlled.shutdown.max.retries failed attempts, .retry.backoff.ms apart, then the broker stops without
    the handover, long before the controlled-shutdown time is up (it used to wait all of it)."""
    retries, backoff_ms, timeout_ms = 3, 100, 30_000
    lifecycle = lifecycle_for(fake_brokers[1], controller.port, shutdown_max_retries=retries,
                              shutdown_retry_backoff_ms=backoff_ms)
    lifecycle.start()
    try:
        await wait_until(lambda: not lifecycle.is_fenced, "unfencing")
        await controller.stop()
        started = time.monotonic()
        assert not await lifecycle.controlled_shutdown(timeout_ms)
        took_s = time.monotonic() - started
        assert (retries - 1) * backoff_ms / 1000 <= took_s < timeout_ms / 1000 / 2
    finally:
        await lifecycle.stop()


async def test_a_controlled_shutdown_waits_for_a_controller_that_answers(controller, fake_brokers):
    """The retries count failures in a row only: a controller that answers, even without approving yet, is
    waited for (here until the time given runs out, as it never approves)."""
    lifecycle = lifecycle_for(fake_brokers[1], controller.port, shutdown_max_retries=1, shutdown_retry_backoff_ms=0)
    lifecycle.start()
    answer = controller.broker_heartbeat
    heartbeats = []

    def never_approving(*args, **kwargs):
        heartbeats.append(kwargs)
        return dataclasses.replace(answer(*args, **kwargs), should_shut_down=False)

    try:
        await wait_until(lambda: not lifecycle.is_fenced, "unfencing")
        controller.broker_heartbeat = never_approving
        assert not await lifecycle.controlled_shutdown(500)
        assert len([h for h in heartbeats if h["want_shutdown"]]) >= 2
    finally:
        await lifecycle.stop()
