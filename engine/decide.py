"""``decide(state, input) -> events``: every decision kreassign makes.

Inputs are commands (submit, cancel, limits, throttle, pause, resume),
observations of the cluster, the executor's reports and ticks. ``decide`` is
pure: it reads the state and returns the events to append; ``engine.state.apply``
folds them. ``handle`` returns the folded state as well, which is by
construction ``fold(events, state)``.

A ``Tick`` reconciles and schedules: it completes steps the last observations
show done, settles partitions whose next step must be planned, removes
throttles no step needs, and starts the next batch (throttles first, then the
steps). Because every tick re-derives what to do from the state alone, a batch
of events cut short by a crash heals on the next tick.

Contract with the shells (the engine's executor and watcher): the executor
carries out the log's actions in log order, and an observation is taken after
the actions logged before it were carried out. Then a step is judged complete
or aborted only on what the cluster did after it was asked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable

from engine import events as ev
from engine.cancellation import rollback_skip_reason, skip_reason
from engine.commands import (
    AdaptThrottle, Cancel, ChangeLimits, ChangeThrottle, Input, Observation, Pause, Resume, StepStartReport, Submit,
    Tick, Unverified,
)
from engine.limits import resolve_changes
from engine.partition import TopicPartition
from engine.scheduler import Hold, Requeue, Start, next_batch
from engine.state import (
    ABORTING, ACTIVE, CANCELLED, COMPLETED, IN_FLIGHT, REVERTED, TERMINAL, State, apply,
)
from engine.step import Done, PlanResult, Step, Waiting, plan_step
from engine.throttles import needed, reconcile
from engine.validation import submission_problems


class _Decision:
    """Events emitted so far, and the state they fold to."""

    __slots__ = ("state", "events", "touched", "steps_changed")

    def __init__(self, state: State):
        self.state = state
        self.events: list[ev.Event] = []
        self.touched: set[str] = set()
        self.steps_changed = False  # throttles need a look only if steps or the rate changed

    def emit(self, event: ev.Event) -> None:
        self.events.append(event)
        self.state = apply(self.state, event)
        if type(event) in _CHANGES_THROTTLE_NEEDS:
            self.steps_changed = True
        rid = getattr(event, "request_id", None)
        if rid:
            self.touched.add(rid)


_CHANGES_THROTTLE_NEEDS = frozenset({
    ev.StepPlanned, ev.StepCompleted, ev.StepAborted, ev.StepFailed, ev.ThrottleRateChanged,
})


def decide(state: State, inp: Input) -> list[ev.Event]:
    return handle(state, inp)[1]


def handle(state: State, inp: Input) -> tuple[State, list[ev.Event]]:
    d = _Decision(state)
    _HANDLERS[type(inp)](d, inp)
    tick = isinstance(inp, Tick)
    if tick or d.steps_changed:
        _reconcile_throttles(d)
    _complete_requests(d, everything=tick)
    return d.state, d.events


# --- planning one partition ----------------------------------------------------------


def plan(s: State, tp: TopicPartition) -> PlanResult:
    """The partition's next step towards its goal, from the latest observation."""
    entry = s.partitions[tp]
    goal = entry.goal
    if goal is None:
        return Waiting("original replicas unknown")
    obs = s.observed.get(tp)
    if obs is None:
        return Waiting("partition not observed yet")
    elected = s.elections.get(tp)
    if elected is not None and elected in obs.isr and (s.live_brokers() is None or elected in s.live_brokers()):
        return Waiting(f"waiting for broker {elected} to become leader (preferred leader election)")
    if obs.reassignment_in_progress:
        return Waiting(
            f"a reassignment not started by kreassign is in progress "
            f"(adding {list(obs.adding)}, removing {list(obs.removing)})"
        )
    return plan_step(
        obs.replicas, goal, obs.isr, obs.leader,
        s.min_insync(tp.topic), s.limits.max_replicas_per_step, s.live_brokers(),
    )


def watched(s: State) -> set[TopicPartition]:
    """The partitions an ISR watcher must poll: those with a step in flight, those
    waiting (a change may unblock them) and those awaiting a leader election."""
    return set(s.steps.keys()) | set(s.waiting.keys()) | set(s.elections.keys())


def _resolve(d: _Decision, tp: TopicPartition, result: PlanResult) -> None:
    entry = d.state.partitions[tp]
    if isinstance(result, Step):
        d.emit(ev.PartitionReady(entry.request_id, tp, result))
    elif isinstance(result, Waiting):
        d.emit(ev.PartitionWaiting(entry.request_id, tp, result.reason))
    elif entry.rolling_back:
        d.emit(ev.PartitionReverted(entry.request_id, tp))
    else:
        d.emit(ev.PartitionCompleted(entry.request_id, tp, d.state.observed[tp].replicas))


