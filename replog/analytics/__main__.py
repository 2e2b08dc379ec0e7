"""`python -m replog.analytics ...`, or `spark-submit .../replog/analytics/__main__.py ...`: the analyze
command. Imported absolutely, as spark-submit runs this file as a script."""

import sys

from replog.analytics.job import main

sys.exit(main())
