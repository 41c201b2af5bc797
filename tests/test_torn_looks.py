"""Issue 27, defect 8: a look torn by metadata lag. What is in progress comes from the controller
(ListPartitionReassignments), the replicas and the configs from a broker's metadata, which lags it
(measured on Kafka 4.0: ``replicas=(2,4,1,3), isr={1,2,3}``, nothing in progress, 0.64 s before the
broker showed ``(2,4,1)``). Such a look must never fail a healthy step nor correct a throttle that is
as the log says; a change another tool really made still fails the step once a later look confirms it.

The core on the unforgiving fake cluster (the torn look handed in as the adapter would report it), the
decider on the simulated cluster whose brokers lag (in process, virtual time), and the decider through
the real Kafka adapter against the simulated cluster's Kafka front with a lagging broker."""

from __future__ import annotations

import time

import pytest

from engine.core import events as ev
from engine.core.commands import Observation, PartitionTarget, Submit, ThrottlesObserved
from engine.core.decide import METADATA_SETTLE
from engine.core.partition import PartitionState, TopicPartition
from engine.core.state import COMPLETED
from engine.core.throttles import ThrottleSet
from tests.fake_cluster import Driver, FakeCluster

TP = TopicPartition("t", 0)


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def started(cr=(2, 1, 3), tr=(2, 4, 1)):
    """One step in flight on the fake cluster: CR -> TR (the incident's partition: adds 4, drops 3)."""
    c = FakeCluster({TP: cr}, range(5))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, tr),)))
    d.tick()
    assert d.state.steps[TP].started and c.in_progress() == [TP]
    return c, d


def look(d, replicas, isr, leader, adding=(), removing=()):
    """One observation of the partition as an adapter reports it (brokers and topics as the fake has them)."""
    full = d.cluster.observation({TP})
    d.feed(Observation(full.brokers, full.topics, {TP: PartitionState(tuple(replicas), frozenset(isr), leader,
                                                                        None, tuple(adding), tuple(removing))}, d.now))


def test_a_step_kafka_completed_seen_through_a_lagging_broker_is_not_failed():
    c, d = started()
    c.finish(TP)  # the controller completed it: nothing in progress
    d.now += 0.1
    look(d, (2, 4, 1, 3), {1, 2, 3}, 2)  # the broker's metadata still has RS and the old ISR: torn
    assert not of_type(d.events, ev.StepFailed), of_type(d.events, ev.StepFailed)
    assert TP in d.state.steps
    d.now += 0.64
    d.observe()  # the broker caught up
    assert of_type(d.events, ev.StepCompleted) and not of_type(d.events, ev.StepFailed)
    assert d.state.partitions[TP].status == COMPLETED and c.assignment()[TP] == (2, 4, 1)


def test_the_torn_look_seen_again_within_the_settle_time_still_fails_nothing():
    c, d = started()
    c.finish(TP)
    for dt in (0.1, 1.0, 1.0, 1.0, 1.0):  # four seconds of the same stale metadata
        d.now += dt
        look(d, (2, 4, 1, 3), {1, 2, 3}, 2)
    assert not of_type(d.events, ev.StepFailed)
    d.now += 1.0
    d.observe()
    assert of_type(d.events, ev.StepCompleted) and not of_type(d.events, ev.StepFailed)


def test_a_change_another_tool_made_fails_the_step_once_a_later_look_confirms_it():
    c, d = started()
    c.targets.clear()  # another tool moved the partition elsewhere, and it completed
    c.parts[TP] = PartitionState((2, 0, 1), frozenset({0, 1, 2}), 2)
    d.now += 0.1
    d.observe()
    assert not of_type(d.events, ev.StepFailed)  # one look proves nothing yet
    d.now += METADATA_SETTLE - 0.2
    d.observe()
    assert not of_type(d.events, ev.StepFailed)
    d.now += 0.2
    d.observe()
    failed = of_type(d.events, ev.StepFailed)
    assert len(failed) == 1 and "replicas changed outside kreassign to [2, 0, 1]" in failed[0].reason


def test_without_a_clock_the_next_look_confirms_a_change():
    c, d = started()
    d.now = None
    c.targets.clear()
    c.parts[TP] = PartitionState((2, 0, 1), frozenset({0, 1, 2}), 2)
    d.observe()
    assert not of_type(d.events, ev.StepFailed)
    d.observe()
    assert len(of_type(d.events, ev.StepFailed)) == 1


