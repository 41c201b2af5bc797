"""The executor: what the event log asks of the cluster, and carrying it out.

Pure part:

* ``actions(events)``: the actions the events call for, in log order
  (``ThrottlesApplied`` -> ``ApplyThrottles``; ``StepPlanned`` -> ``StartStep``
  with exactly the step's TR; ``PartitionCancelled`` with ``aborting`` ->
  ``CancelStep``; ``ThrottlesRemoved`` -> ``RemoveThrottles``; ``StepCompleted``
  with ``elect_leader`` -> ``ElectLeader``). Nothing else touches the cluster.
* ``reassert(state)``: what must be asserted again after a restart, from the
  state alone: throttles in force, each step in flight (altered again to its
  TR, or cancelled if it is being aborted), each pending preferred-leader
  election. Every action is idempotent, so repeating one that was already
  carried out changes nothing. What the state cannot tell (a ``ThrottlesRemoved``
  logged but not yet carried out when the engine died) the shell recovers from
  the log after the last event it knows it carried out: ``recovery_actions``.
* ``recovery_actions(removed, state)``: when a decider takes over, remove the
  throttle entries and broker rates that the ``ThrottlesRemoved`` events of
  that stretch of log name and the state no longer has in force, then
  ``reassert(state)``. This is what running ``actions`` over that stretch in
  log order would leave on the cluster (for each entry, the last delta that
  touched it wins, and that delta is what the fold says is in force), in at
  most one call, and without re-running a ``StartStep`` of a step that has
  completed since: repeating an old step's TR after its partition moved on
  would start a move backwards.

Thin runner:

* ``run(cluster, actions)`` carries actions out in order (consecutive actions
  of one kind go in one batch call) and returns the ``StepStartReport``s
  ``decide`` needs. It stops at the first ``Unavailable`` answer, so nothing
  runs ahead of an action that may not have happened; ``Outcome.done`` says how
  many were carried out and ``Executor`` keeps the rest to retry first.

The engine's loop (``engine.sim.strategies``, issue 5's Faust worker) is:
``handle`` an input, ``run`` the actions of its events, ``handle`` each report,
then observe ``watched(state)`` only after acting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Iterable, Sequence

from engine import events as ev
from engine.cluster import Cluster
from engine.cluster.actions import Action, ApplyThrottles, CancelStep, ElectLeader, RemoveThrottles, StartStep
from engine.cluster.result import Ok, Refused, Result, Unavailable
from engine.commands import StepStartReport
from engine.state import State
from engine.throttles import ThrottleSet


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
    return out


def reassert(state: State) -> list[Action]:
    out: list[Action] = []
    if not state.throttles.is_empty():
        out.append(ApplyThrottles(state.throttles))
    for tp, f in sorted(state.steps.items()):
        if f.aborting:
            out.append(CancelStep(f.request_id, tp, f.number))
        else:
            out.append(StartStep(f.request_id, tp, f.number, f.step.tr))
    out.extend(ElectLeader(tp) for tp in sorted(state.elections.keys()))
    return out


def recovery_actions(removed: Iterable[ThrottleSet], state: State) -> list[Action]:
    """See the module doc: ``removed`` are the ``ThrottlesRemoved`` sets logged after the last
    event known carried out (all of them if that is unknown)."""
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
    return out + reassert(state)


@dataclass(frozen=True)
class Outcome:
    reports: tuple[StepStartReport, ...] = ()
    done: int = 0  # actions carried out, in order
    unavailable: Unavailable | None = None  # why it stopped before the end
    refused: tuple[tuple[Action, Refused], ...] = ()  # refusals that are not step reports

    @property
    def complete(self) -> bool:
        return self.unavailable is None


def run(cluster: Cluster, todo: Sequence[Action]) -> Outcome:
    reports: list[StepStartReport] = []
    refused: list[tuple[Action, Refused]] = []
    done = 0
    for kind, group in groupby(todo, key=type):
        batch = list(group)
        results = _call(cluster, kind, batch)
        for action, result in zip(batch, results):
            if isinstance(result, Unavailable):
                return Outcome(tuple(reports), done, result, tuple(refused))
            if kind is StartStep:
                error = None if isinstance(result, Ok) else str(result)
                reports.append(StepStartReport(action.request_id, action.tp, action.number, error))
            elif isinstance(result, Refused):
                refused.append((action, result))
            done += 1
    return Outcome(tuple(reports), done, None, tuple(refused))


def _call(cluster: Cluster, kind: type, batch: list) -> list[Result]:
    if kind is StartStep:
        by_tp = cluster.alter_reassignments({a.tp: a.replicas for a in batch})
        return [by_tp.get(a.tp, Unavailable(f"no answer for {a.tp}")) for a in batch]
    if kind is CancelStep:
        by_tp = cluster.cancel_reassignments([a.tp for a in batch])
        return [by_tp.get(a.tp, Unavailable(f"no answer for {a.tp}")) for a in batch]
    if kind is ElectLeader:
        by_tp = cluster.elect_preferred_leaders([a.tp for a in batch])
        return [by_tp.get(a.tp, Unavailable(f"no answer for {a.tp}")) for a in batch]
    if kind is ApplyThrottles:
        return [cluster.apply_throttles(a.throttles) for a in batch]
    if kind is RemoveThrottles:
        return [cluster.remove_throttles(a.throttles) for a in batch]
    raise TypeError(f"not an action: {kind.__name__}")


@dataclass
class Executor:
    """``run`` with memory: actions left over by an ``Unavailable`` answer go first next time."""

    cluster: Cluster
    pending: list[Action] = field(default_factory=list)
    refused: list[tuple[Action, Refused]] = field(default_factory=list)
    last_unavailable: Unavailable | None = None

    def execute(self, todo: Iterable[Action] = ()) -> list[StepStartReport]:
        self.pending.extend(todo)
        outcome = run(self.cluster, self.pending)
        del self.pending[: outcome.done]
        self.refused.extend(outcome.refused)
        self.last_unavailable = outcome.unavailable
        return list(outcome.reports)

    def execute_events(self, events: Iterable[ev.Event]) -> list[StepStartReport]:
        return self.execute(actions(events))
