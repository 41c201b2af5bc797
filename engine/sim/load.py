"""What the engine's own work costs the cluster, and what producers feel of it.

The engine looks at the cluster with admin requests (``engine.cluster.kafka``:
ListPartitionReassignments and DescribeTopicPartitions for a look, DescribeCluster
and DescribeConfigs when their caches are old; DescribeLogDirs to each broker
concerned for a catch-up measure; ...) and appends what it decides to its log.
``engine.whatif.strategies`` counts every request at the broker it goes to, as the
adapter of the run sends it (``_Engine``: today's, or the one of the calibration's
records, which sent four requests a look), and ``delay`` charges a broker's rate
above ``broker_request_capacity`` to the acks=all writes it leads (``rates``: the
engine's request budget per broker).

What that costs producers depends on where the engine runs. On the measured
cluster (docs/simulator.md, "Calibration") the four brokers, the controller, the
probe producer and the engine shared one 2-core machine: looking at the steps
close to done every 0.1 s instead of every second quadrupled the probe's median
and doubled its p99, whether the engine's own topics were on that cluster or
not. The model, one fitted parameter (``Scenario.broker_request_capacity``, 10.85 a
second on that machine, fitted with the adapter of its records):

* A broker absorbs ``capacity`` of the engine's requests a second beside its
  load. Counted over the last ``RATE_WINDOW``, every request above that puts
  it behind: the delay of an acks=all write to a partition it leads grows by
  ``(rate - capacity) / capacity`` seconds per second, and is worked off at
  the rate it has to spare once the engine sends less. A write sent at ``t``
  completes no earlier than ``t + delay(t)``.

A short look costs nothing; looking back to back (a step close to done at a
0.1 s fast interval) at a rate above the capacity makes the delay grow for as
long as it does, then fall: the measured probe timelines' plateaus. With the
brokers on machines of their own (``broker_request_capacity`` None, the
default) the engine's requests cost producers nothing here (``rates`` still
counts them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

RATE_WINDOW = 1.0  # seconds over which a broker's request rate counts: a shorter burst is absorbed
STEP = 0.05  # seconds: the delay is sampled this finely for the probe (its windows)


@dataclass(frozen=True)
class RequestRates:
    """Requests per second one broker received from the engine: on average over a span, and the
    most in any one second of it."""

    broker: int
    requests: int
    mean: float
    peak: int


def rates(arrivals: Mapping[int, Sequence[float]], start: float, end: float) -> list[RequestRates]:
    """Per broker: requests received in ``[start, end)``, their mean rate and the most in one second
    (seconds counted from ``start``)."""
    out = []
    span = max(end - start, 1e-9)
    for b in sorted(arrivals):
        inside = [t for t in arrivals[b] if start <= t < end]
        per_second: dict[int, int] = {}
        for t in inside:
            k = int((t - start) // 1.0)
            per_second[k] = per_second.get(k, 0) + 1
        out.append(RequestRates(b, len(inside), len(inside) / span, max(per_second.values(), default=0)))
    return out


def merge(log: Iterable[tuple[float, int]]) -> dict[int, list[float]]:
    """broker -> sorted arrival times, from (time, broker) pairs."""
    out: dict[int, list[float]] = {}
    for t, b in log:
        out.setdefault(b, []).append(t)
    for ts in out.values():
        ts.sort()
    return out


def delay(arrivals: Sequence[float], capacity: float | None, window: float = RATE_WINDOW) -> list[tuple[float, float]]:
    """What a broker's backlog of the engine's requests delays its produce requests, as (time, delay)
    breakpoints, linear in between and 0 outside; ``arrivals``: when the engine's requests reached
    it. Empty when requests cost nothing (``capacity`` None)."""
    if capacity is None or not arrivals:
        return []
    changes: dict[float, int] = {}  # the rate over the last ``window`` changes by +1 / -1 / window
    for a in arrivals:
        changes[a] = changes.get(a, 0) + 1
        changes[a + window] = changes.get(a + window, 0) - 1
    points: list[tuple[float, float]] = []
    d, count, t = 0.0, 0, None
    for at in sorted(changes):
        if t is not None and at > t:
            slope = (count / window - capacity) / capacity
            if d > 0 or slope > 0:
                if not points or points[-1] != (t, d):
                    points.append((t, d))
                end = d + slope * (at - t)
                if end < 0:
                    points.append((t + d / -slope, 0.0))
                    d = 0.0
                else:
                    d = end
                    points.append((at, d))
        count += changes[at]
        t = at
    if d > 0:  # no request left in the window: worked off at full speed
        points.append((t + d, 0.0))
    return points


def windows(points: Sequence[tuple[float, float]], step: float = STEP) -> list[tuple[float, float]]:
    """The delay as probe windows: (start, done) for each ``step`` while it is positive; a write sent
    in ``[start, start + step)`` completes at ``done``, the latest ``t + delay(t)`` in it."""
    out = []
    for (t0, d0), (t1, d1) in zip(points, points[1:]):
        if d0 <= 0 and d1 <= 0:
            continue
        n = max(1, math.ceil((t1 - t0) / step - 1e-9))
        for k in range(n):
            a = t0 + (t1 - t0) * k / n
            b = t0 + (t1 - t0) * (k + 1) / n
            da = d0 + (d1 - d0) * k / n
            db = d0 + (d1 - d0) * (k + 1) / n
            done = max(a + da, b + db)  # t + delay(t) is linear on the piece: its larger end
            if done > a:
                out.append((a, done))
    return out
