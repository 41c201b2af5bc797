"""The reassignment state and ``apply(state, event) -> state``.

State is only ever the fold of events: ``fold(events)``. Every field is an
immutable value (``immutables.Map`` is a persistent hash map: an update costs
O(log n) and shares the rest), so a state can be kept, compared and folded at
tens of thousands of events per second with a million partitions.

``apply`` never decides anything: each mutator records what its event says.
Indexes (``ready``, ``pending``, ``waiting``, ``steps``, ``elections``, the
in-flight counters and per-request counts) are kept here so that ``decide``
never scans the whole state.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

import immutables

from engine.core import events as ev
from engine.core.limits import DEFAULT_LIMITS, Limits
from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition
from engine.core.scheduler import CONTINUING, FRESH, InFlight, ReadyIndex, SchedulingKey, Slot
from engine.core.step import Step
from engine.core.throttles import DEFAULT_THROTTLE_RATE, ThrottleSet, after_apply, after_remove, minus, union

# Partition statuses
PENDING = "pending"  # needs a planning decision (transient within a decision)
READY = "ready"  # next step known, waiting for the scheduler
WAITING = "waiting"  # cannot progress now; the reason is in State.waiting
IN_FLIGHT = "in_flight"
ABORTING = "aborting"  # its step in flight is being cancelled on the cluster
COMPLETED = "completed"
CANCELLED = "cancelled"
REVERTED = "reverted"
TERMINAL = frozenset({COMPLETED, CANCELLED, REVERTED})
STATUSES = (PENDING, READY, WAITING, IN_FLIGHT, ABORTING, COMPLETED, CANCELLED, REVERTED)

ACTIVE = "active"

REJECTIONS_KEPT = 100
"""``State.rejections`` keeps this many latest rejected commands (a flood of bad commands stays bounded)."""


class InFlightStep(NamedTuple):
    request_id: str
    number: int
    step: Step
    started: bool = False
    aborting: bool = False
    attempt: int = 1  # of the alter (or, while aborting, of the cancel)
    error: str | None = None  # why the last attempt failed
    retry: bool = False  # a failed attempt is to be tried again, from retry_at on (None: at once)
    retry_at: float | None = None
    started_at: float | None = None  # the shell's clock when the cluster accepted it
    released: bool = False  # its throttle entries are no longer needed: close to done
    weight: int = 8  # against the per-broker move caps, in eighths of a move
    # Alters and cancels of it logged whose answer has not come back: while any is due, no observation
    # judges the step (the look may predate the action).
    answers_due: int = 0

    def answered(self) -> "InFlightStep":
        """One of its alters or cancels was answered."""
        return self._replace(answers_due=max(0, self.answers_due - 1))


class Election(NamedTuple):
    """A preferred-leader election asked for after a step that moved the preferred leader."""

    leader: int
    attempt: int = 1
    since: float | None = None  # when the last attempt was made (shell's clock)
    error: str | None = None
    retry: bool = False  # the last attempt failed: try again from retry_at on (None: at once)
    retry_at: float | None = None


class PartitionReassignment(NamedTuple):
    request_id: str
    original: Replicas | None  # ORS
    target: Replicas  # FTR
    status: str
    seq: int  # admission order
    steps_planned: int = 0  # step numbers are never reused, even after an abort
    steps_done: int = 0
    slot: Slot | None = None  # place in the ready index while READY
    rolling_back: bool = False
    cancelled: bool = False
    note: str | None = None  # last cancel-skip reason, or where a cancel left it
    failures: int = 0  # steps the cluster refused in a row (StepFailed), for the backoff
    retry_at: float | None = None  # a refused step is planned again from then on

    @property
    def goal(self) -> Replicas | None:
        """The replicas this partition is heading to now (ORS when rolling back)."""
        return self.original if self.rolling_back else self.target


class Request(NamedTuple):
    request_id: str
    seq: int
    partitions: int
    digest: str
    status: str = ACTIVE
    counts: immutables.Map = immutables.Map()  # partition status -> count
    members: immutables.Map = immutables.Map()  # every partition it ever queued -> True
    vstart: int = 0  # where it joined the turn-taking between requests (engine.core.scheduler)
    started: int = 0  # steps it has started

    @property
    def rank(self) -> int:
        """Its place in the turn-taking: the lowest rank starts its next step first."""
        return self.vstart + self.started

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    @property
    def open(self) -> int:
        return sum(n for s, n in self.counts.items() if s not in TERMINAL)


class State(NamedTuple):
    brokers: immutables.Map = immutables.Map()  # id -> Broker
    topics: immutables.Map = immutables.Map()  # name -> TopicInfo
    observed: immutables.Map = immutables.Map()  # tp -> PartitionState
    partitions: immutables.Map = immutables.Map()  # tp -> PartitionReassignment
    requests: immutables.Map = immutables.Map()  # id -> Request
    ready: ReadyIndex = ReadyIndex()
    in_flight: InFlight = InFlight()
    steps: immutables.Map = immutables.Map()  # tp -> InFlightStep
    pending: immutables.Map = immutables.Map()  # tp -> True
    waiting: immutables.Map = immutables.Map()  # tp -> reason
    elections: immutables.Map = immutables.Map()  # tp -> Election
    throttles: ThrottleSet = ThrottleSet()  # in force on the cluster
    throttle_failed: ThrottleSet = ThrottleSet()  # pieces whose last change failed: retried at throttle_retry_at
    throttle_retry_at: float | None = None
    throttle_error: str | None = None
    throttle_attempt: int = 0  # consecutive failed rounds of throttle changes
    # the last read-back's differences from the log not yet confirmed (a ThrottlesDiffered event), or None
    throttles_differed: object = None
    cluster_error: str | None = None  # why the cluster cannot be observed now
    release_debt: immutables.Map = immutables.Map()  # broker -> (bytes released into it, when): a bucket
    denied: immutables.Map = immutables.Map()  # topic -> why the engine may not describe it (engine.kafka.access)
    # tp -> the shell's clock of the newest thing the state knows of the partition: its latest recorded
    # observation, or the cluster's latest answer to an alter or cancel of it. A look taken earlier
    # says nothing new (it may predate the action) and is ignored.
    known_at: immutables.Map = immutables.Map()
    limits: Limits = DEFAULT_LIMITS
    throttle_rate: int | None = DEFAULT_THROTTLE_RATE
    paused: bool = False
    seq: int = 0
    live: frozenset | None = None  # ids of live brokers; None: no broker observed yet
    rejections: tuple = ()  # the latest REJECTIONS_KEPT CommandRejected events, oldest first
    rejected: immutables.Map = immutables.Map()  # command -> how many were ever rejected

    def live_brokers(self) -> frozenset[int] | None:
        """Ids of live brokers, or ``None`` if no broker was ever observed."""
        return self.live

    def min_insync(self, topic: str) -> int:
        info = self.topics.get(topic)
        return info.min_insync_replicas if info else 1


EMPTY = State()

_APPLY: dict[type, Callable[[State, object], State]] = {}


def apply(state: State, event: ev.Event) -> State:
    return _APPLY[type(event)](state, event)


def fold(events: Iterable[ev.Event], state: State = EMPTY) -> State:
    for event in events:
        state = _APPLY[type(event)](state, event)
    return state


def _on(event_type: type):
    def register(fn):
        _APPLY[event_type] = fn
        return fn

    return register


# --- helpers -------------------------------------------------------------------------


def _put(s: State, tp: TopicPartition, new: PartitionReassignment, old: PartitionReassignment | None) -> State:
    """Store a partition entry and keep the per-status counts of its request(s) exact.

    When another request takes a partition over, the old request keeps it in
    its final status, or counts it as cancelled if it had not finished.
    """
    requests = s.requests
    if old is None:
        requests = _count(requests, new.request_id, new.status, +1)
    elif old.request_id == new.request_id:
        if old.status != new.status:
            requests = _count(requests, old.request_id, old.status, -1)
            requests = _count(requests, new.request_id, new.status, +1)
    else:
        if old.status not in TERMINAL:
            requests = _count(requests, old.request_id, old.status, -1)
            requests = _count(requests, old.request_id, CANCELLED, +1)
        requests = _count(requests, new.request_id, new.status, +1)
    pending = s.pending.set(tp, True) if new.status == PENDING else (
        s.pending.delete(tp) if tp in s.pending else s.pending
    )
    waiting = s.waiting if new.status == WAITING or tp not in s.waiting else s.waiting.delete(tp)
    ready = s.ready
    if old is not None and old.slot is not None and new.slot != old.slot:
        ready = ready.remove(old.slot)
    return s._replace(partitions=s.partitions.set(tp, new), requests=requests, pending=pending, waiting=waiting, ready=ready)


def _count(requests: immutables.Map, request_id: str, status: str, delta: int) -> immutables.Map:
    r = requests.get(request_id)
    if r is None:
        return requests
    n = r.counts.get(status, 0) + delta
    counts = r.counts.set(status, n) if n else r.counts.delete(status)
    reopened = ACTIVE if (delta > 0 and status not in TERMINAL) else r.status
    return requests.set(request_id, r._replace(counts=counts, status=reopened))


CLOCK_SET_BACK = 60.0
"""A look or an answer this many seconds older than what the state knows of a partition is no late
delivery (the shells deliver a look within the tick that took it): the clock was set back, or another
engine's clock runs behind. It counts, and the newer times are from then on the ones it gives."""


