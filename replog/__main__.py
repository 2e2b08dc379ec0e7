"""`python -m replog ...` and the `replog` console script: the quiet start and the allocator settings
(process_startup.py), then the CLI."""

import sys

from replog.process_startup import begin_quiet_start, keep_large_buffers_in_heap


def main() -> int:
    begin_quiet_start()
    keep_large_buffers_in_heap()
    from replog.cli import (
        main as cli_main,  # imported after the quiet start began: loading it is most of a start
    )

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
