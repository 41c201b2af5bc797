"""A PySpark streaming data source over kreassign's events topic (confluent-kafka).

    spark.dataSource.register(EventLogSource)
    spark.readStream.format("kreassign_events")
        .option("topic", "kreassign.events")
        .option("kafka.bootstrap.servers", "broker:9092")   # any librdkafka property as kafka.<name>
        .option("kafka.group.id", "kreassign.reader")        # required: assigned, never joined or committed
        .option("startingOffsets", "earliest")               # earliest | latest | {"0": 42}
        .option("maxOffsetsPerTrigger", "100000")            # optional read limit per micro-batch
        .load()                                              # rows: spark.audit.COLUMNS

Offsets are JSON objects ``{"<partition>": next offset}`` with string keys in
ascending partition order (Spark compares them as JSON strings). Each
micro-batch is planned as fixed ``[start, end)`` ranges, so a batch replayed
after a failure reads exactly the same messages: with a checkpoint and the
file sink this is exactly once.

**End offsets.** The end of a partition is where librdkafka reports partition
EOF after reading, never the listed high watermark alone: the driver seeks to
``max(start, listed end - 1)`` and reads to EOF (one small fetch: the last
batch). On Kafka the listed end is exact and this confirms it; on the embedded
broker (tansu) the listed end is the base offset of the last record batch + 1,
and reading to EOF finds the true end. A listed end at or below the start
means no new data on either broker (a new batch starts at or after the old end).

The reader is pickled into Spark's tasks: clients are created lazily and never
pickled; whatever ``read`` needs travels in the options or the partition.
"""

from __future__ import annotations

import json
import time
from typing import Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from spark.audit import COLUMNS, RawMessage, record_batch

NAME = "kreassign_events"
KAFKA_PREFIX = "kafka."
DEFAULT_SPLIT = 100_000  # messages per Spark task
ARROW_ROWS = 10_000  # rows per Arrow batch a task yields


def audit_schema() -> StructType:
    """The source's rows: ``spark.audit.COLUMNS`` (built without a Spark context: workers call it too)."""
    from pyspark.sql import types as T

    simple = {"int": T.IntegerType(), "bigint": T.LongType(), "string": T.StringType(),
              "timestamp": T.TimestampType(), "date": T.DateType(), "array<string>": T.ArrayType(T.StringType())}
    return T.StructType([T.StructField(name, simple[type_], nullable) for name, type_, nullable in COLUMNS])


def kafka_options(config: Mapping[str, object]) -> dict[str, str]:
    """librdkafka settings as source options (``kafka.<name>``: Spark redacts the secret ones in plans)."""
    return {KAFKA_PREFIX + k: str(v) for k, v in config.items()}


class SourceError(RuntimeError):
    """The topic cannot be read; the message says why."""


