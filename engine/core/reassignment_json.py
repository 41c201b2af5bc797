"""Kafka's reassignment JSON, exactly as ``kafka-reassign-partitions.sh`` reads and prints it.

    {"version": 1,
     "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3],
                     "log_dirs": ["any", "any", "any"]}]}

``log_dirs`` is optional. Parsing checks only the document's shape and keeps
everything else (duplicates included) so that validation can name every
semantic problem at once.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

from engine.core.commands import PartitionTarget
from engine.core.partition import Replicas, TopicPartition


class ReassignmentJsonError(ValueError):
    """The document is not Kafka reassignment JSON; the message says where."""


def parse(text: str) -> tuple[PartitionTarget, ...]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReassignmentJsonError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return from_document(doc)


def from_document(doc: object) -> tuple[PartitionTarget, ...]:
    if not isinstance(doc, dict):
        raise ReassignmentJsonError("expected a JSON object with 'version' and 'partitions'")
    version = doc.get("version", 1)
    if version != 1:
        raise ReassignmentJsonError(f"unsupported version {version!r} (only version 1 exists)")
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise ReassignmentJsonError("'partitions' must be a list")
    out = []
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]"
        if not isinstance(entry, dict):
            raise ReassignmentJsonError(f"{where} must be an object")
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ReassignmentJsonError(f"{where}.topic must be a non-empty string")
        partition = entry.get("partition")
        if not _is_int(partition):
            raise ReassignmentJsonError(f"{where}.partition must be an integer")
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not all(_is_int(b) for b in replicas):
            raise ReassignmentJsonError(f"{where}.replicas must be a list of broker ids")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None and (
            not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs)
        ):
            raise ReassignmentJsonError(f"{where}.log_dirs must be a list of strings")
        out.append(PartitionTarget(topic, partition, tuple(replicas), tuple(log_dirs) if log_dirs is not None else None))
    return tuple(out)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def document(assignment: Mapping[TopicPartition, Replicas] | Iterable[tuple[TopicPartition, Replicas]]) -> dict:
    """Kafka's JSON document for an assignment, partitions sorted by topic and number."""
    items = assignment.items() if isinstance(assignment, Mapping) else assignment
    return {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(r), "log_dirs": ["any"] * len(r)}
            for tp, r in sorted(items)
        ],
    }


def dumps(assignment: Mapping[TopicPartition, Replicas] | Iterable[tuple[TopicPartition, Replicas]]) -> str:
    """One line of JSON, the way Kafka's tool prints it."""
    return json.dumps(document(assignment), separators=(",", ":"))
