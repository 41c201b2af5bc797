"""Max-min fair sharing of network capacity among concurrent copies.

Copies are grouped in classes (all copies of a class pass the same
constraints: the receiving broker's free inbound capacity, the sending
broker's free outbound capacity, and the follower / leader replication
throttle where it applies). Progressive filling: every unfrozen copy's rate
grows at the same pace; when a constraint is used up, the copies passing it
are frozen at the rate they reached. The result is the max-min fair
allocation: no copy can go faster without slowing one that is not faster.
"""

from __future__ import annotations

from typing import Hashable, Mapping, Sequence


def max_min_fair(
    classes: Sequence[tuple[int, Sequence[Hashable]]], capacity: Mapping[Hashable, float],
) -> list[float]:
    """Per-copy rate of each class. ``classes``: (number of copies, constraints passed);
    ``capacity``: constraint -> bytes/s. A class with no constraint gets ``inf``."""
    rate = [0.0] * len(classes)
    remaining = {k: max(0.0, capacity[k]) for k in capacity}
    members: dict[Hashable, list[int]] = {}
    load: dict[Hashable, int] = {}
    active: set[int] = set()
    for i, (count, keys) in enumerate(classes):
        if count <= 0:
            continue
        if not keys:
            rate[i] = float("inf")
            continue
        active.add(i)
        for k in keys:
            members.setdefault(k, []).append(i)
            load[k] = load.get(k, 0) + count
    level = 0.0
    while active:
        step, tightest = min((remaining[k] / n, k) for k, n in load.items() if n)
        level += step
        full = [tightest]
        for k, n in load.items():
            if n:
                remaining[k] -= step * n
                if k != tightest and remaining[k] <= 1e-9 * max(capacity[k], 1.0):
                    full.append(k)
        for k in full:
            for i in members[k]:
                if i in active:
                    active.discard(i)
                    rate[i] = level
                    count, keys = classes[i]
                    for key in keys:
                        load[key] -= count
    return rate
