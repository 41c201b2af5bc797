"""Scenario files: loading, generators, target rules, and one-line errors."""

import collections
import json

import pytest
import yaml

from engine.cluster.snapshot import ClusterSnapshot
from engine.partition import TopicPartition
from engine.sim import scenario as S
from engine.units import UnitError, parse_duration, parse_rate, parse_size


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


def loads(scenario, brokers=None):
    out = collections.Counter()
    for tp, replicas in scenario.target_assignment().items():
        for b in replicas:
            out[b] += scenario.partitions[tp].size
    return out


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


def test_decommission_empties_the_broker_keeping_racks():
    s = S.from_document(doc())
    racks = {b.id: b.rack for b in s.brokers}
    after = s.target_assignment()
    assert all(2 not in r for r in after.values())
    assert all(len({racks[b] for b in r}) == 3 for r in after.values())
    assert {t.tp for t in s.targets} == {tp for tp, p in s.partitions.items() if 2 in p.replicas}
    # in place: every other replica keeps its position
    for t in s.targets:
        before = s.partitions[t.tp].replicas
        assert [b for b in before if b != 2] == [b for b, o in zip(t.replicas, before) if o != 2]


def test_add_broker_fills_new_brokers_to_their_share():
    d = doc(brokers={"count": 9, "racks": ["a", "b", "c"]}, reassignment={"kind": "add-broker", "brokers": [7, 8, 9]})
    d["topics"][0]["partitions"] = 300
    s = S.from_document(d)
    assert all(b not in p.replicas for p in s.partitions.values() for b in (7, 8, 9))  # start empty
    load = loads(s)
    share = sum(load.values()) / 9
    biggest = max(p.size for p in s.partitions.values())
    for b in (7, 8, 9):
        assert share - biggest <= load[b] <= share * 1.1
    assert all(len(set(t.replicas) - set(s.partitions[t.tp].replicas)) == 1 for t in s.targets)
    assert s.moved_bytes() == sum(load[b] for b in (7, 8, 9))


def test_rack_migration_moves_every_replica_of_the_old_rack():
    s = S.from_document(doc(brokers={"count": 9, "racks": ["a", "b", "c"]},
                            reassignment={"kind": "rack-migration", "from_rack": "a", "to_rack": "c"}))
    racks = {b.id: b.rack for b in s.brokers}
    assert all(racks[b] != "c" for p in s.partitions.values() for b in p.replicas)
    assert all(racks[b] != "a" for r in s.target_assignment().values() for b in r)


def test_rebalance_brings_every_broker_near_the_mean():
    d = doc(reassignment={"kind": "rebalance"})
    d["topics"][0].update(placement="random", weights={1: 4, 2: 4})
    s = S.from_document(d)
    before = collections.Counter()
    for p in s.partitions.values():
        for b in p.replicas:
            before[b] += p.size
    after = loads(s)
    mean = sum(after.values()) / 6
    biggest = max(p.size for p in s.partitions.values())
    assert max(before.values()) > mean * 1.3  # the weights made it skewed
    assert max(after.values()) <= mean * 1.05 + biggest


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
