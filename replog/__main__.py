"""`python -m replog ...` and the `replog` console script: the quiet start (process_startup.py), then the CLI."""

import sys

from replog.process_startup import begin_quiet_start


def main() -> int:
    begin_quiet_start()
    from replog.cli import (
        main as cli_main,  # imported after the quiet start began: loading it is most of a start
    )

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