def set_back(at: float, seen: float) -> bool:
    return at < seen - CLOCK_SET_BACK


def _known(s: State, tp: TopicPartition | None, at: float | None) -> State:
    """The state knows ``tp`` as of ``at``: the newest time wins, unless the clock was set back."""
    if tp is None or at is None:
        return s
    seen = s.known_at.get(tp)
    if seen is not None and seen >= at and not set_back(at, seen):
        return s
    return s._replace(known_at=s.known_at.set(tp, at))


def _end_step(s: State, tp: TopicPartition) -> tuple[State, InFlightStep]:
    f = s.steps[tp]
    return s._replace(steps=s.steps.delete(tp), in_flight=s.in_flight.minus(f.step, f.weight)), f


# --- observations ----------------------------------------------------------------------


@_on(ev.BrokersObserved)
def _(s: State, e: ev.BrokersObserved) -> State:
    return s._replace(
        brokers=immutables.Map({b.id: b for b in e.brokers}),
        live=frozenset(b.id for b in e.brokers if b.alive),
    )


@_on(ev.TopicObserved)
def _(s: State, e: ev.TopicObserved) -> State:
    if e.info is None:
        return s._replace(topics=s.topics.delete(e.topic)) if e.topic in s.topics else s
    return s._replace(topics=s.topics.set(e.topic, e.info))


