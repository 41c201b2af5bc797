"""KIP-435 step planner: the KIP's examples, the edge cases, and properties."""

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from engine.core.step import DONE, KIP_435, STEP_MODES, WHOLE, Step, Waiting, plan_all, plan_step


def trs(steps):
    return [s.tr for s in steps]


# --- the KIP's worked example and named cases -----------------------------------


def test_kip435_example_r2():
    steps = plan_all((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), max_replicas_per_step=2, steps=KIP_435)
    assert trs(steps) == [(5, 0, 1, 2, 3, 4), (5, 6, 2, 3, 4), (5, 6, 7, 8, 4), (5, 6, 7, 8, 9)]
    assert [(s.nr, s.dr) for s in steps] == [((5,), ()), ((6,), (0, 1)), ((7, 8), (2, 3)), ((9,), (4,))]
    assert [s.moves_leader for s in steps] == [True, False, False, False]


def test_kip435_example_incremental_drops_the_old_leader_with_the_new_one_added():
    # the default: the leader-first step also drops leader 0, which leaves: KRaft elects 5 (TR[0]) at
    # Phase B, one leader epoch bump where kip-435 has two (the election, then the step that drops 0)
    steps = plan_all((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), max_replicas_per_step=2)
    assert trs(steps) == [(5, 1, 2, 3, 4), (5, 6, 7, 3, 4), (5, 6, 7, 8, 9)]
    assert [(s.nr, s.dr) for s in steps] == [((5,), (0,)), ((6, 7), (1, 2)), ((8, 9), (3, 4))]
    assert [s.moves_leader for s in steps] == [True, False, False]


def test_one_replica_onto_a_new_preferred_leader_is_one_step_and_one_bump():
    # 24 x 16 MiB onto a new broker (the measured runs): (1,2,3) -> (4,2,3), leader 1
    assert trs(plan_all((1, 2, 3), (4, 2, 3))) == [(4, 2, 3)]
    assert trs(plan_all((1, 2, 3), (4, 2, 3), steps=KIP_435)) == [(4, 2, 3, 1), (4, 2, 3)]
    step = plan_step((1, 2, 3), (4, 2, 3), {1, 2, 3}, 1)
    assert step == Step((1, 2, 3), (4, 2, 3), (4,), (1,), 1, True)


def test_incremental_keeps_a_leader_that_stays_and_then_needs_the_election():
    # the old leader 2 stays in FTR: nothing in sync is dropped, the new leader is elected after the step
    step = plan_step((2, 1, 3), (4, 2, 3), {1, 2, 3}, 2)
    assert step.nr == (4,) and step.dr == () and step.tr == (4, 2, 3, 1)


def test_incremental_drops_the_leader_only_while_the_floor_holds():
    # (1, 2) with 2 dead, FTR (4, 5): dropping leader 1 would leave one live replica of a floor of two
    step = plan_step((1, 2), (4, 5), {1}, 1, 1, 1, live={1, 4, 5})
    assert step.nr == (4,) and 1 not in step.dr and 2 in step.dr


def test_whole_is_one_step_to_the_target():
    assert trs(plan_all((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), max_replicas_per_step=2, steps=WHOLE)) == [
        (5, 6, 7, 8, 9)]
    assert trs(plan_all((0, 1, 2), (0, 3, 4), steps=WHOLE)) == [(0, 3, 4)]
    # the caps still bound |NR|: then it takes as many steps as they need
    step = plan_step((0, 1, 2), (3, 4, 5), {0, 1, 2}, 0, 1, 1, max_new=2, steps=WHOLE)
    assert step.nr == (3, 4) and step.dr == (0, 1) and step.tr == (3, 4, 2)


def test_an_unknown_step_mode_is_refused():
    with pytest.raises(ValueError):
        plan_step((0, 1), (0, 2), {0, 1}, 0, steps="fast")


def test_first_step_names_nr_dr_and_leader_move():
    step = plan_step((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), {0, 1, 2, 3, 4}, 0, 1, 2, steps=KIP_435)
    assert step == Step((0, 1, 2, 3, 4), (5, 0, 1, 2, 3, 4), (5,), (), 0, True)
    assert step.source == 0


