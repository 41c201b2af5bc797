"""Writing commands and events to Kafka, and reading a topic back to its end.

The publisher API (what ``kreassign execute`` and friends use, and what a
service can use from Python)::

    from engine.eventlog import Publisher

    with Publisher("broker:9092", ClientConfig.load("client.properties")) as p:
        request_id = p.submit(targets, throttle_rate=50_000_000)   # targets: PartitionTarget values
        p.cancel(request_id, rollback=True)
        p.change_limits({"reassignment.parallel.partition.count": 50})
        p.change_throttle(None)          # unthrottled
        p.pause(); p.resume()

Every call waits until the broker has the command (``acks=all``, idempotent
producer) and returns the request id (``submit``) or the command id, or raises
``PublishError`` naming the problem. ``EventWriter`` appends events the same
way (the engine's shell, tests, benchmarks). ``read_topic`` reads partitions
from their first offset to their end, decoding each message; a message that
cannot be decoded is handed to ``set_aside`` (see ``engine.dead_letter``) and
reading goes on. The end of a partition is librdkafka's partition EOF, never
the high watermark (the embedded broker under-reports it).
"""

from __future__ import annotations

import dataclasses
import getpass
import socket
import time
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from engine import commands as cmd
from engine import events as ev
from engine.broker_profile import KAFKA, BrokerProfile
from engine.client_config import ClientConfig, last_failure, logged
from engine.codec import codec_for
from engine.dead_letter import DeadLetter, decode_or_set_aside
from engine.envelope import CommandEnvelope, EventEnvelope, command_key, event_key, millis, new_id, now
from engine.partition import TopicPartition
from engine.topics import DEFAULT_PREFIX, MAX_MESSAGE_BYTES, Topics

DEFAULT_TIMEOUT = 30.0


class PublishError(RuntimeError):
    """A command or event could not be written; the message says why."""


class ReadError(RuntimeError):
    """A topic could not be read; the message says why."""


