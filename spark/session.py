"""The SparkSession of the analytics commands.

``PYSPARK_PYTHON`` is set to the running interpreter before the JVM starts
(Spark's Python workers must import ``spark`` and ``engine`` from the same
environment). Under ``spark-submit`` the master and every setting come from
spark-submit; otherwise ``--master`` (default ``local[*]``). Settings given
here are defaults for small local runs; ``--conf`` / ``SPARK_CONF`` win.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",  # stateful queries keep this in their checkpoint
    "spark.sql.adaptive.enabled": "false",  # AQE plans cost more than they save on small micro-batches
    "spark.sql.streaming.stateStore.maintenanceInterval": "300s",
}
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
"""A local driver's JIT: C1 only. The analytics commands are short JVM runs whose work is mostly Python
(decoding, the fold); C2's compiler threads cost more CPU than they save there (the demo's job and
report: 35 s with C2, 23 s with C1, one session, docs/benchmarks.md). C1 alone reserves 48 MB of code
cache, which pyspark 4.3's plans outgrow ("Out of space in CodeCache"): 240 MB as with C2."""


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(master: str | None = None, app: str = "kreassign", conf: dict | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # e.g. the tests' session: keep its settings
        quiet_sql_errors()
        return active
    builder = SparkSession.builder.appName(app)
    if not under_spark_submit():
        builder = builder.master(master or "local[*]")
        if (master or "local").startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = {**LOCAL_DEFAULTS, **(conf or {})}
        quiet = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
        jit = LOCAL_JAVA_OPTIONS if (master or "local").startswith("local") else ""
        settings[JAVA_OPTIONS] = " ".join(o for o in (quiet, jit, settings.get(JAVA_OPTIONS, "")) if o)
        for key, value in settings.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    quiet_sql_errors()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


def quiet_sql_errors() -> None:
    """pyspark logs every failed statement with its stack to stderr; the commands report it in one line."""
    import logging

    from pyspark.logger import PySparkLogger

    PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