def test_target_equal_to_current_is_done():
    assert plan_step((1, 2, 3), (1, 2, 3), {1, 2, 3}, 1) is DONE
    assert plan_all((1, 2, 3), (1, 2, 3)) == []


def test_reorder_only_is_one_step():
    steps = plan_all((1, 2, 3), (3, 1, 2))
    assert trs(steps) == [(3, 1, 2)]
    assert steps[0].nr == () and steps[0].dr == () and steps[0].moves_leader


def test_replication_factor_increase():
    steps = plan_all((0, 1, 2), (0, 1, 2, 3, 4), max_replicas_per_step=1)
    assert trs(steps) == [(0, 1, 2, 3), (0, 1, 2, 3, 4)]


def test_replication_factor_increase_with_moves():
    steps = plan_all((0, 1, 2), (3, 4, 5, 6, 7), max_replicas_per_step=2, steps=KIP_435)
    assert trs(steps) == [(3, 0, 1, 2), (3, 4, 5, 2), (3, 4, 5, 6, 7)]
    steps = plan_all((0, 1, 2), (3, 4, 5, 6, 7), max_replicas_per_step=2)
    assert trs(steps) == [(3, 1, 2), (3, 4, 5), (3, 4, 5, 6, 7)]


def test_replication_factor_decrease():
    assert trs(plan_all((0, 1, 2, 3, 4), (0, 1, 2))) == [(0, 1, 2, 4), (0, 1, 2)]


def test_replication_factor_decrease_with_moves_never_below_target_size():
    steps = plan_all((0, 1, 2, 3, 4), (5, 6, 7), max_replicas_per_step=2, steps=KIP_435)
    assert trs(steps) == [(5, 0, 1, 2, 3, 4), (5, 2, 3, 4), (5, 6, 4), (5, 6, 7)]
    assert min(len(s.tr) for s in steps) == 3
    steps = plan_all((0, 1, 2, 3, 4), (5, 6, 7), max_replicas_per_step=2)
    assert trs(steps) == [(5, 1, 2, 3, 4), (5, 3, 4), (5, 6, 7)]
    assert min(len(s.tr) for s in steps) == 3


def test_min_insync_catch_up_adds_two_at_once():
    # KIP-435: min.insync.replicas 3, only 1 in sync -> add 2 in the first step.
    step = plan_step((0, 1, 2), (3, 4, 5), {0}, 0, min_insync_replicas=3, max_replicas_per_step=1)
    assert step.nr == (3, 4)
    assert step.tr[:2] == (3, 4)


def test_catch_up_when_leader_already_placed():
    step = plan_step((0, 1, 2), (0, 4, 5), {0}, 0, min_insync_replicas=3, max_replicas_per_step=1)
    assert step.nr == (4, 5)


def test_out_of_sync_excess_replicas_are_dropped_first():
    step = plan_step((0, 1, 2), (0, 3, 4), {0, 2}, 0, 1, 1)
    assert step.dr == (1,)


def test_offline_partition_waits():
    result = plan_step((0, 1, 2), (3, 4, 5), set(), None)
    assert isinstance(result, Waiting) and "offline" in result.reason


def test_all_targets_offline_waits_with_reason():
    result = plan_step((0, 1, 2), (0, 1, 3), {0, 1, 2}, 0, live={0, 1, 2})
    assert result == Waiting("target brokers [3] are offline")


def test_new_preferred_leader_offline_waits():
    result = plan_step((0, 1, 2), (3, 1, 2), {0, 1, 2}, 0, live={0, 1, 2, 4})
    assert result == Waiting("new preferred leader broker 3 is offline")


def test_offline_target_skipped_for_a_live_one():
    step = plan_step((0, 1, 2), (0, 3, 4), {0, 1, 2}, 0, 1, 1, live={0, 1, 2, 4})
    assert step.nr == (4,)


def test_dead_excess_replica_is_dropped_before_live_ones():
    step = plan_step((0, 1, 2), (0, 3, 4), {0, 1}, 0, 1, 1, live={0, 1, 3, 4})
    assert step == Step((0, 1, 2), (0, 3, 1), (3,), (2,), 0, False)


