"""The request budget: at most ``budget`` of the engine's requests per broker in any 1-second window.

The engine's looks (observations, catch-up measurements, throttle read-backs) may be deferred; its
actions never are. This module is the rule alone, pure: given when the requests were sent to each
broker (``sent``, times on the caller's clock, one key per broker and ``ANY`` for the requests whose
broker the client library chooses: they are charged to every broker, as they may all land on one),
the budget, the clock value ``now`` and what the next look will cost the busiest broker (``cost``
requests), when may that look be sent?

A window is ``(t - WINDOW, t]``: a request sent at ``r`` leaves the windows that end at ``r + WINDOW``
or later. A look sent at ``t`` adds ``cost`` requests to every window containing ``t``; the fullest of
them, of the requests already sent, is the one ending at ``t``. So the look may go at the first
``t >= now`` where, at every broker, the requests in ``(t - WINDOW, t]`` plus ``cost`` are at most the
budget. A look that costs more than the budget waits for an empty window (it then overshoots, once,
by its own requests). Every request counted was sent before ``now``, so one answer is never later
than ``now + WINDOW``; requests that are never held (actions, the broker watch's probes) may keep
the window full, so the caller sends a read that has waited ``WINDOW`` whatever the window holds
(``engine.runtime.decider``): no read waits longer than that.

docs/engine.md, *The request budget*.
"""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple, Sequence

WINDOW = 1.0
"""Seconds of the window the budget counts requests over (the budget is requests per second)."""

ANY = None
"""The key of the requests whose broker the client library chooses (charged to every broker)."""


DEFAULT_BUDGET = 20.0
"""Requests a second per broker of the reassigned cluster the engine's looks keep within by default
(``kreassign engine --request-budget``; docs/engine.md, *The request budget*, says why this much)."""

PACED_SHOWN = 60.0
"""Seconds a pacing by the request budget stays shown (``status``, the events, /metrics) after the last look it
deferred: deferrals less apart than this are one pacing, recorded once when it starts and once when it ends.
On a long move the budget binds now and then (a step's end, the throttle read-back every ``verify_interval``,
10 s): shown for 5 s after each deferral, the warning came and went every few seconds, a pair of events each
time (54 on a 382 s move of tests/test_budget.py, 4 now); kept a minute, such a move is one or two pacings. A
pacing ends sooner when nothing is left to look at (the move done). The runtime decides the pacing
(``engine.runtime.decider``)."""


class RequestsSent(NamedTuple):
    """What a cluster adapter counted: ``totals`` (requests since it started, by broker, ``ANY`` for
    those whose broker the client library chooses), ``ages`` (seconds since each request of the
    last ``WINDOW`` was sent, by the same keys) and ``probes`` (of the totals, the broker watch's
    probes by broker: sent from a thread of their own, they are no read's cost)."""

    totals: Mapping[int | None, int]
    ages: Mapping[int | None, Sequence[float]]
    probes: Mapping[int | None, int] = {}


def charged(sent: Mapping[int | None, Sequence[float]], now: float, window: float = WINDOW) -> dict[int | None, int]:
    """Requests charged to each broker in the window ending at ``now``: its own and the ``ANY`` ones.
    With no broker known, the ``ANY`` ones alone (key ``ANY``)."""
    def inside(times):
        return sum(1 for t in times if t > now - window)

    anywhere = inside(sent.get(ANY, ()))
    brokers = [b for b in sent if b is not ANY]
    if not brokers:
        return {ANY: anywhere}
    return {b: inside(sent[b]) + anywhere for b in brokers}


def busiest(sent: Mapping[int | None, Sequence[float]], now: float, window: float = WINDOW) -> tuple[int | None, int]:
    """The broker charged the most requests in the window ending at ``now``, and how many (the lowest
    id among equals; ``ANY`` when no broker is known)."""
    counts = charged(sent, now, window)
    return min(counts.items(), key=lambda kv: (-kv[1], -1 if kv[0] is None else kv[0]))


def look_at(sent: Mapping[int | None, Sequence[float]], budget: float | None, now: float, cost: int = 1,
            window: float = WINDOW) -> float:
    """The earliest time ``t >= now`` at which a look costing ``cost`` requests at the busiest broker
    keeps every broker's window ``(t - window, t]`` within ``budget`` (module doc). ``budget`` None: no
    budget, ``now``."""
    if budget is None:
        return now
    room = max(0, math.floor(budget + 1e-9) - max(cost, 0))  # requests the window may hold before the look
    anywhere = [t for t in sent.get(ANY, ()) if t > now - window]
    at = now
    keys = [b for b in sent if b is not ANY] or [ANY]
    for b in keys:
        times = sorted(anywhere + ([t for t in sent[b] if t > now - window] if b is not ANY else []))
        extra = len(times) - room
        if extra > 0:  # the oldest ``extra`` must leave the window first
            at = max(at, times[extra - 1] + window)
    return at
