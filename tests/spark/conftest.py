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
}  # a local session's JIT is C1 only, with a 240 MB code cache (spark.session.LOCAL_JAVA_OPTIONS)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from spark.session import session

    conf = {**TEST_CONF, "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-sql-warehouse"))}
    s = session("local[2]", app="kreassign-tests", conf=conf)
    yield s
    s.stop()
