"""The Kafka topics of kreassign: names, partitions, keys, retention, and their creation.

All names share a configurable prefix (default ``kreassign.``). docs/events.md
gives the reasons at length; in short:

* ``<prefix>events`` - the log of record. One partition: the log is totally
  ordered, so replay (the fold) is exact and deterministic and cluster-wide
  limits are decided at one point. Kept whole: delete policy with infinite
  retention, never compaction, so a replay from offset 0 stays possible (and
  is what checks a snapshot). The engine appends to it in transactions
  (``<prefix>decider``): readers must read committed records only
  (librdkafka's default).
* ``<prefix>snapshots`` - states folded from the events up to an offset
  (``engine.log.snapshot``), so that recovery and ``status`` fold only the events
  after the latest one. Compacted: keys alternate between two slots, so the
  latest complete snapshot is always kept and older ones go. Losing it loses
  nothing: the events are the record.
* ``<prefix>commands`` - operator commands, keyed by request id (``control``
  for limits, throttle, pause, resume), so one request's commands stay in
  order. Several partitions; consumed once by the engine, kept 7 days.
* ``<prefix>dead-letters`` - messages that could not be decoded, with their
  source and reason. Kept 30 days.
* ``<prefix>decisions`` - the engine's internal queue (docs/engine.md): every
  verified command and every tick, in the order the one decider handles them.
  One partition, so exactly one worker decides at a time. Kept 1 day: the
  events topic, not this one, is the record.

Consumer groups, also under the prefix (so deployments with different prefixes never
share one): ``<prefix>engine`` (the engine workers' group, Faust's application id) and
``<prefix>reader`` (kreassign's readers of a topic, which are assigned partitions and
never join or commit, but librdkafka asks for the coordinator of the ``group.id`` that
confluent-kafka requires: a principal that reads needs DESCRIBE on it, ``engine.kafka.acls``).

``create`` is idempotent: a topic that exists is left as it is (an operator
may have changed its retention on purpose), but a partition count that breaks
the layout (an events topic with several partitions, e.g. auto-created by a
producer) is an error naming the topic. The controller creates the topics; the
broker asked for the layout answers from its metadata, which lags the controller
(on Kafka 4.0 a check right after creating failed 1 run in 10): a topic the
controller said it created or has is waited for in the metadata, up to the
timeout, before it counts as missing.
"""

from __future__ import annotations

import time
from typing import Mapping, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_PREFIX = "kreassign."
DAY_MS = 24 * 3600 * 1000
METADATA_POLL = 0.2
"""Seconds between two looks at the metadata while a topic just created has not reached it yet."""
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest message kreassign writes: a submit of a large reassignment is one
command (it is accepted or rejected as a whole); 100,000 partitions take about
2 MB."""


class TopicSpec(NamedTuple):
    suffix: str
    partitions: int
    config: Mapping[str, str]
    key: str
    why: str


EVENTS = TopicSpec(
    "events", 1,
    {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
    "topic-N of the event's partition, else its request id, else 'cluster'",
    "the log of record: one partition for a total order; replay needs every event, so nothing expires",
)
COMMANDS = TopicSpec(
    "commands", 6,
    {"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS), "max.message.bytes": str(MAX_MESSAGE_BYTES)},
    "request id; 'control' for limits, throttle, pause and resume",
    "a request's commands stay in order on one partition; each command becomes events once consumed",
)
DEAD_LETTERS = TopicSpec(
    "dead-letters", 1,
    {"cleanup.policy": "delete", "retention.ms": str(30 * DAY_MS), "max.message.bytes": str(MAX_MESSAGE_BYTES)},
    "source topic/partition/offset",
    "bad messages kept byte for byte with their reason, long enough to investigate",
)
DECISIONS = TopicSpec(
    "decisions", 1,
    {"cleanup.policy": "delete", "retention.ms": str(DAY_MS), "max.message.bytes": str(MAX_MESSAGE_BYTES)},
    "the command's key; 'tick' for ticks",
    "the engine's single decision point: one partition, consumed by exactly one worker (the decider)",
)
SNAPSHOTS = TopicSpec(
    "snapshots", 1,
    {"cleanup.policy": "compact", "segment.ms": str(3600 * 1000), "min.cleanable.dirty.ratio": "0.1",
     "delete.retention.ms": str(DAY_MS)},
    "snapshot-<slot>-<chunk>: two slots used in turn, one record per chunk of at most 512 KiB",
    "the latest state folded from the events; compacted, so it stays small; the events topic stays the record",
)
LAYOUT: tuple[TopicSpec, ...] = (COMMANDS, EVENTS, DEAD_LETTERS, DECISIONS, SNAPSHOTS)
SINGLE_PARTITION = (EVENTS, DECISIONS)


class Topics(NamedTuple):
    commands: str
    events: str
    dead_letters: str
    decisions: str
    snapshots: str

    @classmethod
    def named(cls, prefix: str = DEFAULT_PREFIX) -> "Topics":
        return cls(*(prefix + spec.suffix for spec in LAYOUT))


def create_command(name: str) -> str | None:
    """The command that creates kreassign's topic ``name`` ("kreassign topics create", with
    ``--prefix P`` unless its prefix is the default), or ``None`` for a topic not of the layout."""
    for spec in LAYOUT:
        if name.endswith(spec.suffix):
            prefix = name[: -len(spec.suffix)]
            return "kreassign topics create" + ("" if prefix == DEFAULT_PREFIX else f" --prefix {prefix}")
    return None


def missing(name: str) -> str:
    """What to say of a topic of the layout that does not exist."""
    command = create_command(name) or "kreassign topics create"
    if name.endswith(SNAPSHOTS.suffix):
        return (f"topic {name} does not exist (snapshots for fast recovery, new in this version; run: {command}, "
                f"which adds only what is missing)")
    return f"topic {name} does not exist (run: {command})"


def engine_group(prefix: str = DEFAULT_PREFIX) -> str:
    """The engine workers' consumer group and Faust application id; its internal topics start with it + '-'."""
    return f"{prefix}engine"


