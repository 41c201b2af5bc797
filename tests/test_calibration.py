"""The simulator against Kafka 4.0 as measured (docs/simulator.md, "Calibration").

Two measured runs, each a shipped scenario. The Kafka tool's runs (all-at-once)
varied between runs; the simulator is deterministic and must land within what
was measured.
"""

from pathlib import Path

import pytest

from engine.sim import scenario as S
from engine.sim.bound import lower_bound
from engine.whatif.strategies import run

SCENARIOS = Path(__file__).resolve().parent.parent / "ops" / "scenarios"


def load(name):
    return S.load(str(SCENARIOS / f"{name}.yaml"))


@pytest.fixture(scope="module")
def small_cluster():
    sc = load("add-broker-small-cluster-4mbs")
    return sc, run(sc, "all-at-once")


@pytest.fixture(scope="module")
def many_small():
    sc = load("many-small-partitions-new-broker-50mbs")
    return sc, run(sc, "all-at-once")


def test_the_scenarios_are_the_measured_ones():
    sc = load("add-broker-small-cluster-4mbs")
    assert len(sc.targets) == 24 - 6 and sc.moved_bytes() == 18 * 16 * 2**20  # 18 replicas to broker 4
    assert sum(1 for t in sc.targets if t.replicas[0] == 4) == 6
    assert sc.moved_bytes() / sc.throttle == pytest.approx(75.5, abs=0.05)
    bound = lower_bound(sc)  # the busiest receiver's bytes / throttle is the measured runs' bound
    assert bound.bytes_over_throttle == pytest.approx(75.5, abs=0.05) and bound.seconds == pytest.approx(74.5, abs=0.05)
    sc2 = load("many-small-partitions-new-broker-50mbs")
    assert sc2.moved_bytes() == 225 * 2**20 and sum(1 for t in sc2.targets if t.replicas[0] == 4) == 75
    assert sc2.moved_bytes() / sc2.throttle == pytest.approx(4.7, abs=0.05)


def test_kafkas_tool_on_the_small_cluster_lands_in_the_measured_ranges(small_cluster):
    sc, r = small_cluster
    # measured over 10 runs: makespan 0.98-1.17 x (bytes / throttle), probe p99 1.5-18.3 s and max
    # 3.5-20.8 s, 18 partitions under-replicated at once, every throttle left until --verify
    assert 0.98 <= r.makespan / (sc.moved_bytes() / sc.throttle) <= 1.17
    assert 1.5 <= r.probe.p99 <= 18.3
    assert 3.5 <= r.probe.max <= 20.8
    assert r.stats.peak_under_replicated == 18
    assert r.throttles_after == 18 + 3 * 18  # follower side: broker 4 per move; leader side: its 3 old replicas


def test_kafkas_tool_on_many_small_partitions_is_near_the_measured_run(many_small):
    sc, r = many_small
    # measured once: 23.4 s (bytes / throttle 4.7 s), probe p50 / p99 / max 10.3 / 24.2 / 25.0 s, 225
    # partitions under-replicated at once
    assert r.makespan == pytest.approx(23.4, rel=0.10)
    assert r.probe.p50 == pytest.approx(10.3, rel=0.25)
    assert r.probe.p99 == pytest.approx(24.2, rel=0.25)
    assert r.probe.max == pytest.approx(25.0, rel=0.25)
    assert r.stats.peak_under_replicated == 225


@pytest.mark.parametrize("name", ["add-broker-small-cluster-4mbs", "many-small-partitions-new-broker-50mbs"])
def test_kreassign_releases_every_copy_before_it_joins_the_isr(name):
    sc = load(name)
    r = run(sc, "kreassign")
    assert r.finished and r.at_target and not r.throttles_left and r.throttles_after == 0
    assert r.stats.throttled_joins == 0  # no replica joined the ISR listed on a saturated broker


def test_on_the_small_cluster_kreassign_does_not_stall_producers_and_keeps_to_the_bound():
    # the goal: probe p99 under 100 ms, makespan within 5 % of bytes / throttle
    sc = load("add-broker-small-cluster-4mbs")
    r = run(sc, "kreassign")
    assert r.probe.p99 < 0.1 and r.probe.max < 0.1
    assert r.makespan <= 1.05 * sc.moved_bytes() / sc.throttle
    assert r.stats.peak_under_replicated <= 2


def test_on_many_small_partitions_kreassign_does_not_stall_producers_and_keeps_all_at_onces_time(many_small):
    # broker 4 creates the 225 new replicas' logs one at a time (0.1 s each): the makespan is bound by
    # that, not by bytes; two new replicas at a time keep it busy, and no finished move's epoch change
    # waits behind more than the one log being created (its leader fences broker 4 meanwhile)
    sc, all_at_once = many_small
    r = run(sc, "kreassign")
    assert r.probe.p99 < 0.1 and r.probe.max < 0.1
    assert r.stats.peak_under_replicated <= 2
    assert r.makespan <= 1.2 * all_at_once.makespan
