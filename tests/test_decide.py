"""decide/apply: requests from submission to completion, told as stories."""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import events as ev
from engine.core.actions import StartStep
from engine.core.outcomes import Refused
from engine.core.step import KIP_435
from engine.core.commands import (
    ActionOutcome, Cancel, ChangeLimits, ChangeThrottle, Observation, Pause, PartitionTarget, Resume, Submit, Tick,
)
from engine.core.decide import decide, handle
from engine.core.limits import Limits
from engine.core.partition import TopicPartition
from engine.core.state import CANCELLED, COMPLETED, EMPTY, REVERTED, TERMINAL, WAITING, fold
from engine.core.throttles import needed
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


def kafka_rate(s):
    """Kafka's rate for the state's throttle: the throttle plus the margin (limit throttle_margin_pct,
    in percent, rounded down to a byte/s)."""
    return None if s.throttle_rate is None else s.throttle_rate * (100 + s.limits.throttle_margin_pct) // 100


def check_invariants(d: Driver):
    s = d.state
    assert fold(d.events) == s, "state is the fold of the events"
    want = needed(((t, f.step) for t, f in s.steps.items()), s.throttle_rate)
    force = s.throttles
    assert (force.leader, force.follower) == (want.leader, want.follower), \
        "throttle entries in force are exactly what steps in flight need"
    # a broker keeps its rate between steps while a partition still to do names it, and only then
    naming = Counter()  # the fold's count of what partitions not ended name, recounted
    for entry in s.partitions.values():
        if entry.status not in TERMINAL:
            naming.update(set(entry.target) | set(entry.original or ()))
    assert dict(s.named) == dict(naming)
    to_do = set() if s.paused else set(naming)
    assert want.leader_brokers <= force.leader_brokers <= want.leader_brokers | to_do
    assert want.follower_brokers <= force.follower_brokers <= want.follower_brokers | to_do
    assert force.rate == (kafka_rate(s) if force.leader_brokers | force.follower_brokers else None)
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


def test_a_broker_keeps_its_rate_between_steps_and_loses_it_with_the_last_move_naming_it():
    # one partition at a time through the same brokers: each broker's rate is set once and deleted once
    # (before, two IncrementalAlterConfigs per broker around every step); the entries follow each step
    c = cluster(n_partitions=4)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    targets = {tp(i): (5, 1, 2) if i < 3 else (6, 0, 2) for i in range(4)}
    d.feed(submit("r", targets))
    for _ in range(50):
        d.tick()
        check_invariants(d)  # a rate only while a step in flight or a partition still to do names its broker
        if d.quiet():
            break
        for t in c.in_progress():
            c.finish(t)
    assert c.assignment() == targets
    set_, gone = [], []
    for e in d.events:
        if isinstance(e, (ev.ThrottlesApplied, ev.ThrottlesRemoved)):
            t = e.throttles
            (set_ if isinstance(e, ev.ThrottlesApplied) else gone).extend(
                [("leader", b) for b in t.leader_brokers] + [("follower", b) for b in t.follower_brokers])
    assert sorted(set_) == sorted(set(set_)) and sorted(gone) == sorted(set_)
    assert {b for side, b in set_ if side == "follower"} == {1, 2, 5, 6}  # every new replica's broker
    copying = [e for e in of_type(d.events, ev.StepPlanned) if e.step.nr]
    assert len(of_type(d.events, ev.ThrottlesApplied)) == len(copying)  # each copying step's entries, once
    assert d.state.throttles.is_empty() and not any(c.throttles.values())


def _rates_set_and_deleted(events):
    set_, gone = [], []
    for e in events:
        if isinstance(e, (ev.ThrottlesApplied, ev.ThrottlesRemoved)):
            t = e.throttles
            (set_ if isinstance(e, ev.ThrottlesApplied) else gone).extend(
                [("leader", b) for b in t.leader_brokers] + [("follower", b) for b in t.follower_brokers])
    return set_, gone


