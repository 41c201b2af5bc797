"""The engine's verdict on one command, read from the events it appended (pure).

Every command the engine decides leaves exactly one event carrying its
``command_id``: the rejection (``CommandRejected``, with every reason) or the
event that records its acceptance (``RequestAccepted``, ``CancelRequested``,
``LimitsChanged``, ``ThrottleRateChanged``, ``Paused``, ``Resumed``). The rest
of that decision (the same append, so the same ``recorded_at``) says what the
acceptance did: partitions queued or waiting and why, partitions cancelled,
copies being aborted, cancels skipped and why. ``Watch`` reads events in log
order and answers once the verdict's decision is complete.

One command has no event: a submit re-delivered with an id and targets the
engine already has (``decide`` treats it as a re-delivery). ``kreassign
execute --request-id`` checks for that before it publishes.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from engine.core import events as ev
from engine.core.cancellation import ROLLBACK_STOPPED
from engine.core.units import format_rate

if TYPE_CHECKING:  # a type only: the views import nothing but the core
    from engine.log.envelope import EventEnvelope

VERDICT_EVENTS = (ev.CommandRejected, ev.RequestAccepted, ev.CancelRequested, ev.LimitsChanged,
                  ev.ThrottleRateChanged, ev.Paused, ev.Resumed)


class Verdict(NamedTuple):
    command_id: str
    accepted: bool
    command: str  # submit, cancel, limits, throttle, pause, resume
    request_id: str | None
    summary: str  # one line: what was accepted, or what was rejected
    details: tuple[str, ...] = ()  # accepted: what it did beyond the summary; rejected: every reason
    at: datetime | None = None

    def to_json(self) -> dict:
        return {"command_id": self.command_id, "verdict": "accepted" if self.accepted else "rejected",
                "command": self.command, "request": self.request_id, "summary": self.summary,
                "details": list(self.details), "at": self.at.isoformat() if self.at else None}


class Watch:
    """Feed the events appended after the command was published; ``verdict`` once it is known.

    ``complete`` is true once the verdict's decision has ended (an event recorded
    at another time follows it, or ``end()`` says the log has no more for now).
    """

    def __init__(self, command_id: str):
        self.command_id = command_id
        self.first: EventEnvelope | None = None
        self.decision: list[ev.Event] = []
        self.complete = False

    def feed(self, envelope: EventEnvelope) -> None:
        if self.complete:
            return
        e = envelope.payload
        if self.first is None:
            if isinstance(e, VERDICT_EVENTS) and getattr(e, "command_id", "") == self.command_id:
                self.first = envelope
                self.decision = [e]
            return
        if envelope.recorded_at != self.first.recorded_at:
            self.complete = True
            return
        self.decision.append(e)

    def end(self) -> None:
        """The log holds nothing more right now: a decision is appended whole, so it is complete."""
        if self.first is not None:
            self.complete = True

    @property
    def verdict(self) -> Verdict | None:
        if not self.complete:
            return None
        return verdict_of(self.command_id, self.decision, self.first.recorded_at)


KAFKAS_RATE = ("Kafka's rate is the throttle plus the limit throttle_margin_pct, since Kafka's quota lets through "
               "less than its rate; kreassign status shows both")


def verdict_of(command_id: str, decision: list[ev.Event], at: datetime | None = None) -> Verdict:
    """The verdict from a decision's events, the first of which carries ``command_id``."""
    first = decision[0]
    if isinstance(first, ev.CommandRejected):
        n = len(first.reasons)
        what = first.command + (f" of request {first.request_id}" if first.request_id else "")
        return Verdict(command_id, False, first.command, first.request_id,
                       f"rejected: {what} ({n} {'reason' if n == 1 else 'reasons'})", tuple(first.reasons), at)
    if isinstance(first, ev.RequestAccepted):
        return _submit(command_id, first, decision, at)
    if isinstance(first, ev.CancelRequested):
        return _cancel(command_id, first, decision, at)
    if isinstance(first, ev.LimitsChanged):
        limits = ", ".join(f"{k}={v}" for k, v in first.limits.as_dict().items())
        return Verdict(command_id, True, "limits", None, "accepted: limits in force from the next decision",
                       (f"limits: {limits}",), at)
    if isinstance(first, ev.ThrottleRateChanged):
        rate = "none (unthrottled)" if first.rate is None else format_rate(first.rate)
        return Verdict(command_id, True, "throttle", None, f"accepted: throttle rate for new steps {rate}",
                       ("steps in flight keep copying; their brokers' rate is updated with the next decision",)
                       + ((KAFKAS_RATE,) if first.rate is not None else ()), at)
    if isinstance(first, ev.Paused):
        return Verdict(command_id, True, "pause", None,
                       ("accepted: already paused, nothing changed" if first.already else "accepted: paused")
                       + ": no new step starts until resume; steps in flight finish", (), at)
    if first.already:
        return Verdict(command_id, True, "resume", None, "accepted: not paused, nothing changed", (), at)
    return Verdict(command_id, True, "resume", None, "accepted: resumed: steps start again", (), at)