def _settle(d: _Decision, first: tuple[TopicPartition, ...] = ()) -> None:
    """Plan every partition that needs a planning decision (``first`` in order)."""
    for tp in first:
        if tp in d.state.pending:
            _resolve(d, tp, plan(d.state, tp))
    if d.state.pending:
        for tp in sorted(d.state.pending.keys()):
            _resolve(d, tp, plan(d.state, tp))


def _reconsider(d: _Decision, tp: TopicPartition) -> None:
    """Re-plan a waiting partition; record a change only."""
    result = plan(d.state, tp)
    if isinstance(result, Waiting) and d.state.waiting.get(tp) == result.reason:
        return
    _resolve(d, tp, result)


def _check_step(d: _Decision, tp: TopicPartition) -> None:
    """Complete (or finish aborting) a step in flight if the cluster shows it done."""
    f = d.state.steps[tp]
    obs = d.state.observed.get(tp)
    if obs is None:
        return
    step = f.step
    busy = obs.reassignment_in_progress
    if f.aborting:
        # Kafka (KRaft) reverts a cancelled reassignment to RS minus AR in RS order:
        # the step's CR as a set, not necessarily in CR's order. Or the step had
        # already completed when the cancel reached it.
        reverted = len(obs.replicas) == len(step.cr) and set(obs.replicas) == set(step.cr)
        if not busy and (reverted or obs.replicas == step.tr):
            d.emit(ev.StepAborted(f.request_id, tp, f.number, obs.replicas))
        return
    if not busy and obs.replicas == step.tr and obs.isr.issuperset(step.tr):
        d.emit(ev.StepCompleted(f.request_id, tp, f.number, obs.leader != step.tr[0]))
    elif f.started and not busy and obs.replicas not in (step.cr, step.tr):
        d.emit(ev.StepFailed(
            f.request_id, tp, f.number,
            f"replicas changed outside kreassign to {list(obs.replicas)} during step {f.number}",
        ))


# --- handlers -------------------------------------------------------------------------------


def _submit(d: _Decision, cmd: Submit) -> None:
    s = d.state
    digest = _digest(cmd)
    known = s.requests.get(cmd.request_id)
    if known is not None:
        if known.digest != digest:
            d.emit(ev.CommandRejected(
                "submit", (f"request id '{cmd.request_id}' is already used by another reassignment",),
                cmd.request_id, cmd.command_id,
            ))
            return
        # Re-delivered: queue what a crash may have left unqueued, nothing else.
        missing = [p for p in cmd.partitions if p.tp not in known.members and _owner_seq(s, p.tp) <= known.seq]
        for p in missing:
            _queue(d, cmd.request_id, p.tp, p.replicas)
        _settle(d, tuple(p.tp for p in missing))
        return
    problems = submission_problems(cmd, s.topics, s.brokers, s.observed)
    if problems:
        d.emit(ev.CommandRejected("submit", tuple(problems), cmd.request_id, cmd.command_id))
        return
    d.emit(ev.RequestAccepted(cmd.request_id, len(cmd.partitions), digest, cmd.command_id))
    if cmd.throttle_rate is not None and cmd.throttle_rate != s.throttle_rate:
        d.emit(ev.ThrottleRateChanged(cmd.throttle_rate, f"request {cmd.request_id}", cmd.command_id))
    for p in cmd.partitions:
        _queue(d, cmd.request_id, p.tp, p.replicas)
    _settle(d, tuple(p.tp for p in cmd.partitions))


def _owner_seq(s: State, tp: TopicPartition) -> int:
    entry = s.partitions.get(tp)
    return -1 if entry is None else s.requests[entry.request_id].seq


def _queue(d: _Decision, request_id: str, tp: TopicPartition, target) -> None:
    """Queue one partition; a request still working on it loses its pending steps first."""
    s = d.state
    entry = s.partitions.get(tp)
    f = s.steps.get(tp)
    if entry is not None and entry.status not in TERMINAL and entry.status != ABORTING:
        d.emit(ev.PartitionCancelled(entry.request_id, tp, False, None, request_id))
    obs = s.observed[tp]
    original = f.step.cr if f is not None else tuple(b for b in obs.replicas if b not in obs.adding)
    d.emit(ev.PartitionQueued(request_id, tp, original, tuple(target)))


