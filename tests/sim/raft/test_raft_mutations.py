"""The simulation must catch known Raft bugs: each test injects one (monkeypatch, never in the code) and
replays the first seed that caught it, which must fail again.

The seeds are the first failing ones, in seed order as test_seeds runs them, found with the bug injected
(the table in the report of issue 19). A change to the simulation moves them: inject the bug, run
`-k test_seeds --sim-seeds 3000`, and record the new first failing seed. If none fails any more, the
simulation has lost strength.
"""

import pytest

from replog.raft import follower as follower_module
from replog.raft import leader as leader_module
from replog.raft import node as node_module
from replog.raft import raft_log as raft_log_module
from replog.raft import states
from replog.raft.quorum_state_file import ElectionState
from replog.raft.raft_log import DivergingFetch, ValidFetch

from .simulation import SimulationFailure, run_seed

# The correct functions, kept before a test replaces them.
may_grant_vote, majority_high_watermark = states.may_grant_vote, states.majority_high_watermark
validate_fetch, election_state = leader_module.validate_fetch, states.election_state


def _two_votes_per_epoch(state, candidate_id, candidate_last, local_last):
    if isinstance(state, states.Voted):
        return states.log_is_up_to_date(candidate_last, local_last)
    return may_grant_vote(state, candidate_id, candidate_last, local_last)


def _commits_before_own_epoch(offsets, voters, epoch_start_offset, current):
    return majority_high_watermark(offsets, voters, -1, current)


def _observers_count(offsets, voters, epoch_start_offset, current):
    ranked = sorted(offsets.values(), reverse=True)  # every replica that fetched, the observer too
    candidate = ranked[len(voters) // 2]
    return candidate if candidate > epoch_start_offset and (current is None or candidate > current) else None


def _no_diverging_epoch(log, fetch_offset, last_fetched_epoch):
    check = validate_fetch(log, fetch_offset, last_fetched_epoch)
    return ValidFetch() if isinstance(check, DivergingFetch) else check



def _vote_not_saved(state, local_id, voters):
    if isinstance(state, states.Voted):
        return ElectionState(state.epoch, None, None, voters)
    return election_state(state, local_id, voters)


def _votes_on_the_unflushed_tail(log):
    return log.last_offset_and_epoch()


@pytest.mark.parametrize(
    ("module", "name", "buggy", "seed"),
    [
        (node_module.s, "may_grant_vote", _two_votes_per_epoch, 7),
        (leader_module, "majority_high_watermark", _commits_before_own_epoch, 738),
        (leader_module, "majority_high_watermark", _observers_count, 0),
        (leader_module, "validate_fetch", _no_diverging_epoch, 5),
        (follower_module, "truncation_offset", lambda log, diverging_epoch: log.end_offset, 7),
        (node_module.s, "election_state", _vote_not_saved, 70),
        # A real bug, not an injected one: found by the long run of issue 19 (seeds 1000-27216), then fixed.
        (raft_log_module.MemoryRaftLog, "last_flushed_offset_and_epoch", _votes_on_the_unflushed_tail, 27216),
    ],
    ids=["two-votes-per-epoch", "commit-before-own-epoch", "observers-count-for-hw", "leader-skips-diverging-epoch",
         "follower-skips-truncation", "vote-not-saved", "votes-on-the-unflushed-tail"],
)
def test_injected_bug_is_caught(monkeypatch, module, name, buggy, seed):
    run_seed(seed)  # passes without the bug
    monkeypatch.setattr(module, name, buggy)
    with pytest.raises(SimulationFailure, match=f"seed {seed} failed"):
        run_seed(seed)