def test_a_throttle_removal_read_back_before_it_reached_the_broker_is_no_drift():
    c, d = started()
    force = d.state.throttles
    assert not force.is_empty()
    c.finish(TP)
    d.now += 0.5
    d.observe()  # completed: its throttles are removed
    assert d.state.throttles.is_empty() and c.throttle_set().leader == frozenset()
    topics, brokers = frozenset({"t"}), frozenset(range(5))
    d.now += 0.1
    d.feed(ThrottlesObserved(force, topics, brokers, d.now))  # a broker that has not applied the removal yet
    assert not of_type(d.events, ev.ThrottlesDrifted)
    differed = of_type(d.events, ev.ThrottlesDiffered)
    assert differed and differed[-1].unexpected.leader == force.leader
    d.now += METADATA_SETTLE
    d.feed(ThrottlesObserved(ThrottleSet(), topics, brokers, d.now))  # it has now: nothing was wrong
    assert not of_type(d.events, ev.ThrottlesDrifted) and d.state.throttles_differed is None
    removals = [t for op, t in c.throttle_calls if op == "remove"]
    assert len(removals) == 1  # nothing removed twice


def test_a_throttle_another_tool_removed_is_set_again_once_a_later_read_back_confirms_it():
    c, d = started()
    force = d.state.throttles
    topics, brokers = frozenset({"t"}), frozenset(range(5))
    c.throttles = {"leader": set(), "follower": set(), "brokers_l": set(), "brokers_f": set()}
    d.now += 1
    d.feed(ThrottlesObserved(c.throttle_set(), topics, brokers, d.now))
    assert not of_type(d.events, ev.ThrottlesDrifted)
    d.now += METADATA_SETTLE - 1
    d.feed(ThrottlesObserved(c.throttle_set(), topics, brokers, d.now))
    assert not of_type(d.events, ev.ThrottlesDrifted)  # too soon after the first: not judged yet
    d.now += 1
    d.feed(ThrottlesObserved(c.throttle_set(), topics, brokers, d.now))
    drifted = of_type(d.events, ev.ThrottlesDrifted)
    assert len(drifted) == 1 and drifted[0].missing.follower == force.follower
    assert c.throttles["follower"] == set(force.follower)  # set again


# --- the simulated cluster's brokers lag the controller ----------------------------------------------


def lagging_run(decider_cluster, sim_cluster, targets, advance, until=600.0, verify=1.0):
    from engine.runtime.decider import Decider, MemoryLog

    log = MemoryLog()
    d = Decider(log, decider_cluster, clock=lambda: sim_cluster.time, verify_interval=verify)
    d.recover(None)
    # kip-435's steps (the new preferred leader added alone, then the rest): the most completions, so the
    # most looks a lagging broker can tear
    d.decide(Submit("r", tuple(targets), steps="kip-435"))
    start = sim_cluster.time
    while sim_cluster.time - start < until:
        d.tick()
        r = d.state.requests.get("r")
        if r is not None and r.status == COMPLETED:
            break
        advance()
    return d, [e.payload for e in log.records]


def torn(payloads, rf):
    """Looks that show more replicas than the partition has with nothing in progress: a lagging broker's
    RS beside the controller's answer that nothing is in progress."""
    return [e for e in payloads if isinstance(e, ev.PartitionObserved) and len(e.state.replicas) > rf
            and not e.state.reassignment_in_progress]


def test_in_process_the_simulated_cluster_serves_torn_looks_and_the_decider_fails_nothing():
    from engine.sim import scenario as S
    from engine.sim.cluster import SimulatedCluster

    sc = S.from_document({
        "seed": 5, "brokers": {"count": 5},
        "topics": [{"name": "t", "partitions": 6, "replication_factor": 3, "min_insync_replicas": 2,
                    "size": "20 MB", "produce_rate": "10 kB/s"}],
        "reassignment": {"kind": "decommission", "brokers": [4]}, "throttle": "20 MB/s",
    })
    cluster = SimulatedCluster.from_scenario(sc)
    for b in cluster.state.brokers:
        cluster.inject(b, "lag", seconds=3.0)  # every broker's metadata 3 s behind the controller
    d, payloads = lagging_run(cluster, cluster, sc.targets, lambda: cluster.advance(0.5))
    assert d.state.requests["r"].status == COMPLETED
    assert torn(payloads, 3), "the lag produced no torn look"
    assert not of_type(payloads, ev.StepFailed), of_type(payloads, ev.StepFailed)
    assert not of_type(payloads, ev.ThrottlesDrifted), of_type(payloads, ev.ThrottlesDrifted)
    s = cluster.state
    assert all(s.partitions[t.tp].replicas == t.replicas for t in sc.targets) and s.throttles.is_empty()


