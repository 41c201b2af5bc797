"""A fault meeting a second event (issue 27): each story drives the real decider (in-memory log,
executor) over the simulated KRaft cluster on virtual time, or the pure core with literal replica
lists, and each failed on the code before its fix.

Rules: docs/algorithm.md (sections 4 to 6, and *Timers and the clock*).
"""

from __future__ import annotations

from engine.core import events as ev
from engine.core.actions import CancelStep, StartStep
from engine.core.commands import ActionOutcome, Cancel, Observation, PartitionTarget, Submit, Tick
from engine.core.decide import handle
from engine.core.outcomes import OK, Refused, Unavailable
from engine.core.partition import Broker, PartitionState, TopicInfo, TopicPartition, in_sync
from engine.core.state import COMPLETED, EMPTY, fold
from engine.runtime.executor import actions
from engine.runtime.decider import Decider, MemoryLog
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster

TP = TopicPartition("t", 0)


class Lossy:
    """The simulated cluster, whose controller leaves the next ``unanswered`` alters unanswered (they
    never reach it: the client times out) and which records every alter and cancel it is sent."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster
        self.unanswered = 0
        self.refused = 0  # the next alters the controller refuses
        self.lost_elections = 0  # the next elections it accepts without electing
        self.alters: list[dict] = []
        self.cancels: list[list] = []
        self.elections: list[list] = []

    def alter_reassignments(self, targets):
        self.alters.append(dict(targets))
        if self.unanswered:
            self.unanswered -= 1
            return {tp: Unavailable("request timed out") for tp in targets}
        if self.refused:
            self.refused -= 1
            return {tp: Refused("REASSIGNMENT_IN_PROGRESS", "try later") for tp in targets}
        return self.cluster.alter_reassignments(targets)

    def elect_preferred_leaders(self, partitions):
        self.elections.append(list(partitions))
        if self.lost_elections:
            self.lost_elections -= 1
            return {tp: OK for tp in partitions}
        return self.cluster.elect_preferred_leaders(partitions)

    def cancel_reassignments(self, partitions):
        self.cancels.append(list(partitions))
        return self.cluster.cancel_reassignments(partitions)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def one_partition(replicas=(0, 1, 2), brokers=4, dead=(), size="10 MB", throttle="10 MB/s", min_isr=1):
    """Topic t, one partition on ``replicas``; brokers 0..brokers-1, those in ``dead`` down."""
    return S.from_document({
        "brokers": [{"id": b, "alive": b not in dead} for b in range(brokers)],
        "topics": [{"name": "t", "min_insync_replicas": min_isr, "assignment": [
            {"partition": 0, "replicas": list(replicas), "size": size, "produce_rate": 0}]}],
        "throttle": throttle, "replica_creation_time": 0,
    })


class Clock:
    """The engine's host clock: the cluster's time plus an offset the test steps."""

    def __init__(self, cluster: SimulatedCluster, offset: float = 0.0):
        self.cluster, self.offset = cluster, offset

    def __call__(self) -> float:
        return self.cluster.time + self.offset


def engine(sc, offset=0.0):
    cluster = Lossy(SimulatedCluster.from_scenario(sc))
    log = MemoryLog()
    clock = Clock(cluster.cluster, offset)
    d = Decider(log, cluster, clock=clock)
    d.recover(None)
    d.host = clock
    return d, cluster, log


def run(d, cluster, rid="r1", seconds=600, step=1.0) -> bool:
    """Tick every ``step`` seconds of cluster time until request ``rid`` completes (True) or time runs out."""
    for _ in range(int(seconds / step)):
        d.tick()
        if d.state.requests[rid].status == COMPLETED:
            return True
        cluster.cluster.advance(step)
    return False


def payloads(log, kind):
    return [e.payload for e in log.records if isinstance(e.payload, kind)]


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


class Core:
    """``handle`` fed by hand (KRaft's style: literal replica lists, one behaviour each): the test says
    what the cluster answered and what a look saw, and when; actions are collected, never carried out."""

    def __init__(self, partitions: dict, brokers=(0, 1, 2, 3, 4, 5), dead=(), at=0.0):
        self.state = EMPTY
        self.events: list = []
        self.brokers = tuple(Broker(b, None, b not in dead) for b in brokers)
        self.look(at, {tp: in_sync(r) for tp, r in partitions.items()})

    def feed(self, inp) -> list:
        self.state, evs = handle(self.state, inp)
        self.events.extend(evs)
        return evs

    def look(self, at, parts: dict) -> list:
        topics = {tp.topic: TopicInfo(max(p.partition for p in parts if p.topic == tp.topic) + 1) for tp in parts}
        return self.feed(Observation(self.brokers, topics, parts, at))

    def answer(self, action, result, at) -> list:
        return self.feed(ActionOutcome(action, result, at))

    def sent(self, events, kind) -> list:
        return [a for a in actions(events) if isinstance(a, kind)]


# --- 1. an unanswered alter of a step that drops a dead broker's replica -------------------------------


def test_a_broker_replacement_whose_first_alter_goes_unanswered_is_retried_and_completes():
    """RF 3 on (0, 1, 2), broker 2 dead, target (0, 1, 3): the step copies 0 -> 3 and drops 2. The
    throttle rate of broker 2 is never set (a rate is set on the broker itself), which must not keep
    the alter from being sent again: the old code waited for it for ever, silently."""
    d, cluster, log = engine(one_partition(dead=(2,)))
    cluster.unanswered = 1
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    assert run(d, cluster, seconds=60), d.state.steps
    assert len(cluster.alters) == 2 and [e.action for e in payloads(log, ev.ActionRetried)] == ["start_step"]
    assert cluster.cluster.state.partitions[TP].replicas == (0, 1, 3)
    assert cluster.cluster.state.throttles.is_empty()


def test_the_same_replacement_with_the_broker_alive_completes_after_two_alters():
    d, cluster, _log = engine(one_partition())
    cluster.unanswered = 1
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    assert run(d, cluster, seconds=60)
    assert len(cluster.alters) == 2


# --- 2. a cancel of a request that took a partition over mid-step ---------------------------------------


def superseded_mid_step():
    """r1 moves (0, 1, 2) -> (0, 1, 3) (a 1 GB copy at the default 50 MB/s); r2 takes the partition over while
    r1's step copies: r1's step goes on under r2."""
    d, cluster, log = engine(one_partition(size="1 GB"))
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    cluster.cluster.advance(1.0)
    d.tick()
    assert d.state.steps[TP].started
    d.decide(Submit("r2", (PartitionTarget("t", 0, (0, 1, 2)),)))
    f = d.state.steps[TP]
    assert f.request_id == "r1" and d.state.partitions[TP].request_id == "r2"
    return d, cluster, log


def test_cancelling_a_request_that_took_over_a_step_in_flight_aborts_that_step_and_ends():
    for rollback in (True, False):
        d, cluster, log = superseded_mid_step()
        d.decide(Cancel("r2", rollback=rollback))
        assert cluster.cancels == [[TP]]
        assert d.state.steps[TP].aborting and d.state.steps[TP].answers_due == 0  # the answer was counted
        assert run(d, cluster, rid="r2", seconds=60), (rollback, d.state.steps, d.state.partitions[TP])
        assert not d.state.steps and d.state.in_flight.partitions == 0  # its P slot is free again
        assert [e.replicas for e in payloads(log, ev.StepAborted)] == [(0, 1, 2)]
        assert cluster.cluster.state.partitions[TP].replicas == (0, 1, 2)
        assert cluster.cluster.state.throttles.is_empty()


# --- 3. an abort that ends neither at CR nor at TR ---------------------------------------------------------


def moved_by_another_tool_then_cancelled(rollback):
    """r1's step (0, 1, 2) -> (0, 1, 3) copies; another tool sets the target (0, 1) (KRaft merges it
    into the reassignment in progress, which completes at once); r1 is cancelled before the engine
    looks: the cancel is answered NO_REASSIGNMENT_IN_PROGRESS and the partition is at (0, 1)."""
    d, cluster, log = engine(one_partition(size="1 GB"))
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    assert d.state.steps[TP].started
    cluster.cluster.alter_reassignments({TP: (0, 1)})
    assert cluster.cluster.state.partitions[TP].replicas == (0, 1)
    d.decide(Cancel("r1", rollback=rollback))
    return d, cluster, log


def test_an_abort_whose_partition_another_tool_moved_elsewhere_ends_where_it_stands():
    d, cluster, log = moved_by_another_tool_then_cancelled(rollback=False)
    assert run(d, cluster, seconds=30), d.state.steps
    assert [e.replicas for e in payloads(log, ev.StepAborted)] == [(0, 1)]
    final = [e for e in payloads(log, ev.PartitionCancelled) if e.final]
    assert len(final) == 1 and "cancelled at [0, 1]" in final[0].reason
    assert cluster.cluster.state.partitions[TP].replicas == (0, 1)


def test_a_rollback_whose_partition_another_tool_moved_elsewhere_returns_to_the_original_replicas():
    d, cluster, log = moved_by_another_tool_then_cancelled(rollback=True)
    assert run(d, cluster, seconds=120), d.state.steps
    assert [e.replicas for e in payloads(log, ev.StepAborted)] == [(0, 1)]
    assert payloads(log, ev.PartitionReverted)
    assert cluster.cluster.state.partitions[TP].replicas == (0, 1, 2)
    assert cluster.cluster.state.throttles.is_empty()


def test_without_the_cancel_the_same_look_fails_the_step():
    d, cluster, log = engine(one_partition(size="1 GB"))
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    cluster.cluster.alter_reassignments({TP: (0, 1)})
    cluster.cluster.advance(1.0)
    d.tick()
    assert payloads(log, ev.StepFailed) == []  # one look may be torn by metadata lag (METADATA_SETTLE)
    cluster.cluster.advance(5.0)
    d.tick()
    assert [e.reason for e in payloads(log, ev.StepFailed)] == [
        "replicas changed outside kreassign to [0, 1] during step 1"]


# --- lesser: a look stamped exactly the time of an answer ----------------------------------------------


def test_a_look_stamped_the_time_of_the_cancels_answer_judges_nothing():
    """(1, 2) -> (2, 3): KRaft runs it as RS (2, 3, 1) and reverts a cancel to (2, 1). A look stamped
    exactly when the cancel was answered may have been taken before the alter reached the controller
    ((1, 2), nothing in progress): read, it would end the abort at (1, 2), a state the cluster never had."""
    core = Core({TP: (1, 2)})
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    [start] = core.sent(core.feed(Tick(1.0)), StartStep)
    core.answer(start, OK, 1.0)
    [cancel] = core.sent(core.feed(Cancel("r")), CancelStep)
    core.answer(cancel, OK, 2.0)
    assert core.look(2.0, {TP: in_sync((1, 2))}) == []
    evs = core.look(2.5, {TP: PartitionState((2, 1), frozenset({1, 2}), 1)})
    assert [e.replicas for e in of_type(evs, ev.StepAborted)] == [(2, 1)]
    assert fold(core.events) == core.state


# --- lesser: a pending preferred-leader election counts against L ----------------------------------------


def test_a_pending_preferred_leader_election_holds_its_place_in_l_until_it_shows():
    """L = 1: t-0 and t-1 each make broker 3 their preferred leader (a leader-moving step). t-0's step
    completes with 0 still leading: the election that moves the leadership to 3 is a leader move as
    much as the step, so t-1's step waits until that election shows (or is given up)."""
    from engine.core.commands import ChangeLimits
    from tests.fake_cluster import Driver, FakeCluster

    t0, t1 = TP, TopicPartition("t", 1)
    c = FakeCluster({t0: (0, 1, 2), t1: (1, 2, 0)}, range(5))
    c.elections = "lose"  # accepted, but the leadership does not move (yet)
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeLimits({"max_leader_moves_in_flight": 1}))
    d.feed(Submit("r", (PartitionTarget("t", 0, (3, 1, 2)), PartitionTarget("t", 1, (4, 2, 0))), steps="kip-435"))
    d.tick()
    assert set(d.state.steps.keys()) == {t0}
    c.finish(t0)
    d.observe()
    assert t0 in d.state.elections and not d.state.steps
    for _ in range(3):
        d.now += 1.0
        d.tick()
        assert not d.state.steps, "t-1's leader move started while t-0's election was pending"
    c.elections = "elect"
    c.parts[t0] = c.parts[t0]._replace(leader=3)  # the election shows
    d.now += 1.0
    d.observe()
    assert not d.state.elections
    d.tick()
    assert set(d.state.steps.keys()) == {t1}
    assert fold(d.events) == d.state


