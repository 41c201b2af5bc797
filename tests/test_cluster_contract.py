"""The cluster contract: the same tests against every implementation of ``engine.cluster``.

* ``sim``: the simulated cluster in process (virtual time);
* ``sim-process``: ``kreassign sim-cluster`` as its own process, through ``RemoteCluster``;
* ``kafka-front``: the same process over the Kafka protocol (``--kafka-port 0``), through the real
  Kafka adapter ``KafkaCluster`` (confluent-kafka and kafka-python, as against production);
* ``kafka``: a real KRaft cluster (testcontainers), skipped when no Docker engine answers.

Topic ``contract``: 3 partitions on brokers 1-4 (racks a, a, b, b), replicas
[1, 2], [2, 3], [3, 4]; partition 2 holds data that copies slowly under a throttle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from engine.cluster import Cluster, Ok, Refused
from engine.cluster.remote import RemoteCluster
from engine.core.partition import TopicPartition
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster
from engine.core.throttles import ThrottledReplica, ThrottleSet

TOPIC = "contract"
P0, P1, P2 = (TopicPartition(TOPIC, i) for i in range(3))
RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b"}
SCENARIO = {
    "name": "contract",
    "brokers": [{"id": b, "rack": r, "network_in": "50 MB/s", "network_out": "50 MB/s"} for b, r in RACKS.items()],
    "topics": [{"name": TOPIC, "min_insync_replicas": 1, "assignment": [
        {"replicas": [1, 2], "size": "10 MB"}, {"replicas": [2, 3], "size": "10 MB"},
        {"replicas": [3, 4], "size": "500 MB", "produce_rate": "100 kB/s"}]}],
}


class Harness:
    def __init__(self, cluster: Cluster, wait, virtual: bool, simulated: bool = True):
        self.cluster = cluster
        self._wait = wait
        self.virtual = virtual
        self.simulated = simulated  # the scenario's cluster: its sizes are known

    def until(self, condition, timeout: float = 60.0):
        """Poll ``condition(observation)`` until true (virtual time moves in process)."""
        deadline = time.monotonic() + timeout
        while True:
            obs = self.cluster.observe([P0, P1, P2])
            if not isinstance(obs, Exception) and hasattr(obs, "partitions") and condition(obs):
                return obs
            assert time.monotonic() < deadline, f"condition not met in {timeout}s: {obs}"
            self._wait()


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("contract") / "contract.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return str(path)


@pytest.fixture(scope="module")
def sim_process(scenario_file):
    """(HTTP URL, Kafka bootstrap) of one sim-cluster process, serving both."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "sim-cluster", "--scenario", scenario_file, "--speed", "20",
         "--kafka-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    try:
        line = proc.stdout.readline()
        assert "http://" in line and "Kafka bootstrap " in line, line
        yield line.split(" at ")[1].split()[0], line.split("Kafka bootstrap ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def kafka_bootstrap():
    from tests.kafka_cluster import create_topic, start_cluster

    gen = start_cluster()
    bootstrap = next(gen)
    create_topic(bootstrap, TOPIC, [[1, 2], [2, 3], [3, 4]])
    _produce(bootstrap, P2, 20_000_000)
    yield bootstrap
    gen.close()


def _produce(bootstrap, tp, n_bytes):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    chunk = b"x" * 100_000
    for _ in range(n_bytes // len(chunk)):
        producer.produce(tp.topic, chunk, partition=tp.partition)
        producer.poll(0)
    producer.flush(60)


@pytest.fixture(params=["sim", "sim-process", "kafka-front", pytest.param("kafka", marks=pytest.mark.kafka)])
def harness(request, scenario_file):
    if request.param == "sim":
        cluster = SimulatedCluster.from_scenario(S.load(scenario_file))
        yield Harness(cluster, lambda: cluster.advance(1.0), virtual=True)
    elif request.param in ("sim-process", "kafka-front"):
        url, bootstrap = request.getfixturevalue("sim_process")
        if request.param == "sim-process":
            cluster = RemoteCluster(url)
        else:
            from engine.kafka.client_config import ClientConfig
            from engine.cluster.kafka import KafkaCluster

            cluster = KafkaCluster(ClientConfig({"bootstrap.servers": bootstrap}), timeout=20)
        yield Harness(cluster, lambda: time.sleep(0.05), virtual=False)
        # the process outlives this test: put the contract topic back for the next one
        for tp, replicas in ((P0, (1, 2)), (P1, (2, 3)), (P2, (3, 4))):
            cluster.cancel_reassignments([tp])
            cluster.alter_reassignments({tp: replicas})
        cluster.close()
    else:
        from engine.kafka.client_config import ClientConfig
        from engine.cluster.kafka import KafkaCluster

        bootstrap = request.getfixturevalue("kafka_bootstrap")
        cluster = KafkaCluster(ClientConfig({"bootstrap.servers": bootstrap}), timeout=20)
        yield Harness(cluster, lambda: time.sleep(0.5), virtual=False, simulated=False)
        for tp, replicas in ((P0, (1, 2)), (P1, (2, 3)), (P2, (3, 4))):
            cluster.cancel_reassignments([tp])
            cluster.alter_reassignments({tp: replicas})
        cluster.close()


def _settled(obs, tp, replicas):
    p = obs.partitions[tp]
    return p.replicas == replicas and p.isr >= set(replicas) and not p.reassignment_in_progress


def test_observe_reports_brokers_topics_and_partitions(harness):
    h = harness
    h.until(lambda o: all(_settled(o, tp, r) for tp, r in ((P0, (1, 2)), (P1, (2, 3)), (P2, (3, 4)))))
    obs = h.cluster.observe([P0, TopicPartition("nosuch", 0)])
    assert {(b.id, b.rack, b.alive) for b in obs.brokers} >= {(b, r, True) for b, r in RACKS.items()}
    assert obs.topics[TOPIC].partitions == 3 and obs.topics[TOPIC].min_insync_replicas == 1
    assert obs.topics["nosuch"] is None
    assert set(obs.partitions) == {P0}
    p0 = obs.partitions[P0]
    assert p0.replicas == (1, 2) and p0.isr == {1, 2} and p0.leader in (1, 2) and p0.size_bytes is None


def test_alter_moves_the_partition_and_repeating_it_changes_nothing(harness):
    h = harness
    assert isinstance(h.cluster.alter_reassignments({P0: (3, 4)})[P0], Ok)
    assert isinstance(h.cluster.alter_reassignments({P0: (3, 4)})[P0], Ok)
    h.until(lambda o: _settled(o, P0, (3, 4)))
    assert isinstance(h.cluster.alter_reassignments({P0: (3, 4)})[P0], Ok)
    assert _settled(h.cluster.observe([P0]), P0, (3, 4))


def test_refusals_are_typed(harness):
    c = harness.cluster
    duplicate = c.alter_reassignments({P0: (1, 1)})[P0]
    assert isinstance(duplicate, Refused) and duplicate.code == "INVALID_REPLICA_ASSIGNMENT"
    assert c.alter_reassignments({P0: (1, 99)})[P0].code == "INVALID_REPLICA_ASSIGNMENT"
    missing = TopicPartition(TOPIC, 9)
    assert c.alter_reassignments({missing: (1, 2)})[missing].code == "UNKNOWN_TOPIC_OR_PARTITION"


def test_cancel_reverts_an_in_flight_move_and_cancelling_nothing_is_ok(harness):
    c = harness.cluster
    assert isinstance(c.cancel_reassignments([P1])[P1], Ok)
    slow = ThrottleSet(frozenset(ThrottledReplica(TOPIC, 2, b) for b in (3, 4)),
                       frozenset({ThrottledReplica(TOPIC, 2, 1)}), frozenset({3, 4}), frozenset({1}), 100_000)
    assert isinstance(c.apply_throttles(slow), Ok)
    assert isinstance(c.alter_reassignments({P2: (1, 4)})[P2], Ok)
    obs = harness.until(lambda o: o.partitions[P2].reassignment_in_progress)
    assert obs.partitions[P2].adding == (1,) and obs.partitions[P2].removing == (3,)
    assert isinstance(c.cancel_reassignments([P2])[P2], Ok)
    harness.until(lambda o: _settled(o, P2, (4, 3)) or _settled(o, P2, (3, 4)))
    assert isinstance(c.remove_throttles(slow), Ok)
    assert isinstance(c.remove_throttles(slow), Ok)  # idempotent


def test_preferred_leader_election(harness):
    c = harness.cluster
    c.alter_reassignments({P1: (3, 2)})
    harness.until(lambda o: _settled(o, P1, (3, 2)))
    results = c.elect_preferred_leaders([P1])
    assert isinstance(results[P1], Ok)
    harness.until(lambda o: o.partitions[P1].leader == 3)
    assert isinstance(c.elect_preferred_leaders([P1])[P1], Ok)  # not needed any more: still Ok


def test_snapshot_has_every_partition(harness):
    snap = harness.cluster.snapshot()
    assert set(snap.partitions) >= {P0, P1, P2}
    assert snap.topics[TOPIC].partitions == 3
    if harness.virtual:
        assert snap.partitions[P2].size_bytes == 500_000_000


def test_throttles_read_back_what_was_applied_and_leave_other_entries_alone(harness):
    c = harness.cluster
    ours = ThrottleSet(frozenset({ThrottledReplica(TOPIC, 0, 1), ThrottledReplica(TOPIC, 0, 2)}),
                       frozenset({ThrottledReplica(TOPIC, 0, 3)}), frozenset({1, 2}), frozenset({3}), 7_000_000)
    other = ThrottleSet(frozenset({ThrottledReplica(TOPIC, 1, 2)}), frozenset(), frozenset(), frozenset(), None)
    assert isinstance(c.apply_throttles(other), Ok)  # another tool's entry
    assert isinstance(c.apply_throttles(ours), Ok)
    seen = c.throttles([TOPIC], [1, 2, 3, 4])
    assert isinstance(seen, ThrottleSet), seen
    assert seen.leader == ours.leader | other.leader and seen.follower == ours.follower
    assert seen.leader_brokers == {1, 2} and seen.follower_brokers == {3} and seen.rate == 7_000_000
    # each broker's values as read (the core compares them with the rate in force): 4 has none set
    assert {r.broker: (r.leader, r.follower) for r in seen.rates} == {
        1: (7_000_000, None), 2: (7_000_000, None), 3: (None, 7_000_000)}, seen.rates
    assert isinstance(c.remove_throttles(ours), Ok)
    seen = c.throttles([TOPIC], [1, 2, 3, 4])
    assert seen.leader == other.leader and not seen.follower  # SUBTRACT left the other tool's entry
    assert not seen.leader_brokers and not seen.follower_brokers
    assert isinstance(c.remove_throttles(other), Ok)
    assert c.throttles([TOPIC], [1, 2, 3, 4]).is_empty()


def test_sizes_of_partitions(harness):
    sizes = harness.cluster.sizes([P0, P2, TopicPartition("no-such-topic", 0)])
    assert TopicPartition("no-such-topic", 0) not in sizes
    if harness.simulated:  # the scenario's sizes (DescribeLogDirs through the Kafka front)
        assert sizes[P2] >= 500_000_000 and sizes[P0] >= 10_000_000
    else:  # real Kafka: whatever the test produced, never negative
        assert all(v >= 0 for v in sizes.values())


def test_catch_up_with_no_new_replica_is_the_leaders_log_size(harness):
    # what a new replica would copy: the decider sizes a partition that may start released with it
    c = harness.cluster
    leader = c.observe([P0]).partitions[P0].leader
    whole = c.catch_up({P0: (leader, ())})
    assert isinstance(whole, dict), whole
    if harness.simulated:
        assert whole == {P0: c.sizes([P0])[P0]} and whole[P0] >= 10_000_000
    else:
        assert whole.get(P0, 0) >= 0


def test_catch_up_of_a_copy_in_flight(harness):
    c = harness.cluster
    slow = ThrottleSet(frozenset(ThrottledReplica(TOPIC, 2, b) for b in (3, 4)),
                       frozenset({ThrottledReplica(TOPIC, 2, 1)}), frozenset({3, 4}), frozenset({1}), 1_000_000)
    assert isinstance(c.apply_throttles(slow), Ok)
    assert isinstance(c.alter_reassignments({P2: (1, 4)})[P2], Ok)
    obs = harness.until(lambda o: o.partitions[P2].reassignment_in_progress)
    leader = obs.partitions[P2].leader
    first = c.catch_up({P2: (leader, (1,))})
    assert isinstance(first, dict), first
    if harness.simulated:  # a 500 MB partition at 1 MB/s: far from done, and less behind a moment later
        assert 400_000_000 < first[P2] <= 500_000_000
        deadline = time.monotonic() + 30
        while c.catch_up({P2: (leader, (1,))})[P2] >= first[P2]:
            assert time.monotonic() < deadline, "the copy made no progress"
            harness._wait()
    assert isinstance(c.cancel_reassignments([P2])[P2], Ok)
    assert isinstance(c.remove_throttles(slow), Ok)


def test_a_wildcard_list_set_outside_kreassign_is_answered(harness, request):
    """A throttled-replicas list that is ``*`` (set by an operator: over the Kafka protocol, or in process)
    is answered by ``wildcard_throttles``, and left out of ``throttles``' entries; deleted, it is gone."""
    where = request.node.callspec.params["harness"]
    c = harness.cluster

    def set_follower(value):
        if where == "sim":
            c.set_throttled_replicas(TOPIC, "follower", frozenset({"*"}) if value else frozenset())
            return
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        bootstrap = request.getfixturevalue("kafka_bootstrap" if where == "kafka" else "sim_process")
        bootstrap = bootstrap if where == "kafka" else bootstrap[1]
        op = AlterConfigOpType.SET if value else AlterConfigOpType.DELETE
        entry = ConfigEntry("follower.replication.throttled.replicas", value, incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
        admin = AdminClient({"bootstrap.servers": bootstrap})  # held until answered: its futures end with it
        for future in admin.incremental_alter_configs([resource]).values():
            future.result()

    def until(expected):  # a broker's configs may lag the controller's
        deadline = time.monotonic() + 30
        while (seen := c.wildcard_throttles([TOPIC, "no-such-topic"])) != expected:
            assert time.monotonic() < deadline, seen
            harness._wait()

    assert c.wildcard_throttles([TOPIC]) == {}
    set_follower("*")
    until({TOPIC: frozenset({"follower"})})
    assert not c.throttles([TOPIC], [1, 2, 3, 4]).follower
    set_follower(None)
    until({})
