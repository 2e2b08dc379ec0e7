"""The controller quorum: a sans-IO Raft core in KRaft's shape (KIP-595, KIP-630).

`node.RaftNode` holds the state and decisions; it is fed messages and ticks with the current time and returns
the messages to send. Files and sockets stay outside: the quorum-state file, the log and the network are
injected, so the same core runs in the deterministic simulation (tests/sim/raft) and, next, in the controller.

- config: the controller.quorum.* keys, with Kafka's names and defaults
- messages: the RPCs (Vote, Begin/EndQuorumEpoch, Fetch, FetchSnapshot, DescribeQuorum) as frozen dataclasses
- states: the quorum states (Unattached, Voted, Prospective for KIP-996 pre-vote, Candidate, Leader, Follower,
  Resigned) and the pure election and commit rules
- quorum_state_file: the quorum-state file, written atomically before a vote or epoch change is acted on
- raft_log: what the core needs from a log, the Fetch validation and truncation rules, an in-memory log
- leader: the leader's work (LeaderRole: appends, HW, Fetch answered or parked, check-quorum) and what it
  tracks about the replicas (LeaderProgress)
- requests: correlation ids, one request in flight per peer, the outbox
- snapshots: KIP-630 snapshot policy and FetchSnapshot chunks
- commits: what the state machine is handed: a snapshot to load, then committed entries in order
- node: RaftNode, the core that ties them together
- codec: the messages to and from Kafka's wire schemas (kio)
"""