# --- lesser: a plain cancel after --rollback; a rollback to a dead broker ---------------------------------


def rolling_back(dead=()):
    """(0, 1, 2) -> (0, 1, 3) completed (brokers ``dead`` then die)."""
    core = Core({TP: (0, 1, 2)})
    core.feed(Submit("r", (PartitionTarget("t", 0, (0, 1, 3)),)))
    [start] = core.sent(core.feed(Tick(1.0)), StartStep)
    core.answer(start, OK, 1.0)
    core.look(2.0, {TP: in_sync((0, 1, 3))})
    assert core.state.partitions[TP].status == COMPLETED
    if dead:
        core.brokers = tuple(b._replace(alive=b.id not in dead) for b in core.brokers)
        core.look(3.0, {TP: in_sync((0, 1, 3))})
    return core


def test_a_plain_cancel_stops_a_rollback_where_it_stands_and_says_so():
    from engine.views.verdict import verdict_of

    core = rolling_back()
    core.feed(Cancel("r", rollback=True, include_completed=True))
    [back] = core.sent(core.feed(Tick(4.0)), StartStep)
    assert back.replicas == (0, 1, 2)  # the rollback's step: KRaft runs it as RS (0, 1, 2, 3), AR (2)
    core.answer(back, OK, 4.0)
    evs = core.feed(Cancel("r"))  # the operator stops the rollback
    [cancel] = core.sent(evs, CancelStep)
    verdict = verdict_of("c", evs)
    assert "1 rollback stopped where it stands" in verdict.summary and "1 copy in flight being aborted" in \
        verdict.summary, verdict
    core.answer(cancel, OK, 5.0)
    core.look(6.0, {TP: in_sync((0, 1, 3))})  # KRaft's revert: RS - AR, here in CR's own order
    evs = core.look(11.0, {TP: in_sync((0, 1, 3))})  # confirmed (metadata from before the step looks the same)
    assert [e.replicas for e in of_type(evs, ev.StepAborted)] == [(0, 1, 3)]
    [final] = [e for e in of_type(core.events, ev.PartitionCancelled) if e.final]
    assert final.reason.startswith("cancelled after it had reached its target [0, 1, 3]")
    assert not of_type(core.events, ev.PartitionReverted)
    assert fold(core.events) == core.state


