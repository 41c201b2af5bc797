"""Scenario files: loading, generators, targets (the balancer's, for the balancing kinds), one-line errors."""

import collections
import json

import pytest
import yaml

from engine.core.balancer import propose, rack_spread_kept
from engine.cli import main
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.partition import TopicPartition
from engine.sim import scenario as S
from engine.core.units import UnitError, parse_duration, parse_rate, parse_size


def doc(**over):
    base = {
        "seed": 3,
        "brokers": {"count": 6, "racks": ["a", "b", "c"]},
        "topics": [{
            "name": "orders", "partitions": 60, "replication_factor": 3, "min_insync_replicas": 2,
            "size": {"distribution": "lognormal", "median": "1 GB", "sigma": 0.8, "max": "20 GB"},
            "produce_rate": "100 kB/s",
        }],
        "reassignment": {"kind": "decommission", "brokers": [2]},
    }
    base.update(over)
    return base


def test_units():
    assert parse_size("2 GB") == 2_000_000_000 and parse_size("1 KiB") == 1024 and parse_size(7) == 7
    assert parse_rate("50 MB/s") == 50_000_000 and parse_rate("1.5MB") == 1_500_000
    assert parse_duration("5m") == 300 and parse_duration("90s") == 90 and parse_duration("2h") == 7200
    for bad in ("fast", "2 parsecs", "-1", True):
        with pytest.raises(UnitError):
            parse_size(bad)


def test_generation_is_deterministic_for_a_seed_and_changes_with_it():
    a, b = S.from_document(doc()), S.from_document(doc())
    assert a == b
    c = S.from_document(doc(seed=4))
    assert c.partitions != a.partitions


def test_generated_topics_are_rack_aware_and_sized():
    s = S.from_document(doc())
    racks = {b.id: b.rack for b in s.brokers}
    assert len(s.partitions) == 60
    assert s.topics["orders"].min_insync_replicas == 2
    for p in s.partitions.values():
        assert len({racks[b] for b in p.replicas}) == 3
        assert 0 < p.size <= 20_000_000_000 and p.produce_rate == 100_000
    # round robin spreads leaders evenly
    leaders = collections.Counter(p.replicas[0] for p in s.partitions.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1


def proposal(scenario, mode, threshold=0.10, **extra):
    """What the balancer proposes for the scenario's cluster, asked directly."""
    return propose(mode, scenario.current(), {b.id: b.rack for b in scenario.brokers},
                   [b.id for b in scenario.brokers if b.alive], {tp: p.size for tp, p in scenario.partitions.items()},
                   threshold=threshold, **extra)


def targets(scenario):
    return {t.tp: t.replicas for t in scenario.targets}


def counts(assignment):
    return collections.Counter(b for replicas in assignment.values() for b in replicas)


def test_decommission_targets_are_the_balancers_and_empty_the_broker_keeping_racks():
    s = S.from_document(doc())
    assert targets(s) == proposal(s, "remove-brokers", remove=[2]).proposed
    racks = {b.id: b.rack for b in s.brokers}
    after = s.target_assignment()
    assert all(2 not in r for r in after.values())
    assert rack_spread_kept(s.current(), after, racks)
    # every partition on the removed broker moves; the others at most change their preferred leader
    assert {tp for tp, p in s.partitions.items() if 2 in p.replicas} <= set(targets(s))
    assert all(set(r) == set(s.partitions[tp].replicas) for tp, r in targets(s).items() if 2 not in s.partitions[tp].replicas)
    assert sum(len(set(r) - set(s.partitions[tp].replicas)) for tp, r in targets(s).items()) == counts(s.current())[2]


def test_decommission_of_a_broker_that_is_down_still_empties_it():
    d = doc()
    d["brokers"] = [{"id": i, "rack": "abc"[(i - 1) % 3], "alive": i != 2} for i in range(1, 7)]
    s = S.from_document(d)
    assert all(2 not in r for r in s.target_assignment().values())


def test_add_broker_targets_are_the_balancers_and_fill_the_new_brokers():
    d = doc(brokers={"count": 9, "racks": ["a", "b", "c"]}, reassignment={"kind": "add-broker", "brokers": [7, 8, 9]})
    d["topics"][0]["partitions"] = 300
    s = S.from_document(d)
    assert all(b not in p.replicas for p in s.partitions.values() for b in (7, 8, 9))  # start empty
    p = proposal(s, "add-brokers", add=[7, 8, 9])
    assert targets(s) == p.proposed and p.balanced
    low, high = p.target
    after = counts(s.target_assignment())
    assert all(low <= after[b] <= high for b in range(1, 10))  # the new brokers hold their share of replicas
    assert rack_spread_kept(s.current(), s.target_assignment(), {b.id: b.rack for b in s.brokers})
    assert s.moved_bytes() == p.bytes_moved


def test_rack_migration_moves_every_replica_of_the_old_rack():
    s = S.from_document(doc(brokers={"count": 9, "racks": ["a", "b", "c"]},
                            reassignment={"kind": "rack-migration", "from_rack": "a", "to_rack": "c"}))
    racks = {b.id: b.rack for b in s.brokers}
    assert all(racks[b] != "c" for p in s.partitions.values() for b in p.replicas)
    assert all(racks[b] != "a" for r in s.target_assignment().values() for b in r)


def test_rebalance_targets_are_the_balancers_and_even_out_replica_counts():
    d = doc(reassignment={"kind": "rebalance"})
    d["topics"][0].update(placement="random", weights={1: 4, 2: 4})
    s = S.from_document(d)
    before = counts(s.current())
    assert max(before.values()) > 1.3 * sum(before.values()) / 6  # the weights made it skewed
    p = proposal(s, "cluster-balance")
    assert targets(s) == p.proposed and p.balanced
    low, high = p.target
    assert all(low <= n <= high for n in counts(s.target_assignment()).values())


def test_rebalance_balances_counts_not_bytes():
    """Even counts, uneven sizes: the balancer (KAFKA-5319) moves no data, at most preferred leaders."""
    s = S.from_document(doc(reassignment={"kind": "rebalance"}))
    assert len(set(counts(s.current()).values())) == 1
    assert s.moved_bytes() == 0
    assert all(set(t.replicas) == set(s.partitions[t.tp].replicas) for t in s.targets)


def test_threshold_percentage_reaches_the_balancer():
    d = doc(reassignment={"kind": "rebalance", "threshold_percentage": 0})
    d["topics"][0].update(placement="random", weights={1: 2})
    s = S.from_document(d)
    assert targets(s) == proposal(s, "cluster-balance", threshold=0.0).proposed
    d["reassignment"]["threshold_percentage"] = 50
    loose = S.from_document(d)
    assert targets(loose) == proposal(loose, "cluster-balance", threshold=0.5).proposed
    assert s.moved_bytes() > loose.moved_bytes()


@pytest.mark.parametrize("kind, flags", [
    ("add-broker", ["--add-brokers", "7,8,9"]),
    ("decommission", ["--remove-brokers", "2"]),
    ("rebalance", ["--cluster-balance"]),
])
def test_targets_are_what_kreassign_balance_proposes_for_the_scenario(tmp_path, capsys, kind, flags):
    d = doc(brokers={"count": 9, "racks": ["a", "b", "c"]},
            reassignment={"kind": kind, **({"brokers": [7, 8, 9] if kind == "add-broker" else [2]}
                                           if kind != "rebalance" else {})})
    d["topics"][0].update(partitions=120, placement="random", weights={1: 3})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["balance", "--scenario", str(path), *flags, "--format", "json"]) == 0
    proposed = json.loads(capsys.readouterr().out)["proposed"]["partitions"]
    s = S.load(str(path))
    assert s.targets and [(t.topic, t.partition, list(t.replicas)) for t in s.targets] == [
        (p["topic"], p["partition"], p["replicas"]) for p in proposed]


