"""The engine's whole story on a real Apache Kafka KRaft cluster (testcontainers: one controller, four
brokers on two racks; tests/kafka_cluster.py), with the ``kafka`` broker profile and the real adapter:
submit -> steps -> done, throttles read back from the brokers and topics after every phase; a cancel
with rollback of copies in flight; pause and resume; SIGKILL of the engine mid-move and a restart.

Skips, with the reason, without a Docker engine (it never runs in this project's CI); it is written to
pass on Kafka 4.x as it is, and is run against it outside CI.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from engine.core import events as ev
from engine.kafka.broker_profile import KAFKA
from engine.kafka.client_config import ClientConfig
from engine.cluster.kafka import KafkaCluster
from engine.core.commands import PartitionTarget
from engine.log.eventlog import Publisher
from engine.core.partition import TopicPartition
from engine.kafka.topics import Topics, create
from tests.engine_harness import EventTail, Worker, wait_for

pytestmark = pytest.mark.kafka

TOPIC = "story"
PREFIX = "story."
THROTTLE = 2_000_000  # bytes/s: copies of 4 MB take seconds, so cancels and kills land mid-move


@pytest.fixture(scope="module")
def cluster():
    from tests.kafka_cluster import create_topic, start_cluster

    gen = start_cluster()
    bootstrap = next(gen)
    create_topic(bootstrap, TOPIC, [[1 + (i + k) % 3 for k in range(3)] for i in range(12)], min_isr=2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    chunk = b"x" * 100_000
    for p in range(12):
        for _ in range(40):  # 4 MB a partition
            producer.produce(TOPIC, chunk, partition=p)
            producer.poll(0)
    assert producer.flush(60) == 0
    create({"bootstrap.servers": bootstrap}, PREFIX, replication_factor=3)
    yield SimpleNamespace(bootstrap=bootstrap)
    gen.close()


def tp(i: int) -> TopicPartition:
    return TopicPartition(TOPIC, i)


def adapter(cluster) -> KafkaCluster:
    return KafkaCluster(ClientConfig({}).with_bootstrap(cluster.bootstrap), timeout=20)


def replicas(cluster, parts) -> dict:
    c = adapter(cluster)
    try:
        obs = c.observe(list(parts))
        return {t: p.replicas for t, p in obs.partitions.items()}
    finally:
        c.close()


def throttles_left(cluster) -> object:
    """Every throttle config on the topic and on every broker, read back from Kafka."""
    c = adapter(cluster)
    try:
        return c.throttles([TOPIC], [1, 2, 3, 4])
    finally:
        c.close()


def worker(cluster) -> Worker:
    w = Worker(cluster, PREFIX, "kafka", poll=0.5, broker_profile="kafka")
    w.wait_active(timeout=180)  # Faust's group join on real Kafka: the session timeout at most
    return w


def publisher(cluster) -> Publisher:
    return Publisher(cluster.bootstrap, prefix=PREFIX, profile=KAFKA)


def onto_broker_4(parts) -> tuple[PartitionTarget, ...]:
    """Each partition gives its last replica to broker 4 (and broker 4 leads half of them)."""
    out = []
    for t, r in parts.items():
        target = (4,) + r[:2] if t.partition % 2 else r[:2] + (4,)
        out.append(PartitionTarget(t.topic, t.partition, target))
    return tuple(out)


def test_submit_cancel_pause_kill_and_restart_on_kraft(cluster):
    events = Topics.named(PREFIX).events
    tail = EventTail(cluster, events)
    procs = [worker(cluster)]
    try:
        before = replicas(cluster, [tp(i) for i in range(12)])
        # 1. submit -> steps -> done
        first = {tp(i): before[tp(i)] for i in range(6)}
        with publisher(cluster) as p:
            p.submit(onto_broker_4(first), throttle_rate=THROTTLE, request_id="r1")
        wait_for(lambda: any(isinstance(e, ev.RequestCompleted) and e.request_id == "r1" for e in tail.payloads()),
                 600, "request r1 to complete")
        after = replicas(cluster, list(first))
        assert after == {t.tp: t.replicas for t in onto_broker_4(first)}
        assert throttles_left(cluster).is_empty()
        assert not [e for e in tail.payloads() if isinstance(e, ev.ActionFailed) and e.code.startswith("_")]
        # 2. cancel with rollback of copies in flight
        second = {tp(i): before[tp(i)] for i in range(6, 12)}
        with publisher(cluster) as p:
            p.submit(onto_broker_4(second), throttle_rate=THROTTLE, request_id="r2")
            started = wait_for(lambda: [e.tp for e in tail.payloads(ev.StepStarted) if e.request_id == "r2"], 120,
                               "steps of r2 to start")
            p.cancel("r2", started[:2], rollback=True)
        # 3. pause and resume while the rest of r2 moves
        with publisher(cluster) as p:
            p.pause()
            wait_for(lambda: tail.payloads(ev.Paused), 60, "the pause")
            time.sleep(2)  # nothing new starts while paused (checked below from the log)
            p.resume()
        # 4. SIGKILL mid-move, then a new worker recovers from the log and finishes
        wait_for(lambda: procs[0].active() and procs[0].active()["in_flight"], 120, "a step in flight to kill")
        procs[0].kill()
        procs.append(worker(cluster))
        wait_for(lambda: any(isinstance(e, ev.RequestCompleted) and e.request_id == "r2" for e in tail.payloads()),
                 600, "request r2 to complete after the restart")
        payloads = tail.payloads()
        paused_at = next(i for i, e in enumerate(payloads) if isinstance(e, ev.Paused))
        resumed_at = next(i for i, e in enumerate(payloads) if isinstance(e, ev.Resumed))
        assert not [e for e in payloads[paused_at:resumed_at] if isinstance(e, ev.StepPlanned)]
        final = replicas(cluster, list(second))
        target = {x.tp: x.replicas for x in onto_broker_4(second)}
        cancel_at = next(i for i, e in enumerate(payloads) if isinstance(e, ev.CancelRequested))
        done_before = {e.tp for e in payloads[:cancel_at] if isinstance(e, ev.PartitionCompleted)}
        reverted = {e.tp for e in payloads if isinstance(e, ev.PartitionReverted)}
        assert reverted == set(started[:2]) - done_before  # Kafka's --cancel: only what was in progress
        for t in second:
            # rolled back to the original replicas, order included; everything else at its target
            assert final[t] == (before[t] if t in reverted else target[t]), t
        # nothing left behind: no throttle on the topic or any broker, read back from Kafka
        assert throttles_left(cluster).is_empty()
        assert not [e for e in payloads if isinstance(e, ev.ActionFailed) and e.code.startswith("_")]
    finally:
        tail.close()
        for w in procs:
            w.cleanup()