def test_a_rollback_to_a_dead_broker_says_how_to_get_out_and_a_plain_cancel_does():
    from engine.views.attention import attention
    from engine.views.verdict import verdict_of

    core = rolling_back(dead=(2,))
    evs = core.feed(Cancel("r", rollback=True, include_completed=True))
    verdict = verdict_of("c", evs)
    assert any("broker 2 is down" in line and "cancel without --rollback" in line and "new request" in line
               for line in verdict.details), verdict
    core.feed(Tick(4.0))
    reason = core.state.waiting[TP]
    assert "broker 2 is down" in reason and "cancel without --rollback" in reason
    assert any("broker 2 is down" in a["title"] for a in attention(core.state, {}))
    evs = core.feed(Cancel("r"))  # the way out
    assert [e.reason for e in of_type(evs, ev.PartitionCancelled) if e.final] == [
        "cancelled after it had reached its target [0, 1, 3]"]
    assert core.state.requests["r"].status == COMPLETED


# --- the unit fake follows KRaft: a second, different alter is merged, not revert-then-new ---------------


def test_the_fake_merges_a_second_alter_as_kraft_does():
    """(0, 1, 2) -> (0, 1, 3) in progress (RS (0, 1, 3, 2), AR (3), RR (2)), then another target
    (0, 1, 4): KRaft computes from RS as it stands: RR (2, 3), AR (4), RS (0, 1, 4, 2, 3). A cancel then
    reverts to RS - AR = (0, 1, 2, 3), not to (0, 1, 2): revert-then-new would have said (0, 1, 2)."""
    from tests.fake_cluster import FakeCluster

    c = FakeCluster({TP: (0, 1, 2)}, range(5))
    c.alter_reassignments({TP: (0, 1, 3)})
    c.alter_reassignments({TP: (0, 1, 4)})
    p = c.parts[TP]
    assert (p.replicas, p.adding, p.removing) == ((0, 1, 4, 2, 3), (4,), (2, 3))
    c.cancel_reassignments([TP])
    assert c.parts[TP].replicas == (0, 1, 2, 3)
    # an empty AR keeps the one in progress: back to (0, 1, 2) is RR (3), AR still (3), and Phase B
    # completes at once (0, 1 and 2 are in sync)
    c = FakeCluster({TP: (0, 1, 2)}, range(5))
    c.alter_reassignments({TP: (0, 1, 3)})
    c.alter_reassignments({TP: (0, 1, 2)})
    assert c.parts[TP].replicas == (0, 1, 2) and not c.in_progress()


