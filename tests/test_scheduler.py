"""KIP-435 batch scheduler: limits, order, fairness, determinism."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.limits import Limits, LimitsError
from engine.partition import TopicPartition
from engine.scheduler import CONTINUING, FRESH, Hold, InFlight, ReadyIndex, Requeue, SchedulingKey, Start, admits, next_batch
from engine.step import Step, Waiting

import pytest


def step(nr, leader=0, moves_leader=False, cr=(0, 1, 2)):
    tr = tuple(nr) + cr[len(nr):] if nr else cr
    return Step(cr, tr, tuple(nr), cr[-len(nr):] if nr else (), leader, moves_leader)


def index_of(entries):
    """entries: [(tp, step, lane)] in readiness order."""
    index = ReadyIndex()
    plans = {}
    for seq, (tp, s, lane) in enumerate(entries):
        index, _slot = index.add(SchedulingKey.of(s), lane, seq, tp)
        plans[tp] = s
    return index, plans


def tp(i):
    return TopicPartition("t", i)


def started(decisions):
    return [d.tp for d in decisions if isinstance(d, Start)]


def test_partition_limit():
    index, plans = index_of([(tp(i), step((10 + i,)), FRESH) for i in range(5)])
    limits = Limits(max_partitions_in_flight=3, max_incoming_moves_per_broker=9, max_outgoing_moves_per_broker=9)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(0), tp(1), tp(2)]


def test_leader_moves_first_up_to_l_then_the_others():
    entries = [(tp(i), step((10 + i,), moves_leader=False), FRESH) for i in range(3)]
    entries += [(tp(i), step((10 + i,), moves_leader=True), FRESH) for i in range(3, 6)]
    index, plans = index_of(entries)
    limits = Limits(max_partitions_in_flight=4, max_leader_moves_in_flight=2,
                    max_incoming_moves_per_broker=9, max_outgoing_moves_per_broker=9)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(3), tp(4), tp(0), tp(1)]


def test_per_broker_incoming_cap_skips_to_other_brokers():
    entries = [(tp(0), step((7,), leader=0), FRESH), (tp(1), step((7,), leader=1), FRESH),
               (tp(2), step((7,), leader=2), FRESH), (tp(3), step((8,), leader=3), FRESH)]
    index, plans = index_of(entries)
    limits = Limits(max_incoming_moves_per_broker=2)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(0), tp(1), tp(3)]


def test_per_broker_outgoing_cap():
    entries = [(tp(i), step((10 + i,), leader=0), FRESH) for i in range(4)]
    index, plans = index_of(entries)
    limits = Limits(max_outgoing_moves_per_broker=2)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(0), tp(1)]


def test_cluster_wide_additions_cap():
    entries = [(tp(i), step((10 + 2 * i, 11 + 2 * i), leader=i), FRESH) for i in range(4)]
    index, plans = index_of(entries)
    limits = Limits(max_replica_additions_in_flight=5, max_replicas_per_step=2)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(0), tp(1)]


def test_in_flight_counts_against_limits():
    index, plans = index_of([(tp(1), step((7,), leader=1), FRESH)])
    busy = InFlight().plus(step((7,), leader=2)).plus(step((7,), leader=3))
    assert started(next_batch(index, busy, Limits(), plans.get)) == []
    assert started(next_batch(index, busy.minus(step((7,), leader=3)), Limits(), plans.get)) == [tp(1)]


def test_oversized_catch_up_step_runs_alone_and_never_deadlocks():
    big = step((7, 8, 9), leader=0)  # min.insync catch-up: 3 new replicas
    index, plans = index_of([(tp(0), big, FRESH)])
    limits = Limits(max_outgoing_moves_per_broker=2, max_replica_additions_in_flight=2)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(0)]
    other = InFlight().plus(step((5,), leader=0))
    assert started(next_batch(index, other, limits, plans.get)) == []


def test_continuing_partitions_go_before_fresh_ones():
    entries = [(tp(0), step((10,), leader=0), FRESH), (tp(1), step((11,), leader=1), CONTINUING)]
    index, plans = index_of(entries)
    limits = Limits(max_partitions_in_flight=1)
    assert started(next_batch(index, InFlight(), limits, plans.get)) == [tp(1)]


def test_fifo_within_a_bucket_keeps_a_blocked_partition_first():
    entries = [(tp(i), step((7,), leader=0), FRESH) for i in range(3)]
    index, plans = index_of(entries)
    busy = InFlight().plus(step((7,), leader=5)).plus(step((7,), leader=6))
    assert started(next_batch(index, busy, Limits(), plans.get)) == []
    # once broker 7 frees up, the oldest of the bucket go first (incoming cap 2)
    assert started(next_batch(index, InFlight(), Limits(), plans.get)) == [tp(0), tp(1)]


def test_stale_plan_is_requeued_or_held_not_started():
    s0, s1 = step((7,), leader=0), step((8,), leader=1)
    index, _ = index_of([(tp(0), s0, FRESH), (tp(1), s1, FRESH)])
    fresh = {tp(0): step((9,), leader=0), tp(1): Waiting("target brokers [8] are offline")}
    decisions = next_batch(index, InFlight(), Limits(), fresh.get)
    assert decisions == [Requeue(tp(0), fresh[tp(0)]), Hold(tp(1), fresh[tp(1)])]


def test_removal_keeps_index_consistent():
    index, plans = index_of([(tp(i), step((10 + i,), leader=i), FRESH) for i in range(3)])
    index2, slot = index.add(SchedulingKey.of(step((20,), leader=9)), FRESH, 99, tp(9))
    assert index2.size == 4
    assert index2.remove(slot) == index
    assert sorted(index) == [tp(0), tp(1), tp(2)]


def test_limit_aliases_and_errors():
    limits = Limits().changed({"reassignment.parallel.replica.count": 3,
                               "reassignment.max.concurrent.partition.movements": 7,
                               "reassignment.max.concurrent.leader.movements": 2,
                               "num.concurrent.partition.movements.per.broker": 4})
    assert (limits.max_replicas_per_step, limits.max_partitions_in_flight, limits.max_leader_moves_in_flight) == (3, 7, 2)
    assert limits.max_incoming_moves_per_broker == limits.max_outgoing_moves_per_broker == 4
    with pytest.raises(LimitsError, match="unknown limit 'bogus'.*must be an integer >= 1, got 0"):
        Limits().changed({"bogus": 1, "max_replicas_per_step": 0})


# --- properties ----------------------------------------------------------------------------------


@st.composite
def queues(draw):
    n = draw(st.integers(min_value=0, max_value=40))
    entries = []
    for i in range(n):
        leader = draw(st.integers(0, 5))
        k = draw(st.integers(0, 3))
        nr = tuple(draw(st.lists(st.integers(6, 11), min_size=k, max_size=k, unique=True)))
        entries.append((tp(i), Step((leader,), (leader,) + nr, nr, (), leader, draw(st.booleans())),
                        draw(st.sampled_from([CONTINUING, FRESH]))))
    return entries


limit_values = st.builds(
    Limits,
    max_replicas_per_step=st.integers(1, 3),
    max_partitions_in_flight=st.integers(1, 12),
    max_leader_moves_in_flight=st.integers(1, 6),
    max_replica_additions_in_flight=st.integers(1, 12),
    max_incoming_moves_per_broker=st.integers(1, 4),
    max_outgoing_moves_per_broker=st.integers(1, 4),
)


def within(c: InFlight, limits: Limits, before: InFlight, s: Step) -> bool:
    """The counters after adding ``s`` respect every limit, or ``s`` is an oversized step running alone."""
    n = len(s.nr)
    ok = c.partitions <= limits.max_partitions_in_flight
    ok &= (not s.moves_leader) or c.leader_moves <= limits.max_leader_moves_in_flight
    if n:
        ok &= c.additions <= limits.max_replica_additions_in_flight or before.additions == 0
        ok &= all(c.incoming[b] <= limits.max_incoming_moves_per_broker for b in s.nr)
        ok &= c.outgoing[s.source] <= limits.max_outgoing_moves_per_broker or before.outgoing.get(s.source, 0) == 0
    return ok


@settings(max_examples=300, deadline=None)
@given(queues(), queues(), limit_values, limit_values)
def test_scheduler_never_exceeds_a_limit_even_when_limits_shrink(ready, running, old_limits, limits):
    # steps already in flight were admitted under old_limits; limits then shrink or grow
    index, plans = index_of(ready)
    c = InFlight()
    running_index, running_plans = index_of([(TopicPartition("u", e[0].partition), e[1], e[2]) for e in running])
    for d in next_batch(running_index, c, old_limits, running_plans.get):
        c = c.plus(d.step)
    before_all = c
    decisions = next_batch(index, c, limits, plans.get)
    for d in decisions:
        assert isinstance(d, Start)
        before = c
        assert admits(before, limits, SchedulingKey.of(d.step))
        c = c.plus(d.step)
        assert within(c, limits, before, d.step)
    # same input, same decision (also from an index built in another order)
    rebuilt, _ = index_of(ready)
    assert next_batch(rebuilt, before_all, limits, plans.get) == decisions


@settings(max_examples=200, deadline=None)
@given(queues(), limit_values)
def test_batch_is_maximal(ready, limits):
    """Nothing left in the queue could still have been admitted (no idle capacity)."""
    index, plans = index_of(ready)
    decisions = next_batch(index, InFlight(), limits, plans.get)
    c = InFlight()
    chosen = set()
    for d in decisions:
        c = c.plus(d.step)
        chosen.add(d.tp)
    for t, s, _lane in ready:
        if t not in chosen:
            assert not admits(c, limits, SchedulingKey.of(s))
