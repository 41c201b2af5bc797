"""Three ways to run a scenario's reassignment on the simulated cluster.

* ``kreassign``: the real core loop, exactly as the engine runs it: ``handle``
  a ``Submit``, then ``Tick``; the executor (``engine.runtime.executor``) carries out
  the events' actions on the cluster and reports back; the watcher observes
  ``watched(state)`` and the catch-up of the copies every ``poll_interval``,
  and the steps close to done every ``fast_interval``. No Kafka involved.
* ``all-at-once``: what ``kafka-reassign-partitions.sh --execute --throttle``
  does: throttle every moving replica (leader side: its current replicas,
  follower side: the new ones) and alter every partition to its final target
  at once. The tool itself never removes a throttle: that is ``--verify``,
  run here once the move is done and the cluster has settled.
* ``per-broker-cap``: Cruise Control's executor model: whole targets (one
  AlterPartitionReassignments to the final replicas), at most
  ``per_broker_cap`` moves in progress on any broker (a move occupies every
  broker of its old and new replica lists), throttles set for the moves in
  progress and cleared as each finishes.

Every strategy uses the scenario's throttle rate and faults, polls the
cluster every ``poll_interval`` and counts the makespan up to the poll that
sees everything done. The cluster then runs on until every partition can
complete acks=all writes again (at most ``SETTLE_LIMIT``), so that what a
producer felt of the move is counted whole (``engine.sim.probe``). Throttle
sets are the core's (``engine.core.throttles``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from engine.core import events as ev
from engine.core.commands import CatchUpObserved, ChangeLimits, ChangeThrottle, Observation, Submit, Tick
from engine.core.decide import catch_up_due, copying, handle, near_done, timers_pending, watched
from engine.runtime.executor import Executor
from engine.core.partition import TopicPartition
from engine.sim import controller
from engine.sim.cluster import SimulatedCluster
from engine.sim.model import Stats, linked
from engine.sim.probe import ProbeResult, probe
from engine.sim.scenario import Scenario
from engine.core.state import COMPLETED, EMPTY
from engine.core.step import Step
from engine.core.throttles import DEFAULT_THROTTLE_RATE, EMPTY as NO_THROTTLES, ThrottleSet, after_apply, after_remove, needed, reconcile

STRATEGIES = ("kreassign", "all-at-once", "per-broker-cap")
REQUEST_ID = "simulate"
SETTLE_LIMIT = 600.0  # seconds the cluster may run on after the move for producers to recover


class SimulationError(RuntimeError):
    """The scenario could not be run (e.g. the core rejected its reassignment)."""


@dataclass(frozen=True)
class RunResult:
    strategy: str
    finished: bool
    makespan: float  # seconds to the poll that saw everything done (or when it gave up)
    stats: Stats
    moves: int  # AlterPartitionReassignments entries issued
    at_target: bool  # every partition ends exactly at its target replicas
    throttles_left: bool  # throttle configuration still set at the end
    events: int = 0  # kreassign: events logged
    probe: ProbeResult | None = None  # what an acks=all producer felt of the move
    throttles_after: int = 0  # throttled replica entries still listed when the strategy was done


class _Clock:
    """The simulated cluster of a run (faults are injected by it as time passes)."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.cluster = SimulatedCluster.from_scenario(scenario)

    def wait(self, dt: float) -> None:
        self.cluster.advance(dt)

    def result(self, strategy: str, finished: bool, moves: int, events: int = 0, verify: bool = False) -> RunResult:
        """The run's result: the makespan is now; then the cluster settles (and, with ``verify``, the
        Kafka tool's --verify removes every throttle it set)."""
        makespan = self.cluster.time
        left = self.cluster.state.throttles.as_set()
        entries = len(left.leader) + len(left.follower)
        settle_end = makespan + SETTLE_LIMIT
        while self.cluster.state.stats.blocked and self.cluster.time < settle_end:
            self.wait(min(self.scenario.poll_interval, settle_end - self.cluster.time))
        if verify and not left.is_empty():
            self.cluster.remove_throttles(left)
        s = self.cluster.state
        target = self.scenario.target_assignment()
        at_target = all(s.partitions[tp].replicas == r and not s.partitions[tp].reassigning for tp, r in target.items())
        stats = controller.close_stats(s)
        felt = probe(list(s.partitions.keys()), self.scenario.probe_rate, makespan,
                     linked(stats.blocked_log), linked(stats.leader_log))
        return RunResult(
            strategy, finished, makespan, stats, moves, at_target, not s.throttles.is_empty(), events,
            felt, entries,
        )