def kraft_alters():
    from hypothesis import strategies as st

    target = st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True).map(tuple)
    return st.tuples(target, st.lists(st.one_of(target, st.just(None)), min_size=1, max_size=5))


def test_the_fake_and_the_simulated_controller_agree_on_any_sequence_of_alters_and_cancels():
    """The simulated controller is the product's model of KRaft (engine/sim/controller.py); the unit
    fake must give the same replicas, AR, RR and ISR for any sequence of alters (None: a cancel) on a
    partition whose new replicas never catch up."""
    from hypothesis import given, settings

    from engine.sim import controller
    from tests.fake_cluster import FakeCluster

    @settings(max_examples=300, deadline=None)
    @given(kraft_alters())
    def check(case):
        start, calls = case
        sc = S.from_document({
            "brokers": [{"id": b} for b in range(6)], "throttle": "none", "replica_creation_time": 0,
            "topics": [{"name": "t", "assignment": [{"partition": 0, "replicas": list(start), "size": 1000,
                                                     "produce_rate": 0}]}]})
        sim = controller.initial(sc)
        fake = FakeCluster({TP: start}, range(6))
        for target in calls:
            if target is None:
                sim, _ = controller.cancel(sim, TP)
                fake.cancel_reassignments([TP])
            else:
                sim, _ = controller.alter(sim, TP, target)
                fake.alter_reassignments({TP: target})
            s, f = sim.partitions[TP], fake.parts[TP]
            assert (s.replicas, s.adding, s.removing, s.isr) == (f.replicas, f.adding, f.removing, f.isr), (
                start, calls, target)

    check()


