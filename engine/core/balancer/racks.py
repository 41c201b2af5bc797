"""Rack awareness: a partition's replicas on as many distinct racks as possible.

A move never lowers the number of distinct racks a partition spans, and among
moves that are otherwise equal the balancer prefers one that raises it. Brokers
without a rack all count as one unnamed rack; with rack awareness disabled
(Kafka's ``--disable-rack-aware``) every move is allowed.
"""

from __future__ import annotations

from typing import Iterable, Mapping


def distinct_racks(replicas: Iterable[int], racks: Mapping[int, str | None]) -> int:
    return len({racks.get(b) for b in replicas})


def rack_gain(replicas: Iterable[int], src: int, dst: int, racks: Mapping[int, str | None]) -> int:
    """How many distinct racks the partition gains (negative: loses) if ``src`` is replaced by ``dst``."""
    others = [racks.get(b) for b in replicas if b != src]
    return (racks.get(dst) not in others) - (racks.get(src) not in others)


def can_gain(replicas: Iterable[int], racks: Mapping[int, str | None], rack_count: int) -> bool:
    """Whether some move could spread the partition over more racks."""
    replicas = list(replicas)
    return distinct_racks(replicas, racks) < min(len(replicas), rack_count)
