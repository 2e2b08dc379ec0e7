"""The analyze command's options and entry point, shared by `replog analyze`, `python -m replog.analytics`
and spark-submit. PySpark is imported only once the options are read, so a missing install gets a clear
message instead of a traceback."""

import argparse
import sys
from pathlib import Path

from . import AnalysisError

DEFAULT_OUT = Path("replog-analysis")
DEFAULT_WINDOW_S = 10.0
INSTALL_HINT = "pip install 'replog[analytics]'"
EXIT_OK, EXIT_ERROR = 0, 1


def _positive_seconds(text: str) -> float:
    seconds = float(text)
    if seconds < 0.001:
        raise argparse.ArgumentTypeError("the window must be at least 0.001 s")
    return seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics",
        nargs="+",
        required=True,
        type=Path,
        metavar="DIR",
        help="directories holding metrics dumps, every *.jsonl under them, recursively (required)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where the tables, plots and report.html go (default: ./{DEFAULT_OUT})",
    )
    parser.add_argument(
        "--master",
        metavar="URL",
        help="Spark master (default: the one spark-submit or Spark's configuration sets, else local[*])",
    )
    parser.add_argument(
        "--window",
        type=_positive_seconds,
        default=DEFAULT_WINDOW_S,
        metavar="SECONDS",
        help=f"length of the time windows (default: {DEFAULT_WINDOW_S:g})",
    )


def run(args: argparse.Namespace) -> int:
    """Analyse, print the summary on stdout; errors are one line on stderr and exit code 1."""
    try:
        import matplotlib  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        print(
            f"error: the analysis needs PySpark and matplotlib ({e.name} is missing): {INSTALL_HINT}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    from .pipeline import Progress, analyze_directories

    try:
        print(analyze_directories(args.metrics, args.out, args.window, args.master, Progress()))
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replog.analytics", description="Analyse metrics dumps.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
