"""Writing commands and events to Kafka, and reading a topic back to its end.

The publisher API (what ``kreassign execute`` and friends use, and what a
service can use from Python)::

    from engine.log.eventlog import Publisher

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
cannot be decoded is handed to ``set_aside`` (see ``engine.log.dead_letter``) and
reading goes on. The end of a partition is librdkafka's partition EOF, never
the high watermark (the embedded broker under-reports it).

Before writing or reading, the topic is described with its authorized
operations (``engine.kafka.probe``): a missing topic, a missing permission (Write, or
Read, and Describe on the readers' group ``group_id``, whose coordinator
librdkafka asks for although the reader never joins), a failed authentication
or an unreachable cluster is a ``PublishError`` / ``ReadError`` saying which,
with the kafka-acls.sh grant for a missing permission (``engine.kafka.access``).
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

from engine.core import commands as cmd
from engine.kafka.access import AuthWatch, Need, authentication_failed, explain, group, principal_of, topic as topic_resource
from engine.kafka.access import TRANSACTIONAL_ID, Resource, denied, user_of
from engine.core import events as ev
from engine.kafka.broker_profile import KAFKA, BrokerProfile
from engine.kafka.client_config import ClientConfig, logged
from engine.log.codec import codec_for
from engine.log.dead_letter import DeadLetter, decode_or_set_aside
from engine.log.envelope import CommandEnvelope, EventEnvelope, command_key, event_key, millis, new_id, now
from engine.core.partition import TopicPartition
from engine.kafka.topics import DEFAULT_PREFIX, MAX_MESSAGE_BYTES, Topics

DEFAULT_TIMEOUT = 30.0


class PublishError(RuntimeError):
    """A command or event could not be written; the message says why."""


class ReadError(RuntimeError):
    """A topic could not be read; the message says why."""


class Fenced(PublishError):
    """A transactional writer was fenced: another producer with its ``transactional.id`` took over
    (Kafka's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH), or its producer failed fatally. Nothing it
    tried to write was committed; it must not act on it."""


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
    """An idempotent producer that writes to one topic and waits for every delivery.

    With a ``transactional_id`` every ``write`` is one transaction, and creating the writer claims
    the id (``init_transactions``): it fences any older producer with that id, whose later writes
    fail with ``Fenced`` and are never committed (Kafka aborts its open transaction)."""

    def __init__(self, config: ClientConfig, topic: str, profile: BrokerProfile, timeout: float, check: bool,
                 transactional_id: str | None = None, extra: Mapping[str, object] | None = None):
        self.topic = topic
        self.timeout = timeout
        self.config = config
        bootstrap = config.bootstrap or "(no bootstrap server)"
        if check:
            _check(config, topic, ("Write",), timeout, PublishError)
        self.watch = AuthWatch()
        settings: dict[str, object] = {
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
            "message.max.bytes": MAX_MESSAGE_BYTES,
            "message.timeout.ms": int(timeout * 1000),
            **profile.producer,
            **self.watch.config(),
            **(extra or {}),
        }
        self.transactional_id = transactional_id
        if transactional_id is not None:
            # librdkafka: message.timeout.ms may not exceed transaction.timeout.ms
            settings.update({"transactional.id": transactional_id,
                             "transaction.timeout.ms": max(60_000, int(timeout * 1000))})
        self.producer = Producer(logged(config.confluent(**settings)))
        self.bootstrap = bootstrap
        self.last_offset: int | None = None  # of the last message delivered
        self.undelivered: tuple[list, Need | None] = ([], None)  # the last write's delivery errors (``_write``)
        self.fenced: str | None = None  # why a newer producer with this transactional.id fenced this one
        self.committed_at: float | None = None  # monotonic time just before the last commit that succeeded began
        if transactional_id is not None:
            try:
                self.producer.init_transactions(timeout)
            except KafkaException as e:
                err = e.args[0]
                if err.code() == getattr(KafkaError, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", None):
                    need = Need(("Write",), Resource(TRANSACTIONAL_ID, transactional_id),
                                "the decider appends its events in transactions under this id")
                    raise PublishError(denied(need, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", principal_of(config),
                                              config.bootstrap)) from None
                raise PublishError(f"cannot claim transactional.id {transactional_id} on {bootstrap}: "
                                   f"{err.str()}") from None

    def close(self) -> None:
        """Flush and let the producer go (librdkafka closes it when it is no longer referenced)."""
        if self.producer is not None:
            self.producer.flush(self.timeout)
            self.producer = None

    def write(self, messages: Iterable[tuple[bytes, bytes, int]], headers: list | None = None,
              topic: str | None = None) -> int:
        """Produce (key, value, timestamp ms) messages, flush, and fail if any was not delivered
        (transactional: commit, or abort and fail; ``Fenced`` if another producer took over)."""
        if self.producer is None:
            raise PublishError(f"the writer to {self.topic} is closed")
        if self.fenced is not None:  # for good: librdkafka answers a fenced producer's next begin_transaction
            raise Fenced(self.fenced)  # with _CONFLICT ("commit_transaction already in progress"), retriable
        if self.transactional_id is None:
            return self._write(messages, headers, topic or self.topic)
        try:
            self.producer.begin_transaction()
            # commit_transaction flushes the messages itself: it fails at once when a Produce was refused (a
            # newer producer fenced this one: the transaction can only be aborted), where a flush of our own
            # waited for their delivery reports until message.timeout.ms (``timeout``, 30 s), blocking the
            # decider, and Faust's rebalance behind it, that long (tests/test_fencing.py)
            started = time.monotonic()
            n = self._write(messages, headers, topic or self.topic, flush=False)
            self.producer.commit_transaction(self.timeout)
            self.committed_at = started
            return n
        except KafkaException as e:
            raise self._failed(e.args[0]) from None
        except SystemError as e:
            # confluent-kafka: a fatal error raised in flush() while a delivery callback runs surfaces
            # as SystemError whose cause is the KafkaException (e.g. _FENCED)
            cause = e.__cause__ or e.__context__
            if isinstance(cause, KafkaException):
                raise self._failed(cause.args[0]) from None
            raise
        except PublishError as e:
            self._abort()
            raise e from None

    def _failed(self, err: Any) -> PublishError:
        text = f"{self.topic}: {err.str() if isinstance(err, KafkaError) else err}"
        if isinstance(err, KafkaError) and (err.fatal() or err.code() in _FENCED_CODES):
            # no abort: a fenced producer's abort_transaction waits its whole timeout (measured on the
            # embedded broker) and Kafka aborted the transaction already, when the newer producer claimed
            self.fenced = f"{text} (transactional.id {self.transactional_id})"
            return Fenced(self.fenced)
        timed_out = isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT
        auth = self.watch.failure(self.producer) if timed_out else None
        errors, need = self.undelivered
        refused = [self._explain(e, need) for e in errors]
        self._abort()
        if auth is not None:
            return PublishError(authentication_failed(user_of(self.config), auth))
        if any(refused):  # a message the broker refused (a grant missing): said as the flush said it
            return PublishError(f"{len(errors)} messages to {self.topic} failed: {next(r for r in refused if r)}")
        return PublishError(f"{text} (is {self.bootstrap} reachable?)" if timed_out else text)

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(self.timeout)
        except KafkaException:
            pass  # the next begin_transaction says what is wrong, with its reason

    def _write(self, messages, headers, topic, flush: bool = True) -> int:
        """Produce the messages; ``flush``: wait for them and fail if any was not delivered (a transaction's
        commit does that instead)."""
        errors: list = []  # KafkaError objects, read after flush (a fatal error may be pending in the callback)
        need = Need(("Write",), topic_resource(topic))
        self.undelivered = (errors, need)  # what a failed commit explains itself with (``_failed``)

        def delivered(err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                self.last_offset = msg.offset()

        n = 0
        for key, value, timestamp in messages:
            while True:
                try:
                    self.producer.produce(topic, value=value, key=key, timestamp=timestamp, on_delivery=delivered,
                                          headers=headers)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self.producer.poll(0.1)
                except KafkaException as e:
                    if self.transactional_id is not None:
                        raise
                    raise PublishError(f"{topic}: {self._explain(e.args[0], need) or e.args[0].str()}") from None
            n += 1
        if not flush:
            return n
        try:
            left = self.producer.flush(self.timeout)
        except (KafkaException, KafkaError) as e:  # a fatal error (e.g. the idempotent producer refused) is raised
            if self.transactional_id is not None:
                raise
            err = e.args[0] if isinstance(e, KafkaException) else e
            raise PublishError(f"{topic}: {self._explain(err, need) or err.str()}") from None
        failures = [self._explain(e, need) or e.str() for e in errors]
        if left:
            auth = self.watch.failure(self.producer)
            if auth is not None:
                raise PublishError(authentication_failed(user_of(self.config), auth))
            raise PublishError(f"{left} messages to {self.topic} not delivered within {self.timeout:g} s "
                               f"(is {self.bootstrap} reachable?)")
        if failures:
            raise PublishError(f"{len(failures)} messages to {topic} failed: {failures[0]}")
        return n

    def _explain(self, err, need: Need) -> str | None:
        return explain(err, need, principal_of(self.config), self.config.bootstrap, user_of(self.config))


_FENCED_CODES = frozenset(
    getattr(KafkaError, name) for name in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
                                           "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") if hasattr(KafkaError, name)
)


def _check(config: ClientConfig, topic: str, operations: tuple[str, ...], timeout: float, error: type,
           group_id: str | None = None) -> Any:
    """The topic's description if it exists and this client may do ``operations`` on it (and Describe
    group ``group_id``), else ``error`` naming the problem: a missing topic (never auto-created: that
    could give it the wrong layout), a missing permission with its grant, a failed authentication,
    an unreachable cluster."""
    from engine.kafka.probe import Prober, ProbeError

    try:
        prober = Prober(config, timeout)
        desc = prober.topic(topic, operations)
        if group_id is not None:
            prober.group(group_id, ("Describe",), "kreassign's readers ask for their group's coordinator")
        return desc
    except ProbeError as e:
        raise error(str(e)) from None


class _EnvelopeWriter:
    """Writes one kind of envelope to its topic; a context manager."""

    envelope: type
    topic_role: str  # field of ``Topics``

    def __init__(
        self, bootstrap: str | None = None, config: ClientConfig | None = None, *,
        prefix: str = DEFAULT_PREFIX, profile: BrokerProfile = KAFKA, registry: Any = None,
        timeout: float = DEFAULT_TIMEOUT, check_topic: bool = True, transactional_id: str | None = None,
    ):
        config = (config or ClientConfig()).with_bootstrap(bootstrap)
        self.topic = getattr(Topics.named(prefix), self.topic_role)
        self._codec = _encoder(self.envelope, registry, self.topic)
        self._writer = _Writer(config, self.topic, profile, timeout, check_topic, transactional_id)

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
        client), timeout (seconds), check_topic. ``signing_key``: an ``engine.log.signing.SigningKey``
        to sign every command with (HMAC-SHA256, see ``engine.log.signing``)."""
        super().__init__(bootstrap, config, **options)
        self.issued_by = issued_by or issuer()
        self.signing_key = signing_key

    def submit(self, partitions: Iterable[cmd.PartitionTarget], throttle_rate: int | None = None,
               request_id: str | None = None, allow_below_min_insync: bool = False,
               steps: str = "incremental") -> str:
        """Reassign ``partitions`` (Kafka's reassignment JSON entries); returns the request id. ``steps``:
        how its partitions step (``engine.core.step.STEP_MODES``)."""
        request_id = request_id or new_id()
        self.send(cmd.Submit(request_id, tuple(partitions), throttle_rate,
                             allow_below_min_insync=allow_below_min_insync, steps=steps))
        return request_id

    def cancel(self, request_id: str, partitions: Iterable[TopicPartition] | None = None,
               rollback: bool = False, include_completed: bool = False) -> str:
        return self.send(cmd.Cancel(request_id, None if partitions is None else tuple(partitions), rollback,
                                    include_completed=include_completed)).id

    def change_limits(self, changes: Mapping[str, int]) -> str:
        """Limit names are field names or KIP aliases (``engine.core.limits.SETTINGS``)."""
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
            from engine.log.signing import sign

            envelope = sign(envelope, self.signing_key)
        data = self._codec.encode(envelope)
        self._writer.write([(command_key(command).encode(), data, millis(envelope.issued_at))])
        return envelope


