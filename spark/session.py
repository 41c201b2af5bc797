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
        settings[JAVA_OPTIONS] = f"{quiet} {settings.get(JAVA_OPTIONS, '')}".strip()
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