@_on(ev.PartitionObserved)
def _(s: State, e: ev.PartitionObserved) -> State:
    elections = s.elections
    want = elections.get(e.tp)
    if want is not None and e.state.leader == want.leader:
        elections = elections.delete(e.tp)
    return _known(s._replace(observed=s.observed.set(e.tp, e.state), elections=elections), e.tp, e.at)


# --- requests and partitions -------------------------------------------------------------


@_on(ev.RequestAccepted)
def _(s: State, e: ev.RequestAccepted) -> State:
    # it joins level with the least served request still running, so it neither waits behind the
    # others' backlog nor overtakes them for long
    vstart = min((r.rank for r in s.requests.values() if r.status == ACTIVE), default=0)
    r = Request(e.request_id, s.seq, e.partitions, e.digest, vstart=vstart)
    return s._replace(requests=s.requests.set(e.request_id, r), seq=s.seq + 1)


@_on(ev.CommandRejected)
def _(s: State, e: ev.CommandRejected) -> State:
    """Nothing else changes; the rejection is kept so that status and replay can show it."""
    return s._replace(rejections=(s.rejections + (e,))[-REJECTIONS_KEPT:],
                      rejected=s.rejected.set(e.command, s.rejected.get(e.command, 0) + 1))


@_on(ev.PartitionQueued)
def _(s: State, e: ev.PartitionQueued) -> State:
    old = s.partitions.get(e.tp)
    inherit = old is not None and old.status in (IN_FLIGHT, ABORTING)  # its step in flight goes on
    new = PartitionReassignment(e.request_id, e.original, e.target, old.status if inherit else PENDING, s.seq)
    s = _put(s, e.tp, new, old)
    r = s.requests[e.request_id]
    requests = s.requests.set(e.request_id, r._replace(members=r.members.set(e.tp, True)))
    return s._replace(requests=requests, seq=s.seq + 1)


