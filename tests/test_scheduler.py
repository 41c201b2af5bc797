"""KIP-435 batch scheduler: limits, order, fairness, determinism."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core import scheduler
from engine.core.limits import Limits, LimitsError
from engine.core.partition import TopicPartition
from engine.core.scheduler import (
    CONTINUING, FRESH, WEIGHT_UNITS, Hold, InFlight, ReadyIndex, Requeue, SchedulingKey, Start, admits, next_batch,
    oversized, resources, weight_units,
)
from engine.core.step import Step, Waiting

import pytest


def step(nr, leader=0, moves_leader=False, cr=(0, 1, 2)):
    tr = tuple(nr) + cr[len(nr):] if nr else cr
    return Step(cr, tr, tuple(nr), cr[-len(nr):] if nr else (), leader, moves_leader)


def index_of(entries):
    """entries: [(tp, step, lane)] in readiness order, all of one request."""
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


def test_a_step_planned_before_a_cap_shrank_is_planned_again_never_run_over_the_cap():
    big = step((7, 8, 9), leader=0)  # planned when the caps allowed three copies out of broker 0
    index, plans = index_of([(tp(0), big, FRESH)])
    limits = Limits(max_outgoing_moves_per_broker=2, max_replica_additions_in_flight=2)
    smaller = step((7, 8), leader=0)
    assert next_batch(index, InFlight(), limits, {tp(0): smaller}.get) == [Requeue(tp(0), smaller)]
    assert next_batch(index, InFlight(), limits, plans.get) == []  # the same again: it waits


def test_the_oldest_blocked_step_keeps_its_capacity_so_it_cannot_starve():
    # tp(0) needs two copies out of broker 0, which has one running; one-copy steps from broker 0
    # keep arriving behind it. Without a reservation they would take every free slot forever.
    old = step((7, 8), leader=0)
    entries = [(tp(0), old, FRESH)] + [(tp(i), step((9 + i % 3,), leader=0), FRESH) for i in range(1, 20)]
    index, plans = index_of(entries)
    busy = InFlight().plus(step((6,), leader=0))
    assert started(next_batch(index, busy, Limits(), plans.get)) == []  # broker 0's slot is kept for tp(0)
    assert started(next_batch(index, InFlight(), Limits(), plans.get))[:1] == [tp(0)]


def test_requests_take_turns():
    # a 60-partition decommission queued first, then one urgent partition of another request
    entries = [(tp(i), step((10 + i % 6,), leader=i % 6), FRESH) for i in range(60)]
    index, plans = index_of(entries)
    index, _slot = index.add(SchedulingKey.of(step((20,), leader=7)), FRESH, 60, tp(99), "urgent")
    plans[tp(99)] = step((20,), leader=7)
    ranks = {"": 30, "urgent": 30}  # the urgent one joined level with the decommission
    limits = Limits(max_partitions_in_flight=3)
    assert tp(99) in started(next_batch(index, InFlight(), limits, plans.get, ranks.get))
    assert tp(99) not in started(next_batch(index, InFlight(), limits, plans.get, {"": 0, "urgent": 30}.get))


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
    assert limits.max_new_replicas_per_broker == 4  # Cruise Control's operator asked for 4 moves into a broker
    assert Limits().changed({"reassignment.max.new.replicas.per.broker": 3}).max_new_replicas_per_broker == 3
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
    max_new_replicas_per_broker=st.integers(1, 4),
)


def totals(steps) -> dict:
    """What a list of steps in flight takes, counted from the steps themselves (not the scheduler's
    counters): partitions, leader moves, additions, copies into and out of each broker."""
    t = {"P": 0, "L": 0, "A": 0}
    for s in steps:
        t["P"] += 1
        t["L"] += bool(s.moves_leader)
        t["A"] += len(s.nr)
        for b in s.nr:
            t[("in", b)] = t.get(("in", b), 0) + 1
        if s.nr:
            t[("out", s.leader)] = t.get(("out", s.leader), 0) + len(s.nr)
    return t


def over(t: dict, limits: Limits) -> list:
    caps = {"P": limits.max_partitions_in_flight, "L": limits.max_leader_moves_in_flight,
            "A": limits.max_replica_additions_in_flight}
    bad = [k for k, cap in caps.items() if t[k] > cap]
    # whole moves here: a broker's incoming copies are bounded by both its incoming cap and the new
    # replicas it may be asked to create at once
    cap_in = min(limits.max_incoming_moves_per_broker, limits.max_new_replicas_per_broker)
    bad += [k for k, v in t.items() if isinstance(k, tuple) and v > (
        cap_in if k[0] == "in" else limits.max_outgoing_moves_per_broker)]
    return bad


@settings(max_examples=300, deadline=None)
@given(queues(), queues(), limit_values, limit_values)
def test_scheduler_never_exceeds_a_limit_even_when_limits_shrink(ready, running, old_limits, limits):
    # steps already in flight were admitted under old_limits; limits then shrink or grow
    index, plans = index_of([e for e in ready if not oversized(limits, SchedulingKey.of(e[1]))])
    c = InFlight()
    running_steps = []
    running_index, running_plans = index_of([(TopicPartition("u", e[0].partition), e[1], e[2]) for e in running
                                             if not oversized(old_limits, SchedulingKey.of(e[1]))])
    for d in next_batch(running_index, c, old_limits, running_plans.get):
        c = c.plus(d.step)
        running_steps.append(d.step)
    assert not over(totals(running_steps), old_limits)
    before_all = c
    decisions = next_batch(index, c, limits, plans.get)
    new = [d.step for d in decisions]
    assert all(isinstance(d, Start) for d in decisions)
    # whatever the running steps take, no limit the new steps touch goes over it because of them
    after = totals(running_steps + new)
    before = totals(running_steps)
    for k in over(after, limits):
        assert after[k] == before.get(k, 0), (k, after[k], before.get(k, 0))
    # same input, same decision (also from an index built in another order)
    rebuilt, _ = index_of([e for e in ready if not oversized(limits, SchedulingKey.of(e[1]))])
    assert next_batch(rebuilt, before_all, limits, plans.get) == decisions


@settings(max_examples=200, deadline=None)
@given(queues(), limit_values)
def test_batch_is_maximal_but_for_one_reservation(ready, limits):
    """Nothing left in the queue could still have been admitted (no idle capacity), except what one
    older blocked step keeps for itself. (Past a blocked step a decision looks at most SCAN more of its
    lane; the lanes here are shorter than that.)"""
    ready = [e for e in ready if not oversized(limits, SchedulingKey.of(e[1]))]
    index, plans = index_of(ready)
    decisions = next_batch(index, InFlight(), limits, plans.get)
    c = InFlight()
    chosen = set()
    for d in decisions:
        c = c.plus(d.step)
        chosen.add(d.tp)
    order = {t: (0 if s.moves_leader else 1, lane, i) for i, (t, s, lane) in enumerate(ready)}
    left = [(t, s) for t, s, _lane in ready if t not in chosen]
    blocked = [(t, s) for t, s in left if not admits(c, limits, SchedulingKey.of(s))]
    held = pin_holds(ready, [d.step for d in decisions], left, c, limits)
    for t, s in left:
        if admits(c, limits, SchedulingKey.of(s)) and t not in held:
            keeps = [b for b, bs in blocked if order[b] < order[t] and bs.nr and s.nr and (
                brokers_of(bs) & brokers_of(s) or c.additions + len(bs.nr) > limits.max_replica_additions_in_flight)]
            assert keeps, f"{t} could start and nothing older keeps its capacity"


def pin_holds(ready, chosen, left, c, limits) -> set:
    """The steps of ``left`` the dominant-source rule holds, as docs/algorithm.md states it (section 2, "A
    dominant source"), for one decision from nothing in flight: the source with at least twice the ready
    steps of any other (another has some) is pinned to the brokers it starts copies into; another
    source's copy into them waits, and so does its own into another broker; its own into a broker another
    source copies into waits, and (when it has no step left that fits every cap and is not held so) the
    brokers of such a step that fits every cap take no other source's copy (they drain for it). Every copy here weighs a whole move."""
    counts = {}
    for _t, s, _lane in ready:
        if s.nr:
            counts[s.source] = counts.get(s.source, 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    if len(ranked) < 2 or ranked[0] < 2 * ranked[1]:
        return set()
    dom = max(counts, key=counts.get)
    feeds = {}
    for s in chosen:
        for b in s.nr:
            feeds.setdefault(b, set()).add(s.source)
    pinned = {b for s in chosen if s.source == dom for b in s.nr}

    def others(b):
        return bool(feeds.get(b, set()) - {dom})

    def own_held(s):
        return any(others(b) for b in s.nr) or bool(pinned and any(b not in pinned for b in s.nr))

    mine = [s for _t, s in left if s.source == dom and s.nr]
    free = any(not own_held(s) for s in mine if admits(c, limits, SchedulingKey.of(s)))
    drained = set() if free else {b for s in mine if admits(c, limits, SchedulingKey.of(s))
                                  and any(others(x) for x in s.nr) for b in s.nr}
    out = set()
    for t, s in left:
        if not s.nr:
            continue
        if s.source == dom and own_held(s):
            out.add(t)
        elif s.source != dom and any(b in pinned or b in drained for b in s.nr):
            out.add(t)
    return out


def brokers_of(s: Step) -> set:
    return {("out", s.leader)} | {("in", b) for b in s.nr}


def test_small_copies_weigh_a_share_of_a_move_against_the_per_broker_caps():
    # sixteen 1-eighth copies fit the default two slots of broker 7; a seventeenth does not (the count
    # of new replicas per broker raised out of the way: this is the weighting alone)
    small = [(tp(i), step((7,), leader=i % 6), FRESH) for i in range(20)]
    index = ReadyIndex()
    plans = {}
    for seq, (t, s, lane) in enumerate(small):
        index, _slot = index.add(SchedulingKey.of(s, 1), lane, seq, t)
        plans[t] = s
    decisions = next_batch(index, InFlight(), Limits(max_outgoing_moves_per_broker=8, max_new_replicas_per_broker=32),
                           plans.get, weigh=lambda _tp, _s: 1)
    assert len(started(decisions)) == 16
    assert all(d.weight == 1 for d in decisions)
    # a whole move needs a whole slot free
    busy = InFlight()
    for d in decisions[:9]:
        busy = busy.plus(d.step, 1, d.weight)
    big_index, big_plans = index_of([(tp(50), step((7,), leader=0), FRESH)])
    assert started(next_batch(big_index, busy, Limits(), big_plans.get)) == []  # 9/8 taken: 7/8 left


def test_a_copy_far_shorter_than_a_move_weighs_nothing_only_the_new_replica_caps_hold_it():
    # a move is 2 s at the throttle: 100 MB at 50 MB/s. Under half an eighth of it (6.25 MB) a copy weighs
    # nothing; from there on its share, rounded up; 1 MiB at 4 MB/s is a quarter
    assert weight_units(1 << 20, 50_000_000, 2) == 0
    assert weight_units(6_249_999, 50_000_000, 2) == 0 < weight_units(6_250_000, 50_000_000, 2) == 1
    assert weight_units(1 << 20, 4_000_000, 2) == 2
    assert weight_units(None, 50_000_000, 2) == weight_units(1 << 20, None, 2) == WEIGHT_UNITS
    # broker 7 already takes two whole moves: its move caps are full; twenty weightless copies into it
    # still start, as many as its new-replica caps allow (40 in flight, 20 a decision), and charge it
    # no eighth (a weightless charge makes no counter entry, and taking it back removes none)
    busy = InFlight().plus(step((7,), leader=5)).plus(step((7,), leader=6))
    entries = [(tp(i), step((7,), leader=i % 5), FRESH) for i in range(30)]
    index, plans = small_index(entries, weight=0)
    decisions = next_batch(index, busy, Limits(), plans.get, weigh=lambda _tp, _s: 0, creations=lambda _b: (40, 20))
    assert len(started(decisions)) == 20 and all(d.weight == 0 for d in decisions)
    after = busy
    for d in decisions:
        after = after.plus(d.step, 1, d.weight)
    assert after.incoming == busy.incoming and after.outgoing == busy.outgoing
    assert after.new_replicas[7] == 22 and after.additions == 22
    for d in decisions:
        after = after.minus(d.step, d.weight)
    assert after == busy
    # a weightless copy takes no outgoing capacity: a step blocked on its source's outgoing cap (two whole
    # copies out of broker 0, which serves one) keeps that for itself, not from weightless copies of another
    # request (a lane is not searched past a step its own source refuses: those of the same request wait)
    assert ("out", 0) not in resources(SchedulingKey.of(step((9,), leader=0), 0))
    index = ReadyIndex()
    index, _ = index.add(SchedulingKey.of(step((7, 8), leader=0), WEIGHT_UNITS), FRESH, 0, tp(0), "a")
    for i in range(1, 4):
        index, _ = index.add(SchedulingKey.of(step((9 + i,), leader=0), 0), FRESH, i, tp(i), "b")
    plans = {tp(0): step((7, 8), leader=0), **{tp(i): step((9 + i,), leader=0) for i in range(1, 4)}}
    one_out = InFlight().plus(step((6,), leader=0))
    weigh = lambda t, _s: WEIGHT_UNITS if t == tp(0) else 0  # noqa: E731
    assert started(next_batch(index, one_out, Limits(), plans.get, weigh=weigh)) == [tp(1), tp(2), tp(3)]


def small_index(entries, weight=1):
    index = ReadyIndex()
    for seq, (t, s, lane) in enumerate(entries):
        index, _slot = index.add(SchedulingKey.of(s, weight), lane, seq, t)
    return index, {t: s for t, s, _lane in entries}


def test_a_broker_is_asked_to_create_at_most_two_new_replicas_at_once_whatever_their_size():
    # twenty copies of an eighth of a move each (12.5 MB at 50 MB/s) into broker 7, then four into broker 8: by weight
    # sixteen would fit broker 7's two slots, but broker 7 creates their logs one at a time, and a
    # finished move's epoch change waits behind the logs queued before it (its leader refuses broker
    # 7's fetches meanwhile). Two at a time per broker, by default; the others go to broker 8 (from
    # leaders 4 and 5: the oldest step refused, tp(2), keeps its leader 2's capacity for itself).
    entries = [(tp(i), step((7,), leader=i % 6), FRESH) for i in range(20)]
    entries += [(tp(i), step((8,), leader=4 + i % 2), FRESH) for i in range(20, 24)]
    index, plans = small_index(entries)
    limits = Limits(max_outgoing_moves_per_broker=8)
    assert limits.max_new_replicas_per_broker == 2
    decisions = next_batch(index, InFlight(), limits, plans.get, weigh=lambda _tp, _s: 1)
    assert started(decisions) == [tp(0), tp(1), tp(20), tp(21)]
    # one still in flight into broker 7: one more may start there, whatever its weight
    busy = InFlight().plus(step((7,), leader=5), 1, 1)
    assert [t for t in started(next_batch(index, busy, limits, plans.get, weigh=lambda _tp, _s: 1))
            if t.partition < 20] == [tp(0)]
    # the operator raises it: the weights bound again (sixteen eighths in two slots)
    more = Limits(max_outgoing_moves_per_broker=8, max_new_replicas_per_broker=20)
    assert len([t for t in started(next_batch(index, InFlight(), more, plans.get, weigh=lambda _tp, _s: 1))
                if t.partition < 20]) == 16


def test_a_step_adding_two_replicas_to_other_brokers_counts_one_new_replica_on_each():
    index, plans = small_index([(tp(0), step((7, 8), leader=0), FRESH), (tp(1), step((7,), leader=1), FRESH),
                                (tp(2), step((8,), leader=2), FRESH), (tp(3), step((7,), leader=3), FRESH)])
    limits = Limits(max_replicas_per_step=2, max_outgoing_moves_per_broker=8)
    assert started(next_batch(index, InFlight(), limits, plans.get, weigh=lambda _tp, _s: 1)) == [tp(0), tp(1), tp(2)]


@settings(max_examples=300, deadline=None)
@given(queues(), queues(), limit_values, limit_values, st.data())
def test_no_broker_creates_more_new_replicas_at_once_than_its_cap_whatever_the_weights(ready, running, old_limits,
                                                                                      limits, data):
    """Counted from the steps themselves: new replicas per broker never exceed the cap, nor copies' weights
    the incoming cap, unless steps already in flight (admitted under other limits) took them over."""
    weights = {e[0]: data.draw(st.integers(1, 8)) for e in ready + running}

    def admitted(entries, lim, c):
        entries = [e for e in entries if not oversized(lim, SchedulingKey.of(e[1]))]
        index = ReadyIndex()
        for seq, (t, s, lane) in enumerate(entries):
            index, _slot = index.add(SchedulingKey.of(s, weights[t]), lane, seq, t)
        plans = {t: s for t, s, _lane in entries}
        out = []
        for d in next_batch(index, c, lim, plans.get, weigh=lambda t, _s: weights[t]):
            assert isinstance(d, Start) and d.weight == weights[d.tp]
            c = c.plus(d.step, 1, d.weight)
            out.append((d.step, d.weight))
        return out, c

    def load(steps):
        count, units = {}, {}
        for s, w in steps:
            for b in s.nr:
                count[b] = count.get(b, 0) + 1
                units[b] = units.get(b, 0) + w
        return count, units

    weights.update({TopicPartition("u", t.partition): weights[t] for t, _s, _lane in running})
    first, c = admitted([(TopicPartition("u", t.partition), s, lane) for t, s, lane in running], old_limits, InFlight())
    before_count, before_units = load(first)
    assert all(n <= old_limits.max_new_replicas_per_broker for n in before_count.values())
    assert dict(c.new_replicas) == before_count and dict(c.incoming) == before_units
    second, _c = admitted(ready, limits, c)
    count, units = load(first + second)
    for b, n in count.items():
        if n > limits.max_new_replicas_per_broker:
            assert n == before_count.get(b, 0), (b, n)
        if units[b] > limits.max_incoming_moves_per_broker * WEIGHT_UNITS:
            assert units[b] == before_units.get(b, 0), (b, units[b])


def test_a_decision_never_scans_the_queue(monkeypatch):
    # 5,000 steps from 5 brokers all copying into broker 9, which is at its incoming cap: nothing may
    # start, and the decision looks at SCAN + 1 steps per lane at most, not at every one of them
    from engine.core import scheduler

    entries = [(tp(i), step((9,), leader=i % 5), FRESH) for i in range(5000)]
    index, plans = index_of(entries)
    looked = []
    real = scheduler.refusal
    monkeypatch.setattr(scheduler, "refusal", lambda c, limits, key, *more: looked.append(key) or real(c, limits, key, *more))
    busy = InFlight().plus(step((9,), leader=7)).plus(step((9,), leader=8))
    assert next_batch(index, busy, Limits(), plans.get) == []
    assert len(looked) <= 5 * (scheduler.SCAN + 1)
    # and with P nearly full, only as many as start
    looked.clear()
    assert started(next_batch(index, InFlight(), Limits(max_partitions_in_flight=2), plans.get)) == [tp(0), tp(1)]
    assert len(looked) == 2


def pin_limits():
    return Limits(max_incoming_moves_per_broker=4, max_outgoing_moves_per_broker=4, max_new_replicas_per_broker=4,
                  max_replica_additions_in_flight=20, max_partitions_in_flight=20)


def test_a_dominant_source_copies_into_one_broker_that_takes_no_other_sources_copies():
    # Broker 5 leads four of the five ready moves (a retired leader): it copies into broker 2 now. Beside
    # another leader's copy at 2 its own would get nearly nothing of 2's follower quota (Kafka's replica
    # fetcher, docs/simulator.md), so broker 1's copy into 2 waits, and so does 5's into 8: 5 keeps feeding
    # 2, which takes its copies at its whole rate. With the rule off, both start.
    busy = InFlight().plus(step((2,), leader=5))
    entries = [(tp(1), step((2,), leader=1), FRESH), (tp(2), step((8,), leader=5), FRESH),
               (tp(3), step((2,), leader=5), FRESH), (tp(4), step((8,), leader=5), FRESH),
               (tp(5), step((2,), leader=5), FRESH)]
    index, plans = index_of(entries)
    assert started(next_batch(index, busy, pin_limits(), plans.get)) == [tp(3), tp(5)]
    off = pin_limits().changed({"pin_dominant_source": 0})
    assert started(next_batch(index, busy, off, plans.get)) == [tp(1), tp(2), tp(3), tp(4)]  # 5's cap of 4


def test_a_dominant_source_with_no_more_copies_for_its_broker_holds_nothing_there():
    # 5 copies into 2 but has no more copies for it: 2 takes broker 1's copy, and 5 starts on broker 8
    busy = InFlight().plus(step((2,), leader=5))
    entries = [(tp(1), step((2,), leader=1), FRESH)] + [(tp(i), step((8,), leader=5), FRESH) for i in range(2, 5)]
    index, plans = index_of(entries)
    assert started(next_batch(index, busy, pin_limits(), plans.get)) == [tp(1), tp(2), tp(3), tp(4)]


def test_an_idle_dominant_source_starts_where_no_other_source_copies_rather_than_wait():
    # 5 copies nothing; its oldest copy goes into 1, which broker 3 feeds: it waits (beside 3's copy it
    # would get nearly nothing), but 5 has a copy for broker 2, which nobody feeds: that one starts, and
    # 1 is not drained for 5 (broker 0's copy into 1 starts too)
    busy = InFlight().plus(step((1,), leader=3))
    entries = [(tp(1), step((1,), leader=5), FRESH), (tp(2), step((1,), leader=5), FRESH),
               (tp(3), step((2,), leader=5), FRESH), (tp(4), step((1,), leader=0), FRESH)]
    index, plans = index_of(entries)
    assert started(next_batch(index, busy, pin_limits(), plans.get)) == [tp(3), tp(4)]


def test_a_broker_drains_for_a_dominant_source_that_has_copies_for_nothing_else():
    # all of 5's copies go into 1, which broker 3 feeds: 1 takes no other source's copy until 3's ends
    # and 5 starts there; broker 0's copy into 4 goes on
    busy = InFlight().plus(step((1,), leader=3))
    entries = [(tp(i), step((1,), leader=5), FRESH) for i in range(1, 5)] + [
        (tp(5), step((1,), leader=0), FRESH), (tp(6), step((4,), leader=0), FRESH)]
    index, plans = index_of(entries)
    assert started(next_batch(index, busy, pin_limits(), plans.get)) == [tp(6)]
    # once 3's copy has ended, 5 starts there (as much as 1's incoming cap of 4 allows), and 0's copy into
    # 1 waits
    assert started(next_batch(index, InFlight(), pin_limits(), plans.get)) == [tp(1), tp(2), tp(3), tp(4), tp(6)]


def test_copies_that_weigh_nothing_are_not_held_by_a_dominant_source():
    busy = InFlight().plus(step((2,), leader=5))
    entries = [(tp(1), step((2,), leader=1), FRESH)] + [(tp(i), step((2,), leader=5), FRESH) for i in range(2, 5)]
    index = ReadyIndex()
    plans = {}
    for seq, (t, s, lane) in enumerate(entries):
        index, _slot = index.add(SchedulingKey.of(s, 0 if s.leader == 1 else WEIGHT_UNITS), lane, seq, t)
        plans[t] = s
    decisions = next_batch(index, busy, pin_limits(), plans.get,
                           weigh=lambda t, s: 0 if s.leader == 1 else WEIGHT_UNITS)
    assert tp(1) in started(decisions)


def test_a_dominant_source_is_never_pinned_to_a_dead_broker():
    # 5 (dominant) copies into broker 2, whose incoming cap (1) its copy fills, and has more copies for it;
    # then 2 dies: the copy into it stays in flight until 2 returns (section 2, "No starvation": copies out
    # of a healthy source go on meanwhile), so 5 is not pinned to 2 and its copies into 8 start. While 2
    # lives, they wait (5's whole rate goes into 2). (8 takes one: its incoming cap is 1 too.)
    limits = pin_limits().changed({"max_incoming_moves_per_broker": 1})
    busy = InFlight().plus(step((2,), leader=5))
    entries = [(tp(1), step((2,), leader=5), FRESH), (tp(2), step((8,), leader=5), FRESH),
               (tp(3), step((8,), leader=5), FRESH), (tp(4), step((7,), leader=1), FRESH)]
    index, plans = index_of(entries)
    assert started(next_batch(index, busy, limits, plans.get, live=frozenset({1, 5, 7, 8}))) == [tp(2), tp(4)]
    assert started(next_batch(index, busy, limits, plans.get, live=frozenset({1, 2, 5, 7, 8}))) == [tp(4)]


def test_a_dead_dominant_source_holds_no_other_sources_copies():
    # 5 leads most ready moves and copies into 2, but is dead: its copies wait anyway (on a new leader);
    # broker 1's copy into 2 starts
    busy = InFlight().plus(step((2,), leader=5))
    entries = [(tp(1), step((2,), leader=1), FRESH)] + [(tp(i), step((2,), leader=5), FRESH) for i in range(2, 5)]
    index, plans = index_of(entries)
    assert tp(1) not in started(next_batch(index, busy, pin_limits(), plans.get))
    assert tp(1) in started(next_batch(index, busy, pin_limits(), plans.get, live=frozenset({1, 2})))


def test_another_requests_copy_into_the_pinned_broker_keeps_its_turn():
    # 5 (dominant, request "decom") copies into 2: the decommission's other copies into 2 wait, but a copy
    # of another request (a small urgent one) into 2 starts in its turn (start-time fair queueing)
    busy = InFlight().plus(step((2,), leader=5))
    index, plans = ReadyIndex(), {}
    for seq, (t, s, rid) in enumerate([(tp(1), step((2,), leader=1), "decom"), (tp(2), step((2,), leader=1), "urgent")]
                                      + [(tp(i), step((2,), leader=5), "decom") for i in range(3, 7)]):
        index, _slot = index.add(SchedulingKey.of(s), FRESH, seq, t, rid)
        plans[t] = s
    got = started(next_batch(index, busy, pin_limits(), plans.get))
    assert tp(1) not in got and tp(2) in got, got


def test_pin_holds_reports_only_what_a_decision_looks_at():
    # 5 (dominant) copies into 2; 4,000 of its copies into 8 wait 'pin-out' in one lane: a decision looks
    # at the lane's head and SCAN more, so the status counts those, the rest are queued behind them (and
    # a status call or a /metrics scrape costs O(SCAN x lanes), not O(ready steps))
    busy = InFlight().plus(step((2,), leader=5))
    entries = ([(tp(0), step((2,), leader=5), FRESH), (tp(1), step((7,), leader=1), FRESH)]
               + [(tp(i), step((8,), leader=5), FRESH) for i in range(2, 4002)])
    index, _plans = index_of(entries)
    holds = scheduler.pin_holds(index, busy, pin_limits())
    assert holds.pinned_to == frozenset({2})
    assert sum(1 for _key, why in holds.held.values() if why == scheduler.PIN_OUT) == scheduler.SCAN  # and its head
