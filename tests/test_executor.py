"""The executor: events -> actions in log order, the runner, and re-assertion after a restart."""

import dataclasses
import random

from engine.core import events as ev
from engine.core.actions import ApplyThrottles, CancelStep, ElectLeader, RemoveThrottles, StartStep
from engine.core.outcomes import OK, Refused, Unavailable
from engine.core.commands import Cancel, PartitionTarget, Submit, Tick
from engine.core.decide import handle, watched
from engine.runtime.executor import Executor, actions, reassert, run
from engine.core.partition import TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet, union
from engine.sim.cluster import SimulatedCluster
from engine.core.state import COMPLETED, EMPTY, fold
from tests.sim_helpers import scenario

MB = 1_000_000


def small():
    parts = [((1 + i % 3, 1 + (i + 1) % 3), (50 + 10 * i) * MB, 0) for i in range(6)]
    targets = tuple(PartitionTarget("t", i, (4, 5) if i % 2 else (5, 4)) for i in range(6))
    return dataclasses.replace(scenario(parts, brokers=5, throttle="20 MB/s"), targets=targets)


def test_actions_follow_the_log_order():
    c = SimulatedCluster.from_scenario(small())
    state, _ = handle(EMPTY, c.observe())
    state, evs = handle(state, Submit("r", small().targets))
    state, evs = handle(state, Tick())
    acts = actions(evs)
    kinds = [type(a) for a in acts]
    assert kinds[0] is ApplyThrottles and set(kinds[1:]) == {StartStep}
    planned = [e for e in evs if isinstance(e, ev.StepPlanned)]
    assert [(a.tp, a.number, a.replicas) for a in acts[1:]] == [(e.tp, e.number, e.step.tr) for e in planned]
    cancel = [e for e in handle(state, Cancel("r"))[1] if isinstance(e, ev.PartitionCancelled)]
    assert {type(a) for a in actions(cancel)} == {CancelStep}