def test_through_the_kafka_adapter_a_lagging_broker_fails_no_step_and_drifts_no_throttle():
    """The real adapter (confluent-kafka and kafka-python) against the Kafka front, every broker's
    metadata 1.5 s behind the controller: the decider runs on the wall clock, the cluster at speed 1."""
    from engine.cluster.kafka import KafkaCluster
    from engine.kafka.client_config import ClientConfig
    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer

    sc = S.from_document({
        "seed": 7, "brokers": {"count": 4},
        "topics": [{"name": "t", "partitions": 4, "replication_factor": 3, "min_insync_replicas": 2,
                    "size": "5 MB"}],
        "reassignment": {"kind": "decommission", "brokers": [4]}, "throttle": "50 MB/s",
    })
    sim = SimServer(sc, speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    try:
        with sim.lock:
            for b in sim.cluster.state.brokers:
                sim.cluster.inject(b, "lag", seconds=1.5)

        class Wall:
            time = property(lambda self: time.time())

        def pause():
            time.sleep(0.2)

        d, payloads = lagging_run(cluster, Wall(), sc.targets, pause, until=120, verify=0.5)
        assert d.state.requests["r"].status == COMPLETED
        assert torn(payloads, 3), "the lag produced no torn look"
        assert not of_type(payloads, ev.StepFailed), of_type(payloads, ev.StepFailed)
        assert not of_type(payloads, ev.ThrottlesDrifted), of_type(payloads, ev.ThrottlesDrifted)
        with sim.lock:
            s = sim.cluster.state
            assert all(s.partitions[t.tp].replicas == t.replicas for t in sc.targets) and s.throttles.is_empty()
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


def test_kreassign_topics_create_waits_for_the_topics_to_reach_a_lagging_brokers_metadata():
    """``kreassign topics create`` against brokers whose metadata trails the controller by 1.5 s: the
    layout check right after CreateTopics must not call the topics just created missing."""
    from engine.kafka.topics import LAYOUT, create
    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer

    sim = SimServer(S.from_document({"name": "topics", "brokers": {"count": 3},
                                     "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}]}), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    try:
        with sim.lock:
            for b in sim.cluster.state.brokers:
                sim.cluster.inject(b, "lag", seconds=1.5)
        t = time.monotonic()
        outcome = create({"bootstrap.servers": front.bootstrap}, "lag.", replication_factor=3, timeout=20)
        assert sorted(name for name, _ in outcome) == sorted("lag." + s.suffix for s in LAYOUT)
        assert {what for _, what in outcome} == {"created"}
        assert 1.0 < time.monotonic() - t < 20  # it waited for the lagging metadata
        with sim.lock:
            assert sim.cluster.state.topics["lag.events"].partitions == 1
    finally:
        front.shutdown()
        sim.shutdown()


def test_a_look_from_before_the_last_step_is_not_planned_from():
    """The partition completed a step (its TR recorded), then a broker that had not applied it shows the
    step's RS again: planned from that, the next step would copy the dropped replica back."""
    c = FakeCluster({TP: (2, 1, 3)}, range(7))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, (2, 5, 6)),)))
    d.tick()
    first = d.state.steps[TP].step
    assert first.dr  # it drops a replica
    c.finish(TP)
    d.now += 0.5
    d.observe()
    assert of_type(d.events, ev.StepCompleted)
    stale = first.tr + first.dr  # the step's RS, as the lagging broker still has it
    d.now += 0.2
    look(d, stale, set(stale), first.tr[0])
    assert d.state.observed[TP].replicas == first.tr  # set aside
    d.tick()
    second = [e for e in of_type(d.events, ev.StepPlanned) if e.number == 2]
    assert second and second[0].step.cr == first.tr, second
    assert not set(second[0].step.tr) & set(first.dr)  # nothing dropped is copied back


# --- the review's finding 2: a topic absent from one broker's metadata is not a deleted topic ---------------


def moving(n=4, ids=None):
    """Steps in flight on topic t (brokers 1, 2, 3 -> 1, 2, 4): two start (the default caps)."""
    c = FakeCluster({TopicPartition("t", i): (1, 2, 3) for i in range(n)}, range(1, 5))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", tuple(PartitionTarget("t", i, (1, 2, 4)) for i in range(n))))
    d.tick()
    assert len(d.state.steps) == 2
    return c, d


def absent(d, topic_info=None):
    """A look whose broker answers UNKNOWN_TOPIC_OR_PARTITION for t (``topic_info``: or shows another t)."""
    full = d.cluster.observation(None)
    parts = {} if topic_info is None else full.partitions
    d.feed(Observation(full.brokers, {"t": topic_info}, parts, d.now))


