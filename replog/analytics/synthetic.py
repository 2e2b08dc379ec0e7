"""Synthetic metrics dumps (docs/metrics-dumps.md) of a cluster whose throughput, lag and ISR changes are
known by construction, at any scale (lines are written as they are made; memory grows with the partition
count only).

    python -m replog.analytics.synthetic --brokers 3 --partitions 30 --seconds 120 --out DIR [--seed 1]

The model, every `interval_ms` tick:
- brokers 1..N and a controller (CONTROLLER_ID) start at `start_ms`; partition k (of all topics) is
  partition k // topics of topic-(k % topics), with replicas [(k + j) % N + 1 for j < replication_factor],
  the first one its leader, and min ISR `min_isr`;
- every partition with a live leader appends `bytes_per_second` of records of `record_bytes` each; a
  following replica that is in sync lags its leader by a number of records drawn (seeded) uniformly from
  0 to one tick's worth, and its lag_ms is the time the leader took to append them;
- restart r kills broker (r % N) + 1 at a tick (it leaves half a line), the controller fences it
  SESSION_TIMEOUT_MS later (moving its leaderships to the next in-sync replica and removing it from the
  other ISRs), it starts again `downtime_s` after the kill and each partition it follows takes it back into
  the ISR catch_up_ms(k) after the start (its log catching up linearly meanwhile); leaders do not move back;
- stall s stops one follower fetching: its leader removes it from the ISR REPLICA_LAG_TIME_MS later and
  adds it back when the stall ends. Stall s overlaps restart s when there is one, on a partition both
  brokers replicate, so the partition goes under min ISR (with a replication factor of 3 or more).
"""

import argparse
import sys
from pathlib import Path

from .synthetic_cluster import Simulation
from .synthetic_scenario import DEFAULT_MAX_FILE_BYTES, Scenario


def generate(scenario: Scenario, out: Path) -> list[Path]:
    """Write the scenario's dumps under `out` (broker-<id>/ and controller/); returns the files."""
    Simulation(scenario, out).run()
    return sorted(out.rglob("*.jsonl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m replog.analytics.synthetic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, required=True, help="brokers in the cluster (required)")
    parser.add_argument("--partitions", type=int, required=True, help="partitions in all, over the topics (required)")
    parser.add_argument("--seconds", type=int, required=True, help="length of the dumped history (required)")
    parser.add_argument("--interval-ms", type=int, default=1000,
                        help="time between snapshot lines (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True,
                        help="where the dumps go: broker-<id>/ and controller/ (required)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the lag draws (default: %(default)s)")
    parser.add_argument("--topics", type=int, default=1, help="topics the partitions spread over (default: "
                        "%(default)s)")
    parser.add_argument("--replication-factor", type=int, default=3,
                        help="replicas of each partition (default: %(default)s)")
    parser.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas of every partition (default: "
                        "%(default)s)")
    parser.add_argument("--bytes-per-second", type=int, default=10_000,
                        help="produced to each partition (default: %(default)s)")
    parser.add_argument("--record-bytes", type=int, default=100, help="size of one record (default: %(default)s)")
    parser.add_argument("--restarts", type=int, default=1,
                        help="broker kills and restarts, spread evenly (default: %(default)s)")
    parser.add_argument("--stalls", type=int, default=1,
                        help="followers that stop fetching for a while (default: %(default)s)")
    parser.add_argument("--downtime-s", type=int, default=20,
                        help="how long a killed broker stays down (default: %(default)s)")
    parser.add_argument("--max-file-bytes", type=int, default=DEFAULT_MAX_FILE_BYTES,
                        help="a new dump file past this size, as metrics.dump.max.bytes (default: %(default)s)")
    args = parser.parse_args(argv)
    options = {name: value for name, value in vars(args).items() if name != "out"}
    try:
        scenario = Scenario(**options)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    files = generate(scenario, args.out)
    total = sum(path.stat().st_size for path in files)
    print(f"{len(files)} files, {total / 1e6:,.1f} MB under {args.out}")
    for restart in scenario.restart_schedule():
        print(f"restart: {restart}")
    for stall in scenario.stall_schedule():
        print(f"stall: {stall}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
