"""The Kafka topics of kreassign: names, partitions, keys, retention, and their creation.

All names share a configurable prefix (default ``kreassign.``). docs/events.md
gives the reasons at length; in short:

* ``<prefix>events`` - the log of record. One partition: the log is totally
  ordered, so replay (the fold) is exact and deterministic and cluster-wide
  limits are decided at one point. Nothing may ever be removed from it (state
  is the fold of all events): delete policy with infinite retention, never
  compaction.
* ``<prefix>commands`` - operator commands, keyed by request id (``control``
  for limits, throttle, pause, resume), so one request's commands stay in
  order. Several partitions; consumed once by the engine, kept 7 days.
* ``<prefix>dead-letters`` - messages that could not be decoded, with their
  source and reason. Kept 30 days.
* ``<prefix>decisions`` - the engine's internal queue (docs/engine.md): every
  verified command and every tick, in the order the one decider handles them.
  One partition, so exactly one worker decides at a time. Kept 1 day: the
  events topic, not this one, is the record.

``create`` is idempotent: a topic that exists is left as it is (an operator
may have changed its retention on purpose), but a partition count that breaks
the layout (an events topic with several partitions, e.g. auto-created by a
producer) is an error naming the topic.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_PREFIX = "kreassign."
DAY_MS = 24 * 3600 * 1000
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
LAYOUT: tuple[TopicSpec, ...] = (COMMANDS, EVENTS, DEAD_LETTERS, DECISIONS)
SINGLE_PARTITION = (EVENTS, DECISIONS)


class Topics(NamedTuple):
    commands: str
    events: str
    dead_letters: str
    decisions: str

    @classmethod
    def named(cls, prefix: str = DEFAULT_PREFIX) -> "Topics":
        return cls(*(prefix + spec.suffix for spec in LAYOUT))


class TopicsError(RuntimeError):
    """Topics could not be created or do not fit the layout; the message names them."""


def create(
    admin_config: Mapping[str, object], prefix: str = DEFAULT_PREFIX, replication_factor: int = -1,
    timeout: float = 30.0,
) -> list[tuple[str, str]]:
    """Create every topic of the layout that does not exist; [(name, 'created' | 'exists')].

    ``replication_factor`` -1 takes the broker's ``default.replication.factor``.
    """
    from engine.client_config import logged

    admin = AdminClient(logged(admin_config))
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
            else:
                problems.append(f"{name}: {err.str() if isinstance(err, KafkaError) else err}")
    if problems:
        raise TopicsError("; ".join(problems))
    problems = layout_problems(admin, prefix, timeout)
    if problems:
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
            problems.append(f"topic {name} does not exist (run: kreassign topics create)")
        elif spec in SINGLE_PARTITION and len(topic.partitions) != 1:
            problems.append(
                f"topic {name} has {len(topic.partitions)} partitions; the {spec.suffix} topic must have exactly 1 "
                f"(a total order); delete it and run kreassign topics create"
            )
    return problems
