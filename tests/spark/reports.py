"""A report of a log: the log written to the embedded broker under its own prefix, the audit job run into a
fresh warehouse, and the report written from it."""

from __future__ import annotations

import json

from engine.kafka.client_config import ClientConfig
from engine.kafka.embedded import EMBEDDED
from engine.kafka.topics import Topics, create, reader_group
from spark import audit_job
from spark import report
from tests.spark.test_analytics_job import write_in_chunks


def report_of(spark, broker, tmp_path_factory, name: str, log: list) -> tuple[list, dict, str]:
    """(the log, report.json, index.html) of ``log``, written under the prefix ``analytics-<name>.``."""
    prefix = f"analytics-{name}."
    create({"bootstrap.servers": broker.bootstrap}, prefix)
    warehouse = tmp_path_factory.mktemp(f"warehouse-{name}")
    write_in_chunks(broker, prefix, log, chunks=1)
    audit_job.run(spark, audit_job.JobOptions(
        warehouse=str(warehouse), topic=Topics.named(prefix).events, group=reader_group(prefix),
        kafka=ClientConfig().with_bootstrap(broker.bootstrap).confluent(**EMBEDDED.consumer)))
    out = tmp_path_factory.mktemp(f"report-{name}")
    report.write(spark, str(warehouse), out)
    return log, json.loads((out / "report.json").read_text()), (out / "index.html").read_text()