class EventWriter(_EnvelopeWriter):
    """Appends events to the events topic, each in an envelope with a new id and the time.

    ``writer``: a ``writer`` header on every message (the engine puts its worker id there, so the
    log says who appended what). ``transactional_id``: each append is one transaction (the
    engine's decider: ``docs/engine.md``, fencing); ``last_offset`` is the offset of the last event
    appended, ``committed_at`` when its commit began (``time.monotonic``)."""

    envelope = EventEnvelope
    topic_role = "events"
    writer_id: str | None = None

    def append(self, events: Iterable[ev.Event], recorded_at: datetime | None = None) -> list[EventEnvelope]:
        t = recorded_at or now()
        envelopes = [EventEnvelope(new_id(), t, e) for e in events]
        self.write(envelopes)
        return envelopes

    def write(self, envelopes: Iterable[EventEnvelope]) -> int:
        encode = self._codec.encode
        headers = None if self.writer_id is None else [(WRITER_HEADER, self.writer_id.encode())]
        return self._writer.write(
            ((event_key(e.payload).encode(), encode(e), millis(e.recorded_at)) for e in envelopes), headers
        )

    def write_other(self, topic: str, messages: Iterable[tuple[bytes, bytes, int]], headers: list | None = None) -> int:
        """Messages to another topic through the same producer (in a transaction of their own, if
        transactional): what the decider uses to renew its lease."""
        return self._writer.write(messages, headers, topic)

    @property
    def last_offset(self) -> int | None:
        return self._writer.last_offset

    @property
    def committed_at(self) -> float | None:
        return self._writer.committed_at