def test_one_look_from_a_broker_that_has_not_seen_the_topic_ends_nothing():
    """deleted_core.py of the review: one such look failed every step in flight and ended the request
    ("completed", its partitions cancelled) while its reassignments kept running on Kafka, unowned."""
    c, d = moving()
    d.now += 1
    absent(d)
    assert of_type(d.events, ev.TopicMissing) and not of_type(d.events, ev.StepFailed)
    assert not of_type(d.events, ev.PartitionCancelled) and len(d.state.steps) == 2
    assert d.state.request("r").status != COMPLETED
    d.now += 1
    d.observe()  # the next look (another broker) shows it: what was recorded is cleared
    assert "t" not in d.state.missing and "t" in d.state.topics
    d.run()
    assert all(r == (1, 2, 4) for r in c.assignment().values())
    assert not of_type(d.events, ev.StepFailed) and d.state.request("r").status == COMPLETED


def test_looks_alternating_with_a_lagging_broker_never_end_the_request():
    """deleted_repro.py of the review: brokers 2 and 3 lag 3 s behind the topic's creation; the looks go
    to either, so they alternate between the topic and no topic: none may end it."""
    c, d = moving()
    for i in range(20):
        d.now += 1.5
        absent(d) if i % 2 == 0 else d.observe()
    assert not of_type(d.events, ev.StepFailed) and len(d.state.steps) == 2
    assert not of_type(d.events, ev.PartitionCancelled)


def test_a_topic_still_absent_a_settle_time_later_was_deleted():
    c, d = moving()
    d.now += 1
    absent(d)
    d.now += METADATA_SETTLE - 0.5
    absent(d)  # too soon to believe it
    assert not of_type(d.events, ev.StepFailed)
    d.now += 0.5
    absent(d)
    failed = of_type(d.events, ev.StepFailed)
    assert len(failed) == 2 and {e.reason for e in failed} == {"topic t was deleted"}
    ended = [e for e in of_type(d.events, ev.PartitionCancelled) if e.final]
    assert len(ended) == 4 and {e.reason for e in ended} == {"topic t was deleted"}
    assert "t" not in d.state.topics and "t" not in d.state.missing


def test_without_a_clock_the_next_look_confirms_a_deleted_topic():
    c, d = moving()
    d.now = None
    absent(d)
    assert not of_type(d.events, ev.StepFailed)
    absent(d)
    assert len(of_type(d.events, ev.StepFailed)) == 2


def test_a_topic_created_again_under_its_name_is_told_by_its_id_and_still_confirmed():
    """Topic ids (DescribeTopicPartitions, Metadata v10+): a look showing t with another id shows another
    topic; a look showing the old id again (a lagging broker) is no reason to end anything at once."""
    c, d = moving()
    info = d.state.topics["t"]
    d.feed(Observation(None, {"t": info._replace(topic_id="a" * 32)}, {}, d.now))
    assert d.state.topics["t"].topic_id == "a" * 32
    d.now += 1
    d.feed(Observation(None, {"t": info}, {}, d.now))  # a look that gives no id says nothing of it
    assert d.state.topics["t"].topic_id == "a" * 32 and not of_type(d.events, ev.TopicMissing)
    d.now += 1
    other = info._replace(topic_id="b" * 32)
    absent(d, other)  # another topic t: its partitions are not recorded as this request's
    [missing] = of_type(d.events, ev.TopicMissing)
    assert missing.topic_id == "b" * 32 and not of_type(d.events, ev.StepFailed)
    d.now += METADATA_SETTLE
    absent(d, other)
    failed = of_type(d.events, ev.StepFailed)
    assert len(failed) == 2 and all("deleted and created again" in e.reason for e in failed)
    assert d.state.topics["t"].topic_id == "b" * 32 and "t" not in d.state.missing
    d.now += 1
    d.feed(Observation(None, {"t": info._replace(topic_id="a" * 32)}, {}, d.now))  # a lagging broker: old id
    assert d.state.missing.get("t") == d.now and d.state.topics["t"].topic_id == "b" * 32


def test_what_a_missing_topic_recorded_is_the_fold_of_the_log():
    from engine.core.state import fold

    c, d = moving()
    d.now += 1
    absent(d)
    assert fold(d.events).missing == d.state.missing and dict(d.state.missing) == {"t": d.now}


