"""RequestChannel: one request in flight per peer, answers matched by correlation id, timeouts."""

from replog.raft import messages as m
from replog.raft.messages import Envelope
from replog.raft.requests import RequestChannel

BEGIN = m.BeginQuorumEpochRequest("c", 1, 3)


def test_one_request_per_peer_until_answered_or_expired():
    channel = RequestChannel(1, request_timeout_ms=2000)
    channel.send(2, BEGIN, now_ms=10)
    channel.send(2, BEGIN, now_ms=20)  # still outstanding: not sent again
    channel.send(3, BEGIN, now_ms=20)
    sent = channel.drain()
    assert [(e.destination, e.correlation_id) for e in sent] == [(2, 1), (3, 2)]
    assert channel.next_expiry_ms() == 2010
    channel.expire(2009)
    assert channel.is_waiting_for(2)
    channel.expire(2010)
    assert not channel.is_waiting_for(2) and channel.is_waiting_for(3)
    channel.send(2, BEGIN, now_ms=2010)
    assert channel.drain()[0].correlation_id == 3


def test_only_the_answer_to_the_outstanding_request_is_taken():
    channel = RequestChannel(1, request_timeout_ms=2000)
    channel.send(2, m.FetchRequest("c", 1, 3, 40, 2, 500), now_ms=0, fetch_offset=40)
    request = channel.drain()[0]
    answer = m.FetchResponse(0, 2, 3, 40, 0)
    assert channel.take_answered(Envelope(2, 1, request.correlation_id + 1, answer)) is None  # stale
    assert channel.take_answered(Envelope(3, 1, request.correlation_id, answer)) is None  # another peer
    taken = channel.take_answered(Envelope(2, 1, request.correlation_id, answer))
    assert taken is not None and taken.fetch_offset == 40
    assert channel.take_answered(Envelope(2, 1, request.correlation_id, answer)) is None  # duplicate
    assert channel.idle


def test_responses_keep_the_requests_correlation_id():
    channel = RequestChannel(1, request_timeout_ms=2000)
    channel.respond(Envelope(2, 1, 77, BEGIN), m.BeginQuorumEpochResponse(0, 1, 3))
    assert channel.drain() == [Envelope(1, 2, 77, m.BeginQuorumEpochResponse(0, 1, 3))]
    assert channel.drain() == []