WRITER_HEADER = "writer"


class Message(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: Any  # decoded


READ_FETCH_WAIT_MS = 20


def read_topic(
    config: ClientConfig, topic: str, decode: Callable[[bytes | None], Any],
    set_aside: Callable[[DeadLetter], None], *, group_id: str, profile: BrokerProfile = KAFKA,
    until_offset: int | None = None, idle_timeout: float = DEFAULT_TIMEOUT, batch: int = 1000,
    expect_partitions: int | None = None, start_offset: int = 0,
) -> Iterator[Message]:
    """Every message of every partition of ``topic``, from the first offset (or
    ``start_offset``) to the end (or to ``until_offset``, exclusive), decoded; in
    offset order within a partition.
    ``group_id``: the consumer's group (``engine.kafka.topics.reader_group``): never joined, never
    committed, but librdkafka asks for its coordinator (DESCRIBE on the group).
    ``expect_partitions``: fail unless the topic has exactly that many partitions."""
    desc = _check(config, topic, ("Read",), idle_timeout, ReadError, group_id)
    partitions = sorted(p.id for p in desc.partitions)
    if expect_partitions is not None and len(partitions) != expect_partitions:
        raise ReadError(f"topic {topic} has {len(partitions)} partitions, expected {expect_partitions}")
    watch = AuthWatch()
    consumer = Consumer(logged(config.confluent(**{
        "group.id": group_id,  # never joined, never committed: partitions are assigned
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        # the end of the partition is known from an empty fetch, which a broker holds this long: a
        # reader that stops there would wait librdkafka's 500 ms at every read (each recovery reads twice)
        "fetch.wait.max.ms": READ_FETCH_WAIT_MS,
        **profile.consumer,
        **watch.config(),
    })))
    user = user_of(config)

    def failure(err, p: int | None = None) -> ReadError:
        return _read_failure(config, topic, group_id, consumer, watch, err, p)

    try:
        starts = []
        for p in partitions:
            try:
                low, _high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=idle_timeout)
            except KafkaException as e:
                raise failure(e.args[0], p) from None
            starts.append(KafkaTopicPartition(topic, p, max(low, start_offset, 0)))  # explicit: no reset delay
        open_partitions = {tp.partition for tp in starts if until_offset is None or tp.offset < until_offset}
        consumer.assign([tp for tp in starts if tp.partition in open_partitions])
        idle_since = time.monotonic()
        while open_partitions:
            # consume() returns when it has ``batch`` messages or after its timeout: keep it short.
            messages = consumer.consume(batch, 0.05)
            if not messages:
                if time.monotonic() - idle_since > idle_timeout:
                    auth = watch.failure(consumer)
                    if auth is not None:
                        raise ReadError(authentication_failed(user, auth))
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
                    raise failure(err, p)
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


