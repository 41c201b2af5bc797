"""decide/apply: requests from submission to completion, told as stories."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.commands import (
    Cancel, ChangeLimits, ChangeThrottle, Observation, Pause, PartitionTarget, Resume, StepStartReport, Submit, Tick,
)
from engine.decide import decide, handle
from engine.limits import Limits
from engine.partition import PartitionState, TopicPartition
from engine.state import CANCELLED, COMPLETED, EMPTY, REVERTED, WAITING, fold
from engine.throttles import needed
from tests.fake_cluster import Driver, FakeCluster

T = "t"


def tp(i, topic=T):
    return TopicPartition(topic, i)


def submit(rid, targets, **kw):
    return Submit(rid, tuple(PartitionTarget(t.topic, t.partition, tuple(r)) for t, r in targets.items()), **kw)


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def cluster(n_partitions=6, brokers=range(8), rf=3, min_isr=1):
    assignment = {tp(i): tuple((i + k) % 4 for k in range(rf)) for i in range(n_partitions)}
    return FakeCluster(assignment, brokers, min_isr)


def check_invariants(d: Driver):
    s = d.state
    assert fold(d.events) == s, "state is the fold of the events"
    want = needed(((t, f.step) for t, f in s.steps.items()), s.throttle_rate)
    assert s.throttles == want, "throttles in force are exactly what steps in flight need"
    assert d.cluster.throttles["leader"] == set(want.leader)
    assert d.cluster.throttles["follower"] == set(want.follower)


# --- validation -------------------------------------------------------------------------------


def test_invalid_submission_is_rejected_naming_every_problem_and_changes_nothing():
    d = Driver(cluster(n_partitions=3, brokers=range(6)))
    before = d.state
    cmd = Submit("bad", (
        PartitionTarget("nosuch", 0, (1, 2)),
        PartitionTarget(T, 7, (1, 2)),
        PartitionTarget(T, 0, ()),
        PartitionTarget(T, 1, (1, -4, 2)),
        PartitionTarget(T, 2, (3, 3, 9)),
        PartitionTarget(T, 2, (1, 2, 3)),
        PartitionTarget(T, 1, (1, 2), ("any",)),
    ))
    events = decide(before, cmd)
    assert len(events) == 1 and isinstance(events[0], ev.CommandRejected)
    reasons = " | ".join(events[0].reasons)
    for fragment in ("unknown topic 'nosuch'", "unknown partition t-7", "t-0: empty replica list",
                     "negative broker ids [-4]", "brokers [3] listed more than once",
                     "brokers [9] are not in the cluster", "partition t-2 is listed 2 times",
                     "1 log_dirs for 2 replicas"):
        assert fragment in reasons
    after = handle(before, cmd)[0]
    assert after.rejections == (events[0],) and dict(after.rejected) == {"submit": 1}  # kept for status and replay
    assert after._replace(rejections=before.rejections, rejected=before.rejected) == before  # nothing else


def test_an_observation_without_a_size_keeps_the_known_size():
    d = Driver(cluster(n_partitions=1))
    p = d.cluster.parts[tp(0)]
    events = d.feed(Observation(partitions={tp(0): p._replace(size_bytes=5_000)}))
    assert of_type(events, ev.PartitionObserved)[0].state.size_bytes == 5_000
    assert decide(d.state, Observation(partitions={tp(0): p})) == []  # size unknown now: nothing changed
    moved = decide(d.state, Observation(partitions={tp(0): p._replace(leader=p.replicas[1])}))
    assert of_type(moved, ev.PartitionObserved)[0].state.size_bytes == 5_000


def test_unchanged_observation_emits_nothing():
    d = Driver(cluster())
    assert decide(d.state, d.cluster.observation()) == []


# --- a request from submission to completion -------------------------------------------------------


def test_request_runs_to_its_target_and_clears_its_throttles():
    c = cluster(n_partitions=12)
    d = Driver(c)
    targets = {tp(i): (4 + i % 4, 4 + (i + 1) % 4, i % 4) for i in range(12)}
    d.feed(submit("r1", targets))
    d.run()
    assert c.assignment() == targets
    assert of_type(d.events, ev.RequestCompleted) == [ev.RequestCompleted("r1", 12, 0, 0)]
    assert d.state.throttles.is_empty() and not any(c.throttles.values())
    assert len(of_type(d.events, ev.ThrottlesApplied)) >= 1
    check_invariants(d)


def test_throttles_are_set_before_the_step_and_removed_when_it_completes():
    c = cluster(n_partitions=1)
    d = Driver(c)
    d.feed(submit("r1", {tp(0): (5, 1, 2)}))
    events = d.tick()
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ThrottlesApplied) < kinds.index(ev.StepPlanned)
    applied = of_type(events, ev.ThrottlesApplied)[0].throttles
    assert {r.config_entry() for r in applied.follower} == {"0:5"}
    assert {r.config_entry() for r in applied.leader} == {"0:0", "0:1", "0:2"}
    c.finish(tp(0))
    events = d.feed(c.observation())
    kinds = [type(e) for e in events]
    assert kinds.index(ev.StepCompleted) < kinds.index(ev.ThrottlesRemoved)
    assert d.state.throttles.is_empty()


def test_requests_queue_and_share_capacity():
    c = cluster(n_partitions=8)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 2, "max_incoming_moves_per_broker": 9,
                         "max_outgoing_moves_per_broker": 9}))
    d.feed(submit("a", {tp(i): (6, 1, 2) for i in range(4)}))
    d.feed(submit("b", {tp(i): (7, 2, 3) for i in range(4, 8)}))
    in_flight_peak = 0
    for _ in range(100):
        d.tick()
        in_flight_peak = max(in_flight_peak, len(d.state.steps))
        for t in c.in_progress()[:1]:
            c.finish(t)
        d.observe()
    assert in_flight_peak <= 2
    assert {e.request_id for e in of_type(d.events, ev.RequestCompleted)} == {"a", "b"}


def test_paused_engine_starts_nothing_new_and_resume_continues():
    c = cluster(n_partitions=4)
    d = Driver(c)
    d.feed(submit("r", {tp(i): (5, 6, 7) for i in range(4)}))
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.tick()
    assert len(d.state.steps) == 1
    d.feed(Pause())
    for t in c.in_progress():
        c.finish(t)
    d.observe()
    events = d.tick()
    assert not of_type(events, ev.StepPlanned) and not d.state.steps
    assert of_type(decide(d.state, Pause()), ev.CommandRejected)
    d.feed(Resume())
    assert of_type(d.tick(), ev.StepPlanned)
    d.run()
    assert all(r == (5, 6, 7) for r in c.assignment().values())


def test_limits_apply_from_the_next_decision():
    c = cluster(n_partitions=6)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 2}))
    d.feed(submit("r", {tp(i): (4 + i % 4, 1 + i % 3, 0) for i in range(6)}))
    d.tick()
    assert len(d.state.steps) == 2
    d.feed(ChangeLimits({"reassignment.parallel.partition.count": 1}))
    assert not of_type(d.tick(), ev.StepPlanned)  # two in flight already, above the new limit
    assert len(d.state.steps) == 2
    bad = decide(d.state, ChangeLimits({"max_partitions_in_flight": 0, "nope": 3}))
    assert bad == [ev.CommandRejected("limits", (
        "limit 'max_partitions_in_flight' must be an integer >= 1, got 0", "unknown limit 'nope'"))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "cancel", "limits", "pause"]), st.booleans()), max_size=260))
def test_rejections_are_kept_in_the_state_the_latest_hundred_and_counted_by_command(commands):
    from collections import Counter

    from engine.state import REJECTIONS_KEPT

    log, state = [], EMPTY
    for i, (command, rejected) in enumerate(commands):
        event = ev.CommandRejected(command, (f"reason {i}",), None, f"c{i}") if rejected else ev.Paused(f"c{i}")
        log.append(event)
        state = fold([event], state)
    rejections = [e for e in log if isinstance(e, ev.CommandRejected)]
    assert list(state.rejections) == rejections[-REJECTIONS_KEPT:]
    assert dict(state.rejected) == dict(Counter(e.command for e in rejections))
    assert fold(log) == state


def test_throttle_rate_change_reapplies_rates_and_disabling_removes_everything():
    c = cluster(n_partitions=2)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2), tp(1): (6, 2, 3)}, throttle_rate=10_000_000))
    d.tick()
    assert d.state.throttles.rate == 10_000_000
    events = d.feed(ChangeThrottle(20_000_000))
    applied = of_type(events, ev.ThrottlesApplied)[0].throttles
    assert applied.rate == 20_000_000 and applied.follower_brokers == {5, 6}
    events = d.feed(ChangeThrottle(None))
    assert of_type(events, ev.ThrottlesRemoved) and d.state.throttles.is_empty()
    assert of_type(decide(d.state, ChangeThrottle(0)), ev.CommandRejected)
    check_invariants(d)


def test_redelivered_submit_is_ignored_and_a_reused_id_rejected():
    d = Driver(cluster())
    cmd = submit("r", {tp(0): (5, 6, 7)})
    d.feed(cmd)
    assert decide(d.state, cmd) == []
    other = decide(d.state, submit("r", {tp(0): (4, 6, 7)}))
    assert other[0].reasons == ("request id 'r' is already used by another reassignment",)


def test_a_submit_cut_short_by_a_crash_is_completed_on_redelivery():
    d = Driver(cluster())
    cmd = submit("r", {tp(i): (5, 6, 7) for i in range(4)})
    events = decide(d.state, cmd)
    queued = [e for e in events if isinstance(e, ev.PartitionQueued)]
    cut = events[: events.index(queued[2])]  # the crash lost the last two partitions
    state = fold(cut, d.state)
    redelivered = decide(state, cmd)
    assert [e.tp for e in of_type(redelivered, ev.PartitionQueued)] == [tp(2), tp(3)]


def test_partition_already_at_target_completes_at_once():
    c = cluster(n_partitions=1)
    d = Driver(c)
    events = d.feed(submit("r", {tp(0): c.assignment()[tp(0)]}))
    assert of_type(events, ev.PartitionCompleted) and of_type(events, ev.RequestCompleted)


def test_refused_step_waits_with_the_reason_and_is_retried():
    c = cluster(n_partitions=1)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2)}))
    state, events = handle(d.state, Tick())
    planned = of_type(events, ev.StepPlanned)[0]
    state, events = handle(state, StepStartReport("r", tp(0), planned.number, "INVALID_REPLICA_ASSIGNMENT: broker 5"))
    assert state.partitions[tp(0)].status == WAITING and "INVALID_REPLICA_ASSIGNMENT" in state.waiting[tp(0)]
    assert state.throttles.is_empty()
    state, events = handle(state, Observation(partitions={tp(0): c.parts[tp(0)]}))
    assert of_type(events, ev.PartitionReady)


def test_broker_down_makes_moves_to_it_wait_and_they_finish_when_it_returns():
    c = cluster(n_partitions=2)
    c.brokers[5] = c.brokers[5]._replace(alive=False)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2), tp(1): (6, 2, 3)}))
    d.run()
    assert d.state.partitions[tp(0)].status == WAITING
    assert d.state.waiting[tp(0)] == "new preferred leader broker 5 is offline"
    assert c.assignment()[tp(1)] == (6, 2, 3)
    c.brokers[5] = c.brokers[5]._replace(alive=True)
    d.observe()
    d.run()
    assert c.assignment()[tp(0)] == (5, 1, 2)
    assert of_type(d.events, ev.RequestCompleted) == [ev.RequestCompleted("r", 2, 0, 0)]


# --- cancellation (KIP-236) ---------------------------------------------------------------------------


def test_cancel_aborts_steps_in_flight_and_keeps_finished_partitions():
    c = cluster(n_partitions=4)
    original = c.assignment()
    d = Driver(c)
    d.feed(submit("r", {tp(i): (5, 6, 7) for i in range(4)}))
    # partitions 0 and 1 finish every step; the first steps of 2 and 3 never catch up
    for _ in range(30):
        d.tick()
        for t in [t for t in c.in_progress() if t in (tp(0), tp(1))]:
            c.finish(t)
        d.observe()
    assert c.assignment()[tp(0)] == c.assignment()[tp(1)] == (5, 6, 7)
    assert c.in_progress() == [tp(2), tp(3)]
    events = d.feed(Cancel("r"))
    assert {e.tp for e in of_type(events, ev.PartitionCancelled) if e.aborting} == {tp(2), tp(3)}
    d.run()
    assert not c.in_progress()
    assert c.assignment()[tp(2)] == original[tp(2)] and c.assignment()[tp(3)] == original[tp(3)]
    assert c.assignment()[tp(0)] == (5, 6, 7)
    assert of_type(d.events, ev.StepAborted)
    assert of_type(d.events, ev.RequestCompleted)[-1] == ev.RequestCompleted("r", 2, 2, 0)
    check_invariants(d)


def test_cancel_with_rollback_returns_every_partition_to_its_original_replicas():
    c = cluster(n_partitions=5)
    original = c.assignment()
    d = Driver(c)
    d.feed(submit("r", {tp(i): (4 + i % 4, 5 + i % 3, 0 if i % 4 else 1) for i in range(5)}))
    for _ in range(5):
        d.tick()
        for t in c.in_progress()[:2]:
            c.finish(t)
        d.observe()
    d.feed(Cancel("r", rollback=True))
    d.observe()
    d.run()
    assert c.assignment() == original
    assert {e.tp for e in of_type(d.events, ev.PartitionReverted)} | \
        {t for t, p in d.state.partitions.items() if p.status == CANCELLED} == set(original)
    assert of_type(d.events, ev.RequestCompleted)[-1].reverted >= 1
    check_invariants(d)


def test_rollback_of_a_completed_request_moves_it_back():
    c = cluster(n_partitions=2)
    original = c.assignment()
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 6, 7), tp(1): (6, 7, 4)}))
    d.run()
    assert of_type(d.events, ev.RequestCompleted)
    skipped = decide(d.state, Cancel("r", partitions=(tp(0),)))
    assert of_type(skipped, ev.CancelSkipped)[0].reason.startswith("already completed")
    d.feed(Cancel("r", rollback=True))
    d.run()
    assert c.assignment() == original
    assert all(p.status == REVERTED for p in d.state.partitions.values())
    assert of_type(d.events, ev.RequestCompleted)[-1] == ev.RequestCompleted("r", 0, 0, 2)


def test_cancel_single_partition_leaves_the_rest_running():
    c = cluster(n_partitions=3)
    d = Driver(c)
    d.feed(submit("r", {tp(i): (5, 6, 7) for i in range(3)}))
    d.feed(Cancel("r", partitions=(tp(1),)))
    d.run()
    assert c.assignment()[tp(0)] == c.assignment()[tp(2)] == (5, 6, 7)
    assert d.state.partitions[tp(1)].status == CANCELLED
    bad = decide(d.state, Cancel("r", partitions=(tp(9),)))
    assert "not part of request" in bad[0].reasons[0]
    assert decide(d.state, Cancel("nosuch"))[0].reasons == ("unknown request 'nosuch'",)


def test_kip236_skip_when_original_replicas_are_all_out_of_isr_and_new_ones_online():
    c = cluster(n_partitions=1)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 6, 7)}))
    d.run()
    # the original brokers 0,1,2 fell out of the ISR while 5,6,7 are online: rollback would go offline
    events = d.feed(Cancel("r", rollback=True))
    assert not of_type(events, ev.CancelSkipped)  # all in sync: allowed
    d2 = Driver(FakeCluster({tp(0): (0, 1, 2)}, range(8)))
    d2.feed(submit("r", {tp(0): (5, 6, 7)}))
    d2.run()
    p = d2.cluster.parts[tp(0)]
    d2.feed(Observation(partitions={tp(0): p}))
    state = d2.state
    from engine.decide import handle as h
    state, _ = h(state, Observation(partitions={tp(0): p}))
    events = decide(state, Cancel("r", rollback=True))
    assert not of_type(events, ev.CancelSkipped)
    # original replicas out of ISR: they are no longer replicas at all, and 5,6,7 are online
    state2 = state
    state2 = state2._replace(observed=state2.observed.set(tp(0), PartitionState((5, 6, 7), frozenset({5, 6, 7}), 5)))
    from engine.cancellation import skip_reason
    assert skip_reason((0, 1, 2), (5, 6, 7), {5, 6, 7}, None).startswith("original replicas [0, 1, 2] are all out of the ISR")
    assert skip_reason((0, 1, 2), (5, 6, 7), {5, 6, 7}, set()) is None  # everything offline anyway
    assert skip_reason(None, (5,), {5}, None) == "original replicas unknown: nothing to roll back to"


def test_cancel_in_flight_is_skipped_when_the_abort_would_take_the_partition_offline():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2)}))
    d.tick()
    # step (5,0,1,2) in flight; brokers 0,1,2 drop out of the ISR while 5 caught up
    p = c.parts[tp(0)]
    d.feed(Observation(partitions={tp(0): p._replace(isr=frozenset({5}), leader=5)}))
    events = d.feed(Cancel("r"))
    skipped = of_type(events, ev.CancelSkipped)
    assert skipped and "reverting would take the partition offline" in skipped[0].reason
    assert not of_type(events, ev.PartitionCancelled)


def test_new_request_supersedes_pending_work_of_an_overlapping_one():
    c = cluster(n_partitions=2)
    d = Driver(c)
    d.feed(submit("old", {tp(0): (5, 6, 7), tp(1): (5, 6, 7)}))
    d.tick()
    in_flight = dict(d.state.steps)
    assert tp(0) in in_flight
    events = d.feed(submit("new", {tp(0): (4, 6, 7)}))
    cancelled = of_type(events, ev.PartitionCancelled)
    assert cancelled == [ev.PartitionCancelled("old", tp(0), False, None, "new")]
    d.run()
    assert c.assignment()[tp(0)] == (4, 6, 7)
    assert c.assignment()[tp(1)] == (5, 6, 7)
    done = {e.request_id: e for e in of_type(d.events, ev.RequestCompleted)}
    assert done["old"] == ev.RequestCompleted("old", 1, 1, 0)
    assert done["new"] == ev.RequestCompleted("new", 1, 0, 0)
    check_invariants(d)


# --- properties over whole runs -----------------------------------------------------------------------


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 10))
    nb = 8
    assignment, targets = {}, {}
    for i in range(n):
        assignment[tp(i)] = tuple(draw(st.lists(st.integers(0, nb - 1), min_size=2, max_size=4, unique=True)))
        if draw(st.booleans()) or i == 0:
            targets[tp(i)] = tuple(draw(st.lists(st.integers(0, nb - 1), min_size=2, max_size=4, unique=True)))
    limits = draw(st.builds(
        Limits,
        max_replicas_per_step=st.integers(1, 3), max_partitions_in_flight=st.integers(1, 6),
        max_leader_moves_in_flight=st.integers(1, 3), max_replica_additions_in_flight=st.integers(1, 6),
        max_incoming_moves_per_broker=st.integers(1, 3), max_outgoing_moves_per_broker=st.integers(1, 3),
    ))
    return assignment, targets, limits


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.randoms(use_true_random=False), st.booleans())
def test_any_run_converges_exactly_within_limits_and_leaves_no_throttle(scenario, rnd, cancel_midway):
    assignment, targets, limits = scenario
    c = FakeCluster(assignment, range(8), min_isr=1)
    d = Driver(c)
    d.feed(ChangeLimits(limits.as_dict()))
    d.feed(submit("r", targets))
    rounds = 0
    while True:
        rounds += 1
        assert rounds < 500
        d.tick()
        s = d.state
        assert s.in_flight.partitions <= max(limits.max_partitions_in_flight, 1)
        check_invariants(d)
        if cancel_midway and rounds == 3:
            d.feed(Cancel("r", rollback=rnd.random() < 0.5))
            s = d.state
        if d.quiet():
            break
        for t in c.in_progress():
            if rnd.random() < 0.6:
                c.finish(t)
        d.observe()
    if not cancel_midway:
        for t, r in targets.items():
            assert c.assignment()[t] == r, "converges to exactly the target, in order"
        assert of_type(d.events, ev.RequestCompleted)[-1].completed == len(targets)
    else:
        assert of_type(d.events, ev.RequestCompleted)
    assert d.state.throttles.is_empty() and not any(c.throttles.values())
    assert min(c.min_isr_seen.values()) >= 1
    assert fold(d.events) == fold(d.events) == d.state
    statuses = {p.status for p in d.state.partitions.values()}
    assert statuses <= {COMPLETED, CANCELLED, REVERTED}
