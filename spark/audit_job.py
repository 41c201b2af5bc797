"""The analytics job: the events topic -> audit table, spans, aggregates (Spark Structured Streaming).

    kreassign analytics run --bootstrap-server B --warehouse DIR [--trigger available-now|continuous-seconds N]
    spark-submit spark/audit_job.py --bootstrap-server B --warehouse DIR [...]     (same options)

Four streaming queries, each with its checkpoint under ``DIR/_checkpoints``:

1. ``audit``: the events topic -> ``audit`` (Parquet file sink, partitioned by
   date and event type). The Python source (``spark.kafka_source``) by
   default; ``--source kafka`` uses Spark's own Kafka connector and decodes
   with the same function (``spark.audit.record_batch``).
2. ``partition_spans``: ``audit`` (as a file stream) grouped by
   topic-partition and folded with ``spark.lifecycle`` in Spark's state store
   -> steps and under-replicated spans (file sink).
3. ``request_timeline``: ``audit`` grouped by request -> milestones and counts.
4. ``metrics_per_minute``: ``audit`` and ``partition_spans`` -> one-minute
   windows, watermarked, of event counts, bytes in/out per broker,
   under-replicated time, throttle rate, cancellations and rejections with
   their reasons.

3 and 4 are aggregations in update mode: every micro-batch writes the rows it
changed into its own folder (``batch_id=N``), overwriting that folder when a
batch is replayed, and readers take each key's latest version: exactly once
for the reader. Every query runs with an available-now trigger, one after the
other in this order (each reads what the ones before it wrote);
``--trigger continuous-seconds N`` repeats that round every N seconds until
interrupted (Ctrl-C or SIGTERM: the round in progress finishes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

if __name__ == "__main__":  # spark-submit spark/audit_job.py: import the package, not its files
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

from spark import warehouse as wh  # noqa: E402  (light: pyspark is imported when a job runs)
from spark.audit import PARTITION_COLUMNS  # noqa: E402
from spark.lifecycle import EVENT_TYPES as FOLDED_EVENTS, History, PartitionEvent, fold  # noqa: E402

AVAILABLE_NOW = "available-now"
CONTINUOUS = "continuous-seconds"
CONNECTOR_HINT = ("Spark's Kafka connector is not on the classpath: start Spark with "
                  "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> (or --jars), "
                  "or use the default --source python")


class JobError(RuntimeError):
    """The job cannot run or a query failed; the message is one line."""


@dataclass
class JobOptions:
    warehouse: str
    topic: str
    kafka: dict  # librdkafka settings (bootstrap included, the broker profile's consumer settings too)
    group: str  # kreassign's readers' group.id (engine.kafka.topics.reader_group): assigned, never joined
    java_kafka: dict = field(default_factory=dict)  # Java client properties, for --source kafka
    source: str = "python"  # python | kafka
    trigger_seconds: float | None = None  # None: available now
    max_events_per_batch: int | None = None
    watermark: str = "10 minutes"
    split_size: int | None = None


# -- the queries -----------------------------------------------------------------------------------
def audit_stream(spark, o: JobOptions):
    from spark.kafka_source import NAME as SOURCE_NAME, EventLogSource, kafka_options

    if o.source == "python":
        spark.dataSource.register(EventLogSource)
        reader = (spark.readStream.format(SOURCE_NAME).option("topic", o.topic)
                  .options(**kafka_options({**o.kafka, "group.id": o.group})))
        if o.max_events_per_batch:
            reader = reader.option("maxOffsetsPerTrigger", str(o.max_events_per_batch))
        if o.split_size:
            reader = reader.option("splitSize", str(o.split_size))
        return reader.load()
    return connector_stream(spark, o)


def connector_stream(spark, o: JobOptions):
    """Spark's own Kafka connector, decoded by ``spark.audit.record_batch`` in ``mapInArrow``."""
    from pyspark.errors import AnalysisException

    # Spark names its consumers' groups groupIdPrefix-<uuid>-...: under kreassign's prefix (the Java consumer,
    # assigned partitions and committing nothing, does not ask for their coordinator)
    reader = (spark.readStream.format("kafka").option("subscribe", o.topic).option("startingOffsets", "earliest")
              .option("groupIdPrefix", o.group)
              .options(**{f"kafka.{k}": str(v) for k, v in o.java_kafka.items()}))
    if o.max_events_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(o.max_events_per_batch))
    try:
        raw = reader.load()
    except AnalysisException as e:
        if "DATA_SOURCE_NOT_FOUND" in str(e) or "Failed to find data source" in str(e):
            raise JobError(CONNECTOR_HINT) from None
        raise
    return decode_raw(raw)