@_on(ev.PartitionReady)
def _(s: State, e: ev.PartitionReady) -> State:
    old = s.partitions[e.tp]
    if old.slot is not None:
        s = s._replace(ready=s.ready.remove(old.slot))
        old = old._replace(slot=None)
    lane = CONTINUING if (old.steps_planned or old.rolling_back) else FRESH
    ready, slot = s.ready.add(SchedulingKey.of(e.step, e.weight), lane, s.seq, e.tp, old.request_id)
    s = s._replace(ready=ready, seq=s.seq + 1)
    return _put(s, e.tp, old._replace(status=READY, slot=slot), old)


@_on(ev.PartitionWaiting)
def _(s: State, e: ev.PartitionWaiting) -> State:
    old = s.partitions[e.tp]
    s = s._replace(waiting=s.waiting.set(e.tp, e.reason))
    return _put(s, e.tp, old._replace(status=WAITING, slot=None), old)


@_on(ev.StepPlanned)
def _(s: State, e: ev.StepPlanned) -> State:
    old = s.partitions[e.tp]
    f = InFlightStep(e.request_id, e.number, e.step, weight=e.weight, answers_due=1)
    s = s._replace(
        steps=s.steps.set(e.tp, f),
        in_flight=s.in_flight.plus(e.step, 1, e.weight),
    )
    new = old._replace(status=IN_FLIGHT, slot=None, steps_planned=old.steps_planned + 1)
    r = s.requests.get(e.request_id)
    if r is not None:
        s = s._replace(requests=s.requests.set(e.request_id, r._replace(started=r.started + 1)))
    return _put(s, e.tp, new, old)


@_on(ev.StepStarted)
def _(s: State, e: ev.StepStarted) -> State:
    f = s.steps[e.tp]
    # the alter's answer; or, the answer having been lost (nothing due), a look showing it in progress
    f = f._replace(started=True, error=None, retry=False, retry_at=None, started_at=e.at).answered()
    return _known(s._replace(steps=s.steps.set(e.tp, f)), e.tp, e.at)


@_on(ev.StepFailed)
def _(s: State, e: ev.StepFailed) -> State:
    s, _f = _end_step(s, e.tp)
    old = s.partitions[e.tp]
    s = s._replace(waiting=s.waiting.set(e.tp, e.reason))
    new = old._replace(status=WAITING, failures=old.failures + 1, retry_at=e.retry_at)
    return _put(s, e.tp, new, old)


@_on(ev.StepCompleted)
def _(s: State, e: ev.StepCompleted) -> State:
    s, f = _end_step(s, e.tp)
    s = _known(s, e.tp, e.at)
    if e.elect_leader:
        s = s._replace(elections=s.elections.set(e.tp, Election(f.step.tr[0], 1, e.at)))
    old = s.partitions[e.tp]
    new = old._replace(status=PENDING, steps_done=old.steps_done + 1, failures=0, retry_at=None)
    return _put(s, e.tp, new, old)


@_on(ev.PartitionCompleted)
def _(s: State, e: ev.PartitionCompleted) -> State:
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=COMPLETED, slot=None), old)


@_on(ev.RequestCompleted)
def _(s: State, e: ev.RequestCompleted) -> State:
    r = s.requests[e.request_id]
    return s._replace(requests=s.requests.set(e.request_id, r._replace(status=COMPLETED)))


# --- cancellation ----------------------------------------------------------------------------


@_on(ev.CancelRequested)
def _(s: State, e: ev.CancelRequested) -> State:
    return s


@_on(ev.CancelSkipped)
def _(s: State, e: ev.CancelSkipped) -> State:
    old = s.partitions[e.tp]
    if old.request_id != e.request_id:
        return s
    return s._replace(partitions=s.partitions.set(e.tp, old._replace(note=e.reason)))


