"""Leader balance (KAFKA-5319): preferred leaders spread evenly, moving no data.

The preferred leader of a partition is its first replica. Leadership can only
go to a broker that already holds a replica, so leader balance only reorders
replica lists: it swaps the first replica with another one of the same list.

Target: every broker leads between floor(avg) and ceil(avg) partitions, where
avg = partitions / brokers. Moving one preferred leadership from a broker above
the range to one below may need a chain of swaps (A gives a partition to B, B
gives another to C...), so the balancer searches such chains in the graph of
brokers, where an edge A -> B means "some partition led by A has a replica on
B" (augmenting paths, as in a max-flow). Each chain moves the imbalance of its
two ends by one; when no chain exists the remaining imbalance is forced by the
placement of the replicas, and only replica moves could remove it.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Iterable, Mapping

from engine.core.partition import Replicas, TopicPartition


def balance_leaders(
    assignment: Mapping[TopicPartition, Replicas], brokers: Iterable[int] | None = None,
    down: Iterable[int] = (),
) -> dict[TopicPartition, Replicas]:
    """Every partition of ``assignment``, with replica lists reordered to even out preferred leaders.
    A broker that is ``down`` is never given a preferred leadership (it may give its own away)."""
    work = {tp: list(r) for tp, r in assignment.items() if r}
    dead = set(down)
    nodes = set(brokers) if brokers is not None else set()
    for r in work.values():
        nodes.update(r)
    nodes_sorted = sorted(nodes)
    if not nodes_sorted:
        return {tp: tuple(r) for tp, r in assignment.items()}
    leads = {b: 0 for b in nodes_sorted}
    edges: dict[int, dict[int, set[TopicPartition]]] = {b: {} for b in nodes_sorted}
    for tp, r in work.items():
        leads[r[0]] += 1
        for other in r[1:]:
            edges[r[0]].setdefault(other, set()).add(tp)
    alive = [b for b in nodes_sorted if b not in dead] or nodes_sorted
    avg = len(work) / len(alive)
    lo, hi = math.floor(avg), math.ceil(avg)

    def hand_over(tp: TopicPartition, frm: int, to: int) -> None:
        r = work[tp]
        for other in r[1:]:
            s = edges[frm][other]
            s.discard(tp)
            if not s:
                del edges[frm][other]
        i = r.index(to)
        r[0], r[i] = r[i], r[0]
        for other in r[1:]:
            edges[to].setdefault(other, set()).add(tp)
        leads[frm] -= 1
        leads[to] += 1

    def chain(sources: list[int], is_sink) -> list[int] | None:
        parent: dict[int, int | None] = {s: None for s in sources}
        queue = deque(sources)
        while queue:
            u = queue.popleft()
            for v in sorted(edges[u]):
                if v in parent or v in dead:
                    continue
                parent[v] = u
                if is_sink(v):
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                queue.append(v)
        return None

    for too_many, sink, source in (
        # phase 1: nobody above ceil(avg) (a broker that is down should lead nothing)
        (lambda b: leads[b] > (0 if b in dead else hi), lambda b: b not in dead and leads[b] < hi, None),
        # phase 2: nobody alive below floor(avg)
        (None, lambda b: b not in dead and leads[b] < lo, lambda b: leads[b] > (0 if b in dead else lo)),
    ):
        while True:
            if too_many is not None:
                sources = [b for b in nodes_sorted if too_many(b)]
            else:
                if not any(sink(b) for b in nodes_sorted):
                    break
                sources = [b for b in nodes_sorted if source(b)]
            if not sources:
                break
            path = chain(sources, sink)
            if path is None:
                break
            for u, v in zip(path, path[1:]):
                hand_over(min(edges[u][v]), u, v)
    return {tp: tuple(work.get(tp, r)) for tp, r in assignment.items()}