def issuer() -> str:
    """``user@host``: who issued a command, unless the caller says."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _encoder(python_type: type, registry: Any, topic: str):
    codec = codec_for(python_type)
    return codec.with_registry(registry, topic) if registry is not None else codec


class _Writer:
    """An idempotent producer that writes to one topic and waits for every delivery."""

    def __init__(self, config: ClientConfig, topic: str, profile: BrokerProfile, timeout: float, check: bool):
        self.topic = topic
        self.timeout = timeout
        bootstrap = config.bootstrap or "(no bootstrap server)"
        if check:
            _topic_metadata(AdminClient(logged(config.confluent())), topic, timeout, bootstrap, PublishError)
        self.producer = Producer(logged(config.confluent(**{
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "message.timeout.ms": int(timeout * 1000),
            **profile.producer,
        })))
        self.bootstrap = bootstrap

    def close(self) -> None:
        """Flush and let the producer go (librdkafka closes it when it is no longer referenced)."""
        if self.producer is not None:
            self.producer.flush(self.timeout)
            self.producer = None

    def write(self, messages: Iterable[tuple[bytes, bytes, int]]) -> int:
        """Produce (key, value, timestamp ms) messages, flush, and fail if any was not delivered."""
        if self.producer is None:
            raise PublishError(f"the writer to {self.topic} is closed")
        failures: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                failures.append(err.str())

        n = 0
        for key, value, timestamp in messages:
            while True:
                try:
                    self.producer.produce(self.topic, value=value, key=key, timestamp=timestamp, on_delivery=delivered)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self.producer.poll(0.1)
                except KafkaException as e:
                    raise PublishError(f"{self.topic}: {e.args[0].str()}") from None
            n += 1
        left = self.producer.flush(self.timeout)
        if left:
            raise PublishError(f"{left} messages to {self.topic} not delivered within {self.timeout:g} s "
                               f"(is {self.bootstrap} reachable?)")
        if failures:
            raise PublishError(f"{len(failures)} messages to {self.topic} failed: {failures[0]}")
        return n


def _topic_metadata(client: Any, topic: str, timeout: float, bootstrap: str | None, error: type) -> Any:
    """The topic's metadata, or ``error`` naming the problem: an unreachable cluster or a
    missing topic (never auto-created: that could give it the wrong layout)."""
    try:
        metadata = client.list_topics(timeout=timeout)
    except KafkaException as e:
        client.poll(0)  # serves the client's log lines: the cause, when librdkafka logged one
        cause = last_failure()
        raise error(f"cannot reach the cluster at {bootstrap}: {e.args[0].str()}"
                    + (f" ({cause})" if cause else "")) from None
    if topic not in metadata.topics:
        raise error(f"topic {topic} does not exist on {bootstrap} (run: kreassign topics create)")
    return metadata.topics[topic]


class _EnvelopeWriter:
    """Writes one kind of envelope to its topic; a context manager."""

    envelope: type
    topic_role: str  # field of ``Topics``

    def __init__(
        self, bootstrap: str | None = None, config: ClientConfig | None = None, *,
        prefix: str = DEFAULT_PREFIX, profile: BrokerProfile = KAFKA, registry: Any = None,
        timeout: float = DEFAULT_TIMEOUT, check_topic: bool = True,
    ):
        config = (config or ClientConfig()).with_bootstrap(bootstrap)
        self.topic = getattr(Topics.named(prefix), self.topic_role)
        self._codec = _encoder(self.envelope, registry, self.topic)
        self._writer = _Writer(config, self.topic, profile, timeout, check_topic)

    def close(self) -> None:
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Publisher(_EnvelopeWriter):
    """Publishes operator commands to the commands topic (see the module doc)."""

    envelope = CommandEnvelope
    topic_role = "commands"

    def __init__(self, bootstrap: str | None = None, config: ClientConfig | None = None, *,
                 issued_by: str | None = None, signing_key: Any = None, **options: Any):
        """``options``: prefix, profile (a ``BrokerProfile``), registry (a Schema Registry URL or
        client), timeout (seconds), check_topic. ``signing_key``: an ``engine.signing.SigningKey``
        to sign every command with (HMAC-SHA256, see ``engine.signing``)."""
        super().__init__(bootstrap, config, **options)
        self.issued_by = issued_by or issuer()
        self.signing_key = signing_key

    def submit(self, partitions: Iterable[cmd.PartitionTarget], throttle_rate: int | None = None,
               request_id: str | None = None, allow_below_min_insync: bool = False) -> str:
        """Reassign ``partitions`` (Kafka's reassignment JSON entries); returns the request id."""
        request_id = request_id or new_id()
        self.send(cmd.Submit(request_id, tuple(partitions), throttle_rate,
                             allow_below_min_insync=allow_below_min_insync))
        return request_id

    def cancel(self, request_id: str, partitions: Iterable[TopicPartition] | None = None,
               rollback: bool = False, include_completed: bool = False) -> str:
        return self.send(cmd.Cancel(request_id, None if partitions is None else tuple(partitions), rollback,
                                    include_completed=include_completed)).id

    def change_limits(self, changes: Mapping[str, int]) -> str:
        """Limit names are field names or KIP aliases (``engine.limits.SETTINGS``)."""
        return self.send(cmd.ChangeLimits(dict(changes))).id

    def change_throttle(self, rate: int | None) -> str:
        return self.send(cmd.ChangeThrottle(rate)).id

    def pause(self) -> str:
        return self.send(cmd.Pause()).id

    def resume(self) -> str:
        return self.send(cmd.Resume()).id

    def send(self, command: cmd.Command) -> CommandEnvelope:
        """Publish any command; its ``command_id`` becomes the envelope id (a new UUID if empty)."""
        if not command.command_id:
            command = dataclasses.replace(command, command_id=new_id())
        envelope = CommandEnvelope(command.command_id, now(), self.issued_by, command)
        if self.signing_key is not None:
            from engine.signing import sign

            envelope = sign(envelope, self.signing_key)
        data = self._codec.encode(envelope)
        self._writer.write([(command_key(command).encode(), data, millis(envelope.issued_at))])
        return envelope


class EventWriter(_EnvelopeWriter):
    """Appends events to the events topic, each in an envelope with a new id and the time."""

    envelope = EventEnvelope
    topic_role = "events"

    def append(self, events: Iterable[ev.Event], recorded_at: datetime | None = None) -> list[EventEnvelope]:
        t = recorded_at or now()
        envelopes = [EventEnvelope(new_id(), t, e) for e in events]
        self.write(envelopes)
        return envelopes

    def write(self, envelopes: Iterable[EventEnvelope]) -> int:
        encode = self._codec.encode
        return self._writer.write(
            (event_key(e.payload).encode(), encode(e), millis(e.recorded_at)) for e in envelopes
        )


class Message(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: Any  # decoded


def read_topic(
    config: ClientConfig, topic: str, decode: Callable[[bytes | None], Any],
    set_aside: Callable[[DeadLetter], None], *, profile: BrokerProfile = KAFKA,
    until_offset: int | None = None, idle_timeout: float = DEFAULT_TIMEOUT, batch: int = 1000,
    expect_partitions: int | None = None, start_offset: int = 0,
) -> Iterator[Message]:
    """Every message of every partition of ``topic``, from the first offset (or
    ``start_offset``) to the end (or to ``until_offset``, exclusive), decoded; in
    offset order within a partition.
    ``expect_partitions``: fail unless the topic has exactly that many partitions."""
    consumer = Consumer(logged(config.confluent(**{
        "group.id": "kreassign-reader",  # never joined, never committed: partitions are assigned
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        **profile.consumer,
    })))
    try:
        metadata = _topic_metadata(consumer, topic, idle_timeout, config.bootstrap, ReadError)
        partitions = sorted(metadata.partitions)
        if expect_partitions is not None and len(partitions) != expect_partitions:
            raise ReadError(f"topic {topic} has {len(partitions)} partitions, expected {expect_partitions}")
        starts = []
        for p in partitions:
            low, _high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=idle_timeout)
            starts.append(KafkaTopicPartition(topic, p, max(low, start_offset, 0)))  # explicit: no reset delay
        open_partitions = {tp.partition for tp in starts if until_offset is None or tp.offset < until_offset}
        consumer.assign([tp for tp in starts if tp.partition in open_partitions])
        idle_since = time.monotonic()
        while open_partitions:
            # consume() returns when it has ``batch`` messages or after its timeout: keep it short.
            messages = consumer.consume(batch, 0.05)
            if not messages:
                if time.monotonic() - idle_since > idle_timeout:
                    raise ReadError(f"{topic}: no message and no end of partition within {idle_timeout:g} s")
                continue
            idle_since = time.monotonic()
            for m in messages:
                p = m.partition()
                if p not in open_partitions:
                    continue
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        open_partitions.discard(p)
                        continue
                    raise ReadError(f"{topic}/{p}: {err.str()}")
                offset = m.offset()
                if until_offset is not None and offset >= until_offset:
                    open_partitions.discard(p)
                    continue
                value = decode_or_set_aside(decode, topic, p, offset, m.key(), m.value(), set_aside)
                if value is not None:
                    yield Message(p, offset, m.key(), value)
                if until_offset is not None and offset + 1 >= until_offset:
                    open_partitions.discard(p)
    finally:
        consumer.close()


def end_offset(config: ClientConfig, topic: str, *, profile: BrokerProfile = KAFKA, partition: int = 0,
               timeout: float = DEFAULT_TIMEOUT) -> int:
    """The partition's listed end (high watermark): every message at or after it is newer than this
    call. (The embedded broker lists less than the end, which is still a safe place to start from.)"""
    consumer = Consumer(logged(config.confluent(**{"group.id": "kreassign-reader", "enable.auto.commit": False,
                                                   **profile.consumer})))
    try:
        _topic_metadata(consumer, topic, timeout, config.bootstrap, ReadError)
        _low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=timeout)
        return max(high, 0)
    except KafkaException as e:
        raise ReadError(f"{topic}: {e.args[0].str()}") from None
    finally:
        consumer.close()


