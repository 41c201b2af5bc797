"""The event log on the embedded broker: topics, publishing, replay, dead letters."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from engine.core import events as ev
from engine.kafka.client_config import ClientConfig
from engine.log.codec import codec_for
from engine.core.commands import (
    Cancel, ChangeLimits, ChangeThrottle, LooksPaced, Observation, ObservationFailed, Pause, PartitionTarget, Resume, Submit,
    ThrottlesObserved,
)
from engine.core.throttles import ThrottleSet
from engine.log.dead_letter import DeadLetterWriter, read_dead_letter
from engine.kafka.embedded import EMBEDDED
from engine.log.envelope import CommandEnvelope, EventEnvelope, new_id
from engine.log.eventlog import EventWriter, Publisher, PublishError, decoder_for, read_topic
from engine.core.partition import TopicPartition
from engine.log.replay import replay
from engine.core.state import fold
from engine.views.summary import summarize
from engine.kafka.topics import COMMANDS, DEAD_LETTERS, EVENTS, Topics, TopicsError, create
from tests.fake_cluster import Driver, FakeCluster


def config(broker) -> ClientConfig:
    return ClientConfig().with_bootstrap(broker.bootstrap)


def tp(i: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, i)


def story() -> Driver:
    """A run that leaves almost every kind of event in the log and steps in flight at the end."""
    c = FakeCluster({tp(i): tuple((i + k) % 4 for k in range(3)) for i in range(6)}, range(8))
    d = Driver(c)
    # kip-435 steps (the new preferred leader added alone, then elected): the most kinds of events
    d.feed(Submit("r1", tuple(PartitionTarget("t", i, (5, 6, 7)) for i in range(4)), throttle_rate=10_000_000,
                  steps="kip-435"))
    d.feed(ChangeLimits({"reassignment.parallel.partition.count": 3}))
    c.unavailable("alter")  # the first alter goes unanswered: retried
    c.refuse("apply", "TOPIC_AUTHORIZATION_FAILED", "not authorized", times=2)  # and a throttle change
    for _ in range(4):
        d.tick()
        for t in c.in_progress()[:1]:
            c.finish(t)
        d.observe()
    d.feed(ObservationFailed("connection refused"))
    d.feed(ThrottlesObserved(ThrottleSet(), frozenset({"t"}), frozenset(range(8))))  # someone removed ours
    d.feed(ThrottlesObserved(ThrottleSet(), frozenset({"t"}), frozenset(range(8))))  # confirmed: set again
    d.feed(Cancel("r1", partitions=(tp(0),)))  # already completed: skipped
    d.feed(Pause())
    d.tick()
    d.feed(Resume())
    d.feed(Cancel("r1", partitions=(tp(3),), rollback=True))
    d.feed(Submit("r2", (PartitionTarget("t", 4, (4, 5, 6)), PartitionTarget("t", 2, (1, 2, 3))), steps="kip-435"))
    d.feed(Submit("bad", (PartitionTarget("nope", 0, (1,)),)))
    d.feed(Observation(denied={"secret": "User:engine is not authorized to Describe on topic secret "
                                         "(TOPIC_AUTHORIZATION_FAILED): grant it with: kafka-acls.sh ..."}))
    d.feed(Submit("hidden", (PartitionTarget("secret", 0, (1, 2, 3)),)))  # rejected, naming the grant
    d.feed(ChangeThrottle(20_000_000))
    d.feed(LooksPaced("looks paced by the request budget: broker 1 at 20/s"))  # the decider's reads wait
    d.feed(LooksPaced(None, None, 12, 0.95, 41.5))  # and no longer do: what the pacing came to
    d.feed(LooksPaced("looks paced by the request budget: broker 1 at 20/s"))  # and again
    for _ in range(3):
        d.tick()
        for t in c.in_progress()[:1]:
            c.finish(t)
        d.observe()
    d.now = 10_000.0  # from here on a clock, which is then set back 600 s (ClockSetBack)
    d.tick()
    d.now -= 600.0
    d.tick()
    d.feed(Observation(topics={"t": None}, now=d.now))  # a lagging broker's look (TopicMissing): the next clears it
    d.feed(Submit("r3", (PartitionTarget("t", 5, (7, 6, 5)),)))
    d.tick()
    assert d.state.steps and not d.state.throttles.is_empty(), "the story ends with steps and throttles in force"
    return d


# --- topics ------------------------------------------------------------------------------------------


def test_topics_create_twice_is_harmless_and_gives_the_layout(broker, prefix):
    conf = {"bootstrap.servers": broker.bootstrap}
    first = create(conf, prefix)
    second = create(conf, prefix)
    names = Topics.named(prefix)
    assert first == sorted((n, "created") for n in names)
    assert second == sorted((n, "exists") for n in names)
    admin = AdminClient(conf)
    metadata = admin.list_topics(timeout=10)
    for spec, name in ((COMMANDS, names.commands), (EVENTS, names.events), (DEAD_LETTERS, names.dead_letters)):
        assert len(metadata.topics[name].partitions) == spec.partitions
    resource = ConfigResource(ConfigResource.Type.TOPIC, names.events)
    configs = admin.describe_configs([resource])[resource].result()
    assert {k: configs[k].value for k in EVENTS.config} == dict(EVENTS.config)


def test_an_events_topic_with_several_partitions_is_refused(broker, prefix):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(prefix + "events", 4, 1)])[prefix + "events"].result()
    with pytest.raises(TopicsError, match=f"{prefix}events has 4 partitions"):
        create({"bootstrap.servers": broker.bootstrap}, prefix)


# --- publish, then replay ---------------------------------------------------------------------------


def test_replay_of_a_published_run_gives_the_cores_state(broker, topics, prefix):
    d = story()
    with EventWriter(config=config(broker), prefix=prefix, profile=EMBEDDED) as writer:
        writer.append(d.events)
    result = replay(config(broker), prefix=prefix, profile=EMBEDDED)
    assert result.events == len(d.events) and result.next_offset == len(d.events)
    assert result.state == d.state
    assert summarize(result.state) == summarize(d.state)
    assert not result.dead_letters and result.duplicates == 0


def test_replay_until_an_offset_or_a_time_folds_that_prefix(broker, topics, prefix):
    d = story()
    half = len(d.events) // 2
    t0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
    writer = EventWriter(config=config(broker), prefix=prefix, profile=EMBEDDED)
    writer.append(d.events[:half], recorded_at=t0)
    writer.append(d.events[half:], recorded_at=t0 + timedelta(seconds=1))
    by_offset = replay(config(broker), prefix=prefix, profile=EMBEDDED, until_offset=half)
    by_time = replay(config(broker), prefix=prefix, profile=EMBEDDED, until_time=t0 + timedelta(milliseconds=999))
    want = fold(d.events[:half])
    assert by_offset.state == want and by_offset.events == half
    assert by_time.state == want and by_time.events == half and by_time.last_recorded_at == t0
    assert want != d.state


def test_replay_applies_a_redelivered_event_once_and_skips_undecodable_messages(broker, topics, prefix):
    d = story()
    envelopes = [EventEnvelope(new_id(), datetime(2030, 1, 1, tzinfo=timezone.utc), e) for e in d.events]
    writer = EventWriter(config=config(broker), prefix=prefix, profile=EMBEDDED)
    writer.write(envelopes[:10] + [envelopes[9]])  # the 10th event written twice
    _produce_raw(broker, topics.events, [b"garbage"])
    writer.write(envelopes[10:])
    result = replay(config(broker), prefix=prefix, profile=EMBEDDED)
    assert result.state == d.state
    assert result.duplicates == 1 and result.events == len(d.events)
    assert [(x.source_offset, x.value) for x in result.dead_letters] == [(11, b"garbage")]
    assert result.next_offset == len(d.events) + 2


def test_replay_reads_schema_registry_framed_events(broker, topics, prefix):
    pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka.schema_registry import SchemaRegistryClient

    registry = SchemaRegistryClient.new_client({"url": "mock://eventlog-test"})
    d = story()
    EventWriter(config=config(broker), prefix=prefix, profile=EMBEDDED, registry=registry).append(d.events)
    assert replay(config(broker), prefix=prefix, profile=EMBEDDED, registry=registry).state == d.state


# --- the publisher -------------------------------------------------------------------------------------


def test_publisher_writes_each_command_keyed_and_with_its_id(broker, topics, prefix):
    targets = (PartitionTarget("t", 0, (1, 2, 3)), PartitionTarget("t", 1, (2, 3, 4)))
    with Publisher(config=config(broker), prefix=prefix, profile=EMBEDDED, issued_by="tester") as p:
        rid = p.submit(targets, throttle_rate=1000)
        ids = [p.cancel(rid, [tp(1)], rollback=True), p.change_limits({"max_partitions_in_flight": 7}),
               p.change_throttle(None), p.pause(), p.resume()]
    read = list(read_topic(config(broker), topics.commands, decoder_for(CommandEnvelope), _fail,
                           group_id="kreassign.reader", profile=EMBEDDED))
    by_key: dict[bytes, list] = {}
    for m in sorted(read, key=lambda m: (m.partition, m.offset)):
        by_key.setdefault(m.key, []).append(m.value)
    submit, cancel = by_key[rid.encode()]
    assert submit.payload == Submit(rid, targets, 1000, submit.id)
    assert cancel.payload == Cancel(rid, (tp(1),), True, ids[0]) and cancel.id == ids[0]
    control = by_key[b"control"]
    assert [c.payload for c in control] == [
        ChangeLimits({"max_partitions_in_flight": 7}, ids[1]), ChangeThrottle(None, ids[2]), Pause(ids[3]),
        Resume(ids[4]),
    ]
    assert {e.issued_by for e in (submit, cancel, *control)} == {"tester"}


def test_publisher_refuses_a_missing_topic_instead_of_auto_creating_it(broker, prefix):
    with pytest.raises(PublishError, match=f"topic {prefix}commands does not exist"):
        Publisher(config=config(broker), prefix=prefix, profile=EMBEDDED)
    assert prefix + "commands" not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


# --- dead letters ---------------------------------------------------------------------------------------


def test_bad_messages_go_to_the_dead_letter_topic_and_valid_ones_around_them_are_processed(broker, topics):
    codec = codec_for(CommandEnvelope)
    valid = [CommandEnvelope(new_id(), datetime(2030, 1, 1, tzinfo=timezone.utc), "t", Pause(str(i))) for i in range(3)]
    good = [codec.encode(v) for v in valid]
    unknown = good[0][:2] + bytes(8) + good[0][10:]
    bad = {1: b"not avro at all", 3: good[1][:-4], 4: unknown, 5: None}
    sequence = [good[0], bad[1], good[1], bad[3], bad[4], bad[5], good[2]]
    _produce_raw(broker, topics.commands, sequence, partition=0)

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    dead = DeadLetterWriter(lambda t, k, v: producer.produce(t, key=k, value=v), topics.dead_letters)
    processed = [m.value for m in read_topic(config(broker), topics.commands, codec.decode, dead, group_id="kreassign.reader",
                                                  profile=EMBEDDED)]
    assert producer.flush(10) == 0
    assert processed == valid and dead.count == 4

    letters = [m.value for m in read_topic(config(broker), topics.dead_letters, read_dead_letter, _fail,
                                           group_id="kreassign.reader", profile=EMBEDDED)]
    assert [(x.source_topic, x.source_partition, x.source_offset, x.value) for x in letters] == [
        (topics.commands, 0, offset, bad[offset]) for offset in (1, 3, 4, 5)
    ]
    reasons = [x.reason for x in letters]
    assert reasons[0].startswith("not Avro single-object encoding")
    assert reasons[1] == "truncated body"
    assert reasons[2].startswith("unknown schema fingerprint 0000000000000000")
    assert reasons[3] == "empty message (no value)"


def _produce_raw(broker, topic: str, values, partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        if partition is None:
            producer.produce(topic, value=v)
        else:
            producer.produce(topic, value=v, partition=partition)
    assert producer.flush(10) == 0


def _fail(letter) -> None:
    raise AssertionError(f"unexpected dead letter: {letter}")


def test_story_covers_most_event_types():
    kinds = {type(e) for e in story().events}
    missing = {t.__name__ for t in ev.EVENT_TYPES} - {k.__name__ for k in kinds}
    assert len(missing) <= 3, missing  # RequestCompleted, StepAborted, PartitionReverted need a longer story
    assert json.dumps(summarize(story().state))  # the summary is JSON as it is