def test_a_partition_a_cancel_left_where_it_said_is_no_skipped_cancel_in_status():
    """The final cancel's reason (where the partition stays) is kept as the partition's note; status
    listed it as "1 partition not cancelled: cancelled: back at its original replicas [1, 2]"."""
    from engine.views.attention import attention

    core = Core({TP: (1, 2)})
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    [start] = core.sent(core.feed(Tick(1.0)), StartStep)
    core.answer(start, OK, 1.0)
    [cancel] = core.sent(core.feed(Cancel("r")), CancelStep)
    core.answer(cancel, OK, 2.0)
    core.look(3.0, {TP: in_sync((1, 2))})
    core.look(8.0, {TP: in_sync((1, 2))})  # CR in CR's order counts once confirmed
    assert [e.reason for e in of_type(core.events, ev.PartitionCancelled) if e.final] == [
        "cancelled: back at its original replicas [1, 2]"]
    assert not [a for a in attention(core.state, {}) if a["kind"] == "skipped"]


# --- 6. a clock set back, and a failover to a host whose clock lags --------------------------------------


def until(d, cluster, done, seconds, step=1.0) -> float | None:
    """Tick every ``step`` seconds of cluster time until ``done()``: the cluster time it took, or None."""
    start = cluster.cluster.time
    for _ in range(int(seconds / step)):
        d.tick()
        if done():
            return cluster.cluster.time - start
        cluster.cluster.advance(step)
    return None