def _submit(command_id: str, first: ev.RequestAccepted, decision: list[ev.Event], at) -> Verdict:
    rid = first.request_id
    ready = waiting = done = 0
    reasons: Counter = Counter()
    taken_from: Counter = Counter()
    details: list[str] = []
    for e in decision[1:]:
        if isinstance(e, ev.PartitionReady) and e.request_id == rid:
            ready += 1
        elif isinstance(e, ev.PartitionWaiting) and e.request_id == rid:
            waiting += 1
            reasons[e.reason] += 1
        elif isinstance(e, ev.PartitionCompleted) and e.request_id == rid:
            done += 1
        elif isinstance(e, ev.PartitionCancelled) and e.superseded_by == rid:
            taken_from[e.request_id] += 1
        elif isinstance(e, ev.ThrottleRateChanged) and e.command_id == command_id:
            details.append("throttle rate for new steps: "
                           + ("none (unthrottled)" if e.rate is None else format_rate(e.rate)))
            if e.rate is not None:
                details.append(KAFKAS_RATE)
    inherited = first.partitions - ready - waiting - done
    parts = [f"{ready} ready to start"] + ([f"{waiting} waiting"] if waiting else []) + (
        [f"{done} already at {'its' if done == 1 else 'their'} target"] if done else []) + (
        [f"{inherited} finish{'es' if inherited == 1 else ''} a step in flight first"] if inherited > 0 else [])
    for reason, n in reasons.most_common():
        details.append(f"waiting ({n}): {reason}")
    for other, n in sorted(taken_from.items()):
        details.append(f"took over {count(n, 'partition')} from request {other} (its pending steps there are dropped)")
    return Verdict(command_id, True, "submit", rid,
                   f"accepted: request {rid}: {count(first.partitions, 'partition')} ({', '.join(parts)})",
                   tuple(details), at)


def _cancel(command_id: str, first: ev.CancelRequested, decision: list[ev.Event], at) -> Verdict:
    """What a cancel did, from its decision: partitions cancelled (each counted once: a partition with
    nothing in flight is cancelled and settled in the same decision), copies in flight being aborted,
    partitions that were still at their original replicas (nothing to undo: never "back", they had not
    moved), those that stay elsewhere and where, and the skipped ones with KIP-236's reason."""
    rid = first.request_id
    cancelled: set = set()
    aborting: set = set()
    stopped: set = set()  # rollbacks a plain cancel stopped where they stand
    untouched: set = set()  # settled at once where they started: still at their original replicas
    said: dict = {}  # partition -> where it stays (a final cancel), what the cancel means for it, or why it waits
    skipped: list[str] = []
    for e in decision[1:]:
        if getattr(e, "request_id", None) != rid:
            continue
        if isinstance(e, ev.PartitionCancelled) and e.superseded_by is None:
            cancelled.add(e.tp)
            if e.aborting is not None:
                aborting.add(e.tp)
            if e.reason == ROLLBACK_STOPPED:
                stopped.add(e.tp)
            elif e.final and e.reason and e.reason.startswith(AT_ORIGINAL):
                untouched.add(e.tp)
                said.pop(e.tp, None)
            elif e.reason:
                said[e.tp] = f"{e.tp}: {e.reason}"
        elif isinstance(e, ev.PartitionWaiting):
            said[e.tp] = f"{e.tp} waits: {e.reason}"  # the plan that follows the cancel says it all
        elif isinstance(e, ev.CancelSkipped):
            skipped.append(f"skipped {e.tp}: {e.reason}")
        elif isinstance(e, ev.PartitionReverted):
            untouched.add(e.tp)  # rolled back within the cancel itself: it was where it began
            said.pop(e.tp, None)
    which = "the whole request" if first.partitions is None else count(len(first.partitions), "named partition")
    mode = ("without rollback" if not first.rollback else "with rollback to the original replicas"
            + (", completed partitions too" if first.include_completed else ""))
    parts = [f"{count(len(cancelled), 'partition')} cancelled"]
    if stopped:
        parts.append(f"{count(len(stopped), 'rollback')} stopped where {'it stands' if len(stopped) == 1 else 'they stand'}")
    if aborting:
        parts.append(f"{count(len(aborting), 'copy', 'copies')} in flight being aborted")
    if untouched:
        parts.append(f"{len(untouched)} still at {'its' if len(untouched) == 1 else 'their'} original replicas "
                     "(nothing to undo)")
    if skipped:
        parts.append(f"{len(skipped)} skipped")
    if not cancelled and not skipped:
        parts = ["nothing left to cancel (every partition had ended or was already cancelled)"]
    return Verdict(command_id, True, "cancel", rid,
                   f"accepted: cancel of request {rid} ({which}, {mode}): {', '.join(parts)}",
                   tuple(skipped + list(said.values())), at)


def count(n: int, one: str, many: str | None = None) -> str:
    """'1 partition', '3 partitions': a verdict's counts are often one."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


AT_ORIGINAL = "cancelled: back at its original replicas"
"""How the core's final ``PartitionCancelled`` says a partition is where it began (``engine.core.decide``)."""


def completed_staying(request, include_completed: bool, rollback: bool) -> str | None:
    """The line a cancel's verdict adds for the request's partitions that had completed (the state
    after the cancel: ``request`` is its ``Request``): a cancel touches only what is in progress, so
    they stay at their target unless ``--rollback --include-completed``. ``None`` if there is none."""
    if request is None or (rollback and include_completed):
        return None
    n = request.count("completed")
    if not n:
        return None
    return (f"{n} partition{'s' if n != 1 else ''} of request {request.request_id} had completed and "
            f"stay{'s' if n == 1 else ''} at {'its' if n == 1 else 'their'} target (a cancel touches only what is "
            f"in progress; cancel --rollback --include-completed moves them back)")