def _digest(cmd: Submit) -> str:
    doc = [[p.topic, p.partition, list(p.replicas)] for p in cmd.partitions]
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()[:32]


def _cancel(d: _Decision, cmd: Cancel) -> None:
    s = d.state
    r = s.requests.get(cmd.request_id)
    if r is None:
        d.emit(ev.CommandRejected("cancel", (f"unknown request '{cmd.request_id}'",), cmd.request_id, cmd.command_id))
        return
    if cmd.partitions is not None:
        unknown = [str(tp) for tp in cmd.partitions if tp not in r.members]
        if unknown or not cmd.partitions:
            reason = (f"partitions {unknown} are not part of request '{cmd.request_id}'" if unknown
                      else "the list of partitions to cancel is empty")
            d.emit(ev.CommandRejected("cancel", (reason,), cmd.request_id, cmd.command_id))
            return
    targets = sorted(set(cmd.partitions) if cmd.partitions is not None else r.members.keys())
    d.emit(ev.CancelRequested(cmd.request_id, cmd.partitions, cmd.rollback, cmd.command_id))
    for tp in targets:
        _cancel_partition(d, cmd.request_id, tp, cmd.rollback, named=cmd.partitions is not None)
    _settle(d)


def _cancel_partition(d: _Decision, rid: str, tp: TopicPartition, rollback: bool, named: bool) -> None:
    s = d.state
    entry = s.partitions[tp]
    if entry.request_id != rid:
        if named:
            d.emit(ev.CancelSkipped(rid, tp, f"request '{entry.request_id}' has taken this partition over"))
        return
    status = entry.status
    if (
        status == REVERTED
        or (rollback and entry.rolling_back)
        or (status in (CANCELLED, ABORTING) and not rollback)
    ):
        return
    if status == COMPLETED and not rollback:
        if named:
            d.emit(ev.CancelSkipped(rid, tp, "already completed; cancel with rollback to move it back"))
        return
    obs = s.observed.get(tp)
    live = s.live_brokers()
    isr = obs.isr if obs is not None else frozenset()
    f = s.steps.get(tp)
    if rollback:
        reason = rollback_skip_reason(entry.original)
        if reason is not None:
            d.emit(ev.CancelSkipped(rid, tp, reason))
            return
    if status == ABORTING:
        d.emit(ev.PartitionCancelled(rid, tp, rollback, f.number))
        return
    if status == IN_FLIGHT:
        reason = skip_reason(f.step.cr, f.step.nr, isr, live)  # an abort reverts the step to its CR
        if reason is not None:
            d.emit(ev.CancelSkipped(rid, tp, reason))
            return
        d.emit(ev.PartitionCancelled(rid, tp, rollback, f.number))
        return
    d.emit(ev.PartitionCancelled(rid, tp, rollback, None))


def _limits(d: _Decision, cmd: ChangeLimits) -> None:
    resolved, problems = resolve_changes(cmd.changes)
    if problems:
        d.emit(ev.CommandRejected("limits", tuple(problems), None, cmd.command_id))
        return
    d.emit(ev.LimitsChanged(d.state.limits.changed(resolved), cmd.command_id))


def _throttle(d: _Decision, cmd: ChangeThrottle) -> None:
    rate = cmd.rate
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
        d.emit(ev.CommandRejected(
            "throttle", (f"throttle rate must be an integer >= 1 byte/s (or none), got {rate!r}",),
            None, cmd.command_id,
        ))
        return
    d.emit(ev.ThrottleRateChanged(rate, "operator", cmd.command_id))


def _pause(d: _Decision, cmd: Pause) -> None:
    if d.state.paused:
        d.emit(ev.CommandRejected("pause", ("already paused",), None, cmd.command_id))
    else:
        d.emit(ev.Paused(cmd.command_id))


def _resume(d: _Decision, cmd: Resume) -> None:
    if not d.state.paused:
        d.emit(ev.CommandRejected("resume", ("not paused",), None, cmd.command_id))
    else:
        d.emit(ev.Resumed(cmd.command_id))


def _unverified(d: _Decision, u: Unverified) -> None:
    c = u.command
    d.emit(ev.CommandRejected(COMMAND_NAMES[type(c)], (u.reason,), getattr(c, "request_id", None), c.command_id))


def _adapt(d: _Decision, a: AdaptThrottle) -> None:
    """An adaptive change applies only while throttling is on (an operator's ``none`` wins)."""
    rate = d.state.throttle_rate
    if rate is None or a.rate < 1 or a.rate == rate:
        return
    d.emit(ev.ThrottleRateChanged(a.rate, a.reason))


