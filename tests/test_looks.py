"""Issue 26, item 1, and issue 28, item 7: the engine's looks must be cheap. The decider in process on
the simulated cluster (virtual clock), driven as the worker drives it: its timer checks every floor
(``--fast-interval``) and sends a tick only when ``Decider.due_in`` says one is due. Counted: every call
the decider makes to the cluster.

* idle (nothing in flight, waiting or ready): a look at the brokers alone every ``IDLE_LOOK`` (30 s), and
  no tick due in between (the old decider observed the cluster, a DescribeCluster, at every poll
  interval, and the worker ticked every 0.1 s);
* a throttled copy: looked at every poll interval (the ceiling), its catch-up measured at its predicted
  release point only (the old decider measured every copy at every full look: DescribeLogDirs of the
  leader and the new replicas' brokers every second), released in time, its completion seen within
  the floor, and the next step started at once."""

from __future__ import annotations

import math

from collections import Counter

from engine.core import events as ev
from engine.core.commands import ChangeThrottle, PartitionTarget, Submit
from engine.core.decide import copy_left, measure_due, next_looks, next_measures
from engine.core.partition import TopicPartition
from engine.runtime.decider import IDLE_LOOK, Decider, MemoryLog
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster

FLOOR, CEILING = 0.25, 1.0


