"""The leader's side of RF=3 replication, in process: a ReplicaManager leading "t"-0 with two followers and a
consumer fetching through handlers/fetch.handle in incremental sessions (KIP-227), acks=all appends, and a
counter of the Python calls an action makes. Each round: an append wakes both followers' parked fetches
(answered with the batch), each follower fetches again at the new LEO (the second moves the HW: the produce
answer and the consumer's parked fetch complete), and the consumer fetches again and parks. Used by the
counted-call tests (tests/unit/test_fetch_handler_costs.py) and by woken_fetch_cost.py."""

import collections
import sys
import types
import uuid

from replog.broker.access import Access
from replog.broker.handlers import fetch
from replog.broker.replica_manager import ReplicaManager
from replog.log.config import LogConfig
from replog.log.log_manager import LogManager
from replog.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrTopicState
from replog.protocol.fetch_request import FetchRequestData, FetchRequestPartitionData, encode_fetch_request
from replog.protocol.headers import decode_request_header, encode_request_header
from replog.protocol.records import build_batch
from replog.server.auth import Session
from replog.server.dispatch import RequestContext

LEADER, FOLLOWERS, CONSUMER = 1, (2, 3), -1
LEADER_EPOCH = 3
BATCH = bytes(build_batch([(None, b"x" * 1000, [], 1000)]))


class Fetcher:
    """A fetcher in a fetch session: its next request, and what each answer tells it."""

    def __init__(self, replica_id: int) -> None:
        self.replica_id, self.session_id, self.epoch, self.offset, self.correlation_id = replica_id, 0, 0, 0, 0
        self.session = Session(cluster_action=replica_id >= 0)
        self.answers: list[list] = []

    def request(self) -> RequestContext:
        last_fetched_epoch = LEADER_EPOCH if self.replica_id >= 0 else -1
        body = encode_fetch_request(FetchRequestData(
            self.replica_id, 500, 1, 10 << 20, 0, self.session_id, self.epoch,
            {"t": [FetchRequestPartitionData(0, LEADER_EPOCH, self.offset, last_fetched_epoch, 0, 1 << 20)]}))
        self.correlation_id += 1
        frame = bytearray(encode_request_header(1, 12, self.correlation_id, "f") + body)
        return RequestContext(decode_request_header(frame), frame, "127.0.0.1:1", lambda: None, self.session)

    def answered(self, parts: list) -> None:
        assert parts[0][4:6] == b"\0\0", "no top-level error"
        if self.session_id == 0:
            self.session_id = int.from_bytes(parts[0][6:10], "big")
        self.epoch += 1
        self.offset += sum(not isinstance(p, (bytes, bytearray, memoryview)) for p in parts)  # one batch each
        self.answers.append(parts)


class LeaderRounds:
    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager
        self.access = Access(types.SimpleNamespace(enabled=False))
        self.followers = [Fetcher(broker) for broker in FOLLOWERS]
        self.consumer = Fetcher(CONSUMER)
        self.parked: set[Fetcher] = set()

    def send(self, fetcher: Fetcher) -> bool:
        """Whether the fetch parked."""
        result = fetch.handle(fetcher.request(), replicas=self.manager, access=self.access)
        if isinstance(result, list):
            fetcher.answered(result)
            return False
        self.parked.add(fetcher)
        result.on_done(lambda done: self.parked.discard(fetcher) or fetcher.answered(done.result()))
        return True

    def open_sessions(self) -> None:
        for fetcher in [*self.followers, self.consumer]:
            while not self.send(fetcher):
                pass

    @property
    def log(self):
        return self.manager.get_partition("t", 0).log

    def one_round(self) -> None:
        produce = self.manager.append_records([("t", 0, memoryview(bytearray(BATCH)))], -1, 30_000)
        assert not self.parked & set(self.followers), "the append answers both followers' parked fetches"
        for follower in self.followers:
            assert self.send(follower), "a follower at the LEO parks"
        assert produce.done(), "the second follower's fetch moved the HW"
        assert self.consumer not in self.parked, "the HW move answered the consumer's parked fetch"
        assert self.send(self.consumer)


async def leader_rounds(tmp_path, config: LogConfig | None = None) -> "LeaderRounds":
    """A leader whose three fetchers have opened their sessions and been through three rounds."""
    config = config or LogConfig(segment_bytes=1 << 30)
    clock = lambda: 1_000_000  # noqa: E731
    manager = ReplicaManager(LEADER, LogManager([tmp_path], config, clock_ms=clock), config, 2, clock_ms=clock,
                             replica_lag_time_max_ms=30_000, fetch_purgatory_size=100, produce_purgatory_size=100,
                             alter_isr=lambda partition, change: None)
    replicas = [LEADER, *FOLLOWERS]
    state = LeaderAndIsrPartitionState("t", 0, 1, LEADER, LEADER_EPOCH, replicas, 1, replicas)
    await manager.become_leader_or_follower(
        LeaderAndIsrRequest(9, 1, -1, [LeaderAndIsrTopicState("t", uuid.uuid4(), [state])], []))
    leader = LeaderRounds(manager)
    leader.open_sessions()
    for _ in range(3):
        leader.one_round()
    return leader


def count_calls(action, rounds: int) -> collections.Counter:
    """Python calls per round by (module file's last two parts, function name)."""
    counts: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            counts["/".join(code.co_filename.split("/")[-2:]), code.co_name] += 1

    sys.setprofile(profile)
    try:
        for _ in range(rounds):
            action()
    finally:
        sys.setprofile(None)
    return collections.Counter({key: n / rounds for key, n in counts.items()})