def decode_raw(raw):
    """Kafka rows (partition, offset, key, value) -> audit rows, with the Python source's decoder."""
    from spark.kafka_source import audit_schema

    schema = audit_schema()

    def decode(batches):
        from pyspark.sql.pandas.types import to_arrow_schema

        from spark.audit import RawMessage, record_batch

        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        for b in batches:
            cols = b.to_pydict()
            yield record_batch(
                (RawMessage(p, o, k, v) for p, o, k, v in zip(cols["partition"], cols["offset"], cols["key"], cols["value"])),
                arrow_schema)

    return raw.select("partition", "offset", "key", "value").mapInArrow(decode, schema)


def file_stream(spark, warehouse: str, table: str, ddl: str):
    return spark.readStream.schema(ddl).parquet(wh.table_path(warehouse, table))


def fold_partition(key, frames, state):
    """applyInPandasWithState: one partition's new events -> its spans (``spark.lifecycle``)."""
    import pandas as pd

    history = History.from_json(state.get[0] if state.exists else None)
    events = []
    for pdf in frames:
        columns = (pdf[c].tolist() for c in ("kafka_offset", "recorded_ms", "event_type", "request_id",
                                             "step_number", "payload"))
        for offset, ms, kind, request, number, payload in zip(*columns):
            events.append(PartitionEvent(offset, ms, kind, request or None, None if number < 0 else number,
                                         json.loads(payload) if payload else {}))
    spans = fold(history, events)
    state.update((history.to_json(),))
    topic, partition = key
    n = len(spans)
    yield pd.DataFrame({
        "topic": [topic] * n, "partition": [int(partition)] * n,
        **{name: [getattr(s, name) for s in spans] for name in SPAN_FIELDS},
        "new_replicas": [list(s.new_replicas) for s in spans],
        "dropped_replicas": [list(s.dropped_replicas) for s in spans],
        "transfers": [[t._asdict() for t in s.transfers] for s in spans],
    }, columns=list(wh.SPAN_FOLD_COLUMNS), dtype=object)


SPAN_FIELDS = ("kind", "request_id", "step_number", "start_ms", "started_ms", "end_ms", "outcome", "source_broker",
               "moves_leader", "size_bytes", "bytes_moved")
PAYLOAD_NEEDED = ("PartitionObserved", "StepPlanned")
"""The events whose payload the fold reads (the others are matched by request and step number)."""


def spans_stream(spark, o: JobOptions):
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    audit = file_stream(spark, o.warehouse, wh.AUDIT, wh.AUDIT_DDL)
    events = (audit.where(F.col("event_type").isin(*FOLDED_EVENTS) & F.col("topic").isNotNull()
                          & F.col("partition").isNotNull())
              .select("topic", "partition", "kafka_offset", F.unix_millis("recorded_at").alias("recorded_ms"),
                      "event_type", F.coalesce("request_id", F.lit("")).alias("request_id"),
                      F.coalesce("step_number", F.lit(-1)).alias("step_number"),
                      F.when(F.col("event_type").isin(*PAYLOAD_NEEDED), F.col("payload")).alias("payload")))
    spans = events.groupBy("topic", "partition").applyInPandasWithState(
        fold_partition, wh.SPAN_FOLD_DDL, "history string", "append", GroupStateTimeout.NoTimeout)
    return spans.selectExpr(
        "topic", "partition", "kind", "request_id", "step_number", "timestamp_millis(start_ms) AS start",
        "timestamp_millis(started_ms) AS started", "timestamp_millis(end_ms) AS end",
        "CAST(end_ms - start_ms AS DOUBLE) / 1000 AS duration_seconds", "outcome", "source_broker", "new_replicas",
        "dropped_replicas", "moves_leader", "size_bytes", "bytes_moved", "transfers")


