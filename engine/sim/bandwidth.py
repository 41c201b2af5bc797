"""Weighted max-min fair sharing of network capacity among concurrent copies.

Copies are grouped in classes (all copies of a class pass the same
constraints: the receiving broker's free inbound capacity, the sending
broker's free outbound capacity, and the follower / leader replication
quota where it binds) and share a weight. Progressive filling: every
unfrozen copy's rate grows at ``weight`` times the same pace; when a
constraint is used up, the copies passing it are frozen at the rate they
reached. With equal weights this is the max-min fair allocation: no copy can
go faster without slowing one that is not faster.

Weights model how a receiving broker's fetcher shares a quota: one fetch
response per turn, ``replica.fetch.max.bytes`` per partition and at most
``replica.fetch.response.max.bytes`` in all (``engine.sim.physics``).
"""

from __future__ import annotations

from typing import Hashable, Mapping, Sequence


def max_min_fair(
    classes: Sequence[tuple], capacity: Mapping[Hashable, float],
) -> list[float]:
    """Per-copy rate of each class. ``classes``: (number of copies, constraints passed[, weight]);
    ``capacity``: constraint -> bytes/s. A class with no constraint gets ``inf``."""
    rate = [0.0] * len(classes)
    remaining = {k: max(0.0, capacity[k]) for k in capacity}
    members: dict[Hashable, list[int]] = {}
    load: dict[Hashable, float] = {}
    active: set[int] = set()
    weights = [c[2] if len(c) > 2 else 1.0 for c in classes]
    for i, c in enumerate(classes):
        count, keys = c[0], c[1]
        if count <= 0:
            continue
        if not keys:
            rate[i] = float("inf")
            continue
        active.add(i)
        for k in keys:
            members.setdefault(k, []).append(i)
            load[k] = load.get(k, 0.0) + count * weights[i]
    level = 0.0
    while active:
        step, tightest = min((remaining[k] / n, k) for k, n in load.items() if n > 1e-12)
        level += step
        full = [tightest]
        for k, n in load.items():
            if n > 1e-12:
                remaining[k] -= step * n
                if k != tightest and remaining[k] <= 1e-9 * max(capacity[k], 1.0):
                    full.append(k)
        for k in full:
            for i in members[k]:
                if i in active:
                    active.discard(i)
                    rate[i] = level * weights[i]
                    count, keys = classes[i][0], classes[i][1]
                    for key in keys:
                        load[key] -= count * weights[i]
    return rate