def test_with_keep_throttle_rates_0_a_rate_goes_with_the_last_step_in_flight_naming_its_broker():
    # the rule of the engine the records measured (the calibration's twins set it)
    c = cluster(n_partitions=3)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1, "keep_throttle_rates": 0}))
    d.feed(submit("r", {tp(i): (5, 1, 2) for i in range(3)}))
    for _ in range(50):
        d.tick()
        s = d.state
        want = needed(((t, f.step) for t, f in s.steps.items()), kafka_rate(s))
        assert s.throttles == want  # exactly what steps in flight need, rates included
        if d.quiet():
            break
        for t in c.in_progress():
            c.finish(t)
    set_, gone = _rates_set_and_deleted(d.events)
    assert set_.count(("follower", 5)) == 3 and gone.count(("follower", 5)) == 3  # once per step into 5
    assert d.state.throttles.is_empty() and not any(c.throttles.values())


def test_keep_throttle_rates_takes_0_or_1_and_the_other_limits_still_at_least_1():
    d = Driver(cluster())
    assert of_type(decide(d.state, ChangeLimits({"keep_throttle_rates": 0})), ev.LimitsChanged)
    assert decide(d.state, ChangeLimits({"keep_throttle_rates": 2})) == [ev.CommandRejected("limits", (
        "limit 'keep_throttle_rates' must be an integer from 0 to 1, got 2",))]
    assert of_type(decide(d.state, ChangeLimits({"throttle.rates.kept": 1})), ev.LimitsChanged)
    assert decide(d.state, ChangeLimits({"creation_window_ms": 0}))[0].reasons == (
        "limit 'creation_window_ms' must be an integer >= 1, got 0",)


def between_steps(**submit_kw) -> tuple[FakeCluster, Driver]:
    """Two partitions one at a time: the first step done, the second not planned yet (rates kept)."""
    c = cluster(n_partitions=2)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.feed(submit("r", {tp(0): (5, 1, 2), tp(1): (6, 2, 3)}, **submit_kw))
    d.tick()
    c.finish(next(iter(d.state.steps)))
    d.observe()
    assert not d.state.steps
    return c, d


def test_status_says_which_rates_are_kept_between_steps():
    from engine.views.summary import summarize, to_text

    _c, d = between_steps()
    kept = summarize(d.state)["throttles"]["kept"]
    force = d.state.throttles
    assert kept == {"leader_brokers": sorted(force.leader_brokers), "follower_brokers": sorted(force.follower_brokers)}
    assert kept["leader_brokers"] and set(kept["leader_brokers"]) | set(kept["follower_brokers"]) <= {1, 2, 3, 5, 6}
    assert (f"leader rates on brokers {kept['leader_brokers']}, follower rates on brokers "
            f"{kept['follower_brokers']}") in to_text(summarize(d.state))


def test_a_rate_whose_removal_failed_is_not_said_to_be_kept():
    # (the review's finding: status said "kept between steps" of a rate nothing names, waiting for its
    # removal's retry)
    from engine.views.summary import summarize, to_text

    c = cluster(n_partitions=1)
    d = Driver(c)
    d.now = 1000.0
    d.feed(submit("r", {tp(0): (5, 1, 2)}))
    d.tick()
    c.refuse("remove", "POLICY_VIOLATION", times=3)
    c.finish(tp(0))
    d.tick()
    d.tick()
    assert not d.state.throttle_failed.is_empty() and not d.state.named
    assert summarize(d.state)["throttles"]["kept"] == {"leader_brokers": [], "follower_brokers": []}
    assert "kept between steps" not in to_text(summarize(d.state))


def test_setting_keep_throttle_rates_to_0_lets_the_kept_rates_go_with_the_change():
    _c, d = between_steps()
    assert not d.state.steps and d.state.throttles.leader_brokers | d.state.throttles.follower_brokers
    events = d.feed(ChangeLimits({"keep_throttle_rates": 0}))
    assert of_type(events, ev.ThrottlesRemoved) and d.state.throttles.is_empty()


def test_paused_engine_lets_the_kept_rates_go_once_its_steps_in_flight_end():
    c = cluster(n_partitions=4)
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.feed(submit("r", {tp(i): (5, 6, 7) for i in range(4)}))
    d.tick()
    d.feed(Pause())
    assert d.state.throttles.follower_brokers == {5}  # its step in flight (the first, into 5) still needs it
    for t in c.in_progress():
        c.finish(t)
    d.observe()
    d.tick()
    assert not d.state.steps and d.state.throttles.is_empty() and not any(c.throttles.values())
    d.feed(Resume())
    d.run()
    assert all(r == (5, 6, 7) for r in c.assignment().values())