class Scripted:
    """A cluster whose answers the test chooses; it records what it was asked."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def alter_reassignments(self, targets):
        self.calls.append(("alter", dict(targets)))
        return {tp: self.answers.get(tp, OK) for tp in targets}

    def cancel_reassignments(self, tps):
        self.calls.append(("cancel", list(tps)))
        return {tp: self.answers.get(tp, OK) for tp in tps}

    def elect_preferred_leaders(self, tps):
        self.calls.append(("elect", list(tps)))
        return {tp: self.answers.get(tp, OK) for tp in tps}

    refuse_topics: set = set()

    def apply_throttles(self, t):
        self.calls.append(("apply", t))
        if any(e.topic in self.refuse_topics for e in t.leader | t.follower):
            return Refused("TOPIC_AUTHORIZATION_FAILED", "not authorized")
        return self.answers.get("apply", OK)

    def remove_throttles(self, t):
        self.calls.append(("remove", t))
        return OK


def test_runner_carries_out_every_action_and_reports_each_outcome():
    a, b, c = (TopicPartition("t", i) for i in range(3))
    todo = [StartStep("r", a, 1, (1, 2)), StartStep("r", b, 1, (2, 3)), ElectLeader(c),
            RemoveThrottles(ThrottleSet()), StartStep("r", c, 2, (3,))]
    cluster = Scripted({b: Refused("INVALID_REPLICA_ASSIGNMENT", "no"), c: Unavailable("timeout")})
    out = run(cluster, todo, now=5.0)
    assert [(type(o.action).__name__, o.result) for o in out] == [
        ("StartStep", OK), ("StartStep", Refused("INVALID_REPLICA_ASSIGNMENT", "no")),
        ("ElectLeader", Unavailable("timeout")), ("RemoveThrottles", OK), ("StartStep", Unavailable("timeout"))]
    assert all(o.now == 5.0 for o in out)
    # one batch for both steps, and nothing stops at a failure: the last step is still asked
    assert [k for k, _ in cluster.calls] == ["alter", "elect", "remove", "alter"]


def test_a_step_is_not_started_when_the_throttle_change_before_it_failed():
    a, b = TopicPartition("t", 0), TopicPartition("u", 0)
    delta = ThrottleSet(frozenset({ThrottledReplica("t", 0, 1)}), frozenset({ThrottledReplica("t", 0, 4)}),
                        frozenset({1}), frozenset({4}), 1000)
    other = ThrottleSet(frozenset({ThrottledReplica("u", 0, 2)}), frozenset({ThrottledReplica("u", 0, 3)}),
                        frozenset({2}), frozenset({3}), 1000)
    cluster = Scripted({})
    cluster.refuse_topics = {"t"}
    out = run(cluster, [ApplyThrottles(union(delta, other)),
                        StartStep("r", a, 1, (4, 1)), StartStep("r", b, 1, (3, 2))])
    by = {type(o.action).__name__ + str(getattr(o.action, "tp", "")): o.result for o in out}
    # the failed delta is asked again piece by piece, so each outcome names its part
    pieces = [o for o in out if isinstance(o.action, ApplyThrottles)]
    assert [bool(p.action.throttles.leader) for p in pieces] == [True, True, False, False, False, False]
    assert [type(p.result).__name__ for p in pieces[:2]] == ["Refused", "Ok"]
    assert isinstance(by["StartStept-0"], Unavailable) and "throttle" in by["StartStept-0"].message
    assert by["StartStepu-0"] == OK
    assert ("alter", {b: (3, 2)}) in cluster.calls and all(a not in dict(c[1]) for c in cluster.calls if c[0] == "alter")


def test_an_adapter_that_raises_is_an_unavailable_outcome_not_a_crash():
    class Raising(Scripted):
        def alter_reassignments(self, targets):
            raise TypeError("function takes at most 4 arguments (5 given)")

    out = run(Raising({}), [StartStep("r", TopicPartition("t", 0), 1, (1,))])
    assert isinstance(out[0].result, Unavailable) and "TypeError" in out[0].result.message


def drive(cluster, state, executor, inp, log):
    pending = [inp]
    while pending:
        state, evs = handle(state, pending.pop(0))
        log.extend(evs)
        pending.extend(executor.execute_events(evs))
    return state


def test_restart_reasserts_from_the_state_and_converges():
    """Kill the engine at random points (events logged, their actions cut short);
    a new engine folds the log, re-asserts, and the request still finishes exactly."""
    rng = random.Random(7)
    sc = small()
    cluster = SimulatedCluster.from_scenario(sc)
    log: list = []
    state = drive(cluster, EMPTY, Executor(cluster), cluster.observe(), log)
    state = drive(cluster, state, Executor(cluster), Submit("r", sc.targets), log)
    crashes = 0
    for _ in range(2000):
        state, evs = handle(state, Tick())
        log.extend(evs)
        todo = actions(evs)
        # crash: only a prefix of the actions happened (the first three times there are actions, then at
        # random: how many batches of actions a move takes depends on the scheduler, not on this test)
        if todo and (crashes < 3 or rng.random() < 0.3):
            run(cluster, todo[: rng.randrange(len(todo))])
            state = fold(log)  # the new engine's state is the fold of the log
            ex = Executor(cluster)
            for r in ex.execute(reassert(state)):
                state = drive(cluster, state, ex, r, log)
            crashes += 1
        else:
            ex = Executor(cluster)
            for r in ex.execute(todo):
                state = drive(cluster, state, ex, r, log)
        if state.requests["r"].status == COMPLETED:
            break
        cluster.advance(2)
        state = drive(cluster, state, Executor(cluster), cluster.observe(watched(state)), log)
    assert crashes >= 3
    assert state.requests["r"].status == COMPLETED
    assert all(cluster.state.partitions[t.tp].replicas == t.replicas for t in sc.targets)
    assert cluster.state.throttles.is_empty()
    planned = {}
    for e in log:
        if isinstance(e, ev.StepPlanned):
            assert planned.setdefault((e.tp, e.number), e.step.tr) == e.step.tr


def test_reassert_names_throttles_steps_aborts_and_elections():
    sc = small()
    cluster = SimulatedCluster.from_scenario(sc)
    log: list = []
    state = drive(cluster, EMPTY, Executor(cluster), cluster.observe(), log)
    state = drive(cluster, state, Executor(cluster), Submit("r", sc.targets), log)
    state = drive(cluster, state, Executor(cluster), Tick(), log)
    acts = reassert(state)
    assert acts[0] == ApplyThrottles(state.throttles)
    assert {a.tp for a in acts if isinstance(a, StartStep)} == set(state.steps.keys())
    tp = sorted(state.steps.keys())[0]
    state = drive(cluster, state, Executor(cluster), Cancel("r", (tp,)), log)
    assert CancelStep("r", tp, state.steps[tp].number) in reassert(state)


def test_reassert_alters_a_step_again_only_while_the_latest_look_shows_it_unstarted_or_its_own():
    """Seed 2444 of the fault simulator: another tool merged its reassignment into a step in flight and it
    completed elsewhere; a restart then altered the partition again to the step's TR and started copies
    nobody had planned from there (and no cap counted). The next look judges such a step instead."""
    sc = small()
    cluster = SimulatedCluster.from_scenario(sc)
    log: list = []
    state = drive(cluster, EMPTY, Executor(cluster), cluster.observe(), log)
    state = drive(cluster, state, Executor(cluster), Submit("r", sc.targets), log)
    state = drive(cluster, state, Executor(cluster), Tick(), log)
    tp = sorted(state.steps.keys())[0]
    f = state.steps[tp]
    assert StartStep(f.request_id, tp, f.number, f.step.tr) in reassert(state)  # CR or its own: sent again
    obs = state.observed[tp]
    elsewhere = tuple(b for b in range(20) if b not in f.step.cr and b not in f.step.tr)[:len(f.step.cr)]
    moved = state._replace(observed=state.observed.set(tp, obs._replace(replicas=elsewhere, adding=(), removing=())))
    assert not [a for a in reassert(moved) if isinstance(a, StartStep) and a.tp == tp]
    own = obs._replace(replicas=tuple(f.step.tr) + tuple(b for b in f.step.cr if b not in f.step.tr),
                       adding=tuple(f.step.nr), removing=tuple(f.step.dr))
    running = state._replace(observed=state.observed.set(tp, own))
    assert StartStep(f.request_id, tp, f.number, f.step.tr) in reassert(running)


def test_each_outcome_carries_the_time_of_its_answer():
    """Seed 5347 of the fault simulator: a slow throttle change delayed the alter after it by 7 s; stamped
    with the time the run began, the alter's answer let a look taken before the alter landed (a lagging
    broker's) judge the step: 'reverted outside kreassign'. Each outcome carries the clock read when its
    call returned."""
    sc = small()
    cluster = SimulatedCluster.from_scenario(sc)
    clock = [100.0]

    class Slow:
        def __getattr__(self, name):
            return getattr(cluster, name)

        def apply_throttles(self, t):
            clock[0] += 7.0  # a slow call
            return cluster.apply_throttles(t)

    tp = sorted(sc.partitions)[0]
    entry = ThrottledReplica(tp.topic, tp.partition, 0)
    todo = [ApplyThrottles(ThrottleSet(frozenset({entry}), frozenset(), frozenset({0}), frozenset(), 1_000_000)),
            StartStep("r", tp, 1, cluster.state.partitions[tp].replicas)]
    out = Executor(Slow(), lambda: clock[0]).execute(todo)
    assert [o.now for o in out] == [107.0, 107.0], out


def test_a_restart_does_not_alter_again_steps_whose_leaders_moved_past_a_cap():
    """Seed 2102 of the fault simulator: two steps' alters went unanswered; meanwhile the leader of one
    moved to the other's source, so both copies would now come out of one broker, against a limit of one
    outgoing move per broker. The retry rules give such a step up (``decide.over_caps``); a restart sent
    both again. Now only what the caps still admit is sent again, and each one held is an outcome that
    says why, so the core's retry rules judge it (given up and planned again)."""
    from engine.core.commands import ChangeLimits
    from engine.core.decide import held_over_caps
    from tests.fake_cluster import Driver, FakeCluster

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    c = FakeCluster({a: (1, 2), b: (2, 1)}, range(1, 6))
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeLimits({"max_outgoing_moves_per_broker": 1}))
    c.unavailable("alter", times=2)
    d.feed(Submit("r", (PartitionTarget("t", 0, (1, 3)), PartitionTarget("t", 1, (2, 4)))))
    d.tick()
    assert {d.state.steps[tp].source for tp in (a, b)} == {1, 2} and not any(f.started for f in d.state.steps.values())
    todo, held = held_over_caps(d.state, reassert(d.state), d.now)
    assert not held and {x.tp for x in todo if isinstance(x, StartStep)} == {a, b}
    c.parts[b] = c.parts[b]._replace(replicas=(1, 2), leader=1)  # b's leader moves to 1, a's source
    d.now += 1.0
    d.observe()
    assert {d.state.steps[tp].source for tp in (a, b)} == {1}
    todo, held = held_over_caps(d.state, reassert(d.state), d.now)
    assert not [x for x in todo if isinstance(x, StartStep)]  # either, with the other in flight, is over the cap
    assert {o.action.tp for o in held} == {a, b} and all("outgoing moves of broker 1" in o.result.message for o in held)
    for o in held:
        d.feed(o)
    d.now += 10.0
    d.tick()  # past the time an unanswered alter may still land: given up, planned again within the cap
    failed = [e for e in d.events if isinstance(e, ev.StepFailed)]
    assert {e.tp for e in failed} >= {a, b} and all("planned again" in e.reason for e in failed)
    assert sum(1 for f in d.state.steps.values() if f.source == 1) <= 1