def _observe(d: _Decision, o: Observation) -> None:
    if o.brokers is not None:
        brokers = {b.id: b for b in o.brokers}
        if dict(d.state.brokers.items()) != brokers:
            live_before = d.state.live_brokers()
            d.emit(ev.BrokersObserved(tuple(sorted(o.brokers))))
            if d.state.live_brokers() != live_before:
                for tp in sorted(d.state.waiting.keys()):
                    _reconsider(d, tp)
    for topic in sorted(o.topics):
        info = o.topics[topic]
        if d.state.topics.get(topic) != info:
            d.emit(ev.TopicObserved(topic, info))
    for tp in sorted(o.partitions):
        ps = o.partitions[tp]
        known = d.state.observed.get(tp)
        if ps.size_bytes is None and known is not None and known.size_bytes is not None:
            ps = ps._replace(size_bytes=known.size_bytes)  # sizes are measured rarely; keep the last one
        if known != ps:
            d.emit(ev.PartitionObserved(tp, ps))
        if tp in d.state.steps:
            _check_step(d, tp)
        elif tp in d.state.waiting:
            _reconsider(d, tp)
    _settle(d)


def _report(d: _Decision, r: StepStartReport) -> None:
    f = d.state.steps.get(r.tp)
    if f is None or f.request_id != r.request_id or f.number != r.step:
        return  # a report about a step that is no longer in flight
    if r.error is None:
        if not f.started:
            d.emit(ev.StepStarted(r.request_id, r.tp, r.step))
    else:
        d.emit(ev.StepFailed(r.request_id, r.tp, r.step, r.error))


def _tick(d: _Decision, _t: Tick) -> None:
    for tp in sorted(d.state.steps.keys()):
        _check_step(d, tp)
    _settle(d)
    _reconcile_throttles(d)
    if d.state.paused:
        return
    s = d.state
    starts: list[Start] = []
    for decision in next_batch(s.ready, s.in_flight, s.limits, lambda tp: plan(s, tp)):
        if isinstance(decision, Start):
            starts.append(decision)
        elif isinstance(decision, Requeue):
            d.emit(ev.PartitionReady(s.partitions[decision.tp].request_id, decision.tp, decision.step))
        else:
            _resolve(d, decision.tp, decision.result)
    if not starts:
        return
    want = needed(
        [(tp, f.step) for tp, f in d.state.steps.items()] + [(x.tp, x.step) for x in starts],
        d.state.throttle_rate,
    )
    _removed, to_apply = reconcile(d.state.throttles, want)
    if not to_apply.is_empty():
        d.emit(ev.ThrottlesApplied(to_apply))  # before the steps that need them
    for x in starts:
        entry = d.state.partitions[x.tp]
        d.emit(ev.StepPlanned(entry.request_id, x.tp, entry.steps_planned + 1, x.step))


def _reconcile_throttles(d: _Decision) -> None:
    s = d.state
    want = needed(((tp, f.step) for tp, f in s.steps.items()), s.throttle_rate)
    to_remove, to_apply = reconcile(s.throttles, want)
    if not to_remove.is_empty():
        d.emit(ev.ThrottlesRemoved(to_remove))
    if not to_apply.is_empty():
        d.emit(ev.ThrottlesApplied(to_apply))


def _complete_requests(d: _Decision, everything: bool) -> None:
    s = d.state
    ids = (k for k, r in s.requests.items() if r.status == ACTIVE) if everything else d.touched
    for rid in sorted(ids):
        r = d.state.requests.get(rid)
        if r is None or r.status != ACTIVE or r.open or sum(r.counts.values()) < r.partitions:
            continue
        d.emit(ev.RequestCompleted(rid, r.count(COMPLETED), r.count(CANCELLED), r.count(REVERTED)))


_HANDLERS: dict[type, Callable[[_Decision, object], None]] = {
    Submit: _submit,
    Cancel: _cancel,
    ChangeLimits: _limits,
    ChangeThrottle: _throttle,
    Pause: _pause,
    Resume: _resume,
    Observation: _observe,
    StepStartReport: _report,
    Tick: _tick,
    Unverified: _unverified,
    AdaptThrottle: _adapt,
}

COMMAND_NAMES: dict[type, str] = {
    Submit: "submit", Cancel: "cancel", ChangeLimits: "limits", ChangeThrottle: "throttle",
    Pause: "pause", Resume: "resume",
}
"""The ``command`` of a ``CommandRejected`` event, per command type."""
