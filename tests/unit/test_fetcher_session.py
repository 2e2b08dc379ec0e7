"""The follower's fetch session (replog.fetcher.fetch_session, KIP-227): table tests of the pure handler, and
RemoteLeaderEndpoint speaking it over a scripted connection."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from replog.fetcher.fetch_session import FetchSessionHandler
from replog.fetcher.leader_endpoint import FetchRequestPartition, LeaderEndpointError, RemoteLeaderEndpoint
from replog.log.partition_log import TopicPartition
from replog.protocol import messages
from replog.protocol.fetch import (
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
)
from replog.protocol.headers import encode_response_header
from tests.conditions import wait_until

from .test_fetcher_endpoint import CONFIG, Connector, ScriptedConnection

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def _opened(wanted):
    """A handler whose full fetch of `wanted` was granted session 77."""
    handler = FetchSessionHandler()
    request = handler.build(wanted)
    assert handler.on_response(request, ErrorCode.none, 77)
    return handler


def test_first_fetch_is_full_and_opens_a_session():
    handler = FetchSessionHandler()
    request = handler.build({A: 1, B: 2})
    assert (request.session_id, request.epoch, request.partitions, request.forgotten) == (0, 0, {A: 1, B: 2}, [])
    assert handler.on_response(request, ErrorCode.none, 77)
    assert (handler.session_id, handler.epoch) == (77, 1)


@pytest.mark.parametrize(
    ("wanted", "sent", "forgotten"),
    [
        ({A: 1, B: 2}, {}, []),  # nothing changed: an empty incremental fetch
        ({A: 5, B: 2}, {A: 5}, []),  # A's offset moved
        ({A: 1, B: 2, C: 3}, {C: 3}, []),  # C added
        ({A: 1}, {}, [B]),  # B removed
        ({B: 9, C: 3}, {B: 9, C: 3}, [A]),
    ],
)
def test_incremental_fetch_sends_only_changes(wanted, sent, forgotten):
    handler = _opened({A: 1, B: 2})
    request = handler.build(wanted)
    assert (request.session_id, request.epoch, request.partitions, request.forgotten) == (77, 1, sent, forgotten)
    assert handler.on_response(request, ErrorCode.none, 77)
    assert handler.epoch == 2
    assert handler.build(wanted).partitions == {}, "the next fetch has nothing new to say"


@pytest.mark.parametrize(
    ("error", "next_session_id"),
    [
        # Unknown to the leader: start afresh. A wrong epoch: name the session once more, at epoch 0, so the
        # leader closes it as it opens a new one (Kafka's nextCloseExistingAttemptNew).
        (ErrorCode.fetch_session_id_not_found, 0),
        (ErrorCode.invalid_fetch_session_epoch, 77),
    ],
)
def test_session_error_falls_back_to_a_full_fetch(error, next_session_id):
    handler = _opened({A: 1, B: 2})
    assert not handler.on_response(handler.build({A: 2, B: 2}), error, 0)
    request = handler.build({A: 2, B: 2})
    assert (request.session_id, request.epoch, request.partitions) == (next_session_id, 0, {A: 2, B: 2})


def test_failed_request_falls_back_to_a_full_fetch_closing_the_session():
    handler = _opened({A: 1})
    handler.build({A: 2})
    handler.on_failure()
    request = handler.build({A: 2})
    assert (request.session_id, request.epoch, request.partitions) == (77, 0, {A: 2})


def test_no_session_granted_keeps_asking_with_full_fetches():
    handler = FetchSessionHandler()
    assert handler.on_response(handler.build({A: 1}), ErrorCode.none, 0)
    request = handler.build({A: 1})
    assert (request.session_id, request.epoch, request.partitions) == (0, 0, {A: 1})


def test_session_closed_by_the_leader_falls_back_to_a_full_fetch():
    handler = _opened({A: 1})
    assert handler.on_response(handler.build({A: 1}), ErrorCode.none, 0)
    assert (handler.build({A: 1}).epoch, handler.session_id) == (0, 0)


class SessionLeader(ScriptedConnection):
    """Answers each Fetch with the next (error, session id, partitions) of its script."""

    def __init__(self, *answers) -> None:
        super().__init__()
        self.answers = list(answers)

    async def request(self, api_key, version, parts, *, timeout_ms=None, flush=False):
        self.requests.append((api_key, version, messages.decode_request(api_key, version, b"".join(parts), 0)))
        error, session_id, partitions = self.answers.pop(0)
        topics = [FetchTopicResult(tp.topic, [FetchPartitionResult(tp.partition, 0, 10, 10, 0, b"")])
                  for tp in partitions]
        response = FetchResponseData(topics=topics, error_code=error, session_id=session_id)
        return bytearray(encode_response_header(17, 1) + b"".join(encode_fetch_response(version, response)))


def _sent(request):
    return ({(t.topic, p.partition): p.fetch_offset for t in request.topics for p in t.partitions},
            {(t.topic, p) for t in request.forgotten_topics_data for p in t.partitions})


async def test_endpoint_keeps_a_session_and_recovers_from_a_session_error():
    leader = SessionLeader(
        (ErrorCode.none, 77, [A, B]),
        (ErrorCode.none, 77, [A]),  # incremental: only A has news
        (ErrorCode.invalid_fetch_session_epoch, 0, []),
        (ErrorCode.none, 78, [A]),
    )
    endpoint = RemoteLeaderEndpoint(Connector(leader), 3, CONFIG)
    part = FetchRequestPartition(5, 1, 0, 0, 700)
    assert set(await endpoint.fetch({A: part, B: part})) == {A, B}
    moved = FetchRequestPartition(6, 1, 0, 0, 700)
    assert set(await endpoint.fetch({A: moved})) == {A}
    assert await endpoint.fetch({A: moved}) == {}, "a session error answers nothing, and is no failure"
    assert set(await endpoint.fetch({A: moved})) == {A}
    requests = [request for _, _, request in leader.requests]
    assert [(r.session_id, r.session_epoch) for r in requests] == [(0, 0), (77, 1), (77, 2), (77, 0)]
    assert [_sent(r) for r in requests] == [
        ({("t", 0): 5, ("t", 1): 5}, set()),
        ({("t", 0): 6}, {("t", 1)}),
        ({}, set()),
        ({("t", 0): 6}, set()),  # the full fetch after the error names every partition
    ]


async def test_endpoint_other_top_level_errors_still_fail_the_request():
    endpoint = RemoteLeaderEndpoint(Connector(SessionLeader((ErrorCode.unknown_server_error, 0, []))), 3, CONFIG)
    with pytest.raises(LeaderEndpointError):
        await endpoint.fetch({A: FetchRequestPartition(5, 1, 0, 0, 700)})


async def test_endpoint_abandoned_fetch_falls_back_to_a_full_fetch():
    class Parked(SessionLeader):
        async def request(self, api_key, version, parts, *, timeout_ms=None, flush=False):
            if len(self.requests) == 1:  # the second fetch parks at the leader and is abandoned
                self.requests.append((api_key, version, messages.decode_request(api_key, version,
                                                                                b"".join(parts), 0)))
                await asyncio.Event().wait()
            return await super().request(api_key, version, parts, timeout_ms=timeout_ms)

    leader = Parked((ErrorCode.none, 77, [A]), (ErrorCode.none, 78, [A]))
    endpoint = RemoteLeaderEndpoint(Connector(leader), 3, CONFIG)
    part = FetchRequestPartition(5, 1, 0, 0, 700)
    await endpoint.fetch({A: part})
    parked = asyncio.ensure_future(endpoint.fetch({A: part}))
    await wait_until(lambda: len(leader.requests) == 2, "the second fetch to reach the leader")
    parked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await parked
    await endpoint.fetch({A: part})
    requests = [request for _, _, request in leader.requests]
    assert [(r.session_id, r.session_epoch) for r in requests] == [(0, 0), (77, 1), (77, 0)]


def test_an_incremental_fetch_told_what_moved_compares_those_only_and_sends_what_a_full_compare_would():
    """Differential: one handler compares every partition wanted, its twin only the partitions the caller
    says moved (FetchPlan.take_moved), over rounds of 1,000 partitions with a few added, replaced, removed."""
    import random

    rng = random.Random(13)
    tps = [TopicPartition("t", i) for i in range(1200)]
    wanted = {tp: (tp.partition, 0) for tp in tps[:1000]}
    every, told = _opened(dict(wanted)), _opened(dict(wanted))
    for round_number in range(1, 30):
        moved = set(rng.sample(tps, 6))
        for tp in moved:
            choice = rng.random()
            if choice < 0.3:
                wanted.pop(tp, None)
            elif choice < 0.9:
                wanted[tp] = (tp.partition, round_number)  # a new entry (its fetch offset moved)
            else:
                wanted[tp] = (tp.partition, *wanted.get(tp, (0,))[1:])  # replaced by an equal entry
        compared = told.partitions_compared
        full, hinted = every.build(dict(wanted)), told.build(dict(wanted), moved)
        assert hinted.partitions == full.partitions and set(hinted.forgotten) == set(full.forgotten)
        assert told.partitions_compared - compared == len(moved)
        assert every.on_response(full, ErrorCode.none, 77) and told.on_response(hinted, ErrorCode.none, 77)
    assert every.partitions_compared >= 29 * 900