def test_the_kafka_adapter_gives_each_topic_its_id_and_unclean_election_through_either_look():
    """Through the simulated cluster's Kafka front: a look of whole topics (Metadata, confluent-kafka) and a
    look of some partitions (DescribeTopicPartitions, kafka-python) give the same topic id (as Kafka writes it,
    22 URL-safe base64 characters, whichever client's type), and unclean.leader.election.enable set by AlterConfigs reaches both the
    simulated controller (a cancel then reverts uncleanly) and the topic's info (docs/algorithm.md, 4)."""
    from engine.cluster.kafka import KafkaCluster
    from engine.kafka.client_config import ClientConfig
    from tests.sim_helpers import kafka_front

    doc = {"seed": 1, "brokers": {"count": 3},
           "topics": [{"name": "t", "partitions": 2, "replication_factor": 2, "size": "1 MB"}], "throttle": "none"}
    with kafka_front(doc, 1) as front:
        cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
        try:
            _ids_and_unclean(front, cluster)
        finally:
            cluster.close()


def _ids_and_unclean(front, cluster):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    sim = front.sim
    whole = cluster.observe(None)
    some = cluster.observe([TopicPartition("t", 1)])
    ids = {whole.topics["t"].topic_id, some.topics["t"].topic_id}
    assert len(ids) == 1 and len(ids.pop()) == 22, (whole.topics, some.topics)
    assert not whole.topics["t"].unclean_leader_election
    admin = AdminClient({"bootstrap.servers": front.bootstrap})
    entry = ConfigEntry("unclean.leader.election.enable", "true",
                        incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "t",
                                                             incremental_configs=[entry])]).values():
        f.result(timeout=10)
    with sim.lock:
        assert sim.cluster.state.topics["t"].unclean_leader_election
    cluster.throttles(["t"], [])  # a read-back refreshes the topic's configs (else every 30 s)
    assert cluster.observe([TopicPartition("t", 0)]).topics["t"].unclean_leader_election


# --- leader epochs: a look older than the one recorded, however long after (the review's finding 7) --------------


def epoch_started(cr=(2, 4, 1), tr=(2, 4, 6), topic_ids=None):
    """One step in flight on a fake cluster whose partitions carry KRaft's leader epochs."""
    c = FakeCluster({TP: cr}, range(1, 7), epochs=True, topic_ids=topic_ids)
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, tr),)))
    d.tick()
    assert d.state.steps[TP].started and c.in_progress() == [TP]
    return c, d


def feed_look(d, p):
    full = d.cluster.observation({TP})
    return d.feed(Observation(full.brokers, full.topics, {TP: p}, d.now))


def test_a_look_with_a_lower_leader_epoch_than_recorded_is_set_aside_however_late():
    """The review's stale_core.py: step (2,4,1) -> (2,4,6) completes (dropping 1 bumps the epoch); 6 s later,
    past METADATA_SETTLE, a broker that has not applied the completion answers (2,4,6,1), nothing in progress.
    The old rule accepted it: the next request was planned from it as a metadata-only step, and Kafka then
    copied 1 in full, without a throttle entry, outside every cap. Its epoch is lower than the one recorded."""
    c, d = epoch_started()
    stale = c.parts[TP]._replace(adding=(), removing=())  # RS (2,4,6,1) as a lagging broker keeps it
    c.finish(TP)
    d.now += 0.5
    d.observe()
    assert of_type(d.events, ev.StepCompleted) and d.state.observed[TP].replicas == (2, 4, 6)
    assert stale.leader_epoch < d.state.observed[TP].leader_epoch
    d.feed(Submit("r2", (PartitionTarget("t", 0, (2, 4, 1)),)))  # the operator moves it back
    d.now += 6.0
    assert feed_look(d, stale) == []  # set aside: nothing recorded, nothing judged
    assert d.state.observed[TP].replicas == (2, 4, 6)
    d.tick()
    (planned,) = [e for e in of_type(d.events, ev.StepPlanned) if e.request_id == "r2"]
    assert planned.step.cr == (2, 4, 6) and planned.step.nr == (1,)  # a real copy of 1, throttled
    assert any(e.broker == 1 for e in d.state.throttles.follower)


def test_a_torn_look_at_the_step_epoch_fails_no_step_however_long_the_broker_lags():
    """Kafka completed the step; a broker lags more than METADATA_SETTLE and keeps answering the step's whole RS
    (the controller: nothing in progress). The old rule took the look as confirmed after 5 s and failed the
    healthy step as changed outside kreassign. At the epoch of the recorded look in progress (which adds and
    drops replicas: completing or cancelling it bumps the epoch) it is torn: set aside."""
    c, d = epoch_started()
    in_progress = c.parts[TP]
    assert in_progress.adding == (6,) and in_progress.removing == (1,)
    c.finish(TP)
    torn = in_progress._replace(adding=(), removing=())
    for _ in range(4):
        d.now += 2.0
        feed_look(d, torn)
    assert not of_type(d.events, ev.StepFailed) and d.state.steps[TP].started
    assert d.state.observed[TP] == in_progress
    d.now += 0.5
    d.observe()
    assert of_type(d.events, ev.StepCompleted) and not of_type(d.events, ev.StepFailed)