def test_explicit_targets_and_snapshot(tmp_path):
    target = tmp_path / "target.json"
    target.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 2]}]}))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({
        "brokers": [{"id": 1, "rack": "x"}, {"id": 2, "rack": "y"}, {"id": 3, "rack": "x", "network_in": "1 GB/s"}],
        "topics": [{"name": "t", "min_insync_replicas": 2, "assignment": [
            {"replicas": [1, 2], "size": "3 GB", "produce_rate": "1 MB/s"}, {"replicas": [2, 1], "size": "1 GB"}]}],
        "reassignment": {"kind": "explicit", "targets_file": "target.json"},
        "throttle": "none", "limits": {"reassignment.parallel.replica.count": 2}, "poll_interval": "2s",
        "faults": [{"at": "1m", "broker": 3, "action": "slow", "factor": 0.5}],
    }))
    s = S.load(str(scenario))
    assert s.throttle is None and s.poll_interval == 2 and s.limits == {"reassignment.parallel.replica.count": 2}
    assert s.brokers[2].network_in == 10**9 and s.faults[0].at == 60
    assert [(t.tp, t.replicas) for t in s.targets] == [(TopicPartition("t", 0), (3, 2))]
    snap = s.snapshot()
    p0 = snap.partitions[TopicPartition("t", 0)]
    assert p0.size_bytes == 3 * 10**9 and p0.isr == {1, 2} and p0.leader == 1
    assert ClusterSnapshot.from_document(json.loads(json.dumps(snap.to_document()))) == snap
    assert snap.observation().partitions[TopicPartition("t", 0)].size_bytes is None


@pytest.mark.parametrize("change, fragment", [
    ({"brokers": []}, "brokers: the list is empty"),
    ({"seed": "x"}, "seed: expected an integer"),
    ({"speed": 3}, "unknown key speed"),
    ({"throttle": "fast"}, "throttle: expected a rate"),
    ({"reassignment": {"kind": "shuffle"}}, "reassignment.kind: expected one of"),
    ({"reassignment": {"kind": "decommission", "brokers": [42]}}, "brokers [42] are not in the scenario"),
    ({"reassignment": {"kind": "rebalance", "threshold_percentage": 150}}, "reassignment.threshold_percentage: expected"),
    ({"reassignment": {"kind": "rack-migration", "from_rack": "a", "to_rack": "b", "threshold_percentage": 5}},
     "reassignment.threshold_percentage: only for"),
    ({"reassignment": {"kind": "decommission", "brokers": [1, 2, 3, 4]}}, "reassignment: the balancer (remove-brokers)"),
    ({"limits": {"max_partitions_in_flight": 0}}, "limits: limit 'max_partitions_in_flight' must be"),
    ({"faults": [{"at": "1m", "broker": 1, "action": "explode"}]}, "faults[0].action"),
    ({"topics": [{"name": "x", "partitions": 3, "replication_factor": 9}]}, "topics[0].replication_factor"),
    ({"topics": [{"name": "x", "partitions": 3, "size": {"distribution": "zipf"}}]}, "topics[0].size.distribution"),
])
def test_bad_scenarios_name_the_problem(change, fragment):
    with pytest.raises(S.ScenarioError) as e:
        S.from_document(doc(**change))
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("brokers: [1, 2\n")
    with pytest.raises(S.ScenarioError, match=r"bad.yaml: not valid YAML at line"):
        S.load(str(bad))
    with pytest.raises(S.ScenarioError, match=r"missing.yaml: No such file"):
        S.load(str(tmp_path / "missing.yaml"))
