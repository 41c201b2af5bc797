"""The snapshots topic: write a snapshot, find the latest one, and fold the events after it.

``engine.log.snapshot`` says what a snapshot is; this module is its Kafka shell:

* ``SnapshotWriter.write(fold)`` writes one snapshot (its chunks, one record
  each, in the slot not used last) with an idempotent producer and waits for
  every delivery. A snapshot never needs fencing: whoever writes it, it is the
  fold of the events below the offset it names.
* ``latest(...)`` reads the end of the snapshots topic (a window before the
  high watermark, widened until a usable snapshot is found or the topic's
  start is reached), so its cost does not grow with the events topic nor with
  snapshots left uncompacted (the embedded broker never compacts).
* ``resume(...)``: where to fold from: the snapshot, checked against the
  events topic (the event just below its offset must be the one it names, else
  the events topic is not the one it was folded from), and the events after
  it; without a usable snapshot, every event from offset 0 (an error if
  retention deleted some). The decider's recovery, ``status`` and ``replay``
  fold this way.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from engine.kafka.access import AuthWatch, Need, authentication_failed, denied, principal_of, topic as topic_resource, user_of
from engine.kafka.broker_profile import KAFKA, BrokerProfile
from engine.kafka.client_config import ClientConfig, logged
from engine.log.eventlog import DEFAULT_TIMEOUT, ReadError, _check, _Writer, decoder_for, read_topic
from engine.log.envelope import EventEnvelope, millis
from engine.log.snapshot import Assembled, Fold, Snapshot, assemble, to_records
from engine.kafka.topics import DEFAULT_PREFIX, EVENTS, Topics, missing, reader_group

log = logging.getLogger("kreassign.snapshots")

WINDOW = 64
"""Records read from the end of the snapshots topic at first (a 100,000-partition snapshot is
about 20); the window grows fourfold until a usable snapshot is in it."""


class SnapshotWriter:
    """Writes snapshots to ``<prefix>snapshots`` (see the module doc)."""

    def __init__(self, config: ClientConfig, *, prefix: str = DEFAULT_PREFIX, profile: BrokerProfile = KAFKA,
                 timeout: float = DEFAULT_TIMEOUT, writer: str = "", slot: int = 0):
        self.topic = Topics.named(prefix).snapshots
        # one record per batch: the embedded broker's high watermark is then exact (latest() trusts it)
        self._writer = _Writer(config, self.topic, profile, timeout, check=True,
                               extra={**profile.exact_end_offsets})
        self.writer = writer
        self.slot = slot  # the slot the next snapshot goes to

    def write(self, fold: Fold, now: datetime | None = None) -> tuple[str, int, int]:
        """Write a snapshot of ``fold``; (its id, records, bytes)."""
        t = now or datetime.now(timezone.utc)
        sid = str(uuid.uuid4())
        records = to_records(fold, snapshot_id=sid, slot=self.slot, written_at=t.isoformat(), writer=self.writer)
        ms = millis(t)
        self._writer.write((k, v, ms) for k, v in records)
        self.slot = 1 - self.slot
        return sid, len(records), sum(len(v) for _k, v in records)

    def close(self) -> None:
        self._writer.close()


class Found(NamedTuple):
    assembled: Assembled
    records: int  # records read
    seconds: float
    problem: str | None  # why no snapshot could be looked for (e.g. the topic is missing)
    slot: int | None = None  # the slot of the snapshot found (the next one goes to the other)
    end: int | None = None  # the snapshots topic's end offset when it was read


def latest(config: ClientConfig, *, prefix: str = DEFAULT_PREFIX, profile: BrokerProfile = KAFKA,
           timeout: float = DEFAULT_TIMEOUT, window: int = WINDOW, unless_end: int | None = None,
           freeze: bool = True) -> Found | None:
    """The latest usable snapshot on the snapshots topic (see the module doc); ``ReadError`` if the
    cluster does not answer within ``timeout``. ``None`` when the
    topic's end offset is still ``unless_end``: the snapshot read then is still the latest (a worker
    that read one ahead checks so in one offsets request). ``freeze``: see ``snapshot.loads``."""
    topic = Topics.named(prefix).snapshots
    started = time.monotonic()
    watch = AuthWatch()
    consumer = Consumer(logged(config.confluent(**{"group.id": reader_group(prefix), "enable.auto.commit": False,
                                                   **profile.consumer, **watch.config()})))
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=timeout)
        except KafkaException as e:  # every later read would wait as long again: said once, here
            auth = watch.failure(consumer)
            if auth is not None:
                raise ReadError(authentication_failed(user_of(config), auth)) from None
            raise ReadError(f"cannot reach the cluster at {config.bootstrap}: no answer within {timeout:g} s "
                            f"({e.args[0].str()})") from None
        t = metadata.topics.get(topic)
        if t is not None and t.error is not None and t.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            need = Need(("Read",), topic_resource(topic), "status, replay and recovery start from the latest snapshot")
            return Found(Assembled(None, ()), 0, 0.0, denied(need, "TOPIC_AUTHORIZATION_FAILED", principal_of(config),
                                                             config.bootstrap))
        if t is None or t.error is not None or not t.partitions:
            return Found(Assembled(None, ()), 0, 0.0, missing(topic))
        try:
            low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, 0), timeout=timeout)
        except KafkaException as e:
            return Found(Assembled(None, ()), 0, 0.0, f"cannot read the offsets of {topic}: {e.args[0].str()}")
    finally:
        consumer.close()
    if unless_end is not None and high == unless_end:
        return None
    read = 0
    start = high
    while True:
        start = max(low, start - window)
        messages = list(read_topic(config, topic, lambda v: v, lambda _d: None, group_id=reader_group(prefix),
                                   profile=profile, idle_timeout=timeout, start_offset=start))
        read += len(messages)
        found = assemble((m.value for m in messages), freeze=freeze)
        if found.snapshot is not None or start <= low:
            slot = None
            if found.snapshot is not None:
                keys = [m.key for m in messages if m.value is not None and found.snapshot.id.encode() in m.value[:400]]
                slot = int(keys[-1].split(b"-")[1]) if keys and keys[-1] and keys[-1].count(b"-") == 2 else None
            return Found(found, read, time.monotonic() - started, None, slot, high)
        window *= 4


def resume(config: ClientConfig, snapshot: Snapshot | None, *, prefix: str = DEFAULT_PREFIX,
           profile: BrokerProfile = KAFKA, registry: Any = None, timeout: float = DEFAULT_TIMEOUT,
           set_aside: Callable = lambda _d: None) -> tuple[Snapshot | None, Iterator[tuple[int, EventEnvelope]], str | None]:
    """Where to fold from: (the snapshot, if it belongs to this events topic; the records after it,
    or from offset 0; a note if the snapshot was refused). The records' iterator reads lazily."""
    topic = Topics.named(prefix).events
    decode = decoder_for(EventEnvelope, registry, topic)
    note = None
    if snapshot is not None and snapshot.fold.next_offset > 0:
        first = snapshot.fold.next_offset - 1
        records = read_topic(config, topic, decode, set_aside, group_id=reader_group(prefix), profile=profile,
                             idle_timeout=timeout, expect_partitions=EVENTS.partitions, start_offset=first)
        head = next(records, None)
        if head is not None and head.offset == first and head.value.id == snapshot.fold.last_event:
            def rest() -> Iterator[tuple[int, EventEnvelope]]:
                try:
                    for m in records:
                        yield m.offset, m.value
                finally:
                    records.close()
            return snapshot, rest(), None
        records.close()
        got = "nothing" if head is None else f"event {head.value.id} at offset {head.offset}"
        note = (f"snapshot {snapshot.id} names event {snapshot.fold.last_event} at offset {first}, the events topic "
                f"has {got} there: not its log; folding from offset 0")
    low = _low_watermark(config, topic, prefix, profile, timeout)
    if low > 0:
        raise ReadError(f"{topic} starts at offset {low}: the events before it were deleted (retention) and no "
                        f"usable snapshot covers them, so the log cannot be folded")
    records = read_topic(config, topic, decode, set_aside, group_id=reader_group(prefix), profile=profile,
                         idle_timeout=timeout, expect_partitions=EVENTS.partitions)

    def everything() -> Iterator[tuple[int, EventEnvelope]]:
        try:
            for m in records:
                yield m.offset, m.value
        finally:
            records.close()
    return None, everything(), note


def _low_watermark(config: ClientConfig, topic: str, prefix: str, profile: BrokerProfile, timeout: float) -> int:
    _check(config, topic, ("Read",), timeout, ReadError, reader_group(prefix))  # missing, or not allowed: said so
    consumer = Consumer(logged(config.confluent(**{"group.id": reader_group(prefix), "enable.auto.commit": False,
                                                   **profile.consumer})))
    try:
        low, _high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, 0), timeout=timeout)
        return low
    except KafkaException as e:
        raise ReadError(f"cannot read the offsets of {topic}: {e.args[0].str()}") from None
    finally:
        consumer.close()


