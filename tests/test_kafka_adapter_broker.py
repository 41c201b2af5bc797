"""Every ``KafkaCluster`` method against a real process speaking the Kafka protocol: the embedded broker.

tansu cannot reassign partitions, elect leaders or describe log dirs, and it does not keep broker
configs; it answers those with Kafka's own "unsupported" codes. That is accepted here as what it is: a
broker's answer. What must never come back is a refusal by the client library itself (librdkafka's
``_CONFLICT`` for two BROKER resources in one call, ``_INVALID_ARG``, a binding's ``TypeError``): those
happen before anything is sent, on any broker, real Kafka 4.0 included. (librdkafka-side checks are
listed in its ``rdkafka_admin.c``; the measured ones are in ../shared/reference/README.md.)
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from engine.kafka.client_config import ClientConfig
from engine.cluster import Ok, Refused, Unavailable
from engine.cluster.kafka import TRANSIENT_LOCAL_CODES, KafkaCluster
from engine.core.partition import TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet

# Codes that say the broker (not the client) cannot do it: Kafka's UNSUPPORTED_VERSION, and librdkafka's
# _UNSUPPORTED_FEATURE, which it derives from the broker's ApiVersions answer.
BROKER_UNSUPPORTED = {"UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE"}
TRANSIENT_NAMES = ("_TRANSPORT", "_RESOLVE", "_MSG_TIMED_OUT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_NODE_UPDATE",
                   "_WAIT_COORD", "_IN_PROGRESS", "_PREV_IN_PROGRESS", "_TIMED_OUT_QUEUE", "_INTR", "_RETRY")
assert len(TRANSIENT_NAMES) == len(TRANSIENT_LOCAL_CODES)


def broker_answer(result) -> bool:
    """Whether ``result`` is something a broker said (or a wait for one), not a client-side refusal."""
    if isinstance(result, Ok):
        return True
    if isinstance(result, Refused):
        return result.code in BROKER_UNSUPPORTED or not result.code.startswith("_") and result.code != "CLIENT_ERROR"
    assert isinstance(result, Unavailable), result
    text = result.message.split(": ", 1)[1] if result.message.startswith(("BROKER ", "TOPIC ")) else result.message
    return text.startswith(TRANSIENT_NAMES)


@pytest.fixture
def cluster(broker, prefix):
    topic = prefix + "moving"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=10).values():
        f.result()
    c = KafkaCluster(ClientConfig({}).with_bootstrap(broker.bootstrap), timeout=3)
    obs = c.observe([TopicPartition(topic, 0)])
    assert not isinstance(obs, Unavailable), obs
    c.broker_id = obs.brokers[0].id  # tansu names itself; its id is what broker resources must use
    c.topic = topic
    yield c
    c.close()


def test_observe_snapshot_and_sizes_answer(cluster):
    tps = [TopicPartition(cluster.topic, p) for p in range(3)]
    obs = cluster.observe(tps)
    assert set(obs.partitions) == set(tps)
    assert all(p.replicas == (cluster.broker_id,) and p.leader == cluster.broker_id for p in obs.partitions.values())
    assert obs.topics[cluster.topic].partitions == 3
    snap = cluster.snapshot()
    assert not isinstance(snap, Unavailable) and set(tps) <= set(snap.partitions)
    sizes = cluster.sizes(tps)
    assert isinstance(sizes, dict)  # tansu lacks DescribeLogDirs: known sizes are simply absent
    catch_up = cluster.catch_up({tps[0]: (cluster.broker_id, (cluster.broker_id,))})
    assert isinstance(catch_up, dict)


def test_throttles_on_topics_and_on_several_brokers_are_sent_the_way_librdkafka_accepts(cluster):
    b, t = cluster.broker_id, cluster.topic
    one = ThrottleSet(frozenset({ThrottledReplica(t, 0, b)}), frozenset({ThrottledReplica(t, 1, b)}),
                      frozenset({b}), frozenset({b}), 4_000_000)
    assert cluster.apply_throttles(one) == Ok()
    read = cluster.throttles([t], [b])
    assert not isinstance(read, Unavailable), read
    assert read.leader == one.leader and read.follower == one.follower  # tansu keeps topic configs
    assert cluster.remove_throttles(one) == Ok()
    read = cluster.throttles([t], [b])
    assert not read.leader and not read.follower
    # Two brokers in one delta: librdkafka refuses two BROKER resources in one call (_CONFLICT) before
    # sending anything. Broker b+1 does not exist here: waiting for it is a broker answer, a refusal is not.
    two = one._replace(leader_brokers=frozenset({b, b + 1}))
    for result in (cluster.apply_throttles(two), cluster.remove_throttles(two), cluster.throttles([t], [b, b + 1])):
        if isinstance(result, ThrottleSet):
            continue
        assert broker_answer(result), result


def test_reassignment_calls_are_broker_answers(cluster):
    tp = TopicPartition(cluster.topic, 0)
    for name, results in (
        ("alter", cluster.alter_reassignments({tp: (cluster.broker_id,)})),
        ("cancel", cluster.cancel_reassignments([tp])),
        ("elect", cluster.elect_preferred_leaders([tp])),
    ):
        assert set(results) == {tp}, name
        assert broker_answer(results[tp]), (name, results[tp])