def test_replacing_dead_brokers_drops_every_dead_replica_whatever_r():
    # Brokers 1 and 2 died (out of the ISR): the new leader is added, both dead replicas go at once.
    for r in (1, 2, 3):
        step = plan_step((0, 1, 2), (3, 4, 5), {0}, 0, 1, r, live={0, 3, 4, 5})
        assert step == Step((0, 1, 2), (3, 0), (3,), (1, 2), 0, True), r
    # then the partition grows back to |FTR| and converges
    assert trs(walk((0, 1, 2), (3, 4, 5), {0}, 1, live={0, 3, 4, 5})) == [(3, 0), (3, 4), (3, 4, 5)]


def test_a_dead_replica_is_a_slot_to_refill_before_a_live_one_goes():
    step = plan_step((0, 1, 2), (0, 3, 4), {0, 1}, 0, 1, 1, live={0, 1, 3, 4})
    assert step == Step((0, 1, 2), (0, 3, 1), (3,), (2,), 0, False)
    # the target broker is offline too: the dead replica still goes, nothing else
    assert plan_step((0, 1, 2), (0, 1, 3), {0, 1}, 0, 1, 1, live={0, 1}).tr == (0, 1)


def walk(cr, ftr, isr, r, live, min_isr=1, limit=50, steps="incremental"):
    """plan_step repeated, each step completing with its live replicas in sync and TR[0] leading."""
    out, leader = [], next(b for b in cr if b in isr)
    for _ in range(limit):
        result = plan_step(cr, ftr, isr, leader, min_isr, r, live=live, steps=steps)
        if result is DONE:
            return out
        assert isinstance(result, Step), result
        out.append(result)
        cr = result.tr
        isr = {b for b in cr if b in live}
        leader = cr[0] if cr[0] in isr else next(b for b in cr if b in isr)
    raise AssertionError("did not converge")


def test_step_that_must_keep_an_offline_replica_waits():
    # broker 2 is dead but stays in the target: Kafka could never complete the step
    result = plan_step((0, 1, 2), (0, 2, 3), {0, 1}, 0, 1, 1, live={0, 1, 3})
    assert result == Waiting("replicas [2] are offline and must stay in this step's target")


def test_new_replica_shortfall_drops_fewer():
    # Two excess replicas could go, but only one target is online: drop one.
    step = plan_step((0, 1, 2), (0, 3, 4), {0, 1, 2}, 0, 1, 2, live={0, 1, 2, 3})
    assert step.nr == (3,) and step.dr == (1,)
    assert len(step.tr) == 3


# --- properties ---------------------------------------------------------------------------

brokers = st.integers(min_value=0, max_value=11)


@st.composite
def reassignments(draw):
    cr = tuple(draw(st.lists(brokers, min_size=1, max_size=6, unique=True)))
    ftr = tuple(draw(st.lists(brokers, min_size=1, max_size=6, unique=True)))
    r = draw(st.integers(min_value=1, max_value=4))
    return cr, ftr, r


modes = st.sampled_from(STEP_MODES)


@settings(max_examples=500, deadline=None)
@given(reassignments(), modes)
def test_every_plan_converges_to_ftr_in_ftr_order(case, mode):
    cr, ftr, r = case
    steps = plan_all(cr, ftr, max_replicas_per_step=r, steps=mode)
    final = steps[-1].tr if steps else cr
    assert final == ftr
    assert len(steps) <= len(cr) + len(ftr) + 1  # every step makes progress
    if mode == WHOLE:
        assert len(steps) <= 1


@settings(max_examples=500, deadline=None)
@given(reassignments(), modes)
def test_steps_respect_r_and_never_shrink_below_min_size(case, mode):
    cr, ftr, r = case
    floor = min(len(cr), len(ftr))
    prev = cr
    for s in plan_all(cr, ftr, max_replicas_per_step=r, steps=mode):
        assert s.cr == prev
        assert mode == WHOLE or (len(s.nr) <= r and len(s.dr) <= r)
        assert set(s.nr) == set(s.tr) - set(s.cr) and set(s.dr) == set(s.cr) - set(s.tr)
        assert len(set(s.tr)) == len(s.tr) >= floor
        assert s.tr != s.cr
        prev = s.tr


