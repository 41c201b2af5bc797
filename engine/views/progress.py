"""Progress of each request in bytes and time: what ``kreassign status`` shows.

The core's state counts partitions by status but knows no time and no bytes.
``Progress`` is a fold over the same events, each with the time the engine
recorded it, next to the state they apply to:

* a request's bytes to copy are set when its partitions are queued: the
  partition's size (as last observed) times the replicas its target adds. A
  cancelled partition drops what it no longer copies, a rollback adds what
  copying back costs, a step that copies more than its partition owed adds the
  difference, and a finished partition settles its account, so bytes copied
  never pass the total and a finished request has copied exactly its total;
* bytes copied grow when a step that adds replicas completes (size times NR),
  for the request that owns the partition then (a step inherited by a request
  that took the partition over mid-step is the new owner's);
* the rate is the bytes copied in the recent window divided by that window,
  and the ETA the bytes left at that rate. Sizes unknown to the engine make
  bytes unknown (``None``), never a guess.

Pure: ``now`` is an argument, never read from a clock.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import NamedTuple

import immutables

from engine.core import events as ev
from engine.core.decide import rate_in_kafka
from engine.core.state import (
    ABORTING, CANCELLED, COMPLETED, IN_FLIGHT, PENDING, READY, REJECTIONS_KEPT, REVERTED, WAITING, State, retires,
)

WINDOW = timedelta(minutes=5)


class RequestProgress(NamedTuple):
    request_id: str
    accepted_at: datetime | None = None
    completed_at: datetime | None = None
    bytes_total: int | None = 0  # None: some size unknown
    bytes_done: int = 0
    steps_completed: int = 0
    recent: tuple[tuple[datetime, int], ...] = ()  # (time, bytes) of completions in the window
    owed: immutables.Map = immutables.Map()  # partition -> bytes it still has to copy (persistent: O(log n) a change)

    def rate(self, now: datetime, window: timedelta = WINDOW) -> float | None:
        """Bytes per second over the window ending at ``now`` (None before any copy completed)."""
        start = max(now - window, self.accepted_at or now - window)
        done = sum(b for t, b in self.recent if t >= start)
        seconds = (now - start).total_seconds()
        if not done or seconds <= 0:
            return None
        return done / seconds

    def average_rate(self) -> float | None:
        """Bytes per second from acceptance to completion (an ended request's rate: its recent
        window would take in the idle time after it ended)."""
        if self.accepted_at is None or self.completed_at is None:
            return None
        seconds = (self.completed_at - self.accepted_at).total_seconds()
        return self.bytes_done / seconds if seconds > 0 and self.bytes_done else None

    def eta_seconds(self, now: datetime) -> float | None:
        if self.completed_at is not None:
            return 0.0
        rate = self.rate(now)
        if self.bytes_total is None or rate is None:
            return None
        return max(self.bytes_total - self.bytes_done, 0) / rate


class Progress(NamedTuple):
    requests: immutables.Map = immutables.Map()  # request id -> RequestProgress (persistent: O(log n) a change)
    rejected_at: dict = {}  # command id -> when the engine rejected it (the state's kept rejections)

    def after(self, state: State, event: ev.Event, at: datetime) -> "Progress":
        """The progress after ``event``, recorded at ``at``; ``state`` is the state *before* it."""
        kind = type(event)
        if kind is ev.CommandRejected:
            kept = {e.command_id for e in state.rejections[-(REJECTIONS_KEPT - 1):]} if state.rejections else set()
            rejected = {c: t for c, t in self.rejected_at.items() if c in kept}
            rejected[event.command_id] = at
            return self._replace(rejected_at=rejected)
        if kind not in _TRACKED:
            return self
        rid = event.request_id
        if kind is ev.StepCompleted:
            # a step inherited from a request it took the partition over from goes on under the new
            # owner and names its own request: its copy pays what the owner owes (and the request it
            # was taken from settled the partition when it was handed over)
            owner = state.partitions.get(event.tp)
            if owner is not None and owner.request_id != rid and owner.request_id in self.requests:
                rid = owner.request_id
        r = self.requests.get(rid) or RequestProgress(rid)
        if kind is ev.RequestAccepted:
            r = r._replace(accepted_at=at)
        elif kind is ev.PartitionQueued:
            r = _owe(r, state, event.tp, event.original or (), event.target, reset=True)
        elif kind is ev.PartitionCancelled:
            r = _settle(r, event.tp)
            entry = state.partitions.get(event.tp)
            obs = state.observed.get(event.tp)
            if event.rollback and entry is not None and obs is not None and entry.original:
                r = _owe(r, state, event.tp, obs.replicas, entry.original)
        elif kind is ev.StepCompleted:
            f = state.steps.get(event.tp)
            size = _size(state, event.tp)
            copied = len(f.step.nr) * size if (f is not None and size is not None) else 0
            owed = r.owed
            # more than foreseen (the partition grew, or a cancelled step had finished and copying
            # back was not owed yet): the total grows with it, so done never passes the total
            unforeseen = max(copied - owed.get(event.tp, 0), 0)
            if event.tp in owed:
                owed = owed.set(event.tp, max(owed[event.tp] - copied, 0))
            recent = tuple(x for x in r.recent if x[0] >= at - 2 * WINDOW) + ((at, copied),)
            total = None if r.bytes_total is None else r.bytes_total + unforeseen
            r = r._replace(bytes_done=r.bytes_done + copied, steps_completed=r.steps_completed + 1,
                           recent=recent, owed=owed, bytes_total=total)
        elif kind in (ev.PartitionCompleted, ev.PartitionReverted):
            r = _settle(r, event.tp)
        elif kind is ev.RequestCompleted:
            r = r._replace(completed_at=at)
            gone = retires(state, event)
            if gone is not None and gone in self.requests:  # retired: its rate and ETA need no window now
                requests = self.requests.set(gone, self.requests[gone]._replace(recent=(), owed=immutables.Map()))
                return self._replace(requests=requests.set(rid, r))
        return self._replace(requests=self.requests.set(rid, r))


_TRACKED = frozenset({ev.RequestAccepted, ev.PartitionQueued, ev.PartitionCancelled, ev.StepCompleted,
                      ev.PartitionCompleted, ev.PartitionReverted, ev.RequestCompleted})


def _size(state: State, tp) -> int | None:
    obs = state.observed.get(tp)
    return None if obs is None else obs.size_bytes


def _owe(r: RequestProgress, state: State, tp, current, target, reset: bool = False) -> RequestProgress:
    """The partition will copy the replicas ``target`` adds to ``current``."""
    adds = len(set(target) - set(current))
    if (not adds and not reset) or r.bytes_total is None:
        return r
    size = _size(state, tp)
    if size is None:
        return r._replace(bytes_total=None) if adds else r
    owed = r.owed.set(tp, r.owed.get(tp, 0) * (not reset) + adds * size)
    return r._replace(bytes_total=r.bytes_total + adds * size, owed=owed)


def _settle(r: RequestProgress, tp) -> RequestProgress:
    """The partition copies nothing more for this request: what it still owed leaves the total."""
    left = r.owed.get(tp, 0)
    if not left:
        return r
    owed = r.owed.delete(tp)
    total = None if r.bytes_total is None else r.bytes_total - left
    return r._replace(bytes_total=total, owed=owed)

def cancel_skipped(entry) -> bool:
    """Did a cancel leave this partition (a state ``PartitionEntry``) alone? Its note says why (KIP-236's rules,
    or its abort refused); a cancelled partition's note says where the cancel left it: no skip. The one rule of
    ``cancel_skips`` (``list``, ``replay``) and of what needs attention (``engine.views.attention``)."""
    return bool(entry.note) and entry.status != CANCELLED


def cancel_skips(state: State, request) -> list[dict]:
    """The cancels of ``request`` (a ``Request``) that left partitions alone (KIP-236's rules), one per
    reason: ``{"reason", "partitions": [str]}``. ``status`` shows them in what needs attention while
    the request runs and a while after (``engine.views.attention``); ``list`` and ``replay`` show them
    as long as the engine keeps the request (a cancelled partition's note says where the cancel left
    it: no skip)."""
    by: dict[str, list[str]] = {}
    for tp in sorted(request.members.keys()):
        e = state.partitions.get(tp)
        if e is not None and e.request_id == request.request_id and cancel_skipped(e):
            by.setdefault(e.note, []).append(str(tp))
    return [{"reason": reason, "partitions": tps} for reason, tps in sorted(by.items(), key=lambda x: (-len(x[1]), x[0]))]


def skip_lines(skips: list[dict], shown: int = 12) -> list[str]:
    """``cancel_skips`` as lines under a request's line in ``list`` and ``replay``."""
    out = []
    for s in skips:
        tps = s["partitions"]
        names = ", ".join(tps[:shown]) + (f" and {len(tps) - shown} more" if len(tps) > shown else "")
        out.append(f"not cancelled ({len(tps)}): {s['reason']}: {names}")
    return out


DONE = (COMPLETED, CANCELLED, REVERTED)
ENDINGS = ((COMPLETED, "completed"), (REVERTED, "rolled back"), (CANCELLED, "cancelled"))
"""How a partition's part in a request ended, in the words status uses."""


def outcome(status: str, counts: dict) -> str:
    """A request's outcome in words: ``running`` while anything is open; once ended, ``completed``
    only if every partition reached its target, else what happened to them (``rolled back``,
    ``cancelled``, or a mix such as ``ended: 33 completed, 4 rolled back``)."""
    if status != COMPLETED:
        return "running"
    ended = [(word, counts.get(s, 0)) for s, word in ENDINGS if counts.get(s, 0)]
    if len(ended) == 1:
        return ended[0][0]
    if not ended:
        return "completed"  # a request with no partitions
    return "ended: " + ", ".join(f"{n} {word}" for word, n in ended)


PARTITION_WORDS = (("completed", "completed"), ("rolled_back", "rolled back"), ("cancelled", "cancelled"),
                   ("in_flight", "in flight"), ("held", "held to drop together"), ("waiting", "waiting"),
                   ("queued", "queued"))
"""A request's partitions by where they are, in the order and words ``status``, ``list`` and ``replay`` use."""


STATUS_KEYS = {COMPLETED: "completed", REVERTED: "rolled_back", CANCELLED: "cancelled", IN_FLIGHT: "in_flight",
               ABORTING: "in_flight", WAITING: "waiting", PENDING: "queued", READY: "queued"}
"""A partition's state status -> the ``PARTITION_WORDS`` key it is counted under."""


def partition_word(status: str) -> str:
    """Where a partition of this state status is, in ``PARTITION_WORDS``' words."""
    return dict(PARTITION_WORDS)[STATUS_KEYS[status]]


def counts_of(counts: dict, held: int = 0) -> dict:
    """Partitions per state status (``Request.count``) as ``PARTITION_WORDS``' keys; ``held``: how many of
    the waiting ones are drops ``--steps grouped`` holds on purpose (``held_counts``), counted apart."""
    out = {k: 0 for k, _word in PARTITION_WORDS}
    for status, key in STATUS_KEYS.items():
        out[key] += counts.get(status, 0)
    out["waiting"] -= held
    out["held"] = held
    return out


def held_counts(state: State) -> Counter:
    """Per request, its partitions whose final drop ``--steps grouped`` holds (``State.drop_group``): waiting
    by status, but on purpose, not because something is wrong."""
    return Counter(rid for rid, _leader in state.drop_group.values())


def request_line(request_id: str, outcome_words: str, partitions: int, row: dict) -> str:
    """One line per request, the same in ``list`` and ``replay``: "r: ended: 168 completed, 20 rolled
    back (of 188 partitions)" once it has ended (its outcome says it all), "r: running: 3 completed, 2 in
    flight, 7 queued (of 12 partitions)" while it runs. ``row``: counts keyed as ``PARTITION_WORDS``."""
    of = f"(of {partitions} partition{'' if partitions == 1 else 's'})"
    if outcome_words != "running":
        return f"{request_id}: {outcome_words} {of}"
    where = ", ".join(f"{row[k]} {word}" for k, word in PARTITION_WORDS if row.get(k) or k == "completed")
    return f"{request_id}: running: {where} {of}"


def kafka_rate(state: State) -> dict:
    """What kreassign gives Kafka's ``*.replication.throttled.rate`` for the throttle (the throttle plus
    the margin) and the margin, as ``status`` and ``/status`` show them beside the throttle."""
    return {"kafka_rate": rate_in_kafka(state), "margin_pct": state.limits.throttle_margin_pct}


def report(state: State, progress: Progress, now: datetime, only: str | None = None) -> dict:
    """Everything ``status`` shows, as JSON-ready data (a pure function).

    Per request: ``status`` (active | completed, as the log records it) and ``outcome`` (what an
    operator needs: running, completed, rolled back, cancelled, or a mix), partitions by where they
    are (``completed``, ``rolled_back`` and ``cancelled`` once ended; ``done`` is their sum), bytes,
    the rate (bytes per wall-clock second: over the recent window while running, over its whole run
    once ended) and the ETA (wall-clock seconds; ``eta_state`` says ``paused``
    while the engine starts no new step, when an ETA would only grow)."""
    requests = []
    held = held_counts(state)
    one = state.request(only) if only is not None else None
    for r in ([one] if one is not None else []) if only is not None else state.every_request():
        p = progress.requests.get(r.request_id)
        counts = {s: r.count(s) for s in (PENDING, READY, WAITING, IN_FLIGHT, ABORTING, *DONE)}
        rolling_back = sum(1 for tp in r.members.keys() if (e := state.partitions.get(tp)) is not None
                           and e.request_id == r.request_id and e.rolling_back and e.status not in DONE)
        eta = p.eta_seconds(now) if p else None
        running = r.status != COMPLETED
        requests.append({
            "id": r.request_id,
            "status": r.status,
            "outcome": outcome(r.status, counts),
            "partitions": r.partitions,
            "done": sum(counts[s] for s in DONE),
            "completed": counts[COMPLETED],
            "rolled_back": counts[REVERTED],
            "cancelled": counts[CANCELLED],
            "in_flight": counts[IN_FLIGHT] + counts[ABORTING],
            "aborting": counts[ABORTING],
            "rolling_back": rolling_back,  # partitions on their way back to their original replicas
            "waiting": counts[WAITING] - held[r.request_id],
            "held": held[r.request_id],  # waiting, on purpose: drops --steps grouped holds for their leader's others
            "queued": counts[PENDING] + counts[READY],
            "by_status": {s: n for s, n in counts.items() if n},
            "bytes_total": p.bytes_total if p else None,
            "bytes_done": p.bytes_done if p else 0,
            "rate_bytes_per_s": (p.rate(now) if running else p.average_rate()) if p else None,
            "eta_seconds": None if (running and state.paused) else eta,
            "eta_state": ("done" if not running else "paused" if state.paused
                          else "unknown" if eta is None else "estimated"),
            "accepted_at": p.accepted_at.isoformat() if p and p.accepted_at else None,
            "completed_at": p.completed_at.isoformat() if p and p.completed_at else None,
            "cancel_skipped": cancel_skips(state, r),
        })
    members = None
    if only is not None:
        r = state.request(only)
        members = set(r.members.keys()) if r is not None else set()
    waiting = Counter(reason for tp, reason in state.waiting.items() if members is None or tp in members)
    skipped = sorted(
        (str(tp), e.note) for tp, e in state.partitions.items()
        if e.note and (members is None or tp in members)
    )
    return {
        "requests": requests,
        "steps_in_flight": [
            {"partition": str(tp), "request": f.request_id, "step": f.number, "target": list(f.step.tr),
             "adding": list(f.step.nr), "dropping": list(f.step.dr), "aborting": f.aborting}
            for tp, f in sorted(state.steps.items()) if members is None or tp in members
        ],
        "waiting": dict(waiting.most_common()),
        "skipped": [{"partition": tp, "reason": reason} for tp, reason in skipped],
        "throttle_rate": state.throttle_rate,
        **kafka_rate(state),
        "throttled_brokers": sorted(state.throttles.leader_brokers | state.throttles.follower_brokers),
        "limits": state.limits.as_dict(),
        "paused": state.paused,
    }