def run(scenario: Scenario, strategy: str, max_time: float | None = None) -> RunResult:
    """Run ``strategy`` to completion (or until ``max_time`` simulated seconds)."""
    limit = max_time if max_time is not None else 30 * 86400.0
    if not scenario.targets:  # nothing to move: done before it starts
        return _Clock(scenario).result(strategy, True, 0)
    return _RUNNERS[strategy](scenario, limit)


def _kreassign(scenario: Scenario, limit: float) -> RunResult:
    clock = _Clock(scenario)
    cluster = clock.cluster
    executor = Executor(cluster, lambda: cluster.time)  # virtual time: retries and elections follow it
    state = EMPTY
    log: list = []

    def feed(inp) -> list:
        nonlocal state
        pending = [inp]
        emitted = []
        while pending:
            state, evs = handle(state, pending.pop(0))
            emitted.extend(evs)
            pending.extend(executor.execute_events(evs))
        log.extend(emitted)
        return emitted

    first = cluster.observe()  # with sizes, as the engine records them when a request is submitted
    sizes = cluster.sizes(list(first.partitions))
    feed(dataclasses.replace(first, now=cluster.time, partitions={
        tp: p._replace(size_bytes=sizes.get(tp)) for tp, p in first.partitions.items()}))
    if scenario.limits:
        feed(ChangeLimits(dict(scenario.limits)))
    if scenario.throttle != DEFAULT_THROTTLE_RATE:
        feed(ChangeThrottle(scenario.throttle))
    rejected = [e for e in feed(Submit(REQUEST_ID, scenario.targets)) if isinstance(e, ev.CommandRejected)]
    if rejected:
        raise SimulationError("the core rejected the reassignment: " + "; ".join(rejected[0].reasons))
    # The engine's cadence (engine.runtime.decider): every poll_interval a full look at what the core watches,
    # with the catch-up of the copies in flight; every fast_interval in between a look at the steps
    # close to done. An unchanged cluster gives an unchanged observation: it is not fed again.
    seen = None
    full_at = None
    last_catch_up: dict = {}
    while True:
        now = cluster.time
        full = full_at is None or now - full_at >= scenario.poll_interval - 1e-9
        look = watched(state, now) if full else near_done(state, now, last_catch_up)
        if full:
            full_at = now
        changed = False
        snapshot = (cluster.state.partitions, cluster.state.brokers)
        if look and (not full or snapshot != seen):  # a full look at an unchanged cluster sees nothing new
            changed = bool(feed(dataclasses.replace(cluster.observe(look), now=now)))
            if full:
                seen = snapshot
        tps = (copying(state) if full else catch_up_due(state, now, last_catch_up)) if state.throttle_rate else []
        if tps:
            steps = {tp: (state.observed[tp].leader, state.steps[tp].step.nr) for tp in tps}
            measured = cluster.catch_up(steps)
            last_catch_up = {tp: n for tp, n in {**last_catch_up, **measured}.items() if tp in state.steps}
            changed |= bool(feed(CatchUpObserved(measured, now)))
        if changed or timers_pending(state) or full:
            feed(Tick(now))
        r = state.requests[REQUEST_ID]
        if r.status == COMPLETED:
            finished = True
            break
        if cluster.time >= limit:
            finished = False
            break
        hot = near_done(state, cluster.time, last_catch_up)
        clock.wait(scenario.fast_interval if hot or timers_pending(state)
                   else max(full_at + scenario.poll_interval - now, scenario.fast_interval))
    moves = sum(1 for e in log if isinstance(e, ev.StepPlanned))
    return clock.result("kreassign", finished, moves, len(log))