def test_a_rate_change_reaches_the_brokers_whose_rates_are_kept_between_steps():
    _c, d = between_steps(throttle_rate=10_000_000)  # the first step's brokers' rates stay for the second
    kept = d.state.throttles.leader_brokers | d.state.throttles.follower_brokers
    events = d.feed(ChangeThrottle(20_000_000))
    applied = of_type(events, ev.ThrottlesApplied)[0].throttles
    assert applied.rate == 21_600_000 and kept <= applied.leader_brokers | applied.follower_brokers  # + 8 %
    check_invariants(d)


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
    assert decide(d.state, Pause()) == [ev.Paused("", already=True)]  # set-like: no error, nothing changes
    assert decide(d.state, Resume()) == [ev.Resumed("")]
    d.feed(Resume())
    assert decide(d.state, Resume()) == [ev.Resumed("", already=True)]
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

    from engine.core.state import REJECTIONS_KEPT

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
    assert d.state.throttles.rate == 10_800_000  # Kafka's rate: the throttle + 8 % (throttle_margin_pct)
    events = d.feed(ChangeThrottle(20_000_000))
    applied = of_type(events, ev.ThrottlesApplied)[0].throttles
    assert applied.rate == 21_600_000 and applied.follower_brokers == {5, 6}
    events = d.feed(ChangeThrottle(None))
    assert of_type(events, ev.ThrottlesRemoved) and d.state.throttles.is_empty()
    assert of_type(decide(d.state, ChangeThrottle(0)), ev.CommandRejected)
    check_invariants(d)


def test_kafkas_rate_is_the_throttle_plus_the_margin_and_a_margin_change_reaches_every_rated_broker():
    # Kafka's follower quota lets through 5.5 to 10 % less than its rate (refused fetchers back off a
    # second): kreassign gives Kafka the throttle + throttle_margin_pct (8 by default), 0 the throttle itself
    _c, d = between_steps(throttle_rate=10_000_000)  # rates in force for a step and kept between steps
    assert d.state.throttles.rate == 10_800_000
    rated = d.state.throttles.leader_brokers | d.state.throttles.follower_brokers
    events = d.feed(ChangeLimits({"throttle_margin_pct": 0}))
    applied = of_type(events, ev.ThrottlesApplied)[0].throttles
    assert applied.rate == 10_000_000 and rated <= applied.leader_brokers | applied.follower_brokers
    assert not of_type(events, ev.ThrottlesRemoved)  # a new rate, nothing taken away
    events = d.feed(ChangeLimits({"throttle.margin.pct": 25}))  # the alias
    assert of_type(events, ev.ThrottlesApplied)[0].throttles.rate == 12_500_000
    assert d.state.throttles.rate == 12_500_000 and d.state.throttle_rate == 10_000_000  # T as asked
    assert decide(d.state, ChangeLimits({"throttle_margin_pct": 26})) == [ev.CommandRejected("limits", (
        "limit 'throttle_margin_pct' must be an integer from 0 to 25, got 26",))]
    events = d.feed(ChangeThrottle(7_777_777))
    assert of_type(events, ev.ThrottlesApplied)[0].throttles.rate == 9_722_221  # rounded down
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
    refused = Refused("INVALID_REPLICA_ASSIGNMENT", "broker 5")
    state, events = handle(state, ActionOutcome(StartStep("r", tp(0), planned.number, planned.step.tr), refused))
    assert state.partitions[tp(0)].status == WAITING and "INVALID_REPLICA_ASSIGNMENT" in state.waiting[tp(0)]
    # its entries are gone; the rates of its live brokers stay while it is still to do (it is retried)
    assert not state.throttles.leader and not state.throttles.follower
    assert state.throttles.leader_brokers == {0, 1, 2} and state.throttles.follower_brokers == {5}
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
    d.feed(Cancel("r", rollback=True, include_completed=True))
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
    skipped = decide(d.state, Cancel("r", partitions=(tp(0),), rollback=True))  # Kafka's --cancel: only moves in progress
    assert "--include-completed" in of_type(skipped, ev.CancelSkipped)[0].reason
    assert not of_type(decide(d.state, Cancel("r", rollback=True)), ev.PartitionCancelled)
    d.feed(Cancel("r", rollback=True, include_completed=True))
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


