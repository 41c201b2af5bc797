"""KIP-236 cancellation against observations that predate the actions they would judge.

The story a colleague reproduced while building the demo: a step (1, 2) -> (2, 3) has just been sent,
a cancel follows, and the latest observation of the partition was taken before the reassignment
reached the cluster. Judged on that observation the step looks aborted, the core says the partition
is back at (1, 2), while KRaft's revert (RS - AR, in RS order) leaves it at (2, 1): another
preferred leader, and a log that is no longer the truth.

Rules (docs/algorithm.md, section 4): only an observation taken after the cluster's answer to the
last action on a partition may judge it; a cancel of a step whose alter was (or may have been) sent
sends the cancellation, and NO_REASSIGNMENT_IN_PROGRESS is a normal answer; the partition settles on
what the cluster has after the cancel, and an order KRaft's revert changed is restored by a step that
only reorders (no data moves), so the preferred leader is the operator's again.

Told three ways: the pure core fed by hand, the unforgiving fake cluster through the real executor
with observations delivered late, and the simulated cluster under the decider.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import events as ev
from engine.core.cancellation import settle_target
from engine.core.actions import CancelStep, StartStep
from engine.core.outcomes import OK, Ok, Unavailable
from engine.core.commands import ActionOutcome, Cancel, Observation, PartitionTarget, Submit, Tick
from engine.core.decide import handle, watched
from engine.runtime.executor import actions, run
from engine.core.partition import Broker, PartitionState, TopicInfo, TopicPartition, in_sync
from engine.core.state import CANCELLED, COMPLETED, EMPTY, REVERTED, TERMINAL, fold
from tests.fake_cluster import Driver, FakeCluster

TP = TopicPartition("t", 0)


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def final_cancel(events):
    return [e for e in of_type(events, ev.PartitionCancelled) if e.final]


# --- the pure core, fed by hand ------------------------------------------------------------------


class Core:
    """``handle`` over inputs chosen by the test; the actions the log asks for are collected, never
    carried out: the test says what the cluster answered and what an observation saw, and when."""

    def __init__(self, replicas=(1, 2), brokers=(1, 2, 3, 4)):
        self.state = EMPTY
        self.events: list = []
        self.brokers = tuple(Broker(b) for b in brokers)
        self.look(0.0, in_sync(replicas))

    def feed(self, inp) -> list:
        self.state, evs = handle(self.state, inp)
        self.events.extend(evs)
        return evs

    def look(self, at, p: PartitionState) -> list:
        return self.feed(Observation(self.brokers, {"t": TopicInfo(1)}, {TP: p}, at))

    def answer(self, action, result, at) -> list:
        return self.feed(ActionOutcome(action, result, at))

    def actions(self, events) -> list:
        return actions(events)


def moving(replicas, adding, removing, isr, leader) -> PartitionState:
    return PartitionState(tuple(replicas), frozenset(isr), leader, None, tuple(adding), tuple(removing))


def started(target=(2, 3), rollback=None):
    """ORS (1, 2), FTR ``target``; step 1 sent at t=1 and accepted."""
    core = Core()
    core.feed(Submit("r", (PartitionTarget("t", 0, target),)))
    evs = core.feed(Tick(1.0))
    [start] = [a for a in core.actions(evs) if isinstance(a, StartStep)]
    core.answer(start, OK, 1.0)
    assert core.state.steps[TP].started
    return core, start


def test_a_cancel_right_after_a_step_started_is_not_judged_on_the_observation_from_before_it():
    core, start = started()
    assert start.replicas == (2, 3)  # add 3, drop 1: Kafka runs it as RS = (2, 3, 1), AR = (3,)
    evs = core.feed(Cancel("r"))
    [cancel] = [a for a in core.actions(evs) if isinstance(a, CancelStep)]  # the cancellation is sent
    core.answer(cancel, OK, 2.0)  # KRaft reverts to RS - AR in RS order: (2, 1)
    # the watcher's look taken at t=0.5, before the alter reached the controller, arrives now
    late = core.look(0.5, in_sync((1, 2)))
    assert not of_type(late, ev.StepAborted) and not final_cancel(late)
    assert core.state.observed[TP].replicas == (1, 2) and TP in core.state.steps
    # the look after the cancel's answer sees what KRaft left
    now = core.look(3.0, PartitionState((2, 1), frozenset({1, 2}), 1))
    assert [e.replicas for e in of_type(now, ev.StepAborted)] == [(2, 1)]
    assert not final_cancel(now), "(2, 1) is not where the operator had it: the order is restored first"
    evs = core.feed(Tick(4.0))
    [reorder] = [a for a in core.actions(evs) if isinstance(a, StartStep)]
    planned = of_type(evs, ev.StepPlanned)[0].step
    assert reorder.replicas == (1, 2) and not planned.nr and not planned.dr  # moves no data
    core.answer(reorder, OK, 4.0)
    done = core.look(5.0, PartitionState((1, 2), frozenset({1, 2}), 1))
    assert of_type(done, ev.StepCompleted)
    assert [e.reason for e in final_cancel(done)] == ["cancelled: back at its original replicas [1, 2]"]
    assert core.state.partitions[TP].status == CANCELLED
    assert fold(core.events) == core.state


def test_a_rollback_right_after_a_step_started_ends_at_the_original_order():
    core, _start = started()
    evs = core.feed(Cancel("r", rollback=True))
    [cancel] = [a for a in core.actions(evs) if isinstance(a, CancelStep)]
    core.answer(cancel, OK, 2.0)
    late = core.look(0.5, in_sync((1, 2)))
    assert not of_type(late, ev.StepAborted) and not of_type(late, ev.PartitionReverted)
    core.look(3.0, PartitionState((2, 1), frozenset({1, 2}), 1))
    evs = core.feed(Tick(4.0))
    [reorder] = [a for a in core.actions(evs) if isinstance(a, StartStep)]
    assert reorder.replicas == (1, 2)
    core.answer(reorder, OK, 4.0)
    done = core.look(5.0, PartitionState((1, 2), frozenset({1, 2}), 1))
    assert of_type(done, ev.PartitionReverted) and core.state.partitions[TP].status == REVERTED


def test_an_abort_is_judged_only_after_the_cancels_answer_came():
    core, _start = started()
    core.feed(Cancel("r"))  # the cancel is logged; its answer has not come back yet
    evs = core.look(5.0, in_sync((1, 2)))  # taken when? before the cancel reached the cluster, maybe
    assert not of_type(evs, ev.StepAborted)
    assert TP in core.state.steps and core.state.steps[TP].aborting


def test_cancelling_a_step_whose_alter_went_unanswered_sends_the_cancel_and_nothing_in_progress_is_normal():
    core = Core()
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    [start] = [a for a in core.actions(core.feed(Tick(1.0))) if isinstance(a, StartStep)]
    core.answer(start, Unavailable("timed out"), 1.0)  # it may have reached the controller, or not
    evs = core.feed(Cancel("r"))
    [cancel] = [a for a in core.actions(evs) if isinstance(a, CancelStep)]
    answer = core.answer(cancel, Ok("no reassignment in progress"), 2.0)  # Kafka's 85: it never landed
    assert not of_type(answer, ev.ActionFailed)
    assert [e.note for e in of_type(answer, ev.ActionAnswered)] == ["no reassignment in progress"]
    stale = core.look(0.5, in_sync((1, 2)))
    assert not of_type(stale, ev.StepAborted)
    fresh = core.look(3.0, in_sync((1, 2)))
    # CR in CR's order: the alter never landed, or metadata from before a step that completed (seed 9235
    # of the fault simulator): a look METADATA_SETTLE later confirms it
    assert not of_type(fresh, ev.StepAborted)
    fresh = core.look(8.0, in_sync((1, 2)))
    assert [e.replicas for e in of_type(fresh, ev.StepAborted)] == [(1, 2)]
    assert [e.reason for e in final_cancel(fresh)] == ["cancelled: back at its original replicas [1, 2]"]
    assert not core.state.throttles.leader and not core.state.throttles.follower


def test_an_alter_that_lands_after_the_cancel_is_cancelled_again():
    core = Core()
    core.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
    [start] = [a for a in core.actions(core.feed(Tick(1.0))) if isinstance(a, StartStep)]
    core.answer(start, Unavailable("timed out"), 1.0)
    [cancel] = [a for a in core.actions(core.feed(Cancel("r"))) if isinstance(a, CancelStep)]
    core.answer(cancel, Ok("no reassignment in progress"), 2.0)
    # the controller applied the timed-out alter after the cancel: the reassignment runs
    evs = core.look(3.0, moving((2, 3, 1), (3,), (1,), {1, 2}, 1))
    failed = of_type(evs, ev.ActionFailed)
    assert failed and failed[0].action == "cancel_step" and "cancelling it again" in failed[0].message
    assert not of_type(evs, ev.StepAborted)
    assert not [a for a in core.actions(core.feed(Tick(3.0))) if isinstance(a, CancelStep)]  # after a backoff
    again = [a for a in core.actions(core.feed(Tick(4.0))) if isinstance(a, CancelStep)]
    assert again == [cancel]
    core.answer(cancel, OK, 4.5)
    evs = core.look(5.0, PartitionState((2, 1), frozenset({1, 2}), 1))
    assert [e.replicas for e in of_type(evs, ev.StepAborted)] == [(2, 1)]


def test_a_rollback_step_is_never_judged_on_an_observation_from_before_the_first_step():
    # (1, 2) -> (2, 3) completes; a rollback starts (2, 3) -> (1, 2, 3). A look from before step 1
    # shows (1, 2) with nothing in progress: read now, the rollback step would have been "changed by
    # another tool" and failed, and the partition planned again from replicas it no longer has.
    core, start = started()
    core.look(2.0, PartitionState((2, 3), frozenset({2, 3}), 2))
    assert of_type(core.events, ev.StepCompleted)
    core.feed(Cancel("r", rollback=True, include_completed=True))
    evs = core.feed(Tick(3.0))
    [back] = [a for a in core.actions(evs) if isinstance(a, StartStep)]
    core.answer(back, OK, 3.0)
    late = core.look(0.5, in_sync((1, 2)))
    assert late == []
    assert core.state.observed[TP].replicas == (2, 3)  # a look older than what the state knows says nothing
    assert core.state.partitions[TP].status not in TERMINAL


def test_a_look_older_than_the_last_one_never_replaces_it():
    core, _start = started()
    core.look(3.0, moving((2, 3, 1), (3,), (1,), {1, 2}, 1))
    evs = core.look(2.5, in_sync((1, 2)))
    assert evs == [] and core.state.observed[TP].adding == (3,)


def test_a_clock_set_back_is_not_taken_for_late_looks_forever():
    # the engine's host clock is stepped back an hour (or a new decider's host runs behind): its looks
    # count, or the partition would wait an hour without a word; looks late in the new time still don't
    core, start = started()
    core.look(3.0, moving((2, 3, 1), (3,), (1,), {1, 2}, 1))
    evs = core.look(3.0 - 3600, PartitionState((2, 3), frozenset({2, 3}), 2))
    assert of_type(evs, ev.StepCompleted)
    core.feed(Cancel("r", rollback=True, include_completed=True))
    [back] = [a for a in core.actions(core.feed(Tick(5.0 - 3600))) if isinstance(a, StartStep)]
    core.answer(back, OK, 5.0 - 3600)
    assert core.look(4.0 - 3600, in_sync((2, 3))) == []  # taken before the rollback's alter was answered


def test_settle_target_restores_the_original_order_when_the_replicas_are_the_original_ones():
    assert settle_target((2, 1), (1, 2)) == (1, 2)  # KRaft's revert of (1, 2) -> (2, 3)
    assert settle_target((3, 0, 2, 1), (0, 1, 2)) == (0, 1, 2)
    assert settle_target((2, 3), (1, 2)) == (2, 3)  # not the original replicas: it stays where it is
    assert settle_target((2, 1), None) == (2, 1)


# --- the fake cluster, through the real executor, with looks delivered late ---------------------------


def late_look(c: FakeCluster, d: Driver, at: float) -> Observation:
    obs = c.observation(watched(d.state) or None)
    return Observation(obs.brokers, obs.topics, obs.partitions, at)


def test_through_the_executor_a_stale_look_after_a_cancel_leaves_the_log_the_truth():
    for rollback in (False, True):
        c = FakeCluster({TP: (1, 2)}, (1, 2, 3, 4))
        d = Driver(c)
        d.now = 100.0
        d.feed(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
        stale = late_look(c, d, d.now)  # the watcher looks ...
        d.now = 101.0
        d.feed(Tick(d.now))  # ... the step is sent ...
        assert c.in_progress() == [TP]
        d.now = 102.0
        d.feed(Cancel("r", rollback=rollback))  # ... and cancelled: KRaft leaves (2, 1)
        assert c.assignment()[TP] == (2, 1) and (TP, None) in c.alters
        d.feed(stale)  # ... then the look from before arrives
        assert d.state.partitions[TP].status not in TERMINAL, rollback
        for _ in range(10):
            d.now += 1.0
            d.tick()
            if d.quiet():
                break
        assert c.assignment()[TP] == (1, 2), "the operator's order, so the operator's preferred leader"
        assert d.state.observed[TP].replicas == c.assignment()[TP]
        assert d.state.partitions[TP].status == (REVERTED if rollback else CANCELLED)
        assert [a for a in c.alters if a[1] is not None] == [(TP, (2, 3)), (TP, (1, 2))]  # one reorder, no copy
        assert fold(d.events) == d.state


def test_the_fake_reverts_in_kraft_order():
    # RS = TRS + (ORS - TRS) in broker id order (a TreeSet in ReplicationControlManager), revert = RS - AR
    c = FakeCluster({TP: (3, 1, 2)}, range(8))
    c.alter_reassignments({TP: (5,)})
    assert c.parts[TP].replicas == (5, 1, 2, 3)
    c.cancel_reassignments([TP])
    assert c.parts[TP].replicas == (1, 2, 3)


# --- property: random interleavings of answers, looks and a cancel -----------------------------------


class LateDriver:
    """The engine's loop, except that the cluster's answers and the watcher's looks reach the core
    late and out of turn: every action is carried out on the fake cluster when the log asks for it (in
    log order, at its own time), but its answer is queued; a look is taken at one time and delivered
    later. The oracles are the cluster itself and the test's own record of when each alter or cancel
    reached it."""

    def __init__(self, c: FakeCluster, rnd):
        self.c, self.rnd = c, rnd
        self.state, self.events = EMPTY, []
        self.t = 0.0
        self.answers: list[ActionOutcome] = []
        self.looks: list[Observation] = []
        self.acted: dict = {}  # tp -> when an alter or a cancel of ours last reached the cluster

    def clock(self) -> float:
        self.t += 1.0
        return self.t

    def feed(self, inp) -> None:
        self.state, evs = handle(self.state, inp)
        self.events.extend(evs)
        self.check(inp, evs)
        for a in actions(evs):  # one at a time, each at its own time, through the real executor
            at = self.clock()
            if isinstance(a, (StartStep, CancelStep)):
                self.acted[a.tp] = at
            self.answers.extend(run(self.c, [a], at))

    def check(self, inp, evs) -> None:
        """Judgements stand on what the cluster had when the judged look was taken, never earlier."""
        for e in evs:
            tp = getattr(e, "tp", None)
            if isinstance(e, (ev.StepAborted, ev.StepCompleted)):
                assert isinstance(inp, Observation) and inp.now >= self.acted.get(tp, 0.0), (e, inp.now, self.acted)
            if isinstance(e, (ev.PartitionReverted, ev.PartitionCompleted)) or (
                    isinstance(e, ev.PartitionCancelled) and e.final):
                p = self.c.parts[tp]
                assert not p.adding and self.state.observed[tp].replicas == p.replicas, (e, p)

    def look(self) -> None:
        obs = self.c.observation(watched(self.state) or None)
        self.looks.append(Observation(obs.brokers, obs.topics, obs.partitions, self.clock()))

    def deliver(self, queue: list, anywhere: bool) -> None:
        if queue:
            self.feed(queue.pop(self.rnd.randrange(len(queue)) if anywhere else 0))


moves = st.sampled_from(["tick", "look", "answer", "answer-any", "deliver-look", "deliver-any-look", "finish"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.lists(st.integers(0, 5), min_size=2, max_size=3, unique=True),
                       st.lists(st.integers(0, 5), min_size=2, max_size=3, unique=True)), min_size=1, max_size=3),
    st.lists(moves, max_size=40), st.integers(0, 40), st.booleans(), st.randoms(use_true_random=False),
)
def test_whatever_order_answers_and_looks_arrive_in_the_state_settles_on_what_the_cluster_has(
        parts, schedule, cancel_at, rollback, rnd):
    tps = [TopicPartition("t", i) for i in range(len(parts))]
    c = FakeCluster({tp: tuple(o) for tp, (o, _t) in zip(tps, parts)}, range(6))
    d = LateDriver(c, rnd)
    first = c.observation()
    d.feed(Observation(first.brokers, first.topics, first.partitions, d.clock()))
    d.feed(Submit("r", tuple(PartitionTarget("t", tp.partition, tuple(t)) for tp, (_o, t) in zip(tps, parts))))
    for i, move in enumerate(schedule):
        if i == cancel_at:
            d.feed(Cancel("r", rollback=rollback))
        if move == "tick":
            d.feed(Tick(d.clock()))
        elif move == "look":
            d.look()
        elif move.startswith("answer"):
            d.deliver(d.answers, move == "answer-any")
        elif move.startswith("deliver"):
            d.deliver(d.looks, move == "deliver-any-look")
        elif move == "finish" and c.in_progress():
            tp = rnd.choice(c.in_progress())
            c.finish(tp)
    if cancel_at >= len(schedule):
        d.feed(Cancel("r", rollback=rollback))
    # the late ones arrive, in any order; then the engine's own loop: act, answer, look, until quiet
    while d.answers or d.looks:
        d.deliver(d.answers if d.answers and (not d.looks or rnd.random() < 0.5) else d.looks, True)
    for _ in range(200):
        d.feed(Tick(d.clock()))
        while d.answers:
            d.deliver(d.answers, False)
        for tp in c.in_progress():
            c.finish(tp)
        d.look()
        d.deliver(d.looks, False)
        while d.answers:
            d.deliver(d.answers, False)
        if d.state.requests["r"].status == COMPLETED and not c.in_progress():
            break
    assert d.state.requests["r"].status == COMPLETED
    for tp, (original, target) in zip(tps, parts):
        entry = d.state.partitions[tp]
        here = c.assignment()[tp]
        assert d.state.observed[tp].replicas == here, "the state is what the cluster has"
        if entry.status == REVERTED:
            assert here == tuple(original)
        elif entry.status == COMPLETED:
            assert here == tuple(target)
        else:
            assert entry.status == CANCELLED
            if set(here) == set(original):
                assert here == tuple(original), "back at the original replicas means in the original order"
    assert fold(d.events) == d.state


# --- the simulated cluster under the decider ---------------------------------------------------------


def test_on_the_simulated_cluster_a_cancel_right_after_the_start_ends_where_the_operator_had_it():
    import dataclasses

    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim.cluster import SimulatedCluster
    from tests.sim_helpers import scenario

    for rollback in (False, True):
        sim = SimulatedCluster.from_scenario(scenario([((1, 2), "500 MB", "1 MB/s")], throttle="10 MB/s"))
        d = Decider(MemoryLog(), sim, clock=lambda: sim.time)
        d.recover(None)
        d.decide(Submit("r", (PartitionTarget("t", 0, (2, 3)),)))
        stale = dataclasses.replace(sim.observe([TP]), now=sim.time)  # a look ...
        sim.advance(0.5)
        d.tick()  # ... the step starts: RS (2, 3, 1), adding 3 ...
        assert sim.state.partitions[TP].adding == (3,)
        sim.advance(0.5)
        d.decide(Cancel("r", rollback=rollback))  # ... the cancel: KRaft's revert leaves (2, 1) ...
        assert sim.state.partitions[TP].replicas == (2, 1)
        d.process(stale)  # ... and the look from before the step arrives
        assert d.state.partitions[TP].status not in TERMINAL
        for _ in range(60):
            sim.advance(1.0)
            d.tick()
            if d.state.requests["r"].status == COMPLETED:
                break
        p = sim.state.partitions[TP]
        assert (p.replicas, p.leader) == ((1, 2), 1), rollback
        assert d.state.observed[TP].replicas == p.replicas
        assert d.state.partitions[TP].status == (REVERTED if rollback else CANCELLED)
        t = sim.state.throttles
        assert not any(t.follower.values()) and not any(t.leader.values()) and not t.follower_rate and not t.leader_rate


# --- the review's finding 9: a cancel on a topic with unclean leader election enabled -------------------


def test_the_simulated_controller_reverts_uncleanly_only_where_the_topic_allows_it():
    """KRaft's cancelPartitionReassignment: a revert that leaves no replica in sync is refused where
    unclean leader election is off, and done where it is on: the first original replica becomes the
    ISR alone (what the new replicas had is lost), leading if alive."""
    from engine.sim import controller
    from tests.sim_helpers import scenario

    sim = controller.initial(scenario([((1, 2), "100 MB", "0 MB/s")]))
    sim, _ = controller.alter(sim, TP, (3, 4))
    p = sim.partitions[TP]
    sim = controller.put(sim, TP, p._replace(isr=frozenset({3}), leader=3))  # 3 caught up; 1 and 2 fell out
    refused, result = controller.cancel(sim, TP)
    assert result.code == "INVALID_REPLICA_ASSIGNMENT" and refused.partitions[TP].replicas == p.replicas
    unclean, result = controller.cancel(controller.set_unclean(sim, "t", True), TP)
    q = unclean.partitions[TP]
    assert isinstance(result, Ok) and (q.replicas, q.isr, q.leader, q.adding) == ((1, 2), {1}, 1, ())


def unclean_move(unclean: bool):
    """t-0 (1, 2) moved whole to (3, 4) under the decider on the simulated cluster: 3 catches up, 4 is
    stalled; broker 2 goes down (the look sees ISR {1, 3}), then broker 1 before any other look."""
    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim.cluster import SimulatedCluster
    from tests.sim_helpers import scenario

    sim = SimulatedCluster.from_scenario(scenario([((1, 2), "50 MB", "0 MB/s")]))
    if unclean:
        sim.set_unclean("t", True)
    d = Decider(MemoryLog(), sim, clock=lambda: sim.time)
    d.recover(None)
    sim.inject(4, "slow", factor=1e-6)
    d.decide(Submit("r", (PartitionTarget("t", 0, (3, 4)),), steps="whole"))
    for _ in range(20):
        sim.advance(0.5)
        d.tick()
        if 3 in sim.state.partitions[TP].isr:
            break
    sim.inject(2, "down")
    sim.advance(0.5)
    d.tick()
    assert d.state.observed[TP].isr == {1, 3} and d.state.topics["t"].unclean_leader_election == unclean
    sim.inject(1, "down")  # the ISR is {3} now: the last look does not know
    sim.advance(0.1)
    return sim, d


def test_a_cancel_on_a_topic_with_unclean_election_aborts_only_while_every_original_replica_is_in_sync():
    """With the last look's ISR {1, 3}, the old rule (some original replica in sync) sent the cancel; broker
    1 had left meanwhile, and KRaft reverted uncleanly: (1, 2) with broker 1 (down) the ISR alone, the
    partition offline, the 50 MB broker 3 had copied lost. The step goes on instead, and the cancel
    applies once it completes."""
    sim, d = unclean_move(True)
    d.decide(Cancel("r"))
    [skip] = [e for e in d.recent if isinstance(e.payload, ev.CancelSkipped)]
    assert "unclean leader election is enabled on topic t" in skip.payload.reason and "[2]" in skip.payload.reason
    p = sim.state.partitions[TP]
    assert p.adding == (3, 4) and p.isr == {3} and p.leader == 3, "no cancel was sent"
    sim.inject(4, "slow", factor=1.0)
    for _ in range(120):
        sim.advance(0.5)
        d.tick()
        if d.state.requests["r"].status == COMPLETED:
            break
    p = sim.state.partitions[TP]
    assert (p.replicas, p.leader) == ((3, 4), 3) and d.state.partitions[TP].status == CANCELLED
    assert d.state.partitions[TP].note == "cancelled after it had reached its target [3, 4]"


def test_where_unclean_election_is_off_the_same_cancel_is_sent_and_kafka_refuses_it():
    """The rule is the topic's: elsewhere the cancel goes as before (KRaft refuses the revert; the step
    goes on)."""
    sim, d = unclean_move(False)
    d.decide(Cancel("r"))
    assert not [e for e in d.recent if isinstance(e.payload, ev.CancelSkipped)]
    failed = [e.payload for e in d.recent if isinstance(e.payload, ev.ActionFailed)]
    assert failed and failed[-1].code == "INVALID_REPLICA_ASSIGNMENT" and failed[-1].final
    assert sim.state.partitions[TP].adding == (3, 4)


def test_an_abort_retried_on_an_unclean_topic_is_judged_again_on_the_latest_look():
    """The cancel could not be sent (the cluster did not answer); by its retry the latest look shows the
    original replicas out of sync: it is given up (the step goes on), never sent into an unclean revert."""
    c = FakeCluster({TP: (1, 2)}, range(1, 5))
    c.unclean.add("t")
    d = Driver(c)
    d.now = 1000.0
    assert d.state.topics["t"].unclean_leader_election
    d.feed(Submit("r", (PartitionTarget("t", 0, (3, 4)),), steps="whole"))
    d.tick()
    assert c.in_progress() == [TP]
    c.unavailable("cancel")
    d.now += 1
    d.feed(Cancel("r"))
    assert d.state.steps[TP].aborting and d.state.steps[TP].retry
    p = c.parts[TP]
    c.parts[TP] = p._replace(isr=frozenset({3}), leader=3)  # 1 and 2 fell out; 3 caught up
    d.now += 1
    d.observe()
    d.now += 60
    sent = len(c.alters)
    d.feed(Tick(d.now))
    [gave_up] = [e for e in of_type(d.events, ev.ActionFailed) if e.code == "UNCLEAN_REVERT"]
    assert gave_up.final and "unclean leader election" in gave_up.message
    assert len(c.alters) == sent and c.in_progress() == [TP], "no cancel sent"
    f = d.state.steps[TP]
    assert not f.aborting and not f.retry and d.state.partitions[TP].cancelled
    c.finish(TP)
    d.now += 1
    d.observe()
    assert d.state.partitions[TP].status == CANCELLED and c.assignment()[TP] == (3, 4)
