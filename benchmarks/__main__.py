"""`python -m benchmarks [--quick] [--only NAME]`: run the benchmarks, print one table, write the JSON."""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from . import (
    analyze,
    baselines,
    codec_kio_vs_handwritten,
    consume_catchup,
    failover,
    follower_catchup,
    produce_throughput,
    replicated_latency,
    replicated_produce,
    startup,
)
from .harness import print_table, write_json

BENCHMARKS = {
    m.NAME: m for m in (codec_kio_vs_handwritten, baselines, produce_throughput, consume_catchup,
                        replicated_produce, replicated_latency, follower_catchup, failover, startup, analyze)
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller volumes and fewer repeats (~2 min)")
    parser.add_argument(
        "--only", choices=sorted(BENCHMARKS), action="append", help="run only this one (repeatable)"
    )
    args = parser.parse_args()
    names = args.only or list(BENCHMARKS)
    results = []
    started = time.monotonic()
    # Files go next to the repository, on the disk the broker would use, not a possible tmpfs /tmp.
    with tempfile.TemporaryDirectory(
        prefix="replog-bench-", dir=Path(__file__).resolve().parent.parent
    ) as tmp:
        for name in names:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results += BENCHMARKS[name].run(args.quick, Path(tmp))
    print_table(results)
    settings = {"quick": args.quick, "benchmarks": names, "cpus": os.cpu_count(), "python": sys.version.split()[0],
                "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
    path = write_json("quick" if args.quick else "full", results, settings)
    print(f"\n{len(results)} results in {settings['seconds']} s; written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
