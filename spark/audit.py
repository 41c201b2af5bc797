"""One event of the log -> one row of the audit table, as Arrow columns.

The audit table keeps every event: common envelope columns, the event type,
the few fields analysts filter on (request, topic-partition, step number,
reasons, throttle rate) as columns, and the whole payload as JSON. A message
that cannot be decoded is kept too, as event type ``undecodable`` with the
codec's reason, so the table has one row per offset of the topic.

Decoding is the project's codec (``Codec.decode_datum``: plain Avro data).
``record_batch`` is used both by the Python streaming source and, for Spark's
own Kafka connector, by ``mapInArrow`` over the raw messages: one decoder.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterable, NamedTuple

from engine.log.codec import DecodeError, codec_for
from engine.log.envelope import EventEnvelope

UNDECODABLE = "undecodable"
NAMESPACE = "io.kreassign."
DAY_MS = 86_400_000

# (name, Spark SQL type, nullable): the single definition of the audit table's columns.
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("kafka_partition", "int", False),
    ("kafka_offset", "bigint", False),
    ("kafka_key", "string", True),
    ("event_id", "string", True),
    ("recorded_at", "timestamp", True),
    ("date", "date", True),
    ("event_type", "string", False),
    ("request_id", "string", True),
    ("topic", "string", True),
    ("partition", "int", True),
    ("step_number", "bigint", True),
    ("command_id", "string", True),
    ("reason", "string", True),
    ("reasons", "array<string>", True),
    ("rate", "bigint", True),
    ("payload", "string", True),
)
NAMES = tuple(name for name, _type, _null in COLUMNS)
PARTITION_COLUMNS = ("date", "event_type")


class RawMessage(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _has_nested_union_record(schema: Any, named: dict[str, Any], seen: set[str], in_union: bool = False) -> bool:
    """Does a value of ``schema`` contain a record inside a union (which the reader returns as a
    ``(name, dict)`` pair that JSON would turn into a list)?"""
    if isinstance(schema, str):
        if schema not in named or schema in seen:
            return in_union and schema in named
        seen = seen | {schema}
        schema = named[schema]
    if isinstance(schema, list):
        return any(_has_nested_union_record(branch, named, seen, True) for branch in schema)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "record":
        if in_union:
            return True
        named[schema["name"]] = schema
        return any(_has_nested_union_record(f["type"], named, seen) for f in schema["fields"])
    if kind == "array":
        return _has_nested_union_record(schema["items"], named, seen)
    if kind == "map":
        return _has_nested_union_record(schema["values"], named, seen)
    return isinstance(kind, (dict, list, str)) and _has_nested_union_record(kind, named, seen, in_union)


@lru_cache(maxsize=1)
def records_to_unwrap() -> frozenset[str]:
    """The event records whose plain datum holds ``(name, dict)`` pairs below the top level."""
    schema = codec_for(EventEnvelope).schema
    payload = next(f["type"] for f in schema["fields"] if f["name"] == "payload")
    named: dict[str, Any] = {}
    out = set()
    for branch in payload:
        record = named.get(branch, branch) if isinstance(branch, str) else branch
        if _has_nested_union_record({**record, "name": "_"}, named, set()):
            out.add(record["name"])
        named[record["name"]] = record
    return frozenset(out)


def plain(value: Any) -> Any:
    """An Avro datum as JSON-ready data: a union branch ``(record name, dict)`` becomes the dict."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict):
        value = value[1]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def event_type_of(record_name: str) -> str:
    return record_name[len(NAMESPACE):] if record_name.startswith(NAMESPACE) else record_name


def audit_row(message: RawMessage, decode=None) -> dict[str, Any]:
    """The audit row of one message (``recorded_at`` in epoch milliseconds, ``date`` in epoch days)."""
    decode = decode or codec_for(EventEnvelope).decode_datum
    row: dict[str, Any] = {
        "kafka_partition": message.partition, "kafka_offset": message.offset,
        "kafka_key": message.key.decode("utf-8", "replace") if message.key is not None else None,
    }
    try:
        datum = decode(message.value)
    except DecodeError as e:
        row.update(event_type=UNDECODABLE, reason=str(e))
        return row
    name, payload = datum["payload"]
    if name in records_to_unwrap():
        payload = plain(payload)
    recorded = datum["recorded_at"]
    ms = int(recorded.timestamp() * 1000) if hasattr(recorded, "timestamp") else int(recorded)
    tp = payload.get("tp")
    throttles = payload.get("throttles")
    reasons = payload.get("reasons")
    row.update(
        event_id=datum["id"],
        recorded_at=ms,
        date=ms // DAY_MS,
        event_type=event_type_of(name),
        request_id=payload.get("request_id"),
        topic=tp["topic"] if tp else payload.get("topic"),
        partition=tp["partition"] if tp else None,
        step_number=payload.get("number"),
        command_id=payload.get("command_id") or None,
        reason=payload.get("reason") or None,
        reasons=list(reasons) if reasons is not None else None,
        rate=payload["rate"] if "rate" in payload else (throttles or {}).get("rate"),
        payload=json.dumps(payload, separators=(",", ":")),
    )
    return row


def record_batch(messages: Iterable[RawMessage], arrow_schema, decode=None):
    """A ``pyarrow.RecordBatch`` of audit rows with exactly ``arrow_schema`` (Spark's
    ``to_arrow_schema`` of the source schema: timestamps in microseconds, UTC)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = [audit_row(m, decode) for m in messages]
    columns = []
    for field in arrow_schema:
        values = [r.get(field.name) for r in rows]
        if pa.types.is_timestamp(field.type):
            columns.append(pc.multiply(pa.array(values, pa.int64()), 1000).cast(field.type))
        elif pa.types.is_date32(field.type):
            columns.append(pa.array(values, pa.int32()).cast(field.type))
        else:
            columns.append(pa.array(values, field.type))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)
