"""The warehouse: where each table lives, its schema, and the SQL views over it.

A warehouse is one directory (local, or any Hadoop file system URI on a
cluster):

    DIR/audit/               Parquet, file sink (exactly once), by date and event_type
    DIR/partition_spans/     Parquet, file sink (exactly once): steps and under-replicated spans
    DIR/metrics_per_minute/  Parquet, one folder per micro-batch (batch_id=N), rewritten whole
    DIR/request_timeline/    when a batch is replayed; readers take each key's latest version
    DIR/_checkpoints/<query> Spark checkpoints: where each query stands

``register(spark, dir)`` makes every table and view of docs/analytics.md
available to Spark SQL.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from spark.audit import COLUMNS as AUDIT_COLUMNS

AUDIT, SPANS, METRICS, TIMELINE = "audit", "partition_spans", "metrics_per_minute", "request_timeline"
CHECKPOINTS = "_checkpoints"
BATCH = "batch_id"
QUERIES_DIR = Path(__file__).resolve().parent / "queries"


def ddl(columns) -> str:
    return ", ".join(f"`{name}` {type_}" + ("" if nullable else " NOT NULL") for name, type_, nullable in columns)


AUDIT_DDL = ddl(AUDIT_COLUMNS)
SPAN_FOLD_DDL = (
    "topic string, partition int, kind string, request_id string, step_number bigint, start_ms bigint, "
    "started_ms bigint, end_ms bigint, outcome string, source_broker bigint, new_replicas array<bigint>, "
    "dropped_replicas array<bigint>, moves_leader boolean, size_bytes bigint, bytes_moved bigint, "
    "transfers array<struct<broker: bigint, direction: string, bytes: bigint>>"
)
"""What the fold emits (times in epoch milliseconds); the table has timestamps instead."""
SPAN_FOLD_COLUMNS = (
    "topic", "partition", "kind", "request_id", "step_number", "start_ms", "started_ms", "end_ms", "outcome",
    "source_broker", "new_replicas", "dropped_replicas", "moves_leader", "size_bytes", "bytes_moved", "transfers",
)
SPANS_DDL = (
    "topic string, partition int, kind string, request_id string, step_number bigint, start timestamp, "
    "started timestamp, end timestamp, duration_seconds double, outcome string, source_broker bigint, "
    "new_replicas array<bigint>, dropped_replicas array<bigint>, moves_leader boolean, size_bytes bigint, "
    "bytes_moved bigint, transfers array<struct<broker: bigint, direction: string, bytes: bigint>>"
)
METRICS_KEYS = ("minute", "metric", "broker", "request_id", "detail")
METRICS_DDL = (
    "minute timestamp, metric string, broker bigint, request_id string, detail string, "
    "n bigint, total bigint, last bigint"
)
TIMELINE_KEYS = ("request_id",)
TIMELINE_DDL = (
    "request_id string, accepted_at timestamp, partitions bigint, first_step_at timestamp, "
    "last_step_end_at timestamp, cancel_requested_at timestamp, completed_at timestamp, "
    "last_event_at timestamp, events bigint, steps_planned bigint, steps_completed bigint, "
    "steps_aborted bigint, steps_failed bigint, partitions_completed bigint, partitions_cancelled bigint, "
    "partitions_reverted bigint, cancel_skipped bigint, rejections bigint"
)

# Views: name -> SQL over the tables above (docs/analytics.md documents each).
VIEWS: dict[str, str] = {
    "steps": f"""
        SELECT topic, partition, request_id, step_number, start AS planned, started, end AS ended,
               outcome, duration_seconds,
               CAST(unix_millis(end) - unix_millis(started) AS DOUBLE) / 1000 AS copy_seconds,
               source_broker, new_replicas, dropped_replicas, moves_leader, size_bytes, bytes_moved, transfers
        FROM {SPANS} WHERE kind = 'step'""",
    "under_replicated": f"""
        SELECT topic, partition, start, end, duration_seconds FROM {SPANS} WHERE kind = 'under_replicated'""",
    "bytes_per_broker_minute": f"""
        SELECT minute, broker,
               coalesce(sum(CASE WHEN metric = 'bytes_in' THEN total END), 0) AS bytes_in,
               coalesce(sum(CASE WHEN metric = 'bytes_out' THEN total END), 0) AS bytes_out
        FROM {METRICS} WHERE metric IN ('bytes_in', 'bytes_out') GROUP BY minute, broker""",
    "steps_per_minute": f"""
        SELECT minute,
               coalesce(sum(CASE WHEN detail = 'StepPlanned' THEN n END), 0) AS planned,
               coalesce(sum(CASE WHEN detail = 'StepStarted' THEN n END), 0) AS started,
               coalesce(sum(CASE WHEN detail = 'StepCompleted' THEN n END), 0) AS completed,
               coalesce(sum(CASE WHEN detail = 'StepAborted' THEN n END), 0) AS aborted,
               coalesce(sum(CASE WHEN detail = 'StepFailed' THEN n END), 0) AS failed
        FROM {METRICS} WHERE metric = 'events'
          AND detail IN ('StepPlanned', 'StepStarted', 'StepCompleted', 'StepAborted', 'StepFailed')
        GROUP BY minute""",
    "events_per_minute": f"""
        SELECT minute, detail AS event_type, sum(n) AS events FROM {METRICS} WHERE metric = 'events'
        GROUP BY minute, detail""",
    "under_replicated_per_minute": f"""
        SELECT minute, detail AS topic, sum(n) AS spans_ended, CAST(sum(total) AS DOUBLE) / 1000 AS seconds
        FROM {METRICS} WHERE metric = 'under_replicated_ms' GROUP BY minute, detail""",
    "throttle_per_minute": f"""
        SELECT minute, last AS rate, n AS changes, detail AS reason FROM {METRICS} WHERE metric = 'throttle_rate'""",
    "cancellations_per_minute": f"""
        SELECT minute, metric AS kind, request_id, detail AS reason, n FROM {METRICS}
        WHERE metric IN ('cancelled', 'cancel_skipped', 'rejected')""",
    "cancellations": f"""
        SELECT recorded_at, event_type, request_id, topic, partition,
               CASE event_type
                 WHEN 'PartitionCancelled' THEN
                   CASE WHEN get_json_object(payload, '$.superseded_by') IS NOT NULL
                          THEN concat('superseded by ', get_json_object(payload, '$.superseded_by'))
                        WHEN get_json_object(payload, '$.rollback') = 'true' THEN 'cancelled with rollback'
                        ELSE 'cancelled' END
                 WHEN 'CommandRejected' THEN concat_ws('; ', reasons)
                 ELSE reason END AS reason,
               get_json_object(payload, '$.command') AS command
        FROM {AUDIT}
        WHERE event_type IN ('CancelRequested', 'PartitionCancelled', 'CancelSkipped', 'StepAborted',
                             'PartitionReverted', 'CommandRejected')""",
    "throttle_rate_changes": f"""
        SELECT recorded_at, rate, reason, command_id FROM {AUDIT} WHERE event_type = 'ThrottleRateChanged'""",
    "step_duration_by_request": """
        SELECT request_id, count(*) AS steps,
               percentile(duration_seconds, 0.5) AS p50, percentile(duration_seconds, 0.95) AS p95,
               percentile(duration_seconds, 0.99) AS p99, max(duration_seconds) AS max
        FROM steps WHERE outcome = 'completed' GROUP BY request_id""",
    "step_duration_by_broker": """
        SELECT t.broker, t.direction, count(*) AS steps,
               percentile(duration_seconds, 0.5) AS p50, percentile(duration_seconds, 0.95) AS p95,
               percentile(duration_seconds, 0.99) AS p99, max(duration_seconds) AS max
        FROM steps LATERAL VIEW explode(transfers) AS t
        WHERE outcome = 'completed' GROUP BY t.broker, t.direction""",
    "requests": f"""
        SELECT t.*, CAST(unix_millis(completed_at) - unix_millis(accepted_at) AS DOUBLE) / 1000 AS makespan_seconds,
               coalesce(b.bytes_moved, 0) AS bytes_moved
        FROM {TIMELINE} t LEFT JOIN (
            SELECT request_id, sum(bytes_moved) AS bytes_moved FROM steps GROUP BY request_id) b
        USING (request_id)""",
}


def table_path(warehouse: str, table: str) -> str:
    return f"{warehouse.rstrip('/')}/{table}"


def checkpoint_path(warehouse: str, query: str) -> str:
    return f"{warehouse.rstrip('/')}/{CHECKPOINTS}/{query}"


def is_local(warehouse: str) -> bool:
    scheme = urlparse(warehouse).scheme
    return scheme in ("", "file") or len(scheme) == 1  # "C:" on Windows


def local_dir(warehouse: str) -> str:
    return urlparse(warehouse).path if warehouse.startswith("file:") else warehouse


def exists(warehouse: str) -> bool:
    """Has the job run on this warehouse (its audit query's checkpoint)? Remote ones are assumed to."""
    if not is_local(warehouse):
        return True
    return os.path.isdir(os.path.join(local_dir(warehouse), CHECKPOINTS, AUDIT))


def read_latest(spark, path: str, schema: str, keys: tuple[str, ...]):
    """A versioned table (one folder per micro-batch) as its latest version of each key."""
    if not _has_data(path):
        return spark.createDataFrame([], schema)
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.schema(f"{schema}, {BATCH} bigint").parquet(path)
    latest = Window.partitionBy(*keys).orderBy(F.col(BATCH).desc())
    return df.withColumn("_rank", F.row_number().over(latest)).where("_rank = 1").drop("_rank", BATCH)


def _has_data(path: str) -> bool:
    if not is_local(path):
        return True
    return os.path.isdir(local_dir(path)) and any(p.startswith(f"{BATCH}=") for p in os.listdir(local_dir(path)))


def read_sink(spark, path: str, schema: str):
    """A file-sink table: only the files its commit log lists (``_spark_metadata``)."""
    if is_local(path) and not os.path.isdir(os.path.join(local_dir(path), "_spark_metadata")):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(path)


def register(spark, warehouse: str) -> list[str]:
    """Every table and view of the warehouse as a temporary view; their names."""
    read_sink(spark, table_path(warehouse, AUDIT), AUDIT_DDL).createOrReplaceTempView(AUDIT)
    read_sink(spark, table_path(warehouse, SPANS), SPANS_DDL).createOrReplaceTempView(SPANS)
    read_latest(spark, table_path(warehouse, METRICS), METRICS_DDL, METRICS_KEYS).createOrReplaceTempView(METRICS)
    read_latest(spark, table_path(warehouse, TIMELINE), TIMELINE_DDL, TIMELINE_KEYS).createOrReplaceTempView(TIMELINE)
    for name, sql in VIEWS.items():
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {sql}")
    return [AUDIT, SPANS, METRICS, TIMELINE, *VIEWS]


def example_queries() -> dict[str, str]:
    """``spark/queries/*.sql``: name -> SQL."""
    return {p.stem: p.read_text() for p in sorted(QUERIES_DIR.glob("*.sql"))}