def _whole_step(cr, ftr, leader) -> Step:
    nr = tuple(b for b in ftr if b not in cr)
    dr = tuple(b for b in cr if b not in ftr)
    return Step(tuple(cr), tuple(ftr), nr, dr, leader, ftr[0] != leader)


def _all_at_once(scenario: Scenario, limit: float) -> RunResult:
    clock = _Clock(scenario)
    cluster = clock.cluster
    state = cluster.state
    steps = {t.tp: _whole_step(state.partitions[t.tp].replicas, t.replicas, state.partitions[t.tp].leader)
             for t in scenario.targets}
    throttles = needed(steps.items(), scenario.throttle)
    if not throttles.is_empty():
        cluster.apply_throttles(throttles)
    cluster.alter_reassignments({tp: s.tr for tp, s in steps.items()})
    finished = not steps
    seen = None
    while not finished and cluster.time < limit:
        clock.wait(scenario.poll_interval)
        if cluster.state.partitions is not seen:  # unchanged cluster, unchanged answer
            seen = cluster.state.partitions
            obs = cluster.observe(list(steps))
            finished = not any(p.reassignment_in_progress for p in obs.partitions.values())
    return clock.result("all-at-once", finished, len(steps), verify=finished)


def _per_broker_cap(scenario: Scenario, limit: float) -> RunResult:
    clock = _Clock(scenario)
    cluster = clock.cluster
    cap = scenario.per_broker_cap
    queue = list(scenario.targets)
    active: dict[TopicPartition, Step] = {}
    busy: dict[int, int] = {}
    applied: ThrottleSet = NO_THROTTLES
    moves = 0
    seen = None

    def involved(step: Step) -> set[int]:
        return set(step.cr) | set(step.tr)

    freed = True
    while queue or active:
        started = {}
        for t in (list(queue) if freed else ()):  # nothing freed, nothing new may start
            p = cluster.state.partitions[t.tp]
            step = _whole_step(p.replicas, t.replicas, p.leader)
            if all(busy.get(b, 0) < cap for b in involved(step)):
                queue.remove(t)
                started[t.tp] = step
                active[t.tp] = step
                for b in involved(step):
                    busy[b] = busy.get(b, 0) + 1
        if started:
            _remove, to_apply = reconcile(applied, needed(active.items(), scenario.throttle))
            if not to_apply.is_empty():
                cluster.apply_throttles(to_apply)
                applied = after_apply(applied, to_apply)
            cluster.alter_reassignments({tp: s.tr for tp, s in started.items()})
            moves += len(started)
        if cluster.time >= limit:
            return clock.result("per-broker-cap", False, moves)
        clock.wait(scenario.poll_interval)
        freed = False
        if cluster.state.partitions is seen:  # unchanged cluster, unchanged answer
            continue
        seen = cluster.state.partitions
        obs = cluster.observe(list(active))
        done = [tp for tp, p in obs.partitions.items() if not p.reassignment_in_progress]
        freed = bool(done)
        for tp in done:
            for b in involved(active.pop(tp)):
                busy[b] -= 1
        if done:
            to_remove, _apply = reconcile(applied, needed(active.items(), scenario.throttle))
            if not to_remove.is_empty():
                cluster.remove_throttles(to_remove)
                applied = after_remove(applied, to_remove)
    return clock.result("per-broker-cap", True, moves)


_RUNNERS: dict[str, Callable[[Scenario, float], RunResult]] = {
    "kreassign": _kreassign,
    "all-at-once": _all_at_once,
    "per-broker-cap": _per_broker_cap,
}