class OffsetRange(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one partition of the topic."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}/{self.partition} [{self.start}, {self.end}))"


class EventLogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return audit_schema()

    def streamReader(self, schema: StructType) -> "EventLogReader":
        return EventLogReader(schema, self.options)  # options: case-insensitive; keep the object


def canonical(offsets: Mapping) -> dict[str, int]:
    """String keys in ascending partition order: equal offsets give equal JSON."""
    return {str(k): int(offsets[k]) for k in sorted(offsets, key=int)}


def limit_rows(start: Mapping[str, int], end: Mapping[str, int], max_rows: int) -> dict[str, int]:
    """At most ``max_rows`` messages in all, shared in proportion to each partition's backlog
    (as Spark's Kafka connector does); every partition gets its exact share, remainders in order."""
    backlog = {p: end[p] - start[p] for p in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    out = {p: start[p] + backlog[p] * max_rows // total for p in end}
    spare = max_rows - sum(out[p] - start[p] for p in end)
    for p in sorted(end, key=int):
        if spare and out[p] < end[p]:
            out[p] += 1
            spare -= 1
    return out


class EventLogReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, schema: StructType, options):
        self.schema = schema
        self.topic = options["topic"]
        self.kafka = {k[len(KAFKA_PREFIX):]: v for k, v in options.items() if k.lower().startswith(KAFKA_PREFIX)}
        self.max_rows = int(options["maxOffsetsPerTrigger"]) if options.get("maxOffsetsPerTrigger") else None
        self.starting = options.get("startingOffsets", "earliest")
        self.split = int(options.get("splitSize", DEFAULT_SPLIT))
        self.timeout = float(options.get("timeoutSeconds", "60"))
        self._consumer = None  # driver only, created when first needed, never pickled
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow: read up to here

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_consumer"] = None
        return state

    # -- driver ------------------------------------------------------------------------
    def _conf(self, **extra) -> dict:
        """librdkafka settings; ``kafka.group.id`` must be among the options (the job gives kreassign's
        readers' group, ``engine.kafka.topics.reader_group``: assigned partitions, never joined or committed)."""
        if not self.kafka.get("group.id"):
            raise SourceError("option kafka.group.id is required (the job passes <prefix>reader)")
        return {"enable.auto.commit": False, "log_level": 3, **self.kafka, **extra}

    def _driver(self):
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._conf(**{"enable.partition.eof": True}))
        return self._consumer

    def _partitions(self) -> list[int]:
        from confluent_kafka import KafkaException

        try:
            metadata = self._driver().list_topics(self.topic, timeout=self.timeout)
        except KafkaException as e:
            raise SourceError(f"cannot reach {self.kafka.get('bootstrap.servers')}: {e.args[0].str()}") from None
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise SourceError(f"topic {self.topic} does not exist on {self.kafka.get('bootstrap.servers')}")
        return sorted(topic.partitions)

    def _watermarks(self, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        return self._driver().get_watermark_offsets(
            TopicPartition(self.topic, partition), timeout=self.timeout, cached=False)

    def end_offsets(self, start: Mapping[str, int]) -> dict[str, int]:
        """The end of every partition (see the module doc): read from ``max(start, listed end - 1)``
        to partition EOF."""
        from confluent_kafka import KafkaError, TopicPartition

        ends: dict[int, int] = {}
        probe: dict[int, int] = {}
        for p in self._partitions():
            known = int(start.get(str(p), 0))
            _low, listed = self._watermarks(p)
            if listed <= known:
                ends[p] = known
            else:
                probe[p] = max(known, listed - 1)
                ends[p] = listed
        if probe:
            consumer = self._driver()
            consumer.assign([TopicPartition(self.topic, p, o) for p, o in probe.items()])
            open_ = set(probe)
            deadline = time.monotonic() + self.timeout
            try:
                while open_:
                    if time.monotonic() > deadline:
                        raise SourceError(f"{self.topic}: no end of partition {sorted(open_)} "
                                          f"within {self.timeout:g} s")
                    for m in consumer.consume(1000, 0.05):
                        p = m.partition()
                        err = m.error()
                        if err is None:
                            ends[p] = max(ends[p], m.offset() + 1)
                        elif err.code() == KafkaError._PARTITION_EOF:
                            ends[p] = max(ends[p], m.offset())
                            open_.discard(p)
                        else:
                            raise SourceError(f"{self.topic}/{p}: {err.str()}")
            finally:
                consumer.unassign()
        return canonical({str(p): e for p, e in ends.items()})

    def initialOffset(self) -> dict:
        if self.starting == "earliest":
            return canonical({str(p): max(self._watermarks(p)[0], 0) for p in self._partitions()})
        if self.starting == "latest":
            return self.end_offsets({})
        try:
            return canonical(json.loads(self.starting))
        except (ValueError, TypeError, AttributeError):
            raise SourceError(f"startingOffsets: expected earliest, latest or JSON offsets, got {self.starting!r}")

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.end_offsets({})

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start = canonical(start)
        available = self._target if self._target is not None else self.end_offsets(start)
        end = {p: max(int(available.get(p, 0)), start.get(p, 0)) for p in {*start, *available}}
        start = {p: start.get(p, 0) for p in end}  # a partition added to the topic starts at 0
        if isinstance(limit, ReadMaxRows):
            end = limit_rows(start, end, limit.max_rows)
        return canonical(end)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        ranges = []
        for p, e in canonical(end).items():
            s = int(start.get(p, 0))
            for lo in range(s, e, self.split):
                ranges.append(OffsetRange(self.topic, int(p), lo, min(lo + self.split, e)))
        return ranges

    def commit(self, end: dict) -> None:
        """Nothing: the checkpoint is the record of progress (Spark calls this one batch late)."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- executors -------------------------------------------------------------------------
    def read(self, partition: OffsetRange) -> Iterator:
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        chunk: list[RawMessage] = []
        for m in self._messages(partition):
            chunk.append(m)
            if len(chunk) >= ARROW_ROWS:
                yield record_batch(chunk, arrow_schema)
                chunk = []
        if chunk:
            yield record_batch(chunk, arrow_schema)

    def _messages(self, r: OffsetRange) -> Iterator[RawMessage]:
        """Exactly the messages at offsets ``[start, end)`` (offsets missing from the log, e.g.
        transaction markers, are skipped); never trusts a watermark."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        if r.end <= r.start:
            return
        consumer = Consumer(self._conf(**{"enable.partition.eof": True}))
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
            nxt = r.start
            deadline = time.monotonic() + self.timeout
            while nxt < r.end:
                # consume() waits for as many messages as asked or the timeout: ask for what is left
                messages = consumer.consume(min(10_000, r.end - nxt), 0.5)
                if not messages and time.monotonic() > deadline:
                    raise SourceError(f"{r}: nothing read past offset {nxt} within {self.timeout:g} s")
                for m in messages:
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            raise SourceError(f"{r}: {err.str()}")
                        if m.offset() >= r.end:  # the range ends in offsets without a message
                            nxt = r.end
                            break
                        continue
                    offset = m.offset()
                    if offset < nxt:
                        continue
                    if offset >= r.end:
                        nxt = r.end
                        break
                    deadline = time.monotonic() + self.timeout
                    nxt = offset + 1
                    yield RawMessage(r.partition, offset, m.key(), m.value())
        finally:
            consumer.close()