@_on(ev.PartitionCancelled)
def _(s: State, e: ev.PartitionCancelled) -> State:
    """A cancel (or the end of one: ``final``). Not final, a partition that is not in flight
    goes back to planning: a rollback heads for ORS, a plain cancel settles where it stands
    (``engine.core.cancellation.settle_target``) and a final ``PartitionCancelled`` ends it."""
    old = s.partitions[e.tp]
    rolling_back = e.rollback
    note = e.reason or old.note
    if e.aborting is not None:
        status = ABORTING
        f = s.steps[e.tp]
        f = f._replace(aborting=True, attempt=1, error=None, retry=False, retry_at=None, answers_due=f.answers_due + 1)
        s = s._replace(steps=s.steps.set(e.tp, f))
    elif old.status in (IN_FLIGHT, ABORTING):
        status = old.status  # superseded, or cancelled again: the step in flight finishes first
    elif e.final or e.superseded_by is not None:
        status = CANCELLED
    else:
        status = PENDING
    new = old._replace(status=status, slot=None, cancelled=True, rolling_back=rolling_back, note=note)
    return _put(s, e.tp, new, old)


@_on(ev.StepAborted)
def _(s: State, e: ev.StepAborted) -> State:
    s, _f = _end_step(s, e.tp)
    s = _known(s, e.tp, e.at)
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=PENDING), old)


@_on(ev.PartitionReverted)
def _(s: State, e: ev.PartitionReverted) -> State:
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=REVERTED, slot=None), old)


# --- throttles, limits, control -----------------------------------------------------------------


@_on(ev.ThrottlesApplied)
def _(s: State, e: ev.ThrottlesApplied) -> State:
    return s._replace(throttles=after_apply(s.throttles, e.throttles), throttle_failed=minus(s.throttle_failed, e.throttles),
                      throttles_differed=_changed(s.throttles_differed, e.throttles))


@_on(ev.ThrottlesRemoved)
def _(s: State, e: ev.ThrottlesRemoved) -> State:
    return s._replace(throttles=after_remove(s.throttles, e.throttles), throttle_failed=minus(s.throttle_failed, e.throttles),
                      throttles_differed=_changed(s.throttles_differed, e.throttles))


def _changed(differed, delta: ThrottleSet):
    """A difference seen before ``delta`` changed the same pieces says nothing of them any more: the
    next read-back judges them afresh."""
    if differed is None:
        return None
    missing, unexpected = minus(differed.missing, delta), minus(differed.unexpected, delta)
    if missing.is_empty() and unexpected.is_empty():
        return None
    return differed if (missing, unexpected) == (differed.missing, differed.unexpected) else \
        ev.ThrottlesDiffered(missing, unexpected, differed.at)


@_on(ev.ThrottleReleased)
def _(s: State, e: ev.ThrottleReleased) -> State:
    f = s.steps.get(e.tp)
    if f is None or f.number != e.number:
        return s
    s = s._replace(steps=s.steps.set(e.tp, f._replace(released=True)))
    # the bytes it copies unthrottled are charged to its receiving brokers' release bucket
    bucket = s.release_debt
    for b in f.step.nr:
        bucket = bucket.set(b, (release_debt(s, b, e.at) + e.remaining, e.at))
    return s._replace(release_debt=bucket)


RELEASE_REFILL = 0.25
"""Bytes released from the throttle are paid back at this fraction of the throttle rate: on average a
broker receives at most 25 % more than its throttle, in bursts of at most ``throttle_release_ms``."""


def release_debt(s: "State", broker: int, now: float | None) -> float:
    """Bytes released from the throttle into ``broker`` not yet paid back by ``now`` (0 without a clock)."""
    debt = s.release_debt.get(broker)
    if debt is None or now is None or debt[1] is None or s.throttle_rate is None:
        return 0.0
    owed, at = debt
    return max(0.0, float(int(owed - RELEASE_REFILL * s.throttle_rate * max(0.0, now - at))))  # whole bytes


@_on(ev.ThrottlesDrifted)
def _(s: State, e: ev.ThrottlesDrifted) -> State:
    return s._replace(throttles=union(minus(s.throttles, e.missing), e.unexpected), throttles_differed=None)


@_on(ev.ThrottlesDiffered)
def _(s: State, e: ev.ThrottlesDiffered) -> State:
    empty = e.missing.is_empty() and e.unexpected.is_empty()
    return s._replace(throttles_differed=None if empty else e)


# --- action outcomes ---------------------------------------------------------------------------