def test_a_look_without_an_epoch_is_judged_as_before_and_a_cancelled_removal_is_seen():
    """Epochs only order looks that both carry one (librdkafka's Metadata gives none: the settle rules judge
    those), and a reassignment that adds nothing is cancelled to the same replicas at the same epoch: that
    look is the cluster's, not a torn one, and the abort ends."""
    from engine.core.commands import Cancel

    c = FakeCluster({TP: (2, 4, 1)}, range(1, 7), epochs=True)
    c.parts[TP] = c.parts[TP]._replace(isr=frozenset({1, 2}))  # 4 behind: dropping 1 waits for it
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, (2, 4)),)))
    d.tick()
    assert d.state.steps[TP].started and c.parts[TP].adding == () and c.parts[TP].removing == (1,)

    d.feed(Cancel("r"))
    d.now += 0.5
    d.observe()  # CR in CR's own order: metadata from before the step would show it too (seed 9235) ...
    d.now += METADATA_SETTLE
    d.observe()  # ... so it counts once a look METADATA_SETTLE later confirms it
    assert of_type(d.events, ev.StepAborted) and TP not in d.state.steps
    assert d.state.observed[TP].replicas == (2, 4, 1) and not d.state.observed[TP].reassignment_in_progress
    d.now += 1.0
    feed_look(d, c.parts[TP]._replace(leader_epoch=None, isr=frozenset({2, 4})))  # no epoch: recorded
    assert d.state.observed[TP].isr == {2, 4} and d.state.observed[TP].leader_epoch is None


def test_a_topic_made_again_under_the_same_name_starts_its_epochs_anew():
    """A recreated topic's partitions start again at epoch 0: with its new topic id the epochs recorded for the
    old topic are forgotten (else every look at the new topic would be set aside for good, and planned from
    the old topic's replicas)."""
    c, d = epoch_started(topic_ids={"t": "old-id"})
    c.finish(TP)
    d.now += 0.5
    d.observe()
    assert d.state.observed[TP].leader_epoch == 1
    from engine.core.partition import in_sync

    made_again = in_sync((3, 5))._replace(leader_epoch=0)
    d.now += 1.0
    feed_look(d, made_again)  # same topic id: an older look
    assert d.state.observed[TP].replicas == (2, 4, 6)
    c.topic_ids["t"] = "new-id"
    d.now += 1.0
    feed_look(d, made_again)  # another topic t: not believed from one look (a broker may lag)
    assert d.state.topics["t"].topic_id == "old-id" and "t" in d.state.missing
    d.now += METADATA_SETTLE
    feed_look(d, made_again)  # confirmed: the old topic's epochs are forgotten
    assert d.state.topics["t"].topic_id == "new-id" and d.state.observed[TP].leader_epoch is None
    d.now += 1.0
    feed_look(d, made_again)  # the next look records the new topic's partitions from epoch 0
    assert d.state.observed[TP] == made_again


# --- what the fault simulator found beyond the incident -------------------------------------------


def test_an_abort_is_not_ended_on_a_lagging_brokers_whole_rs():
    """Seed 2384: KRaft reverted the aborted step; a lagging broker still shows its whole RS with nothing
    in progress. Ended there, the rollback was planned from replicas the partition no longer had (its
    alter copied more than the limits allowed). The abort ends on the CR the next looks show."""
    from engine.core.commands import Cancel

    c, d = started()
    d.feed(Cancel("r", rollback=True))
    assert d.state.steps[TP].aborting and not c.in_progress()  # reverted to (2, 1, 3)
    d.now += 0.1
    look(d, (2, 4, 1, 3), {1, 2, 3}, 2)  # the step's RS, nothing in progress: torn
    assert not of_type(d.events, ev.StepAborted)
    d.now += 0.6
    d.observe()  # (2, 1, 3): KRaft's revert, in CR's order here, as metadata from before the step would be
    d.now += METADATA_SETTLE
    d.observe()  # confirmed
    aborted = of_type(d.events, ev.StepAborted)
    assert aborted and set(aborted[0].replicas) == {1, 2, 3}