def decider_transactional_id(prefix: str = DEFAULT_PREFIX) -> str:
    """The ``transactional.id`` of the decider's event writer: claiming it fences the previous decider."""
    return f"{prefix}decider"


def reader_group(prefix: str = DEFAULT_PREFIX) -> str:
    """The ``group.id`` of kreassign's readers (assigned partitions only: never joined, never committed)."""
    return f"{prefix}reader"


class TopicsError(RuntimeError):
    """Topics could not be created or do not fit the layout; the message names them."""


def create(
    admin_config: Mapping[str, object], prefix: str = DEFAULT_PREFIX, replication_factor: int = -1,
    timeout: float = 30.0,
) -> list[tuple[str, str]]:
    """Create every topic of the layout that does not exist; [(name, 'created' | 'exists')].

    ``replication_factor`` -1 takes the broker's ``default.replication.factor``.
    """
    from engine.kafka.access import Need, denied, topic as topic_resource
    from engine.kafka.client_config import logged

    admin = AdminClient(logged(admin_config))
    user = admin_config.get("sasl.username")
    principal = f"User:{user}" if user else None
    specs = {prefix + s.suffix: s for s in LAYOUT}
    futures = admin.create_topics(
        [NewTopic(name, s.partitions, replication_factor, config=dict(s.config)) for name, s in specs.items()],
        request_timeout=timeout,
    )
    outcome: list[tuple[str, str]] = []
    problems: list[str] = []
    for name, future in futures.items():
        try:
            future.result()
            outcome.append((name, "created"))
        except KafkaException as e:
            err = e.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                outcome.append((name, "exists"))
            elif isinstance(err, KafkaError) and err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                                 KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                problems.append(denied(Need(("Create",), topic_resource(name), "kreassign topics create"),
                                       err.name(), principal, str(admin_config.get("bootstrap.servers"))))
            else:
                problems.append(f"{name}: {err.str() if isinstance(err, KafkaError) else err}")
    if problems:
        raise TopicsError("; ".join(problems))
    problems = layout_problems(admin, prefix, timeout)
    deadline = time.monotonic() + timeout
    while problems and time.monotonic() < deadline and all(p.startswith("topic ") and "does not exist" in p
                                                             for p in problems):
        # the controller created them (or has them); the broker asked has not applied that yet
        time.sleep(METADATA_POLL)
        problems = layout_problems(admin, prefix, timeout)
    if problems:
        if any("does not exist" in p for p in problems):
            problems.append(f"the controller created or has them, yet the metadata of the broker asked did not "
                            f"show them within {timeout:g} s")
        raise TopicsError("; ".join(problems))
    return sorted(outcome)


def layout_problems(admin: AdminClient, prefix: str = DEFAULT_PREFIX, timeout: float = 30.0) -> list[str]:
    """Missing topics and partition counts that break the layout."""
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        return [f"cannot list topics: {e.args[0]}"]
    problems = []
    for spec in LAYOUT:
        name = prefix + spec.suffix
        topic = metadata.topics.get(name)
        if topic is None:
            problems.append(missing(name))
        elif spec in SINGLE_PARTITION and len(topic.partitions) != 1:
            problems.append(
                f"topic {name} has {len(topic.partitions)} partitions; the {spec.suffix} topic must have exactly 1 "
                f"(a total order); delete it and run {create_command(name)}"
            )
    return problems