AUDIT_METRICS = """
    inline(concat(
      array(named_struct('metric', 'events', 'broker', CAST(NULL AS BIGINT), 'detail', event_type, 'value', 1L)),
      CASE WHEN event_type = 'CommandRejected' THEN transform(coalesce(reasons, array('')),
             r -> named_struct('metric', 'rejected', 'broker', CAST(NULL AS BIGINT), 'detail', r, 'value', 1L))
           WHEN event_type = 'CancelSkipped' THEN
             array(named_struct('metric', 'cancel_skipped', 'broker', CAST(NULL AS BIGINT), 'detail', reason,
                                'value', 1L))
           WHEN event_type = 'PartitionCancelled' THEN
             array(named_struct('metric', 'cancelled', 'broker', CAST(NULL AS BIGINT), 'detail',
               CASE WHEN get_json_object(payload, '$.superseded_by') IS NOT NULL
                      THEN concat('superseded by ', get_json_object(payload, '$.superseded_by'))
                    WHEN get_json_object(payload, '$.rollback') = 'true' THEN 'cancelled with rollback'
                    ELSE 'cancelled' END, 'value', 1L))
           WHEN event_type = 'ThrottleRateChanged' THEN
             array(named_struct('metric', 'throttle_rate', 'broker', CAST(NULL AS BIGINT), 'detail', reason,
                                'value', rate))
           ELSE array() END))"""

SPAN_METRICS = """
    inline(CASE WHEN kind = 'step' AND outcome = 'completed' THEN
             transform(transfers, t -> named_struct('metric', concat('bytes_', t.direction), 'broker', t.broker,
                                                    'detail', CAST(NULL AS STRING), 'value', t.bytes))
           WHEN kind = 'under_replicated' THEN
             array(named_struct('metric', 'under_replicated_ms', 'broker', CAST(NULL AS BIGINT), 'detail', topic,
                                'value', unix_millis(end) - unix_millis(start)))
           ELSE array() END)"""


def metrics_stream(spark, o: JobOptions):
    from pyspark.sql import functions as F

    audit = file_stream(spark, o.warehouse, wh.AUDIT, wh.AUDIT_DDL).selectExpr(
        "recorded_at AS time", "kafka_offset AS ord", "request_id", AUDIT_METRICS)
    spans = file_stream(spark, o.warehouse, wh.SPANS, wh.SPANS_DDL).selectExpr(
        "end AS time", "unix_millis(end) AS ord", "request_id", SPAN_METRICS)
    return (audit.unionByName(spans).withWatermark("time", o.watermark)
            .groupBy(F.window("time", "1 minute").alias("w"), "metric", "broker", "request_id", "detail")
            .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"),
                 F.max_by("value", "ord").alias("last"))
            .selectExpr("w.start AS minute", *wh.METRICS_KEYS[1:], "n", "total", "last"))


def _when(event_type: str, what: str = "recorded_at") -> str:
    return f"CASE WHEN event_type = '{event_type}' THEN {what} END"


def _count(*event_types: str) -> str:
    return "count_if(event_type IN (" + ", ".join(f"'{t}'" for t in event_types) + "))"


PARTITIONS = "CAST(get_json_object(payload, '$.partitions') AS BIGINT)"


def timeline_stream(spark, o: JobOptions):
    from pyspark.sql import functions as F

    audit = file_stream(spark, o.warehouse, wh.AUDIT, wh.AUDIT_DDL).where("request_id IS NOT NULL")
    return audit.groupBy("request_id").agg(*(F.expr(e) for e in (
        f"min({_when('RequestAccepted')}) AS accepted_at",
        f"max({_when('RequestAccepted', PARTITIONS)}) AS partitions",
        f"min({_when('StepPlanned')}) AS first_step_at",
        "max(CASE WHEN event_type IN ('StepCompleted', 'StepAborted', 'StepFailed') THEN recorded_at END)"
        " AS last_step_end_at",
        f"min({_when('CancelRequested')}) AS cancel_requested_at",
        f"max({_when('RequestCompleted')}) AS completed_at",
        "max(recorded_at) AS last_event_at",
        "count(1) AS events",
        f"{_count('StepPlanned')} AS steps_planned",
        f"{_count('StepCompleted')} AS steps_completed",
        f"{_count('StepAborted')} AS steps_aborted",
        f"{_count('StepFailed')} AS steps_failed",
        f"{_count('PartitionCompleted')} AS partitions_completed",
        f"{_count('PartitionCancelled')} AS partitions_cancelled",
        f"{_count('PartitionReverted')} AS partitions_reverted",
        f"{_count('CancelSkipped')} AS cancel_skipped",
        f"{_count('CommandRejected')} AS rejections",
    )))


# -- sinks and the round of queries --------------------------------------------------------------------------------
def versioned_writer(path: str):
    """foreachBatch: the batch's rows into ``path/batch_id=N``, replacing that folder if the batch is replayed."""

    def write(df, batch_id: int) -> None:
        from pyspark.sql import functions as F

        (df.withColumn(wh.BATCH, F.lit(batch_id).cast("bigint")).write.mode("overwrite")
         .option("partitionOverwriteMode", "dynamic").partitionBy(wh.BATCH).parquet(path))

    return write


