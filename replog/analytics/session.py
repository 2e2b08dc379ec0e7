"""The SparkSession the analysis runs in, alike under `replog analyze`, `python -m replog.analytics` and
spark-submit."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

APP_NAME = "replog-analyze"
SHUFFLE_PARTITIONS_PER_CORE = 4  # Spark's default of 200 shuffle partitions is mostly overhead on one machine
# The JVM PySpark starts for a session made here (in local mode it is driver and executors at once). The
# analysis is a batch job that caches its parsed rows: with the default heap (1 GiB) and collector (G1), GC
# took 15-20 CPU-s per GB of dumps. A larger heap and the throughput collector suit it. Under spark-submit
# the JVM is already running with the options given to spark-submit, and these change nothing.
# The parsed rows are cached uncompressed: their columns hardly compress (121 MB compressed, 122 MB not, for
# 1 GB of dumps: far below the storage share of the heap), and gathering the compression statistics was half
# of building the cache (docs/profiles/analytics.md, round 5).
DRIVER_DEFAULTS = {
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


@contextmanager
def spark_session(master: str | None) -> Iterator[SparkSession]:
    """A session on `master` when one is given; otherwise on what spark-submit or Spark's configuration sets,
    which is local[*] when nothing does. A session this process already has is used as it is, and only a
    session made here is stopped at the end."""
    # Spark binds to the machine's first address by default; the dumps are local files, so loopback will do.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    existing = SparkSession.getActiveSession()
    builder = SparkSession.builder.appName(APP_NAME).config("spark.ui.showConsoleProgress", "false")
    if existing is None:
        for key, value in DRIVER_DEFAULTS.items():
            builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    context = spark.sparkContext
    if existing is None:
        context.setLogLevel("ERROR")
    configured = context.getConf().contains("spark.sql.shuffle.partitions")
    if context.master.startswith("local") and not configured:
        spark.conf.set(
            "spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS_PER_CORE * context.defaultParallelism
        )
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()