@settings(max_examples=300, deadline=None)
@given(reassignments(), st.integers(min_value=1, max_value=4), st.data())
def test_catch_up_is_the_only_excess_over_r(case, min_isr, data):
    cr, ftr, r = case
    isr = set(data.draw(st.lists(st.sampled_from(cr), min_size=1, unique=True)))
    leader = data.draw(st.sampled_from(sorted(isr)))
    result = plan_step(cr, ftr, isr, leader, min_isr, r)
    if isinstance(result, Step):
        assert len(result.dr) <= r
        if len(result.nr) > r:
            # only to bring the in-sync count up to min.insync.replicas
            assert len(result.nr) <= min_isr - len(isr & set(cr)) + (1 if ftr[0] not in cr else 0)


@settings(max_examples=300, deadline=None)
@given(reassignments(), st.data(), modes)
def test_offline_brokers_never_enter_a_step(case, data, mode):
    cr, ftr, r = case
    live = set(data.draw(st.lists(brokers, unique=True)))
    result = plan_step(cr, ftr, set(cr), cr[0], 1, r, live=live, steps=mode)
    if isinstance(result, Step):
        assert all(b in live for b in result.tr)
        assert len(result.tr) >= min(len(cr), len(ftr))


@settings(max_examples=1000, deadline=None)
@given(reassignments(), st.integers(min_value=1, max_value=7), modes)
def test_healthy_fast_path_equals_iterating_plan_step_at_every_min_insync(case, min_isr, mode):
    cr, ftr, r = case
    slow, c, leader = [], cr, cr[0]
    while True:
        result = plan_step(c, ftr, set(c), leader, min_isr, r, steps=mode)
        if result is DONE:
            break
        slow.append(result)
        c, leader = result.tr, result.tr[0]
    assert plan_all(cr, ftr, min_isr, r, steps=mode) == slow
    assert plan_all(cr, ftr, min_isr, r, isr=set(cr), leader=cr[0], steps=mode) == slow  # the general loop


@settings(max_examples=500, deadline=None)
@given(reassignments())
def test_incremental_never_bumps_more_than_kip_435(case):
    """Leader epoch bumps of a healthy walk (KRaft: a step that drops a replica, and an election after
    a step that leaves TR[0] not leading): the incremental rule never has more than KIP-435's."""
    cr, ftr, r = case

    def bumps(steps):
        n = 0
        for s in steps:
            leader_left = s.leader not in s.tr  # Phase B elects TR[0] (first in sync)
            n += 1 if s.dr else 0
            n += 1 if s.tr[0] != s.leader and not leader_left else 0  # a separate election
        return n

    assert bumps(plan_all(cr, ftr, 1, r)) <= bumps(plan_all(cr, ftr, 1, r, steps=KIP_435))
    assert bumps(plan_all(cr, ftr, 1, r, steps=WHOLE)) <= 2


def test_plan_agrees_with_the_engine_below_min_insync():
    # (1,6,9,3,2) -> (6,5), min.insync 4: once fewer than 4 are in sync the catch-up rule applies
    assert trs(plan_all((1, 6, 9, 3, 2), (6, 5), 4, 1))[-2:] == [(6, 5, 2), (6, 5)]


@settings(max_examples=1000, deadline=None)
@given(reassignments(), st.data(), modes)
def test_dead_replicas_never_block_a_partition_whose_targets_are_alive(case, data, mode):
    cr, ftr, r = case
    dead = set(data.draw(st.lists(st.sampled_from(cr), unique=True, max_size=len(cr) - 1)))
    dead -= set(ftr)  # the targets are alive; some replicas to remove are dead
    alive_cr = [b for b in cr if b not in dead]
    live = (set(range(12)) - dead)
    isr = set(data.draw(st.lists(st.sampled_from(alive_cr), min_size=1, unique=True)))
    steps = walk(cr, ftr, isr, r, live, steps=mode)
    final = steps[-1].tr if steps else cr
    assert final == ftr
    for s in steps:
        assert mode == WHOLE or len([b for b in s.dr if b in live]) <= r  # dead drops come on top of R
        assert all(b in live for b in s.tr)  # and every dead replica leaves with the first step
