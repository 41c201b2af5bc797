"""``kreassign verify`` and a topic's throttled-replicas list that is the wildcard ``*`` (KIP-73: every replica
of the topic), set outside kreassign: through the Kafka adapter against a sim-cluster's Kafka front (a fresh
CLI process knows no entry of its own under the ``*``), and through the sim-cluster's HTTP API.

The ``*`` is set as an operator would, with confluent-kafka's admin client over the Kafka protocol."""

import json

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from engine.cli import main
from engine.cluster.remote import RemoteCluster
from engine.core.throttles import ThrottleSet
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster
from tests import test_cli_verify_list as base
from tests.engine_harness import SimCluster

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"


@pytest.fixture
def sim(tmp_path):
    s = SimCluster(base.SCENARIO, speed=50, tmp_path=tmp_path)
    try:
        yield s
    finally:
        s.cleanup()


def set_configs(sim, topic: str, names, value: str | None) -> None:
    """SET (or DELETE, value None) the topic's ``names`` over the Kafka front, and check they read back."""
    admin = AdminClient({"bootstrap.servers": sim.kafka[len("kafka://"):]})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.TOPIC, topic,
                              incremental_configs=[ConfigEntry(n, value, incremental_operation=op) for n in names])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    configs = next(iter(described.values())).result()
    assert all(configs[n].value == (value or "") for n in names)


def targets_file(tmp_path) -> str:
    """The scenario's partitions at the replicas they have: nothing to move, only throttles to check."""
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "v", "partition": 0, "replicas": [1, 2]}, {"topic": "v", "partition": 1, "replicas": [2, 3]}]}))
    return str(path)


@pytest.mark.parametrize("through", ["kafka", "http"])
def test_a_wildcard_list_is_a_throttle_left_for_a_reassignment_json_file(sim, tmp_path, capsys, through):
    """Kafka's tool's --verify deletes a topic's throttled-replicas lists, ``*`` included: kreassign verify,
    which removes nothing, counts a ``*`` as left (exit 1), names the topic and the config, says it was set
    outside kreassign and how to delete it. Before: the Kafka adapter read the ``*`` as no entry ("Throttles
    are cleared", exit 0); the sim-cluster's /v1/state failed on it (exit 2)."""
    bootstrap = sim.kafka[len("kafka://"):]
    cluster = sim.kafka if through == "kafka" else "sim+" + sim.url
    common = ["verify", "--bootstrap-server", bootstrap, "--cluster", cluster, "--reassignment-json-file",
              targets_file(tmp_path)]
    assert main(common) == 0
    assert "Throttles are cleared" in capsys.readouterr().out

    set_configs(sim, "v", [LEADER], "*")
    assert main(common) == 1
    out = capsys.readouterr().out
    assert "Reassignment of partition v-0 is completed." in out and "Throttles are cleared" not in out
    assert (f"Throttled replicas still set on topic v: {LEADER} is '*' (every replica of the topic), set outside "
            f"kreassign (by an operator or another tool: kreassign never writes '*')." in out), out
    removal = f"--alter --entity-type topics --entity-name v --delete-config {LEADER}\n"
    assert (f"  To remove: kafka-configs.sh --bootstrap-server {bootstrap} " + removal if through == "kafka"
            else "  To remove: kafka-configs.sh --bootstrap-server HOST:PORT " + removal) in out, out
    assert "Kafka's tool's --verify deletes these configs" in out

    set_configs(sim, "v", [FOLLOWER], "*")
    assert main(common) == 1
    assert f"topic v: {LEADER} and {FOLLOWER} are '*'" in capsys.readouterr().out

    set_configs(sim, "v", [LEADER, FOLLOWER], None)  # the removal the output gives
    assert main(common) == 0
    assert "Throttles are cleared: no throttled replicas on these topics" in capsys.readouterr().out


def test_a_wildcard_list_is_named_not_counted_against_a_request(sim, broker, topics, capsys):
    """With --request the ``*`` is not that request's leftover (kreassign never writes one): named as set outside
    kreassign, exit 0. Another tool's broker rate is counted, as before: alone a ``*`` throttles nothing, with
    a rate it does. Before: nothing about the ``*`` was said."""
    common = base.logged_request(sim.url, broker, topics)
    assert common[-2:] == ["--cluster", "sim+" + sim.url]
    set_configs(sim, "v", [FOLLOWER], "*")
    for cluster in (sim.kafka, "sim+" + sim.url):
        options = [*common[:-1], cluster]
        assert main(["verify", "--request", "req-1", *options]) == 0
        out = capsys.readouterr().out
        assert "Reassignment of partition v-0 is completed." in out
        assert ("Throttles are cleared: no throttled replicas of kreassign's on these topics and no throttle rate "
                "on any broker (the '*' lists set outside kreassign are below)." in out), out
        assert f"Throttled replicas set outside kreassign on topic v: {FOLLOWER} is '*'" in out, out
        assert "Not counted against request req-1: kreassign did not leave it" in out
        assert "still" not in out, out

    stray = ThrottleSet(frozenset(), frozenset(), frozenset(), frozenset({4}), 1_000_000)  # another tool's rate
    RemoteCluster(sim.url).apply_throttles(stray)
    assert main(["verify", "--request", "req-1", *common[:-1], sim.kafka]) == 1
    out = capsys.readouterr().out
    assert "Brokers [4] still have a follower.replication.throttled.rate" in out
    assert f"Throttled replicas set outside kreassign on topic v: {FOLLOWER} is '*'" in out
    RemoteCluster(sim.url).remove_throttles(stray)


def test_the_simulated_cluster_answers_its_wildcard_lists():
    """In process, over HTTP (/v1/state lists a ``*`` as ["*"]) and in ``throttles`` (left out of the entries)."""
    cluster = SimulatedCluster.from_scenario(S.from_document(base.SCENARIO))
    assert cluster.wildcard_throttles(["v"]) == {}
    cluster.set_throttled_replicas("v", "leader", frozenset({"*"}))
    assert cluster.wildcard_throttles(["v", "w"]) == {"v": frozenset({"leader"})}
    assert cluster.throttles(["v"], [1, 2, 3, 4]).is_empty()