QUERIES = (wh.AUDIT, wh.SPANS, wh.TIMELINE, wh.METRICS)
"""In this order: each reads what the ones before it wrote."""
INPUTS = {wh.AUDIT: (), wh.SPANS: (wh.AUDIT,), wh.TIMELINE: (wh.AUDIT,), wh.METRICS: (wh.AUDIT, wh.SPANS)}
"""The tables each query reads. It starts once they have a commit log: a file stream must see
the log from its first listing to read only committed files."""


def committed(spark, warehouse: str, table: str) -> bool:
    """Does the table have a commit log yet (any file system Spark can reach)?"""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{wh.table_path(warehouse, table)}/_spark_metadata")
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path)


def ready(spark, o: JobOptions, name: str) -> bool:
    return all(committed(spark, o.warehouse, table) for table in INPUTS[name])


def start_query(spark, o: JobOptions, name: str):
    path, checkpoint = wh.table_path(o.warehouse, name), wh.checkpoint_path(o.warehouse, name)
    if name == wh.AUDIT:
        writer = (audit_stream(spark, o).writeStream.format("parquet").partitionBy(*PARTITION_COLUMNS)
                  .option("path", path).outputMode("append"))
    elif name == wh.SPANS:
        writer = spans_stream(spark, o).writeStream.format("parquet").option("path", path).outputMode("append")
    else:
        df = timeline_stream(spark, o) if name == wh.TIMELINE else metrics_stream(spark, o)
        writer = df.writeStream.outputMode("update").foreachBatch(versioned_writer(path))
    return writer.option("checkpointLocation", checkpoint).queryName(f"kreassign_{name}") \
        .trigger(availableNow=True).start()


@dataclass
class QueryRun:
    name: str
    batches: int
    rows: int
    seconds: float


def run_once(spark, o: JobOptions) -> list[QueryRun]:
    """Every query once, in order, each with an available-now trigger: whatever its input holds
    now, in micro-batches of at most ``max_events_per_batch`` events, then it stops. One query at
    a time (Spark 4.3 fails planning some of these queries while a Python data source query runs
    beside them in the same session; on 2 cores concurrency gains nothing anyway)."""
    done = []
    for name in QUERIES:
        if not ready(spark, o, name):  # nothing written yet (an empty topic)
            continue
        began = time.monotonic()
        query = start_query(spark, o, name)
        try:
            query.awaitTermination()
        finally:
            query.stop()
        _check(query)
        done.append(_summary(name, query, time.monotonic() - began))
    return done


def run(spark, o: JobOptions, stop: threading.Event | None = None) -> list[QueryRun]:
    """Run the job: once (``trigger_seconds`` None), or a round every ``trigger_seconds`` until
    ``stop`` is set (each round starts that long after the last one started, or at once when
    the last one took longer). Returns what each query read, summed over the rounds."""
    if o.trigger_seconds is None:
        return run_once(spark, o)
    stop = stop or threading.Event()
    totals: dict[str, QueryRun] = {}
    while not stop.is_set():
        began = time.monotonic()
        for r in run_once(spark, o):
            t = totals.setdefault(r.name, QueryRun(r.name, 0, 0, 0.0))
            t.batches, t.rows, t.seconds = t.batches + r.batches, t.rows + r.rows, t.seconds + r.seconds
        stop.wait(max(0.0, o.trigger_seconds - (time.monotonic() - began)))
    return list(totals.values())


def _check(query) -> None:
    e = query.exception()
    if e is not None:
        raise JobError(f"query {query.name}: {one_line(e)}")


def _summary(name: str, query, seconds: float) -> QueryRun:
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0)]
    return QueryRun(name, len({p["batchId"] for p in progress}), sum(p["numInputRows"] for p in progress), seconds)


def one_line(e: BaseException) -> str:
    """A Spark or worker error as one line: our own error's message when it is inside."""
    text = str(e)
    for marker in ("SourceError: ", "JobError: ", "DecodeError: "):
        for line in text.splitlines():
            if marker in line:
                return line.split(marker, 1)[1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else type(e).__name__)[:500]


