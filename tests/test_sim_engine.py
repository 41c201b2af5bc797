"""The simulated kreassign strategy works at the real engine's cadence and with its requests
(engine.whatif.strategies: the decider's ticks, the Kafka adapter's requests, their round trips)."""

import dataclasses

import pytest

from engine.core.partition import TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet
from engine.sim.cluster import SimulatedCluster
from engine.whatif.strategies import APPEND_ROUND_TRIPS, _Engine, next_tick, run
from tests.sim_helpers import scenario

MB = 1_000_000
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_ticks_queued_while_the_decider_works_are_dropped():
    # the worker sends a tick every 0.1 s; the decider takes the next one that comes at least half an
    # interval after it finished (engine.runtime.worker: "one does for all")
    assert next_tick(1.0, 0.1) == pytest.approx(1.1)
    assert next_tick(1.04, 0.1) == pytest.approx(1.1)
    assert next_tick(1.06, 0.1) == pytest.approx(1.2)
    assert next_tick(3.2, 1.0) == pytest.approx(4.0)
    assert next_tick(3.6, 1.0) == pytest.approx(5.0)


def engine(rtt=0.01, brokers=4):
    """The adapter of the calibration's records (2026-11-26); today's: tests/test_sim_requests.py."""
    sc = scenario([((1, 2), 10 * MB, 0), ((2, 3), 10 * MB, 0)], brokers=brokers)
    return _Engine(SimulatedCluster.from_scenario(sc), rtt)


def test_a_look_sends_the_adapters_four_requests_to_one_broker_one_after_the_other():
    e = engine()
    obs = e.observe([T0, T1])
    # DescribeCluster, ListPartitionReassignments, Metadata, DescribeConfigs: all to the lowest live broker
    assert [b for _t, b, _api in e.requests] == [1, 1, 1, 1]
    assert [t for t, _b, _api in e.requests] == pytest.approx([0.0, 0.01, 0.02, 0.03])
    assert e.cluster.time == pytest.approx(0.04) and set(obs.partitions) == {T0, T1}
    e.observe([])  # nothing watched: DescribeCluster alone
    assert len(e.requests) == 5


def test_a_catch_up_measure_asks_each_broker_concerned_for_its_log_dirs():
    e = engine()
    e.catch_up({T0: (1, (3,)), T1: (2, (4,))})
    assert [b for _t, b, _api in e.requests] == [1, 2, 3, 4]
    assert e.cluster.time == pytest.approx(0.04)


def test_a_throttle_change_sends_its_requests_together_and_an_alter_goes_to_the_controllers_stand_in():
    e = engine()
    ts = ThrottleSet(frozenset({ThrottledReplica("t", 0, 1)}), frozenset({ThrottledReplica("t", 0, 3)}),
                     frozenset({1}), frozenset({3}), 10 * MB)
    e.apply_throttles(ts)
    # one call for the topic (any broker), one per broker for its rates: all sent before any answer
    assert sorted(b for _t, b, _api in e.requests) == [1, 1, 3] and {t for t, _b, _api in e.requests} == {0.0}
    assert e.cluster.time == pytest.approx(0.01)
    e.alter_reassignments({T0: (1, 3)})
    assert e.requests[-1] == (pytest.approx(0.01), 1, "AlterPartitionReassignments") and e.first_alter == pytest.approx(0.02)
    e.append()
    assert e.cluster.time == pytest.approx(0.02 + APPEND_ROUND_TRIPS * 0.01)


def test_a_dead_broker_does_not_get_the_requests_not_addressed_to_a_broker():
    e = engine()
    e.cluster.inject(1, "down")
    e.observe([T1])
    assert {b for _t, b, _api in e.requests} == {2}


def small_move(**extra):
    return scenario([((1, 2), 200 * MB, 0), ((2, 1), 200 * MB, 0)], throttle="10 MB/s",
                    **{"replica_creation_time": 0, **extra})


def test_the_strategy_looks_at_steps_close_to_done_every_fast_interval_and_otherwise_every_poll():
    from engine.core.commands import PartitionTarget
    sc = dataclasses.replace(small_move(), targets=(PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (2, 4))))
    fast = run(sc, "kreassign", adapter="as-measured")  # four requests a look
    slow = run(dataclasses.replace(sc, fast_interval=1.0), "kreassign", adapter="as-measured")
    assert fast.finished and slow.finished

    def requests(r, start, end):
        return sum(1 for ts in r.requests.values() for t in ts if start <= t < end)

    # 200 MB into each of brokers 3 and 4 at 10 MB/s: 20 s. Until the copies come close to done a full
    # look every second (4 requests to broker 1, a DescribeLogDirs to each broker concerned), and every
    # 10 s the throttles read back (the topic's configs, each throttled broker's); in their last
    # seconds a look every tick, back to back (each request a 30 ms round trip)
    assert requests(fast, 5, 15) == requests(slow, 5, 15) == 10 * (4 + 4) + (1 + 4)
    assert requests(fast, 17, 19) > 2 * requests(slow, 17, 19)
    rates = {r.broker: r.mean for r in fast.request_rates()}
    assert rates[1] > rates[3]  # broker 1 gets every look; 3 and 4 their DescribeLogDirs


def test_the_strategy_starts_after_the_launch_delay_and_its_round_trips():
    from engine.core.commands import PartitionTarget
    sc = dataclasses.replace(small_move(), targets=(PartitionTarget("t", 0, (1, 3)),), launch_delay=2.0)
    r = run(sc, "kreassign")
    # observe (4 round trips) and size (DescribeCluster and one DescribeLogDirs per live broker) the new
    # partition, log what the submit decides (appends), throttle, then alter
    assert r.first_alter > 2.0 + (4 + 1 + 4) * sc.request_time
    assert run(dataclasses.replace(sc, request_time=0.0), "kreassign").first_alter == pytest.approx(2.0)
    assert run(sc, "all-at-once").first_alter == pytest.approx(2.0)