def test_a_refused_step_is_planned_again_after_its_backoff_although_the_clock_was_set_back():
    """The issue's story: a refusal at t=10,000, then the host's clock reads 10,000 - 600; the step
    was planned again after 603 s instead of 1 s."""
    d, cluster, log = engine(one_partition(), offset=10_000.0)
    cluster.refused = 1
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    assert [e.retry_at for e in payloads(log, ev.StepFailed)] == [10_001.0]
    d.host.offset -= 600.0
    took = until(d, cluster, lambda: len(cluster.alters) == 2, seconds=30)
    assert took is not None and took <= 2.0, took
    [stepped] = payloads(log, ev.ClockSetBack)
    assert (stepped.seen, stepped.now) == (10_000.0, 9_400.0)
    assert run(d, cluster, seconds=60)


def test_a_refused_step_is_planned_again_after_its_backoff_on_a_standby_whose_clock_lags():
    """The controller refuses a step at t=10,000 (planned again 1 s later); the engine dies, and a
    standby whose host clock is 600 s behind takes over from the log (recovery re-asserts steps in
    flight and elections, not a refused step's backoff): it plans the step again within the backoff."""
    d, cluster, log = engine(one_partition(), offset=10_000.0)
    cluster.refused = 1
    d.decide(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    assert [e.retry_at for e in payloads(log, ev.StepFailed)] == [10_001.0]
    standby = Decider(log, cluster, clock=Clock(cluster.cluster, 10_000.0 - 600.0))
    standby.recover(d.executed)
    took = until(standby, cluster, lambda: len(cluster.alters) == 2, seconds=30)
    assert took is not None and took <= 2.0, took
    assert run(standby, cluster, seconds=60)


def test_a_lost_election_is_asked_again_after_its_grace_although_the_clock_was_set_back():
    """(0, 1, 2) -> (3, 1, 2): 3 joins first and leads once elected. The first election is accepted
    but lost; the clock is then set back 600 s: it is asked again after ELECTION_GRACE (5 s) of
    cluster time, not 605 s."""
    from engine.core import retry

    d, cluster, log = engine(one_partition(size="1 MB"), offset=10_000.0)
    cluster.lost_elections = 1
    d.decide(Submit("r1", (PartitionTarget("t", 0, (3, 1, 2)),), steps="kip-435"))
    took = until(d, cluster, lambda: len(cluster.elections) == 1, seconds=30)
    assert took is not None and TP in d.state.elections
    d.host.offset -= 600.0
    took = until(d, cluster, lambda: len(cluster.elections) == 2, seconds=60)
    assert took is not None and took <= retry.ELECTION_GRACE + retry.FIRST_BACKOFF + 1.0, took
    assert run(d, cluster, seconds=60)
    assert cluster.cluster.state.partitions[TP].leader == 3


def test_a_step_reverted_outside_kreassign_fails_after_the_revert_grace_although_the_clock_was_set_back():
    """A step accepted at t=10,000 is dropped by the controller; the clock reads 600 s less from then
    on. The time between the answer and the step back is unknown (the look right after the step may
    be metadata lag), but a look REVERT_GRACE (5 s) after it fails the step, not one 600 s later."""
    from engine.core.decide import REVERT_GRACE

    core = Core({TP: (1, 2)}, at=9_990.0)
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    [start] = core.sent(core.feed(Tick(10_000.0)), StartStep)
    core.answer(start, OK, 10_000.0)
    first = 10_000.0 - 600
    assert not of_type(core.look(first, {TP: in_sync((1, 2))}), ev.StepFailed)
    evs = core.look(first + REVERT_GRACE, {TP: in_sync((1, 2))})
    assert [e.reason for e in of_type(evs, ev.StepFailed)] == [
        "step 1 was reverted outside kreassign (cancelled by another tool, or dropped by the controller): "
        "the partition is back at [1, 2]"]
    assert [(e.seen, e.now) for e in of_type(core.events, ev.ClockSetBack)] == [(10_000.0, first)]
    assert fold(core.events) == core.state


def test_the_release_bucket_refills_although_the_clock_was_set_back():
    """A copy released at t=10,000 fills broker 3's bucket (500 ms of the rate); it refills at a quarter
    of the rate: 2 s later another copy into 3 may go unthrottled, even when those 2 s are read on a
    clock set back 600 s (before the fix the bucket stayed full for 600 s)."""
    from engine.core.commands import CatchUpObserved

    t1, rate = TopicPartition("t", 1), 4_000_000
    core = Core({TP: (1, 2), t1: (2, 1)}, at=9_990.0)
    from engine.core.commands import ChangeThrottle
    core.feed(ChangeThrottle(rate))
    core.feed(Submit("r", (PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (2, 3)))))
    for start in core.sent(core.feed(Tick(10_000.0)), StartStep):
        core.answer(start, OK, 10_000.0)
    budget = rate * core.state.limits.throttle_release_ms / 1000
    core.feed(CatchUpObserved({TP: int(budget / 2), t1: 10_000_000}, 10_000.0))  # each has half the rate
    assert [e.tp for e in of_type(core.events, ev.ThrottleReleased)] == [TP]
    core.feed(Tick(10_000.0 - 600))
    core.feed(CatchUpObserved({t1: int(budget)}, 10_000.0 - 600 + 2.0))
    assert [e.tp for e in of_type(core.events, ev.ThrottleReleased)] == [TP, t1]


def test_an_unanswered_alter_and_a_failed_throttle_change_are_retried_after_their_backoff_across_a_set_back():
    """Both fail at t=10,000 (retry 1 s later); every later input reads the clock 600 s back: the tick
    1.5 s later sets the throttles again, and the next one, once they are in force, the alter (before
    the fix: nothing until the clock passed 10,001 again)."""
    from engine.core.actions import ApplyThrottles

    core = Core({TP: (1, 2)}, at=9_990.0)
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    evs = core.feed(Tick(10_000.0))
    [apply] = core.sent(evs, ApplyThrottles)
    [start] = core.sent(evs, StartStep)
    core.answer(apply, Unavailable("timed out"), 10_000.0)
    core.answer(start, Unavailable("timed out"), 10_000.0)
    assert core.state.steps[TP].retry_at == 10_001.0 and core.state.throttle_retry_at == 10_001.0
    first = 10_000.0 - 600
    core.feed(Tick(first))
    evs = core.feed(Tick(first + 1.5))
    assert core.sent(evs, ApplyThrottles)
    core.answer(core.sent(evs, ApplyThrottles)[0], OK, first + 1.5)
    assert core.sent(core.feed(Tick(first + 1.6)), StartStep) == [start]
    assert fold(core.events) == core.state
