"""``RequestCounter``: every request a cluster adapter sends, counted where it is sent, for the request
budget (``engine.core.budget``; docs/engine.md, *The request budget*).

Each request is charged to the broker it goes to where the adapter knows it, else to ``ANY`` (the
client library chooses the broker: charged to every broker by the budget's rule). The counter keeps
the totals since it started (``/metrics``) and the times of the last ``WINDOW`` seconds (the budget's
rule), on its own monotonic clock; ``sent()`` gives them as ages, so any caller's clock can use them.
Thread-safe: the decider's calls run in threads of their own (``engine.runtime.calls``), the broker
watch probes from its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

from engine.core.budget import ANY, WINDOW, RequestsSent


class RequestCounter:
    def __init__(self, clock: Callable[[], float] = time.monotonic, keep: float = WINDOW):
        self._clock = clock
        self._keep = keep
        self._lock = threading.Lock()
        self._totals: dict[int | None, int] = {}
        self._probes: dict[int | None, int] = {}
        self._times: dict[int | None, deque] = {}

    def count(self, broker: int | None, n: int = 1, probe: bool = False) -> None:
        """``n`` requests sent now to ``broker`` (``ANY``: the client library chooses); ``probe``: the broker
        watch's (counted against the budget, kept apart as no read's cost)."""
        if n <= 0:
            return
        key = broker if broker is None else int(broker)
        now = self._clock()
        with self._lock:
            self._totals[key] = self._totals.get(key, 0) + n
            if probe:
                self._probes[key] = self._probes.get(key, 0) + n
            times = self._times.setdefault(key, deque())
            times.extend([now] * n)
            while times and times[0] <= now - self._keep:
                times.popleft()

    def sent(self) -> RequestsSent:
        """The totals and the ages of the requests of the last window (``RequestsSent``)."""
        now = self._clock()
        with self._lock:
            totals = dict(self._totals)
            probes = dict(self._probes)
            ages = {b: tuple(now - t for t in times if t > now - self._keep) for b, times in self._times.items()}
        return RequestsSent(totals, ages, probes)


__all__ = ["ANY", "RequestCounter"]