def end_offset(config: ClientConfig, topic: str, *, group_id: str, profile: BrokerProfile = KAFKA,
               partition: int = 0, timeout: float = DEFAULT_TIMEOUT) -> int:
    """The partition's listed end (high watermark): every message at or after it is newer than this
    call. (The embedded broker lists less than the end, which is still a safe place to start from.)
    ``group_id``: as for ``read_topic``."""
    _check(config, topic, ("Read",), timeout, ReadError, group_id)
    consumer = Consumer(logged(config.confluent(**{"group.id": group_id, "enable.auto.commit": False,
                                                   **profile.consumer})))
    try:
        _low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=timeout)
        return max(high, 0)
    except KafkaException as e:
        raise ReadError(f"{topic}: {e.args[0].str()}") from None
    finally:
        consumer.close()


def _read_failure(config: ClientConfig, topic: str, group_id: str, consumer: Consumer, watch: AuthWatch, err: Any,
                  p: int | None = None) -> ReadError:
    """A consumer's error as a ReadError an operator can act on: the grant it lacks (Read on the
    topic, Describe on the readers' group), the failed authentication, or librdkafka's text."""
    code = err.code() if hasattr(err, "code") else None
    need = (Need(("Describe",), group(group_id)) if code == KafkaError.GROUP_AUTHORIZATION_FAILED
            else Need(("Read",), topic_resource(topic)))
    user = user_of(config)
    text = explain(err, need, principal_of(config), config.bootstrap, user)
    if text is None:
        auth = watch.failure(consumer)
        text = authentication_failed(user, auth) if auth else err.str()
    return ReadError(f"{topic}{'' if p is None else f'/{p}'}: {text}")