@_on(ev.ActionFailed)
def _(s: State, e: ev.ActionFailed) -> State:
    error = f"{e.code}: {e.message}" if e.message else e.code
    if e.action in ("apply_throttles", "remove_throttles"):
        piece = e.throttles or ThrottleSet()
        # A failed apply is not in force; a failed removal still is. Either is retried as a whole
        # round at throttle_retry_at (the tick's reconcile re-derives what to send).
        force = minus(s.throttles, piece) if e.action == "apply_throttles" else union(s.throttles, piece)
        return s._replace(throttles=force, throttle_failed=union(s.throttle_failed, piece),
                          throttle_retry_at=e.retry_at, throttle_error=error, throttle_attempt=e.attempt)
    if e.action == "elect_leader":
        el = s.elections.get(e.tp)
        if el is None:
            return s
        if e.final:
            return s._replace(elections=s.elections.delete(e.tp))
        el = el._replace(attempt=e.attempt, error=error, retry=True, retry_at=e.retry_at)
        return s._replace(elections=s.elections.set(e.tp, el))
    f = s.steps.get(e.tp)
    if f is None:
        return s
    s = _known(s, e.tp, e.at)  # an answer (or a look showing the action had no effect)
    if e.action == "cancel_step" and e.final:  # the abort was refused: the step goes on
        f = f._replace(aborting=False, attempt=1, error=None, retry=False, retry_at=None).answered()
        s = s._replace(steps=s.steps.set(e.tp, f))
        old = s.partitions[e.tp]
        return _put(s, e.tp, old._replace(status=IN_FLIGHT, note=e.message), old)
    # an answer; or (IN_PROGRESS_AFTER_CANCEL) a look, decided only when no answer was due
    f = f._replace(attempt=e.attempt, error=error, retry=not e.final, retry_at=e.retry_at).answered()
    return s._replace(steps=s.steps.set(e.tp, f))


@_on(ev.ActionRetried)
def _(s: State, e: ev.ActionRetried) -> State:
    if e.action == "elect_leader":
        el = s.elections.get(e.tp)
        if el is None:
            return s
        el = el._replace(attempt=e.attempt, since=e.at, retry=False, retry_at=None)
        return s._replace(elections=s.elections.set(e.tp, el))
    f = s.steps.get(e.tp)
    if f is None:
        return s
    f = f._replace(attempt=e.attempt, retry=False, retry_at=None, answers_due=f.answers_due + 1)  # asked again
    return s._replace(steps=s.steps.set(e.tp, f))


@_on(ev.ActionAnswered)
def _(s: State, e: ev.ActionAnswered) -> State:
    s = _known(s, e.tp, e.at)
    f = s.steps.get(e.tp)
    if f is None or f.number != e.number:
        return s
    return s._replace(steps=s.steps.set(e.tp, f.answered()))


@_on(ev.ActionSucceeded)
def _(s: State, e: ev.ActionSucceeded) -> State:
    if e.action in ("apply_throttles", "remove_throttles"):
        if s.throttle_failed.is_empty():
            return s._replace(throttle_retry_at=None, throttle_error=None, throttle_attempt=0)
        return s
    f = s.steps.get(e.tp) if e.tp is not None else None
    if f is None:
        return s
    return s._replace(steps=s.steps.set(e.tp, f._replace(error=None, retry=False, retry_at=None)))


@_on(ev.ClusterUnreachable)
def _(s: State, e: ev.ClusterUnreachable) -> State:
    return s._replace(cluster_error=e.reason)


@_on(ev.TopicAccessDenied)
def _(s: State, e: ev.TopicAccessDenied) -> State:
    if e.reason is None:
        return s._replace(denied=s.denied.delete(e.topic)) if e.topic in s.denied else s
    return s._replace(denied=s.denied.set(e.topic, e.reason))


@_on(ev.LimitsChanged)
def _(s: State, e: ev.LimitsChanged) -> State:
    return s._replace(limits=e.limits)


@_on(ev.ThrottleRateChanged)
def _(s: State, e: ev.ThrottleRateChanged) -> State:
    return s._replace(throttle_rate=e.rate)


@_on(ev.Paused)
def _(s: State, e: ev.Paused) -> State:
    return s._replace(paused=True)


@_on(ev.Resumed)
def _(s: State, e: ev.Resumed) -> State:
    return s._replace(paused=False)


assert set(_APPLY) == set(ev.EVENT_TYPES), set(ev.EVENT_TYPES) - set(_APPLY)
