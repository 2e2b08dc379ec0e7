"""What a chaos run found: its report (with the verdict and the text `replog chaos` prints), and the
report.json and history.json it leaves in the data directory."""

import dataclasses
import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from . import nemesis
from .chaos_run_config import HW_CATCH_UP_BOUND_S, ISR_WHOLE_TIMEOUT_S
from .checker import ANOMALY_CLASSES, DEFINITE_FAILURES, CheckResult, History
from .load import LoadProducer


@dataclass
class ChaosReport:
    seed: int
    duration: float
    faults: tuple[str, ...]
    schedule: list[nemesis.Action]
    performed_at: list[float] = field(default_factory=list)  # when each action of the schedule ran
    isr_waits: list[float] = field(default_factory=list)  # before each fault: seconds until the ISRs were whole
    isrs_not_whole: list[str] = field(default_factory=list)  # faults begun after ISR_WHOLE_TIMEOUT_S anyway
    nemesis_errors: list[str] = field(default_factory=list)
    attempted: int = 0
    acknowledged: int = 0
    acknowledged_without_offset: int = 0  # librdkafka's implicit acks (see checker.History)
    failed: int = 0
    definitely_failed: int = 0
    failure_reasons: Counter = field(default_factory=Counter)
    producer_fatal_errors: list[str] = field(default_factory=list)
    read_during_faults: int = 0
    reader_errors: Counter = field(default_factory=Counter)  # the reader's errors during the faults, by name
    converged_after: float | None = None  # seconds from healing to whole ISRs; None: never
    unconverged_state: str = ""  # the controller's view when convergence timed out
    hw_caught_up_after: float | None = None  # seconds from whole ISRs to HW = LEO everywhere; None: never
    hw_lagging: list[str] = field(default_factory=list)  # replicas whose HW had not reached LEO in time
    high_watermarks: dict[int, int] = field(default_factory=dict)
    read: int = 0
    incomplete_reads: list[int] = field(default_factory=list)  # partitions not read up to their HW
    check: CheckResult = field(default_factory=CheckResult)
    replica_divergence: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def count(self, op: str) -> int:
        return sum(1 for a in self.schedule[: len(self.performed_at)] if a.op == op)

    @property
    def indeterminate(self) -> int:
        """Writes whose outcome is unknown: failed with an error that leaves it open, or never reported."""
        return self.attempted - self.acknowledged - self.definitely_failed

    @property
    def problems(self) -> list[str]:
        """Everything that makes the run fail: anomalies first, then what kept the check from being whole."""
        found = [f"{n} {anomaly}" for anomaly, n in self.check.counts.items() if n]
        if self.replica_divergence:
            found.append(f"{len(self.replica_divergence)} partitions with divergent replicas")
        if self.converged_after is None:
            found.append("the ISRs never became whole")
        elif self.hw_caught_up_after is None:
            found.append(f"high watermarks did not reach the log end offsets within {HW_CATCH_UP_BOUND_S:g}s")
        if self.isrs_not_whole:
            found.append(f"{len(self.isrs_not_whole)} faults began with an ISR short")
        if self.reader_errors.get("_AUTO_OFFSET_RESET"):
            found.append("the reader during the faults was told its offset is out of range")
        if self.incomplete_reads:
            found.append(f"partitions {self.incomplete_reads} not read up to their high watermark")
        if self.nemesis_errors:
            found.append(f"{len(self.nemesis_errors)} nemesis actions failed")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        lines = [f"replog chaos: seed {self.seed}, {self.duration:g}s, nemesis {','.join(self.faults)}",
                 "schedule (planned time, action, time performed):"]
        for action, at in zip(self.schedule, self.performed_at, strict=False):
            lines.append(f"  {action}  (performed at {at:.2f}s)")
        lines += [f"  error: {e}" for e in self.nemesis_errors]
        lines += [f"  fault begun with an ISR short: {e}" for e in self.isrs_not_whole]
        lines.append(f"nemesis: {self.count(nemesis.KILL_BROKER)} kills, {self.count(nemesis.PAUSE_BROKER)} "
                     f"pauses, {self.count(nemesis.CUT_NETWORK)} network cuts, "
                     f"{self.count(nemesis.RESTART_CONTROLLER)} controller restarts, "
                     f"{self.count(nemesis.STOP_CONTROLLER)} controller downtimes")
        if set(self.faults) & set(nemesis.QUORUM_FAULTS):
            lines.append(f"quorum: {self.count(nemesis.KILL_CONTROLLER)} controller kills, "
                         f"{self.count(nemesis.PAUSE_CONTROLLER)} controller pauses, "
                         f"{self.count(nemesis.ISOLATE_CONTROLLER)} controller isolations, "
                         f"{self.count(nemesis.KILL_CONTROLLER_AND_BROKER)} active controller and broker kills")
        if self.isr_waits:
            lines.append(f"waits for whole ISRs before faults: max {max(self.isr_waits):.1f}s, total "
                         f"{sum(self.isr_waits):.1f}s over {len(self.isr_waits)} faults")
        never_reported = self.attempted - self.acknowledged - self.failed
        lines.append(f"writes: {self.attempted} attempted, {self.acknowledged} acknowledged, {self.failed} "
                     f"failed ({self.definitely_failed} definitely), {never_reported} never reported; "
                     f"{self.indeterminate} indeterminate")
        if self.acknowledged_without_offset:
            lines.append(f"  acknowledged without an offset: {self.acknowledged_without_offset}")
        lines += [f"  failed with {reason}: {n}" for reason, n in self.failure_reasons.most_common()]
        lines += [f"  producer fatal error: {e}" for e in self.producer_fatal_errors]
        lines.append(f"read during the faults: {self.read_during_faults} records"
                     + "".join(f"; {n} x {error}" for error, n in self.reader_errors.most_common()))
        lines.append("converged: " + ("never" if self.converged_after is None else
                                      f"every ISR whole {self.converged_after:.1f}s after healing"))
        if self.unconverged_state:
            lines.append(f"  at the time-out: {self.unconverged_state}")
        lines.append("caught up: " + (
            f"HW = LEO on every replica {self.hw_caught_up_after:.1f}s after that (bound {HW_CATCH_UP_BOUND_S:g}s)"
            if self.hw_caught_up_after is not None else "not measured" if self.converged_after is None
            else f"not within {HW_CATCH_UP_BOUND_S:g}s"))
        lines += [f"  {lag}" for lag in self.hw_lagging]
        lines.append(f"read: {self.read} records; high watermarks "
                     + ", ".join(f"{p}: {hw}" for p, hw in sorted(self.high_watermarks.items())))
        lines.append("anomalies:")
        for anomaly in ANOMALY_CLASSES:
            lines.append(f"  {anomaly}: {self.check.counts[anomaly]}")
            lines += [f"    e.g. {example}" for example in self.check.examples[anomaly]]
        lines.append(f"  divergent replicas: {len(self.replica_divergence)}")
        lines += [f"    {d}" for d in self.replica_divergence]
        verdict = "OK" if self.ok else "FAILED: " + "; ".join(self.problems)
        lines.append(f"result: {verdict} (seed {self.seed}, {self.elapsed:.0f}s)")
        return "\n".join(lines)