def test_kip236_skip_rule_is_kraft_revert_rule():
    from engine.core.cancellation import skip_reason

    # KRaft reverts to RS - AR with ISR - AR and refuses an empty ISR (no unclean election):
    # reverting to (0,1,2) when none of it is in the ISR is refused, whether 5 is alive or not
    assert "none of the replicas [0, 1, 2]" in skip_reason((0, 1, 2), {5})
    assert "none of the replicas [0, 1, 2]" in skip_reason((0, 1, 2), set())
    assert skip_reason((0, 1, 2), {2, 5}) is None
    assert skip_reason(None, {5}) == "original replicas unknown: nothing to roll back to"
    # ISR - AR below min.insync.replicas where more are in sync now: skipped too (rule 3)
    assert "below min.insync.replicas 3" in skip_reason((0, 1, 2), {1, 2, 5}, (5,), 3)
    assert skip_reason((0, 1, 2), {1, 2, 5}, (5,), 2) is None  # two stay in sync: enough
    assert skip_reason((0, 1, 2), {1, 2}, (5,), 3) is None  # already below, and the revert loses none


def test_cancel_in_flight_that_kafka_cannot_revert_applies_when_the_step_completes():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2)}, steps=KIP_435))
    d.tick()
    # step (5,0,1,2) in flight; brokers 0,1,2 drop out of the ISR while 5 caught up
    p = c.parts[tp(0)]
    c.parts[tp(0)] = p._replace(isr=frozenset({5}), leader=5)
    d.observe()
    events = d.feed(Cancel("r"))
    skipped = of_type(events, ev.CancelSkipped)
    assert skipped and "Kafka refuses such a revert" in skipped[0].reason
    assert [e.aborting for e in of_type(events, ev.PartitionCancelled)] == [None]  # no abort is sent
    assert not [a for a in c.alters if a[1] is None]
    c.finish(tp(0))
    d.run()
    # the step completed (5,0,1,2); the cancel then settles it back to 3 replicas: 5 was not original
    assert c.assignment()[tp(0)] == (0, 1, 2)
    assert d.state.partitions[tp(0)].status == CANCELLED
    check_invariants(d)


def test_a_cancel_never_aborts_a_step_into_fewer_in_sync_replicas_than_min_insync():
    """KRaft's revert keeps ISR - AR: with the new replica caught up and an original one dead, the abort
    would leave two in sync against min.insync.replicas 3 where three are in sync now (seed 211 of the
    fault simulator, N2). The abort is skipped, saying so; the step goes on and the cancel applies once
    it completes (here it completes at its target, all of it in sync: a cancel touches only what is in
    progress, so the partition stays there)."""
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8), min_isr=3)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2)}))
    d.tick()  # step 1: (0, 1, 2) -> (5, 1, 2), copying to 5, leader first
    assert c.in_progress() == [tp(0)] and c.parts[tp(0)].adding == (5,)
    c.brokers[0] = c.brokers[0]._replace(alive=False)  # broker 0 dies; 5 has caught up
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({1, 2, 5}))
    d.observe()
    events = d.feed(Cancel("r"))
    skipped = of_type(events, ev.CancelSkipped)
    assert skipped and "below min.insync.replicas 3" in skipped[0].reason, events
    assert [e.aborting for e in of_type(events, ev.PartitionCancelled)] == [None]  # no abort is sent
    assert not [a for a in c.alters if a[1] is None]
    d.run()
    assert c.assignment()[tp(0)] == (5, 1, 2) and d.state.partitions[tp(0)].status == CANCELLED
    assert c.min_isr_seen[tp(0)] >= 3
    c.brokers[0] = c.brokers[0]._replace(alive=True)  # its throttle rate is removed once it is back
    d.run()
    check_invariants(d)