class Counted:
    """The simulated cluster, counting the calls made to it by name."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster
        self.calls: Counter = Counter()

    def __getattr__(self, name):
        attr = getattr(self.cluster, name)
        if not callable(attr):
            return attr

        def call(*a, **k):
            self.calls[name] += 1
            return attr(*a, **k)
        return call


def scenario(size="40 MB", partitions=2):
    return S.from_document({
        "seed": 3,
        "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
        "topics": [{"name": "t", "min_insync_replicas": 2,
                    "assignment": [{"replicas": [1, 2, 3], "size": size} for _ in range(partitions)]}],
    })


def decider(sc):
    cluster = Counted(SimulatedCluster.from_scenario(sc))
    d = Decider(MemoryLog(), cluster, clock=lambda: cluster.cluster.time, poll_interval=CEILING, floor=FLOOR)
    d.recover(None)
    return d, cluster


def run(d, cluster, seconds: float) -> list:
    """The worker's timer for ``seconds``: every FLOOR, a tick if one is due. The ticks' times."""
    ticks = []
    end = cluster.cluster.time + seconds
    while cluster.cluster.time < end:
        due = d.due_in()
        if due is not None and due <= FLOOR / 2:
            ticks.append(cluster.cluster.time)
            d.tick()
        cluster.cluster.advance(FLOOR)
    return ticks


def test_an_idle_decider_looks_at_its_brokers_alone_twice_a_minute_and_wants_no_other_tick():
    d, cluster = decider(scenario())
    d.tick()  # the first tick after a recovery
    cluster.calls.clear()
    asked = []
    observe = cluster.cluster.observe
    cluster.cluster.observe = lambda partitions=None: asked.append(list(partitions)) or observe(partitions)
    ticks = run(d, cluster, 60.0 + FLOOR)
    assert cluster.calls == Counter(observe=2), cluster.calls  # at 30 s and 60 s: brokers only
    assert asked == [[], []]
    assert len(ticks) == 2 and IDLE_LOOK - 2 * FLOOR < d.due_in() <= IDLE_LOOK


def test_a_throttled_copy_is_measured_at_its_predicted_release_and_its_end_seen_within_the_floor():
    d, cluster = decider(scenario("40 MB", partitions=1))
    tp = TopicPartition("t", 0)
    d.decide(ChangeThrottle(4_000_000))  # one copy into broker 4 at 4 MB/s: 10 s
    d.decide(Submit("r", (PartitionTarget("t", 0, (1, 2, 4)),)))
    cluster.calls.clear()
    ticks = run(d, cluster, 30.0)
    logged = [e.payload for e in d.log.records]
    done = [e for e in logged if isinstance(e, ev.StepCompleted)]
    released = [e for e in logged if isinstance(e, ev.ThrottleReleased)]
    assert done and released, [type(e).__name__ for e in logged]
    print(f"looks {cluster.calls}, ticks {len(ticks)}, released at {released[0].at}, done at {done[0].at}")
    # looks: about one per ceiling over the copy (10 s), a few at the floor around its end; none after it
    assert cluster.calls["observe"] <= 10 / CEILING + 8, cluster.calls
    # its catch-up measured as it nears its predicted release: its first, then halfway each time from the
    # last measure to its release point (at most log2(10 s / FLOOR) of them), then at that point (the old
    # decider: at every full look, 9)
    assert cluster.calls["catch_up"] <= math.ceil(math.log2(10 / FLOOR)) + 2, cluster.calls
    assert released[0].at < done[0].at
    # seen done within the floor; after it nothing but the idle look at the brokers, IDLE_LOOK later
    assert [t for t in ticks if t < done[0].at + IDLE_LOOK - FLOOR][-1] <= done[0].at + FLOOR, ticks
    assert d.due_in() > CEILING
    assert tp not in d.state.steps


def test_the_core_schedules_each_look_between_the_floor_and_the_ceiling():
    d, cluster = decider(scenario("40 MB", partitions=2))
    d.decide(ChangeThrottle(4_000_000))
    d.decide(Submit("r", (PartitionTarget("t", 0, (1, 2, 4)), PartitionTarget("t", 1, (1, 2, 4)))))
    run(d, cluster, 2.0)
    s, now = d.state, cluster.cluster.time
    assert len(s.steps) == 2 and all(f.started for f in s.steps.values())
    plan = next_looks(s, now, {}, FLOOR, CEILING)
    assert all(now + FLOOR <= at <= now + CEILING for at in plan.values()), plan
    share = 2_000_000.0  # two copies into broker 4 share its 4 MB/s
    tp = TopicPartition("t", 0)
    # measured 3 MB short 1 s ago: 1 MB left now; its release point (0.5 s of its share) 0.25 s away
    measured = {tp: (3_000_000, now - 1.0)}
    assert copy_left(s, tp, share, now, measured) == 1_000_000
    assert next_looks(s, now, measured, FLOOR, CEILING)[tp] == now + FLOOR
    assert tp in measure_due(s, now, measured, FLOOR)
    far = {tp: (30_000_000, now)}  # far from its release: at the ceiling, not measured
    assert next_looks(s, now, far, FLOOR, CEILING)[tp] == now + CEILING
    assert tp not in measure_due(s, now, far, FLOOR)


def test_a_copy_is_looked_at_by_the_time_its_catch_up_is_due_to_be_measured_not_only_at_its_release():
    """measure_due asks for a copy's catch-up about halfway from its last measurement to its predicted
    release, again at three quarters ..., so a copy ahead of its prediction is released before it ends.
    The plan must bring a measure then (``next_measures``, without a look at the partition): a copy planned
    only at its release point (``next_looks``) was measured there alone,
    and in the simulator 15 of 40 generated moves had a copy join the ISR still throttled (tests/test_simulate.py)."""
    d, cluster = decider(scenario("40 MB", partitions=2))
    d.decide(ChangeThrottle(4_000_000))
    d.decide(Submit("r", (PartitionTarget("t", 0, (1, 2, 4)), PartitionTarget("t", 1, (1, 2, 4)))))
    run(d, cluster, 2.0)
    s, now = d.state, cluster.cluster.time
    tp = TopicPartition("t", 0)
    for short, ago in ((6_000_000, 0.4), (12_000_000, 1.0), (25_000_000, 0.0)):
        measured = {tp: (short, now - ago)}
        assert tp not in measure_due(s, now, measured, FLOOR)  # not due yet
        planned = min(next_looks(s, now, measured, FLOOR, CEILING)[tp],
                      next_measures(s, now, measured, FLOOR, CEILING).get(tp, now + CEILING))
        first = next(t for t in (now + k * 0.005 for k in range(1, 4000)) if tp in measure_due(s, t, measured, FLOOR))
        assert now + FLOOR - 1e-9 <= planned <= min(max(first, now + FLOOR), now + CEILING) + 0.005, (short, ago, planned, first)
