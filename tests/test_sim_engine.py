"""The simulated kreassign strategy works at the real engine's cadence and with its requests
(engine.whatif.strategies: the decider's ticks, the Kafka adapter's requests, their round trips)."""

import dataclasses

import pytest

from engine.core.partition import TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet
from engine.sim.cluster import SimulatedCluster
from engine.whatif import strategies as W
from engine.whatif.strategies import APPEND_ROUND_TRIPS, _Engine, next_tick, run, tick_at
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


def test_the_timer_hands_a_tick_when_the_decider_says_its_next_look_is_within_half_an_interval():
    # (engine.runtime.worker: the timer fires every interval and sends a tick when ``Decider.due_in`` is at
    # most half an interval away; a tick it sent while the decider worked is dropped)
    assert tick_at(1.0, 0.1, 0.0) == pytest.approx(1.1)  # due now: the next tick not dropped
    assert tick_at(1.0, 0.1, 0.53) == pytest.approx(1.5)  # at 1.5 the look is 0.03 s away
    assert tick_at(1.0, 0.1, 0.56) == pytest.approx(1.6)  # at 1.5 it is 0.06 s away: one more interval
    assert tick_at(1.06, 0.1, 0.0) == pytest.approx(1.2)
    assert tick_at(1.0, 0.1, None) == pytest.approx(1.0 + W.KEEPALIVE)  # nothing due: the keep-alive


def test_today_the_simulated_engine_looks_when_the_real_decider_looks(monkeypatch):
    """The simulated kreassign strategy of today's engine is the real decider: on the same move, with
    round trips that take no time, it makes the very calls, at the very times, as a ``Decider`` driven by
    hand on the simulated cluster the way the worker drives it (a timer every fast interval from the
    start, a tick when ``due_in`` is within half of it: ``benchmarks.looks inprocess``)."""
    from benchmarks.looks import scenario as looks_scenario
    from engine.core.commands import ChangeThrottle, Submit
    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim import scenario as S

    doc, targets = looks_scenario(24, "8 MB", 18)
    calls = ("observe", "catch_up", "sizes", "throttles", "alter_reassignments", "cancel_reassignments",
             "apply_throttles", "remove_throttles", "elect_preferred_leaders")

    class Counted:  # the cluster as the decider calls it
        def __init__(self, cluster):
            self.cluster, self.calls = cluster, []

        def __getattr__(self, name):
            attr = getattr(self.cluster, name)
            if name not in calls:
                return attr
            return lambda *a, **k: (self.calls.append((round(self.cluster.time, 6), name)), attr(*a, **k))[1]

    by_hand = Counted(SimulatedCluster.from_scenario(S.from_document(doc)))
    d = Decider(MemoryLog(), by_hand, clock=lambda: by_hand.cluster.time, poll_interval=1.0, floor=0.1,
                verify_interval=W.VERIFY_INTERVAL)
    d.decide(ChangeThrottle(4_000_000))
    d.decide(Submit(W.REQUEST_ID, tuple(targets)))
    for k in range(1, 6000):
        due = d.due_in()
        if due is not None and due <= 0.05 + 1e-9:  # (a look due on the half-interval mark: tick_at's rounding)
            d.tick()
        if d.state.requests[W.REQUEST_ID].status == "completed":
            break
        by_hand.cluster.advance(k * 0.1 - by_hand.cluster.time)

    simulated = []
    for name in calls:
        def counted(self, *a, _base=getattr(W._Today, name), _name=name, **kw):
            simulated.append((round(self.cluster.time, 6), _name))
            return _base(self, *a, **kw)
        monkeypatch.setattr(W._Today, name, counted)
    # (no request budget: the cluster driven by hand counts no requests, so none is held there)
    sc = dataclasses.replace(S.from_document(doc), targets=tuple(targets), throttle=4_000_000, request_time=0.0,
                             request_budget=None)
    r = run(sc, "kreassign")
    assert r.finished and r.makespan == pytest.approx(by_hand.cluster.time)
    looks = [t for t, name in by_hand.calls if name == "observe"]
    # (69 looks and 36 catch-up measures when this was written: the old simulated loop made 114 and 104; 81
    # and 42 once copies were measured halfway to their release without a look, decide.next_measures)
    assert 60 <= len(looks) <= 90
    assert simulated == by_hand.calls


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
    sc = dataclasses.replace(small_move(), targets=(PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (2, 4))),
                             limits={"throttle_release_ms": 500})  # the records' engine's (calibration.AS_MEASURED)
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
