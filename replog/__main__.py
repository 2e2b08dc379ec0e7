"""`python -m replog ...`: the same command line as the `replog` console script."""

import sys

from .cli import main

sys.exit(main())