def test_an_abort_is_not_ended_on_metadata_from_before_the_step_that_completed():
    """Seed 9235: the step completed before its cancel reached the controller (nothing in progress to
    cancel); a lagging broker still shows the replicas from before the step, in CR's order, which KRaft's
    revert would not leave (it leaves RS - AR in RS's order). Taken for a revert, the rollback ended as
    done while the partition stood at its TR. A look at CR in CR's order counts once a later one confirms
    it; the next looks here show the TR."""
    from engine.core.commands import Cancel

    c, d = started(cr=(1, 4, 3), tr=(0, 4, 3, 1))  # adds 0 and makes it the leader: revert order (4, 3, 1)
    c.finish(TP)  # completed
    d.feed(Cancel("r", rollback=True))  # the cancel finds nothing in progress
    d.now += 0.1
    look(d, (1, 4, 3), {1, 3, 4}, 1)  # the broker's metadata from before the step
    assert not of_type(d.events, ev.StepAborted)
    d.now += 0.6
    d.observe()
    aborted = of_type(d.events, ev.StepAborted)
    assert aborted and aborted[0].replicas == (0, 4, 3, 1), aborted  # it had completed: rolled back from there
    d.run()
    assert c.assignment()[TP] == (1, 4, 3)


def test_the_rs_of_another_tools_reassignment_that_ended_is_not_planned_from():
    """Seeds 2391 and 6531: another tool's reassignment (adding 4, removing 3) ran for longer than
    METADATA_SETTLE; it ended, and a lagging broker still shows its whole RS with nothing in progress.
    Planned from, the waiting partition's step would copy back the dropped replica. A partition waiting
    for another tool's reassignment is planned again once a look that shows it ended is confirmed."""
    c = FakeCluster({TP: (2, 1, 3)}, range(6))
    d = Driver(c)
    d.now = 1000.0
    c._alter(TP, (2, 4, 1))  # another tool's reassignment
    d.observe()
    d.feed(Submit("r", (PartitionTarget("t", 0, (2, 4, 5)),)))
    assert "not started by kreassign" in d.state.waiting[TP]
    c.finish(TP)  # it ends at (2, 4, 1), having run longer than METADATA_SETTLE
    d.now += METADATA_SETTLE + 1.0
    look(d, (2, 4, 1, 3), {1, 2, 3}, 2)  # the lagging broker: its RS, nothing in progress
    d.tick()
    assert not of_type(d.events, ev.StepPlanned) and "not started by kreassign" in d.state.waiting[TP]
    d.now += 0.6
    d.observe()  # where it ended
    d.tick()
    assert not of_type(d.events, ev.StepPlanned)
    d.now += METADATA_SETTLE
    d.observe()  # confirmed
    d.tick()
    planned = of_type(d.events, ev.StepPlanned)
    assert planned and planned[0].step.cr == (2, 4, 1), planned


def test_a_pure_add_seen_at_its_tr_with_its_new_replica_out_of_the_isr_waits_for_a_confirming_look():
    """Seed 5527: another tool cancelled a step that only adds; its RS is its TR, and a lagging broker
    still shows it, nothing in progress, the new replica out of the ISR. Taken for the step's end, the
    next step's alter copied a replica the cluster had dropped. Kafka ends a step only with its TR in
    sync: such a look counts once a later one confirms it; the next one here shows the revert."""
    c, d = started(cr=(2, 1, 3), tr=(4, 2, 1, 3))  # the new leader first: a step that only adds 4
    step = d.state.steps[TP].step
    assert step.tr == (4, 2, 1, 3) and not step.dr
    c.drop(TP)  # another tool cancels it: back at (2, 1, 3)
    d.now += 0.1
    look(d, (4, 2, 1, 3), {1, 2, 3}, 2)  # the lagging broker: the RS, which is the TR; 4 not in sync
    assert not of_type(d.events, ev.StepCompleted)
    d.now += 0.6
    d.observe()
    assert not of_type(d.events, ev.StepCompleted)
    d.now += METADATA_SETTLE
    d.observe()  # confirmed back at CR: another tool's doing
    failed = of_type(d.events, ev.StepFailed)
    assert failed and "reverted outside kreassign" in failed[0].reason


def test_a_look_at_tr_with_the_controllers_older_answer_in_progress_sets_nothing_aside_for_good():
    """Seen through the Kafka front (tests/test_engine.py's broker death, 2 runs in 5): a look whose replicas
    and epoch come from metadata that already applied the step's completion, (2, 4, 6) at the new epoch, while
    its AR and RR come from an earlier answer of the controller (adding 6, removing 1). Recorded, it looked
    like a reassignment in progress at that epoch, and every later look at the completed partition, the same
    replicas with nothing in progress, was set aside as torn: the step never completed. A look in progress
    whose replicas do not hold its RR is no RS of a reassignment."""
    c, d = epoch_started()
    in_progress = c.parts[TP]
    c.finish(TP)
    done = c.parts[TP]
    assert done.replicas == (2, 4, 6) and done.leader_epoch > in_progress.leader_epoch
    d.now += 0.5
    feed_look(d, done._replace(adding=in_progress.adding, removing=in_progress.removing))  # the mixed look
    assert not of_type(d.events, ev.StepCompleted)
    for _ in range(3):
        d.now += 1.0
        d.observe()
    assert of_type(d.events, ev.StepCompleted) and TP not in d.state.steps