# -- options ---------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The job's options: ``kreassign analytics run`` and ``spark-submit spark/audit_job.py`` share them."""
    from engine.cli.connection import add_arguments as add_connection, int_at_least

    add_connection(p, registry=False)
    g = p.add_argument_group("analytics")
    g.add_argument("--warehouse", required=True, metavar="DIR", help="where the tables and checkpoints live")
    g.add_argument("--trigger", nargs="+", default=[AVAILABLE_NOW], metavar="available-now|continuous-seconds N",
                   help="available-now (default): read what is there and stop; continuous-seconds N: "
                        "a micro-batch every N seconds until interrupted")
    g.add_argument("--source", choices=("python", "kafka"), default="python",
                   help="python (default): kreassign's streaming source; kafka: Spark's Kafka connector "
                        "(its jar must be on the classpath)")
    g.add_argument("--max-events-per-batch", type=int_at_least(1, "a number of events"), metavar="N",
                   help="read limit per micro-batch (default: everything available)")
    g.add_argument("--watermark", default="10 minutes", metavar="DELAY",
                   help="how late an event may arrive for the per-minute aggregates (default '10 minutes')")
    g.add_argument("--master", metavar="URL", help="Spark master (default local[*]; spark-submit sets its own)")


def trigger_seconds(values: list[str]) -> float | None:
    if values == [AVAILABLE_NOW]:
        return None
    if len(values) == 2 and values[0] == CONTINUOUS:
        try:
            seconds = float(values[1])
        except ValueError:
            seconds = 0
        if seconds > 0:
            return seconds
    raise JobError(f"--trigger: expected {AVAILABLE_NOW} or {CONTINUOUS} N (N > 0 seconds), got {' '.join(values)}")


def _client_config(args):
    from engine.kafka.client_config import ClientConfig

    return ClientConfig.load(args.command_config).with_bootstrap(args.bootstrap_server)


def options_from(args) -> JobOptions:
    from engine.kafka.broker_profile import profile
    from engine.kafka.client_config import ClientConfig, ClientConfigError
    from engine.kafka.topics import Topics, reader_group

    try:
        config = ClientConfig.load(args.command_config).with_bootstrap(args.bootstrap_server)
    except ClientConfigError as e:
        raise JobError(str(e)) from None
    if wh.is_local(args.warehouse) and os.path.exists(wh.local_dir(args.warehouse)) \
            and not os.path.isdir(wh.local_dir(args.warehouse)):
        raise JobError(f"--warehouse {args.warehouse}: not a directory")
    return JobOptions(
        warehouse=args.warehouse, topic=Topics.named(args.prefix).events, group=reader_group(args.prefix),
        kafka=config.confluent(**profile(args.broker_profile).consumer), java_kafka=dict(config.properties),
        source=args.source, trigger_seconds=trigger_seconds(args.trigger),
        max_events_per_batch=args.max_events_per_batch, watermark=args.watermark,
    )


def check_topic(o: JobOptions, timeout: float, config=None) -> None:
    """Fail early, in one line, when the cluster or the events topic is not there, or this principal
    may not read it (Read on the topic, Describe on the readers' group), or cannot authenticate."""
    from engine.kafka.client_config import ClientConfig
    from engine.kafka.probe import Prober, ProbeError

    config = config or ClientConfig({"bootstrap.servers": str(o.kafka.get("bootstrap.servers"))})
    try:
        prober = Prober(config, timeout)
        prober.topic(o.topic, ("Read",))
        prober.group(o.group, ("Describe",), "kreassign's readers ask for their group's coordinator")
    except ProbeError as e:
        raise JobError(str(e)) from None


def execute(args) -> list[QueryRun]:
    """Parse, check, start Spark, run. Raises ``JobError`` with one line."""
    from spark.session import session

    o = options_from(args)
    check_topic(o, args.timeout, _client_config(args))
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    spark = session(args.master, app="kreassign-analytics")
    stop = threading.Event()

    def interrupted(*_) -> None:  # the first Ctrl-C or SIGTERM ends the round in progress, a second stops now
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {}
    if o.trigger_seconds is not None and threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run(spark, o, stop)
    except (PySparkException, Py4JError) as e:  # Spark's errors, as one line
        raise JobError(one_line(e)) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def print_summary(runs: list[QueryRun], warehouse: str) -> None:
    for r in runs:
        print(f"{r.name}: {r.rows} rows in {r.batches} micro-batches ({r.seconds:.1f} s)")
    print(f"warehouse: {warehouse} (kreassign analytics query --warehouse {warehouse} \"SELECT ...\")")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="audit_job.py", description="kreassign analytics job (spark-submit)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        print_summary(execute(args), args.warehouse)
    except JobError as e:
        print(f"audit_job: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