def follow(config: ClientConfig, topic: str, decode: Callable[[bytes | None], Any],
           set_aside: Callable[[DeadLetter], None], *, start_offset: int, profile: BrokerProfile = KAFKA,
           partition: int = 0) -> Iterator[Message | None]:
    """One partition's messages from ``start_offset`` on, decoded, as they arrive, for as long as the
    caller iterates; ``None`` whenever the partition's end is reached and nothing newer came within a
    short poll (the caller decides how long to wait)."""
    consumer = Consumer(logged(config.confluent(**{
        "group.id": "kreassign-reader", "enable.auto.commit": False, "enable.partition.eof": True,
        **profile.consumer,
    })))
    try:
        consumer.assign([KafkaTopicPartition(topic, partition, start_offset)])
        while True:
            messages = consumer.consume(100, 0.1)
            if not messages:
                yield None
                continue
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        yield None
                        continue
                    raise ReadError(f"{topic}/{partition}: {err.str()}")
                value = decode_or_set_aside(decode, topic, partition, m.offset(), m.key(), m.value(), set_aside)
                if value is not None:
                    yield Message(partition, m.offset(), m.key(), value)
    finally:
        consumer.close()


def decoder_for(python_type: type, registry: Any = None, topic: str = "") -> Callable[[bytes | None], Any]:
    """The decode function for a topic's messages (Schema Registry framing too when a registry is given)."""
    return _encoder(python_type, registry, topic).decode
