"""What a crash loop found: each restart (victim, damage, recovery times) and the run's verdict, as
`replog crash-loop` prints it."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from .checker import ANOMALY_CLASSES, DUPLICATED, CheckResult


@dataclass
class Restart:
    number: int
    victim: int
    why: str  # "again", "leader of partition N", "random"
    damage: str | None = None
    process_start_s: float = 0.0  # launch to answering ApiVersions: log recovery happens here
    unfenced_s: float = 0.0  # launch to unfenced by the controller
    killed_at_ms: int = 0  # wall clock, to place a batch's timestamp among the rounds


@dataclass
class CrashLoopReport:
    seed: int
    planned_restarts: int
    torn_fraction: float
    restarts: list[Restart] = field(default_factory=list)
    verifier_problems: list[str] = field(default_factory=list)
    torn_tails_seen: int = 0  # short last writes a SIGKILL left (legitimate)
    loop_error: str = ""
    attempted: int = 0
    acknowledged: int = 0
    failed: int = 0
    acks_one_acknowledged: int = 0
    failure_reasons: Counter = field(default_factory=Counter)
    writer_fatal_errors: list[str] = field(default_factory=list)
    converged: bool = False
    high_watermarks: dict[int, int] = field(default_factory=dict)
    read: int = 0
    read_during_loop: int = 0
    corrupt_served: list[str] = field(default_factory=list)
    incomplete_reads: list[int] = field(default_factory=list)
    check: CheckResult = field(default_factory=CheckResult)
    replica_divergence: list[str] = field(default_factory=list)
    duplicate_origins: list[str] = field(default_factory=list)  # duplicate_origins.py, read from the cluster dir
    elapsed: float = 0.0

    @property
    def damage_counts(self) -> Counter:
        return Counter(r.damage for r in self.restarts if r.damage is not None)

    @property
    def problems(self) -> list[str]:
        found = [f"{n} {anomaly}" for anomaly, n in self.check.counts.items() if n]
        if self.loop_error:
            found.append(f"the loop stopped: {self.loop_error}")
        if self.verifier_problems:
            found.append(f"{len(self.verifier_problems)} on-disk problems")
        if self.corrupt_served:
            found.append(f"{len(self.corrupt_served)} corrupt batches served")
        if not self.converged:
            found.append("the ISRs never became whole at the end")
        if self.incomplete_reads:
            found.append(f"partitions {self.incomplete_reads} not read up to their high watermark")
        if self.replica_divergence:
            found.append(f"{len(self.replica_divergence)} partitions with divergent replicas")
        if self.writer_fatal_errors:
            found.append(f"{len(self.writer_fatal_errors)} fatal writer errors")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        lines = [f"replog crash-loop: seed {self.seed}, {len(self.restarts)} of {self.planned_restarts} restarts, "
                 f"torn-write fraction {self.torn_fraction:g}"]
        for r in self.restarts:
            lines.append(f"  #{r.number}: kill {r.victim} ({r.why}); damage: {r.damage or 'none'}; serving after "
                         f"{r.process_start_s:.2f}s, unfenced after {r.unfenced_s:.2f}s")
        lines.append("torn writes injected: " + (", ".join(f"{kind}: {n}" for kind, n in
                                                        sorted(self.damage_counts.items())) or "none"))
        lines.append(f"short last writes left by SIGKILL: {self.torn_tails_seen}")
        serving = [r.process_start_s for r in self.restarts if r.process_start_s]
        unfenced = [r.unfenced_s for r in self.restarts if r.unfenced_s]
        if serving:
            lines.append(f"recovery (launch to serving): p50 {statistics.median(serving):.2f}s, "
                         f"max {max(serving):.2f}s; to unfenced: p50 {statistics.median(unfenced):.2f}s, "
                         f"max {max(unfenced):.2f}s")
        unknown = self.attempted - self.acknowledged - self.failed
        lines.append(f"acks=all writes: {self.attempted} attempted, {self.acknowledged} acknowledged, "
                     f"{self.failed} failed, {unknown} unknown; acks=1 acknowledged: {self.acks_one_acknowledged}")
        lines += [f"  failed with {reason}: {n}" for reason, n in self.failure_reasons.most_common()]
        lines += [f"  writer fatal error: {e}" for e in self.writer_fatal_errors]
        lines.append(f"read with check.crcs=true: {self.read_during_loop} records during the loop, {self.read} "
                     "at the end; high watermarks "
                     + ", ".join(f"{p}: {hw}" for p, hw in sorted(self.high_watermarks.items())))
        lines += [f"  corrupt batch served: {c}" for c in self.corrupt_served]
        lines.append("anomalies:")
        for anomaly in ANOMALY_CLASSES:
            lines.append(f"  {anomaly}: {self.check.counts[anomaly]}")
            lines += [f"    e.g. {example}" for example in self.check.examples[anomaly]]
            if anomaly == DUPLICATED:
                lines += [f"    written as {origin}" for origin in self.duplicate_origins]
        lines.append(f"  on-disk problems: {len(self.verifier_problems)}")
        lines += [f"    {p}" for p in self.verifier_problems[:20]]
        lines.append(f"  divergent replicas: {len(self.replica_divergence)}")
        lines += [f"    {d}" for d in self.replica_divergence]
        verdict = "OK" if self.ok else "FAILED: " + "; ".join(self.problems)
        lines.append(f"result: {verdict} (seed {self.seed}, {self.elapsed:.0f}s)")
        return "\n".join(lines)
