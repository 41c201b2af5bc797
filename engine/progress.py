"""Progress of each request in bytes and time: what ``kreassign status`` shows.

The core's state counts partitions by status but knows no time and no bytes.
``Progress`` is a fold over the same events, each with the time the engine
recorded it, next to the state they apply to:

* a request's bytes to copy are fixed when its partitions are queued: the
  partition's size (as last observed) times the replicas its target adds; a
  rollback adds what copying back costs;
* bytes copied grow when a step that adds replicas completes (size times NR);
* the rate is the bytes copied in the recent window divided by that window,
  and the ETA the bytes left at that rate. Sizes unknown to the engine make
  bytes unknown (``None``), never a guess.

Pure: ``now`` is an argument, never read from a clock.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta
from typing import NamedTuple

from engine import events as ev
from engine.state import State

WINDOW = timedelta(minutes=5)


class RequestProgress(NamedTuple):
    request_id: str
    accepted_at: datetime | None = None
    completed_at: datetime | None = None
    bytes_total: int | None = 0  # None: some size unknown
    bytes_done: int = 0
    steps_completed: int = 0
    recent: tuple[tuple[datetime, int], ...] = ()  # (time, bytes) of completions in the window

    def rate(self, now: datetime, window: timedelta = WINDOW) -> float | None:
        """Bytes per second over the window ending at ``now`` (None before any copy completed)."""
        start = max(now - window, self.accepted_at or now - window)
        done = sum(b for t, b in self.recent if t >= start)
        seconds = (now - start).total_seconds()
        if not done or seconds <= 0:
            return None
        return done / seconds

    def eta_seconds(self, now: datetime) -> float | None:
        if self.completed_at is not None:
            return 0.0
        rate = self.rate(now)
        if self.bytes_total is None or rate is None:
            return None
        return max(self.bytes_total - self.bytes_done, 0) / rate


class Progress(NamedTuple):
    requests: dict = {}  # request id -> RequestProgress

    def after(self, state: State, event: ev.Event, at: datetime) -> "Progress":
        """The progress after ``event``, recorded at ``at``; ``state`` is the state *before* it."""
        kind = type(event)
        if kind not in _TRACKED:
            return self
        rid = event.request_id
        r = self.requests.get(rid) or RequestProgress(rid)
        if kind is ev.RequestAccepted:
            r = r._replace(accepted_at=at)
        elif kind is ev.PartitionQueued:
            r = _add_total(r, state, event.tp, event.original or (), event.target)
        elif kind is ev.PartitionCancelled and event.rollback:
            entry = state.partitions.get(event.tp)
            obs = state.observed.get(event.tp)
            if entry is not None and obs is not None and entry.original:
                r = _add_total(r, state, event.tp, obs.replicas, entry.original)
        elif kind is ev.StepCompleted:
            f = state.steps.get(event.tp)
            size = _size(state, event.tp)
            copied = len(f.step.nr) * size if (f is not None and size is not None) else 0
            recent = tuple(x for x in r.recent if x[0] >= at - 2 * WINDOW) + ((at, copied),)
            r = r._replace(bytes_done=r.bytes_done + copied, steps_completed=r.steps_completed + 1, recent=recent)
        elif kind is ev.RequestCompleted:
            r = r._replace(completed_at=at)
        return Progress({**self.requests, rid: r})


_TRACKED = frozenset({ev.RequestAccepted, ev.PartitionQueued, ev.PartitionCancelled, ev.StepCompleted,
                      ev.RequestCompleted})


def _size(state: State, tp) -> int | None:
    obs = state.observed.get(tp)
    return None if obs is None else obs.size_bytes


def _add_total(r: RequestProgress, state: State, tp, current, target) -> RequestProgress:
    adds = len(set(target) - set(current))
    if not adds or r.bytes_total is None:
        return r
    size = _size(state, tp)
    return r._replace(bytes_total=None if size is None else r.bytes_total + adds * size)
