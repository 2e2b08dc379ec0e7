"""The SparkSession the analysis runs in, alike under `replog analyze`, `python -m replog.analytics` and
spark-submit."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

APP_NAME = "replog-analyze"
SHUFFLE_PARTITIONS_PER_CORE = 4  # Spark's default of 200 shuffle partitions is mostly overhead on one machine
# Groups an aggregation of percentile_approx keeps in a hash map per task before it falls back to sorting (128
# by default). The lag per partition and follower has a group per follower replica: past 128 the fallback
# serialised and re-merged every group's quantile digest, over half the job's time on 1 GB of dumps. A digest
# holds at most the samples of its group, so the map's memory grows with the samples, not the groups.
HASH_AGGREGATE_GROUPS = 100_000


@contextmanager
def spark_session(master: str | None) -> Iterator[SparkSession]:
    """A session on `master` when one is given; otherwise on what spark-submit or Spark's configuration sets,
    which is local[*] when nothing does. A session this process already has is used as it is, and only a
    session made here is stopped at the end."""
    # Spark binds to the machine's first address by default; the dumps are local files, so loopback will do.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    existing = SparkSession.getActiveSession()
    builder = SparkSession.builder.appName(APP_NAME).config("spark.ui.showConsoleProgress", "false")
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    context = spark.sparkContext
    if existing is None:
        context.setLogLevel("ERROR")
    local_settings = {
        "spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS_PER_CORE * context.defaultParallelism,
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": HASH_AGGREGATE_GROUPS,
    }
    if context.master.startswith("local"):
        for key, value in local_settings.items():
            if not context.getConf().contains(key):  # what spark-submit or Spark's configuration says wins
                spark.conf.set(key, value)
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()