def test_the_min_insync_skip_rule_counts_the_replicas_the_cluster_is_adding():
    """Seed 8635 of the fault simulator: another tool's alter merged into the step in flight (a reorder
    that adds nothing) and adds broker 0, which caught up while broker 4 died. KRaft's revert drops
    what the cluster is adding, not what the step planned: the abort would leave two in sync against
    min.insync.replicas 3, and is skipped."""
    c = FakeCluster({tp(0): (4, 1, 3)}, range(6), min_isr=3)
    d = Driver(c)
    c.unavailable("alter")
    d.feed(submit("r", {tp(0): (1, 3, 4)}))
    d.tick()
    assert d.state.steps[tp(0)].step.nr == ()  # a reorder: nothing to add
    c._alter(tp(0), (1, 0, 4))  # another tool: adding 0, removing 3
    c.brokers[4] = c.brokers[4]._replace(alive=False)
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({0, 1, 3}), leader=1)
    d.observe()
    events = d.feed(Cancel("r"))
    skipped = of_type(events, ev.CancelSkipped)
    assert skipped and "below min.insync.replicas 3" in skipped[0].reason, events
    assert not [a for a in c.alters if a[1] is None]  # no abort
    assert len(c.parts[tp(0)].isr) == 3


def _late_alter_over(other, target, steps="incremental"):
    """A step's alter goes unanswered, another tool alters the partition to ``other``, the step's late alter
    lands over that reassignment in progress; then past ``ALTER_MAY_LAND``, with a cap of one partition
    in flight. Returns the driver, the cluster and the step's partition."""
    c = FakeCluster({tp(0): (0, 1), tp(1): (0, 1)}, range(5))
    d = Driver(c)
    d.now = 100.0
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    c.unavailable("alter")
    d.feed(submit("r", {tp(0): target, tp(1): target}, steps=steps))
    d.tick()
    (f,) = d.state.steps.values()
    first = next(iter(d.state.steps))
    assert not f.started
    c._alter(first, other)
    c._alter(first, f.step.tr)
    p = c.parts[first]
    assert p.adding and set(p.replicas) - set(p.removing) == set(f.step.tr)  # Kafka moves it to the step's TR
    d.observe()
    return d, c, first


def _runs_and_counts(d, c, first, target):
    """The step has started, and stays counted past ``ALTER_MAY_LAND`` (the other partition waits) until
    Kafka completes it; then the other partition follows."""
    assert d.state.steps[first].started  # its reassignment runs
    for _ in range(10):
        d.now += 1.0
        d.tick()
        assert list(d.state.steps) == [first], d.state.steps
    c.finish(first)
    d.run()
    assert c.assignment() == {tp(0): target, tp(1): target}
    check_invariants(d)


def test_a_step_whose_late_alter_landed_over_another_tools_reassignment_runs_and_counts_against_the_caps():
    """Seed 4374 of the fault simulator: a step's alter goes unanswered; another tool starts a reassignment
    of the partition (adding 3); the late alter lands over it. KRaft moves the partition to the step's
    TR (RS = TR + 3, adding the step's NR, removing 3): the step runs. Judged not started and given up,
    its partition no longer counted, the next step started past the partition cap."""
    d, c, first = _late_alter_over((0, 1, 3), (0, 1, 2))
    assert (set(c.parts[first].adding), set(c.parts[first].removing)) == ({2}, {3})
    _runs_and_counts(d, c, first, (0, 1, 2))


def test_a_late_alter_over_another_tools_reassignment_adding_more_than_its_nr_runs():
    """As seed 4374, with the other tool adding the step's NR (2) and 3: the step's alter adds nothing
    KRaft is not adding already, so KRaft keeps the AR in progress (PartitionChangeBuilder starts from the
    partition's AR and RR and replaces only a non-empty one): AR = {2, 3}, RR = {3}, and the partition
    moves to the step's TR all the same."""
    d, c, first = _late_alter_over((0, 1, 2, 3), (0, 1, 2))
    assert (set(c.parts[first].adding), set(c.parts[first].removing)) == ({2, 3}, {3})
    _runs_and_counts(d, c, first, (0, 1, 2))


