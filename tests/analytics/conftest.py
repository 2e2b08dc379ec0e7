"""One local Spark session for every analytics test: starting one takes ~10 s. On data this small, compiling
whole stages and re-planning between them (adaptive execution) cost more than they save."""

import os
import shutil

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("PySpark needs a Java runtime: apt-get install openjdk-17-jre-headless (.ci/run does)")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("replog-analytics-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
