"""The controller quorum: a sans-IO Raft core in KRaft's shape (KIP-595, KIP-630).

`node.RaftNode` holds the state and decisions; it is fed messages and ticks with the current time and returns
the messages to send. Files and sockets stay outside: the quorum-state file, the log and the network are
injected, so the same core runs in the deterministic simulation (tests/sim/raft) and, next, in the controller.
"""