def record_writes(report: ChaosReport, producers: list[LoadProducer]) -> None:
    report.attempted = sum(len(p.attempted) for p in producers)
    report.acknowledged = sum(len(p.acknowledged) for p in producers)
    report.acknowledged_without_offset = sum(1 for p in producers for _, offset in p.acknowledged.values()
                                             if offset is None)
    report.failed = sum(len(p.failed) for p in producers)
    report.failure_reasons = Counter(reason for p in producers for reason in p.failed.values())
    report.definitely_failed = sum(n for reason, n in report.failure_reasons.items() if reason in DEFINITE_FAILURES)
    report.producer_fatal_errors = [e for p in producers for e in p.fatal]


def write_json(root: Path, report: ChaosReport, history: History | None) -> None:
    """report.json: the report's fields and verdict; history.json: every write's outcome and both reads."""
    root.mkdir(parents=True, exist_ok=True)
    fields = dataclasses.asdict(report)
    # asdict rebuilds a Counter from its (key, count) pairs as if they were keys: take them as they are.
    fields.update(failure_reasons=dict(report.failure_reasons), reader_errors=dict(report.reader_errors))
    fields.update(ok=report.ok, problems=report.problems, indeterminate=report.indeterminate,
                  hw_catch_up_bound_s=HW_CATCH_UP_BOUND_S, isr_whole_timeout_s=ISR_WHOLE_TIMEOUT_S)
    (root / "report.json").write_text(json.dumps(fields, indent=1, default=str))
    if history is not None:
        (root / "history.json").write_text(json.dumps({
            "attempted": sorted(history.attempted),
            "acknowledged": history.acknowledged,
            "failed": history.failed,
            "read": history.read,
            "read_during_faults": history.read_during_faults,
        }))


class RunReport(Protocol):
    """A chaos run's or a crash loop's report, as the command that ran it ends."""

    @property
    def ok(self) -> bool: ...

    def format(self) -> str: ...


def print_and_clean_up(report: RunReport, root: Path, *, keep: bool) -> int:
    """Print the report; the run's data stays in `root` if something was wrong or `keep`, else goes. Returns
    the command's exit status: 0 only if nothing was wrong."""
    print(report.format())
    if not report.ok:
        print(f"cluster data and broker output kept in {root}")
        return 1
    if not keep:
        shutil.rmtree(root)
    return 0
