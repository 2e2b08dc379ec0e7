"""The follower's kept FetchRequest body (replog.fetcher.fetch_request_cache): patched in place round after
round, it stays kio's encoding byte for byte through offset moves, partition changes, session resets and full
fetches; and it encodes afresh only when the layout changes."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from replog.fetcher.fetch_request_cache import EncodedFetchRequest, FetchRequestPartition
from replog.fetcher.fetch_session import FetchSessionHandler, SessionRequest
from replog.log.partition_log import TopicPartition
from replog.protocol import messages
from replog.protocol.apis import ApiKey
from replog.protocol.fetch_request import FETCH_REQUEST_VERSION

HEAD = (3, 500, 1, 10_485_760, 0)  # replica id, max wait, min bytes, max bytes, isolation
A, B, C = TopicPartition("orders", 0), TopicPartition("orders", 7), TopicPartition("é-topic", 2)


def _kio_body(request: SessionRequest[FetchRequestPartition]) -> bytes:
    topics: dict[str, list[dict]] = {}
    for tp, p in request.partitions.items():
        topics.setdefault(tp.topic, []).append({
            "partition": tp.partition, "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.fetch_offset,
            "last_fetched_epoch": -1 if p.last_fetched_epoch is None else p.last_fetched_epoch,
            "log_start_offset": p.log_start_offset, "partition_max_bytes": p.max_bytes,
        })  # fmt: skip
    forgotten: dict[str, list[int]] = {}
    for tp in request.forgotten:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    replica_id, max_wait, min_bytes, max_bytes, isolation = HEAD
    return messages.encode_request(ApiKey.FETCH, FETCH_REQUEST_VERSION, {
        "replica_id": replica_id, "max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": request.session_id, "session_epoch": request.epoch,
        "topics": [{"topic": topic, "partitions": ps} for topic, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        "rack_id": "",
    })  # fmt: skip


def _at(offset: int, *, epoch: int | None = 4, log_start: int = 0, leader_epoch: int = 5) -> FetchRequestPartition:
    return FetchRequestPartition(offset, leader_epoch, epoch, log_start, 1_048_576)


# Each round: the partitions wanted, then the leader's answer (error code, session id); None: the request fails.
ROUNDS = [
    ({A: _at(0)}, (ErrorCode.none, 77)),  # full fetch, session 77 granted
    ({A: _at(10)}, (ErrorCode.none, 77)),  # A moved: incremental, names A
    ({A: _at(25)}, (ErrorCode.none, 77)),  # same layout, patched
    ({A: _at(2**40, epoch=None)}, (ErrorCode.none, 77)),  # a big offset, no last fetched epoch
    ({A: _at(2**40, epoch=None)}, (ErrorCode.none, 77)),  # nothing changed: names nothing
    ({A: _at(2**40 + 1, log_start=9)}, (ErrorCode.none, 77)),  # the log start moved too
    ({A: _at(2**40 + 2), B: _at(0), C: _at(3)}, (ErrorCode.none, 77)),  # two added: a new layout
    ({A: _at(2**40 + 3), B: _at(1), C: _at(4)}, (ErrorCode.none, 77)),  # all three moved, patched
    ({A: _at(2**40 + 4), C: _at(5)}, (ErrorCode.none, 77)),  # B forgotten
    ({A: _at(2**40 + 5), C: _at(6)}, (ErrorCode.none, 77)),  # no longer forgotten: a new layout again
    ({A: _at(2**40 + 6), C: _at(7)}, (ErrorCode.invalid_fetch_session_epoch, 0)),  # session error
    ({A: _at(2**40 + 6), C: _at(7)}, (ErrorCode.none, 91)),  # full fetch, closing 77; 91 granted
    ({A: _at(2**40 + 7), C: _at(8)}, None),  # the request fails (connection lost)
    ({A: _at(2**40 + 7), C: _at(8)}, (ErrorCode.none, 0)),  # full fetch; no session granted
    ({A: _at(2**40 + 8), C: _at(9)}, (ErrorCode.none, 0)),  # full fetches on, same layout: patched
    ({A: _at(2**40 + 9, leader_epoch=6), C: _at(10)}, (ErrorCode.none, 5)),  # a new leader epoch
    ({A: _at(2**40 + 10, leader_epoch=6), C: _at(10)}, (ErrorCode.none, 5)),  # only A changed
    ({A: _at(2**40 + 11, leader_epoch=6), C: _at(10)}, (ErrorCode.none, 5)),  # patched
]


def test_every_round_sends_kios_bytes_and_only_layout_changes_encode_afresh():
    session: FetchSessionHandler[FetchRequestPartition] = FetchSessionHandler()
    encoded = EncodedFetchRequest(*HEAD)
    layouts = []
    for wanted, answer in ROUNDS:
        request = session.build(wanted)
        assert encoded.body(request) == _kio_body(request)
        layouts.append((tuple(request.partitions), tuple(request.forgotten)))
        if answer is None:
            session.on_failure()
        else:
            session.on_response(request, *answer)
    changes = sum(1 for before, after in zip([None, *layouts[:-1]], layouts, strict=True) if before != after)
    assert encoded.encodings == changes
    assert encoded.encodings < len(ROUNDS) // 2


def test_a_steady_follower_encodes_once_in_a_thousand_rounds():
    session: FetchSessionHandler[FetchRequestPartition] = FetchSessionHandler()
    encoded = EncodedFetchRequest(*HEAD)
    for offset in range(1000):
        request = session.build({A: _at(offset * 3)})
        body = encoded.body(request)
        assert session.on_response(request, ErrorCode.none, 77)
    assert body == _kio_body(request)
    # The full fetch names A, and so does every incremental one: encoded once, then patched 999 times.
    assert encoded.encodings == 1


def test_the_body_handed_out_is_not_changed_by_the_next_request():
    """The transport may still hold an abandoned request's bytes when the next one is patched."""
    encoded = EncodedFetchRequest(*HEAD)
    first = encoded.body(SessionRequest(77, 3, {A: _at(10)}, []))
    kept = bytes(first)
    encoded.body(SessionRequest(77, 4, {A: _at(20)}, []))
    assert first == kept
