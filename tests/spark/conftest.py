"""One SparkSession for every Spark test (it takes seconds to start), tuned for small local data."""

from __future__ import annotations

import pytest

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.minBatchesToRetain": "10",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m",  # C1 only: faster start for short jobs;
    # C1 alone reserves 48 MB of code cache, which pyspark 4.3's plans outgrow ("Out of space in CodeCache")
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from spark.session import session

    conf = {**TEST_CONF, "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-sql-warehouse"))}
    s = session("local[2]", app="kreassign-tests", conf=conf)
    yield s
    s.stop()