def test_a_late_alter_over_another_tools_reassignment_adding_part_of_its_nr_runs():
    """As seed 4374, for a step adding 2 and 3 while the other tool was adding 2 and 4: 2 is in RS when
    the step's alter lands, so KRaft adds only 3 (AR = TR - RS): AR = {3}, RR = {4}, and the partition
    moves to the step's TR all the same."""
    d, c, first = _late_alter_over((0, 1, 2, 4), (0, 1, 2, 3), steps="whole")
    assert d.state.steps[first].step.nr == (2, 3)
    assert (set(c.parts[first].adding), set(c.parts[first].removing)) == ({3}, {4})
    _runs_and_counts(d, c, first, (0, 1, 2, 3))


def test_a_retried_alter_is_planned_again_when_a_replica_it_dropped_as_dead_is_back_in_sync():
    """Seed 8351 of the fault simulator (N3): planned while brokers 0 and 3 were dead, the step
    (2, 3) -> (2) drops dead replica 3 (rule 6); its alter goes unanswered; broker 3 comes back and
    rejoins the ISR. Retried unchanged, the alter would leave one replica in sync against
    min.insync.replicas 2. The retry is re-checked against the latest look: the step is given up
    and the partition planned again from where it is."""
    c = FakeCluster({tp(0): (2, 3)}, range(5), min_isr=2)
    for b in (0, 3):
        c.brokers[b] = c.brokers[b]._replace(alive=False)
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({2}), leader=2)
    d = Driver(c)
    d.feed(submit("r", {tp(0): (2, 0)}))
    c.unavailable("alter")
    d.tick()
    planned = of_type(d.events, ev.StepPlanned)
    assert [(e.step.cr, e.step.tr) for e in planned] == [((2, 3), (2,))], planned
    assert c.assignment()[tp(0)] == (2, 3)  # the alter was lost
    for b in (0, 3):
        c.brokers[b] = c.brokers[b]._replace(alive=True)
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({2, 3}))
    d.observe()
    d.tick()  # the retry is due: it is re-checked
    assert (tp(0), (2,)) not in c.alters[1:], c.alters
    failed = of_type(d.events, ev.StepFailed)
    assert failed and "planned again" in failed[-1].reason, failed
    d.run()
    assert c.assignment()[tp(0)] == (2, 0)
    assert (tp(0), (2,)) not in c.alters[1:], c.alters  # never one replica against min.insync.replicas 2
    check_invariants(d)


def test_an_abort_kafka_refuses_lets_the_step_go_on_and_the_cancel_applies_after():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (5, 1, 2)}, steps=KIP_435))
    d.tick()
    c.refuse("cancel", "INVALID_REPLICA_ASSIGNMENT", "unable to revert")
    d.feed(Cancel("r"))
    failed = of_type(d.events, ev.ActionFailed)
    assert failed and failed[-1].action == "cancel_step" and failed[-1].final
    assert d.state.steps[tp(0)].aborting is False
    c.finish(tp(0))
    d.run()
    assert c.assignment()[tp(0)] == (0, 1, 2) and d.state.partitions[tp(0)].status == CANCELLED


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


# --- issue 14: cancel end states, caps, fairness, min.insync ---------------------------------------


def test_cancel_without_rollback_never_leaves_a_surplus_replica_and_says_where_it_stopped():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (3, 4, 5)}, steps=KIP_435))
    d.tick()
    c.finish(tp(0))  # step 1 done: (3, 0, 1, 2), 4 replicas, 3 the preferred leader
    d.observe()
    assert c.assignment()[tp(0)] == (3, 0, 1, 2)
    d.feed(Cancel("r"))
    d.run()
    # the replica this request added is dropped (nothing is copied): back at 3 replicas
    assert c.assignment()[tp(0)] == (0, 1, 2)
    final = [e for e in of_type(d.events, ev.PartitionCancelled) if e.final]
    assert final and final[-1].reason == "cancelled: back at its original replicas [0, 1, 2]"
    assert d.state.partitions[tp(0)].status == CANCELLED
    check_invariants(d)


def test_cancel_midway_keeps_the_moves_done_at_the_original_size():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (3, 4, 5)}, steps=KIP_435))
    for _ in range(3):  # (3,0,1,2) -> (3,4,1,2) ... stop somewhere in the middle, nothing in flight
        d.tick()
        for t in c.in_progress():
            c.finish(t)
        d.observe()
    mid = c.assignment()[tp(0)]
    d.feed(Cancel("r"))
    d.run()
    end = c.assignment()[tp(0)]
    assert len(end) == 3 and set(end) <= set(mid)
    reason = [e for e in of_type(d.events, ev.PartitionCancelled) if e.final][-1].reason
    assert str(list(end)) in reason


