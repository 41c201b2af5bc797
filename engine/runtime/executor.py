"""The executor: what the event log asks of the cluster, and carrying it out.

Pure part:

* ``actions(events)``: the actions the events call for, in log order
  (``ThrottlesApplied`` -> ``ApplyThrottles``; ``StepPlanned`` -> ``StartStep``
  with exactly the step's TR; ``PartitionCancelled`` with ``aborting`` ->
  ``CancelStep``; ``ThrottlesRemoved`` -> ``RemoveThrottles``; ``StepCompleted``
  with ``elect_leader`` -> ``ElectLeader``; ``ActionRetried`` -> the action it
  names). Nothing else touches the cluster.
* ``reassert(state)``: what must be asserted again after a restart, from the
  state alone: throttles in force, each step in flight (altered again to its
  TR while the latest look shows its CR or its own reassignment in progress,
  or cancelled if it is being aborted), each pending preferred-leader
  election. Every action is idempotent, so repeating one that was already
  carried out changes nothing. Of the throttles in force, only those whose
  ``ThrottlesApplied`` may not have been carried out are set again when the
  shell knows which (the stretch after the last event it knows it carried
  out): a change that fails is recorded as not in force (section 6 of
  docs/algorithm.md), and a refused re-assertion of throttles set long ago
  would make the log forget throttles that are set. What the state cannot tell (a ``ThrottlesRemoved``
  logged but not yet carried out when the engine died) the shell recovers from
  the log after the last event it knows it carried out: ``recovery_actions``.
* ``recovery_actions(removed, state)``: when a decider takes over, remove the
  throttle entries and broker rates that the ``ThrottlesRemoved`` events of
  that stretch of log name and the state no longer has in force, then
  ``reassert`` of what that stretch's ``ThrottlesApplied`` events name. This
  is what running ``actions`` over that stretch in
  log order would leave on the cluster (for each entry, the last delta that
  touched it wins, and that delta is what the fold says is in force), in at
  most one call, and without re-running a ``StartStep`` of a step that has
  completed since: repeating an old step's TR after its partition moved on
  would start a move backwards.

Thin runner:

* ``run(cluster, actions, now)`` carries out every action, in order
  (consecutive actions of one kind go in one batch call), and returns one
  ``ActionOutcome`` per action: ``Ok``, ``Refused`` or ``Unavailable``. A failure
  never stops the others; ``decide`` turns each outcome into what happens next
  (``engine.core.retry`` holds when). One ordering rule is the runner's: a step is
  never started without the throttles logged before it, so a ``StartStep``
  whose topic or brokers were named by a throttle change that just failed is
  not carried out, and its outcome says why.
* A throttle change that fails is asked again piece by piece (each topic, each
  broker: ``engine.core.throttles.split``), so each outcome says exactly which part
  is in force.

The engine's loop (``engine.runtime.decider``, ``engine.whatif.strategies``) is: ``handle``
an input, ``run`` the actions of its events, ``handle`` each outcome, then
observe ``watched(state)`` only after acting.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from itertools import groupby
from typing import Callable, Iterable, Sequence

from engine.core import events as ev
from engine.cluster import Cluster
from engine.core.actions import Action, ApplyThrottles, CancelStep, ElectLeader, RemoveThrottles, StartStep
from engine.core.outcomes import Ok, Result, Unavailable
from engine.core.commands import ActionOutcome
from engine.core.decide import may_alter_again
from engine.core.state import State
from engine.core.throttles import ThrottleSet, split, union

log = logging.getLogger("kreassign.executor")


def actions(events: Iterable[ev.Event]) -> list[Action]:
    out: list[Action] = []
    for e in events:
        kind = type(e)
        if kind is ev.StepPlanned:
            out.append(StartStep(e.request_id, e.tp, e.number, e.step.tr))
        elif kind is ev.ThrottlesApplied:
            out.append(ApplyThrottles(e.throttles))
        elif kind is ev.ThrottlesRemoved:
            out.append(RemoveThrottles(e.throttles))
        elif kind is ev.PartitionCancelled and e.aborting is not None:
            out.append(CancelStep(e.request_id, e.tp, e.aborting))
        elif kind is ev.StepCompleted and e.elect_leader:
            out.append(ElectLeader(e.tp))
        elif kind is ev.ActionRetried:
            if e.action == "start_step":
                out.append(StartStep(e.request_id, e.tp, e.number, e.replicas))
            elif e.action == "cancel_step":
                out.append(CancelStep(e.request_id, e.tp, e.number))
            elif e.action == "elect_leader":
                out.append(ElectLeader(e.tp))
    return out


def reassert(state: State, applied: ThrottleSet | None = None) -> list[Action]:
    """``applied``: of the throttles in force, those to set again (``None``: all of them)."""
    out: list[Action] = []
    force = state.throttles
    if applied is not None:
        force = ThrottleSet(force.leader & applied.leader, force.follower & applied.follower,
                            force.leader_brokers & applied.leader_brokers,
                            force.follower_brokers & applied.follower_brokers, force.rate)
    if not force.is_empty():
        out.append(ApplyThrottles(force))
    for tp, f in sorted(state.steps.items()):
        if f.aborting:
            out.append(CancelStep(f.request_id, tp, f.number))
        elif may_alter_again(state, tp, f):
            out.append(StartStep(f.request_id, tp, f.number, f.step.tr))
    out.extend(ElectLeader(tp) for tp in sorted(state.elections.keys()))
    return out


def recovery_actions(removed: Iterable[ThrottleSet], state: State,
                     applied: Iterable[ThrottleSet] | None = None) -> list[Action]:
    """See the module doc: ``removed`` are the ``ThrottlesRemoved`` sets logged after the last
    event known carried out (all of them if that is unknown), ``applied`` the ``ThrottlesApplied``
    sets of the same stretch (``None``: unknown, every throttle in force is set again)."""
    leader: set = set()
    follower: set = set()
    leader_brokers: set = set()
    follower_brokers: set = set()
    for r in removed:
        leader |= r.leader
        follower |= r.follower
        leader_brokers |= r.leader_brokers
        follower_brokers |= r.follower_brokers
    force = state.throttles
    stale = ThrottleSet(
        frozenset(leader - force.leader), frozenset(follower - force.follower),
        frozenset(leader_brokers - force.leader_brokers), frozenset(follower_brokers - force.follower_brokers),
    )
    out: list[Action] = [] if stale.is_empty() else [RemoveThrottles(stale)]
    uncertain = None if applied is None else functools.reduce(union, applied, ThrottleSet())
    return out + reassert(state, uncertain)


def run(cluster: Cluster, todo: Sequence[Action], now: float | None = None,
        guard: Callable[[], None] | None = None, clock: Callable[[], float] | None = None) -> list[ActionOutcome]:
    """``guard`` is called before every call that changes the cluster; whatever it raises (the
    decider's ``Deposed``: another decider took over) stops the run at once, outside the rule that
    turns an adapter's exceptions into outcomes. Each outcome carries the time of its answer: ``clock``
    read when the call returned (``now`` without one). A look is judged against it (a look taken before
    an answer may predate the action), so a call that a slow one before it delayed is not stamped with
    the time the run began (the fault simulator's seed 5347: a look 7 s after the batch began, but
    right after its alter landed, was taken for a look after the alter)."""
    guard = guard or _no_guard
    if clock is not None:
        def stamp() -> float | None:
            return clock()
    else:
        def stamp() -> float | None:
            return now
    out: list[ActionOutcome] = []
    failed_topics: set[str] = set()
    failed_brokers: set[int] = set()
    for kind, group in groupby(todo, key=type):
        batch = list(group)
        if kind in (ApplyThrottles, RemoveThrottles):
            for action in batch:
                for piece, result in _throttles(cluster, action, guard):
                    out.append(ActionOutcome(kind(piece), result, stamp()))
                    if kind is ApplyThrottles and not isinstance(result, Ok):
                        failed_topics.update(e.topic for e in piece.leader | piece.follower)
                        failed_brokers.update(piece.leader_brokers | piece.follower_brokers)
            continue
        if kind is StartStep and (failed_topics or failed_brokers):
            held = [a for a in batch if a.tp.topic in failed_topics or failed_brokers & set(a.replicas)]
            for a in held:
                out.append(ActionOutcome(a, Unavailable(
                    "not started: a throttle change it needs failed just before (the step waits for it)"), stamp()))
            batch = [a for a in batch if a not in held]
            if not batch:
                continue
        guard()
        results = _call(cluster, kind, batch)
        answered = stamp()
        out.extend(ActionOutcome(a, r, answered) for a, r in zip(batch, results))
    return out


def _no_guard() -> None:
    return None


def _throttles(cluster: Cluster, action, guard: Callable[[], None]) -> list[tuple[ThrottleSet, Result]]:
    """One call for the whole delta; if it fails, one call per piece, to say which part failed."""
    call = cluster.apply_throttles if isinstance(action, ApplyThrottles) else cluster.remove_throttles
    guard()
    result = _guard(lambda: call(action.throttles))
    pieces = split(action.throttles)
    if isinstance(result, Ok) or len(pieces) <= 1:
        return [(action.throttles, result)]
    out = []
    for piece in pieces:
        guard()
        out.append((piece, _guard(lambda p=piece: call(p))))
    return out


def _guard(call) -> Result:
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - an adapter that raises is a defect: report it, never stall
        log.exception("the cluster adapter raised")
        return Unavailable(f"{type(e).__name__}: {e}")


def _call(cluster: Cluster, kind: type, batch: list) -> list[Result]:
    if kind is StartStep:
        call = lambda: cluster.alter_reassignments({a.tp: a.replicas for a in batch})  # noqa: E731
    elif kind is CancelStep:
        call = lambda: cluster.cancel_reassignments([a.tp for a in batch])  # noqa: E731
    elif kind is ElectLeader:
        call = lambda: cluster.elect_preferred_leaders([a.tp for a in batch])  # noqa: E731
    else:
        raise TypeError(f"not an action: {kind.__name__}")
    try:
        by_tp = call()
    except Exception as e:  # noqa: BLE001 - an adapter that raises is a defect: report it, never stall
        log.exception("the cluster adapter raised")
        return [Unavailable(f"{type(e).__name__}: {e}") for _ in batch]
    return [by_tp.get(a.tp, Unavailable(f"no answer for {a.tp}")) for a in batch]


@dataclass
class Executor:
    """``run`` on one cluster, with the shell's clock."""

    cluster: Cluster
    clock: Callable[[], float] | None = None
    guard: Callable[[], None] | None = None  # before every change to the cluster (see ``run``)

    def execute(self, todo: Iterable[Action] = ()) -> list[ActionOutcome]:
        return run(self.cluster, list(todo), None, self.guard, self.clock)

    def execute_events(self, events: Iterable[ev.Event]) -> list[ActionOutcome]:
        return self.execute(actions(events))