def follow(config: ClientConfig, topic: str, decode: Callable[[bytes | None], Any],
           set_aside: Callable[[DeadLetter], None], *, start_offset: int, group_id: str, profile: BrokerProfile = KAFKA,
           partition: int = 0) -> Iterator[Message | None]:
    """One partition's messages from ``start_offset`` on, decoded, as they arrive, for as long as the
    caller iterates; ``None`` whenever the partition's end is reached and nothing newer came within a
    short poll (the caller decides how long to wait). Committed messages only: the decider appends
    in transactions (``isolation.level`` read_committed, librdkafka's default)."""
    watch = AuthWatch()
    consumer = Consumer(logged(config.confluent(**{
        "group.id": group_id, "enable.auto.commit": False, "enable.partition.eof": True,
        "isolation.level": "read_committed", **profile.consumer, **watch.config(),
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
                    raise _read_failure(config, topic, group_id, consumer, watch, err, partition)
                value = decode_or_set_aside(decode, topic, partition, m.offset(), m.key(), m.value(), set_aside)
                if value is not None:
                    yield Message(partition, m.offset(), m.key(), value)
    finally:
        consumer.close()


def decoder_for(python_type: type, registry: Any = None, topic: str = "") -> Callable[[bytes | None], Any]:
    """The decode function for a topic's messages (Schema Registry framing too when a registry is given)."""
    return _encoder(python_type, registry, topic).decode