def test_caps_are_never_exceeded_not_even_by_a_big_r():
    # RF 3 -> 6 with R = 3 and the default outgoing cap of 2: each step copies at most 2 out of the leader
    c = FakeCluster({tp(i): (0, 1, 2) for i in range(3)}, range(8))
    d = Driver(c)
    d.feed(ChangeLimits({"max_replicas_per_step": 3}))
    d.feed(submit("r", {tp(i): (0, 1, 2, 5, 6, 7) for i in range(3)}))
    for _ in range(100):
        d.tick()
        out: dict = {}
        inc: dict = {}
        for f in d.state.steps.values():
            if f.step.nr:
                out[f.step.source] = out.get(f.step.source, 0) + len(f.step.nr)
            for b in f.step.nr:
                inc[b] = inc.get(b, 0) + 1
        lim = d.state.limits
        assert all(n <= lim.max_outgoing_moves_per_broker for n in out.values()), out
        assert all(n <= lim.max_incoming_moves_per_broker for n in inc.values()), inc
        for t in c.in_progress():
            c.finish(t)
        d.observe()
        if d.quiet():
            break
    assert all(r == (0, 1, 2, 5, 6, 7) for r in c.assignment().values())


def test_a_small_request_is_not_stuck_behind_a_decommission():
    c = FakeCluster({tp(i): (i % 4, (i + 1) % 4) for i in range(61)}, range(8))
    d = Driver(c)
    d.feed(submit("decommission", {tp(i): (4 + i % 3, (i + 1) % 4 if (i + 1) % 4 != 0 else 7) for i in range(60)}))
    d.feed(ChangeLimits({"max_partitions_in_flight": 2}))  # two at a time: the order is what counts
    d.feed(submit("urgent", {tp(60): (5, 6)}))
    for _ in range(200):
        d.tick()
        for t in c.in_progress()[:2]:
            c.finish(t)
        d.observe()
        if any(isinstance(e, ev.StepPlanned) and e.request_id == "urgent" for e in d.events):
            break
    planned = [e.request_id for e in of_type(d.events, ev.StepPlanned)]
    assert "urgent" in planned
    assert planned.index("urgent") <= 4  # interleaved: at most a few decommission steps go first


def test_a_target_below_min_insync_is_rejected_unless_allowed():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8), min_isr=2)
    d = Driver(c)
    events = d.feed(submit("r", {tp(0): (5,)}))
    assert "below the topic's min.insync.replicas (2)" in of_type(events, ev.CommandRejected)[0].reasons[0]
    events = d.feed(submit("r2", {tp(0): (5,)}, allow_below_min_insync=True))
    assert of_type(events, ev.RequestAccepted)


def test_a_copy_weighs_its_seconds_at_the_throttle_against_the_per_broker_caps():
    from engine.core.decide import weight
    from engine.core.step import plan_step

    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(ChangeThrottle(50_000_000))
    s = d.state
    step = plan_step((0, 1, 2), (0, 1, 3), {0, 1, 2}, 0)
    obs = s.observed[tp(0)]
    # a move is 2 s at 50 MB/s, 100 MB: an eighth is 12.5 MB; under half an eighth (6.25 MB) weighs nothing
    for size, w in ((None, 8), (1 << 20, 0), (6_249_999, 0), (6_250_000, 1), (12_500_000, 1), (12_500_001, 2),
                    (50_000_000, 4), (100_000_000, 8), (10_000_000_000, 8)):
        s2 = s._replace(observed=s.observed.set(tp(0), obs._replace(size_bytes=size)))
        assert weight(s2, tp(0), step) == w, size
    assert weight(s._replace(throttle_rate=None), tp(0), step) == 8  # unthrottled: whole moves


# --- L against the leader as last observed (issue 27, defect 4) ---------------------------------------