@pytest.mark.parametrize("who", ["kreassign", "another tool"])
def test_a_look_at_the_reverted_replicas_with_the_controllers_older_answer_sets_nothing_aside_for_good(who):
    """The same mixed look after a cancel (a fresh-eyes review of the rule above): KRaft reverted the step to
    RS - AR, (2, 4, 1) at a new epoch, while the controller's earlier answer still says adding 6, removing 1.
    RR is among those replicas, AR is not: no RS of a reassignment. Taken for one, every later look at the
    reverted partition was set aside: the engine's rollback waited for ever for "a reassignment not started by
    kreassign", and another tool's cancel left the step in flight for ever, silently."""
    from engine.core.commands import Cancel

    c, d = epoch_started()
    in_progress = c.parts[TP]
    if who == "kreassign":
        d.feed(Cancel("r", rollback=True))
    else:
        c.drop(TP)
    reverted = c.parts[TP]
    assert set(reverted.replicas) == {1, 2, 4} and reverted.leader_epoch > in_progress.leader_epoch
    d.now += 0.5
    feed_look(d, reverted._replace(adding=in_progress.adding, removing=in_progress.removing))
    for _ in range(5):
        d.now += METADATA_SETTLE
        d.tick()
    if who == "kreassign":
        assert of_type(d.events, ev.StepAborted) and d.state.partitions[TP].status == "reverted"
        assert not d.state.observed[TP].reassignment_in_progress
    else:  # the step failed as reverted, and the partition was planned again
        assert of_type(d.events, ev.StepFailed) and "reverted outside kreassign" in of_type(d.events, ev.StepFailed)[0].reason
        assert len(of_type(d.events, ev.StepPlanned)) == 2


def test_a_late_alter_seen_only_through_a_torn_look_runs_and_counts_against_the_caps():
    """Fault simulator seed 86 with its torn window 12 s later: a step's alter (CR 2,1 -> TR 3,1) goes
    unanswered and lands late; every look for the next seconds is torn: the replicas from a broker whose
    metadata predates the alter (2,1), what is in progress from the controller (adding 3, removing 2).
    Kafka's RS always holds AR and RR; this look's replicas do not, and its RS is the two put together
    (2,1,3): the step's own reassignment. Taken for another tool's, the step was given up once its alter
    could no longer land (ALTER_MAY_LAND), its copies counted nowhere, and the next step copied out of
    broker 2 beside it, past broker 2's outgoing cap of one move."""
    from engine.core.commands import ChangeLimits, Tick
    from engine.core.decide import ALTER_MAY_LAND

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    c = FakeCluster({a: (2, 1), b: (2, 0)}, range(4))
    d = Driver(c)
    d.now = 100.0
    d.feed(ChangeLimits({"max_outgoing_moves_per_broker": 1, "pin_dominant_source": 0}))
    c.unavailable("alter")
    d.feed(Submit("r", (PartitionTarget("t", 0, (3, 1)), PartitionTarget("t", 1, (3, 0)))))
    d.tick()
    (first,) = d.state.steps
    f = d.state.steps[first]
    assert not f.started and not c.in_progress()
    c._alter(first, f.step.tr)  # the alter lands late
    assert c.in_progress() == [first]
    full = c.observation({a, b})
    for _ in range(int(ALTER_MAY_LAND) + 3):  # the lagging broker's metadata for longer than an alter may land
        d.now += 1.0
        torn = {tp: PartitionState(tuple(f.step.cr), frozenset(f.step.cr), 2, None, p.adding, p.removing)
                if tp == first else p for tp, p in c.observation({a, b}).partitions.items()}
        d.feed(Observation(full.brokers, full.topics, torn, d.now))
        d.feed(Tick(d.now))
        assert not of_type(d.events, ev.StepFailed), of_type(d.events, ev.StepFailed)
        assert c.in_progress() == [first], c.in_progress()  # nothing else copies out of broker 2
    assert d.state.steps[first].started and of_type(d.events, ev.StepStarted)
    c.finish(first)
    d.run()
    assert c.assignment() == {a: (3, 1), b: (3, 0)}