def test_whether_a_step_moves_leadership_is_judged_against_the_leader_as_last_observed():
    # t-0's step keeps broker 0 leading: no leader move, planned. Broker 1 takes over t-0's leadership
    # mid-step: completing it now moves leadership (the preferred leader 0 is elected back), so it
    # counts in L (1 here), and a reorder of t-1 that moves its leader waits for it.
    c = FakeCluster({tp(0): (0, 1, 2), tp(1): (4, 5, 6)}, range(8))
    d = Driver(c)
    d.feed(ChangeLimits({"max_leader_moves_in_flight": 1}))
    d.feed(submit("a", {tp(0): (0, 1, 3)}))
    d.tick()
    assert tp(0) in d.state.steps and d.state.in_flight.leader_moves == 0
    c.parts[tp(0)] = c.parts[tp(0)]._replace(leader=1)  # a failover, mid-step
    d.observe()
    assert d.state.in_flight.leader_moves == 1
    d.feed(submit("b", {tp(1): (5, 4, 6)}))
    d.tick()
    assert tp(1) not in d.state.steps, "L would hold two leader moves"
    c.finish(tp(0))
    d.observe()
    d.run()
    assert c.assignment()[tp(1)] == (5, 4, 6) and c.parts[tp(0)].leader == 0
    check_invariants(d)


def test_a_step_whose_partition_now_leads_from_its_target_leader_frees_its_l():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("a", {tp(0): (1, 0, 3)}))  # moves leadership to 1, copies 3 out of 0
    d.tick()
    assert d.state.in_flight.leader_moves == 1 and dict(d.state.in_flight.outgoing) == {0: 8}
    c.parts[tp(0)] = c.parts[tp(0)]._replace(leader=1)
    d.observe()
    assert d.state.in_flight.leader_moves == 0 and dict(d.state.in_flight.outgoing) == {1: 8}
    c.finish(tp(0))
    d.observe()
    assert d.state.in_flight == type(d.state.in_flight)()  # every charge released
    check_invariants(d)


def test_a_retried_abort_is_judged_again_by_the_min_insync_rule():
    """A fresh-eyes review of the merged skip rules: a cancel that could not be sent is retried; meanwhile the
    new replica caught up and two original ones left the ISR, so the revert would now leave one replica in
    sync against min.insync.replicas 2. The retry was judged again only on unclean-election topics and went
    out. Every retried abort is judged again on the latest look (rules 2 to 4)."""
    c = FakeCluster({tp(0): (1, 2, 3)}, range(1, 6), min_isr=2)
    d = Driver(c)
    d.now = 1000.0
    d.feed(submit("r", {tp(0): (1, 2, 4)}))
    d.tick()
    assert c.in_progress() == [tp(0)]
    c.unavailable("cancel")
    d.feed(Cancel("r"))
    assert [(e.code, e.final) for e in of_type(d.events, ev.ActionFailed)] == [("UNAVAILABLE", False)]
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({1, 4}))  # 4 caught up; 2 and 3 fell behind
    d.now += 0.5
    d.observe()
    d.now += 5.0
    d.tick()
    given_up = [e for e in of_type(d.events, ev.ActionFailed) if e.final]
    assert given_up and given_up[0].code == "REVERT_SKIPPED" and "min.insync.replicas 2" in given_up[0].message
    aborts = [a for a in c.alters if a[1] is None]
    assert c.in_progress() == [tp(0)] and len(aborts) == 1  # only the first abort, which failed: none since
    assert tp(0) in d.state.steps and not d.state.steps[tp(0)].aborting  # the step goes on


def test_a_submit_may_lift_the_throttle_for_this_and_later_moves_as_throttle_none_does():
    """kreassign execute --throttle none: the request's steps and later ones run unthrottled, the same
    ThrottleRateChanged(None) kreassign throttle --rate none gives, naming the request."""
    from engine.core.commands import ChangeThrottle

    c = cluster()
    d = Driver(c)
    d.feed(ChangeThrottle(50_000_000))
    assert d.state.throttle_rate == 50_000_000
    d.feed(submit("r", {TopicPartition("t", 0): (3, 4, 5)}, unthrottled=True, command_id="c9"))
    [changed] = of_type(d.events, ev.ThrottleRateChanged)[1:]
    assert (changed.rate, changed.reason, changed.command_id) == (None, "request r", "c9")
    assert d.state.throttle_rate is None
