"""Leader balance (KAFKA-5319): preferred leaders spread evenly, moving no data.

The preferred leader of a partition is its first replica. Leadership can only
go to a broker that already holds a replica, so leader balance only reorders
replica lists: it swaps the first replica with another one of the same list.

Target: every broker leads between floor(avg) and ceil(avg) partitions, where
avg = partitions / brokers (a broker that is down: none). Moving one preferred
leadership from a broker above the range to one below may need a chain of
swaps (A gives a partition to B, B gives another to C...), so the balancer
searches such chains in the graph of brokers, where an edge A -> B means "some
partition led by A has a replica on B" (augmenting paths, as in a max-flow).
When no chain exists the remaining imbalance is forced by the placement of the
replicas, and only replica moves could remove it.

Fewest preferred-leader changes. Every partition whose preferred leader ends
other than it was (``original``: before any replica moved) changes leader on
the cluster when its reassignment completes (an election, a leader epoch bump,
producers told NOT_LEADER_OR_FOLLOWER). A hand-over of a partition from A to B
costs one such change where A is its original preferred leader, none where
neither is, and gives one back where B is. Leader balance is a min-cost flow:
a unit a broker above the range must give, or one below it must get, is worth
more than any number of changes (a chain that serves two such units before one
that serves one), and among chains worth the same the cheapest goes first
(fewest changes, then fewest hand-overs, then broker ids); a chain that gives
changes back without leaving the range is taken too. Taking always the
cheapest chain (successive shortest paths; Bellman-Ford, since a hand-over
back costs -1) ends at the fewest changes for that balance. A chain moves as
many partitions at once as each of its edges has at its cost.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from engine.core.partition import Replicas, TopicPartition


def balance_leaders(
    assignment: Mapping[TopicPartition, Replicas], brokers: Iterable[int] | None = None,
    down: Iterable[int] = (), original: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, Replicas]:
    """Every partition of ``assignment``, with replica lists reordered to even out preferred leaders.
    A broker that is ``down`` is never given a preferred leadership (it may give its own away).
    ``original``: each partition's preferred leader before the reassignment (default: its first
    replica in ``assignment``); for the same balance, as few partitions as possible end led by
    another broker."""
    work = {tp: list(r) for tp, r in assignment.items() if r}
    orig = {tp: r[0] for tp, r in work.items()}
    if original is not None:
        orig.update((tp, b) for tp, b in original.items() if tp in orig)
    dead = set(down)
    nodes = set(brokers) if brokers is not None else set()
    for r in work.values():
        nodes.update(r)
    nodes_sorted = sorted(nodes)
    if not nodes_sorted:
        return {tp: tuple(r) for tp, r in assignment.items()}
    alive = [b for b in nodes_sorted if b not in dead] or nodes_sorted
    avg = len(work) / len(alive)
    lo, hi = math.floor(avg), math.ceil(avg)
    floor = {b: lo if b in alive else 0 for b in nodes_sorted}
    ceiling = {b: hi if b in alive else 0 for b in nodes_sorted}
    leads = {b: 0 for b in nodes_sorted}
    # edges[a][b][c + 1]: the partitions led by a with a replica on b whose hand-over from a to b
    # costs c preferred-leader changes (c = -1, 0 or 1)
    edges: dict[int, dict[int, tuple[set[TopicPartition], ...]]] = {b: {} for b in nodes_sorted}

    def cost(tp: TopicPartition, frm: int, to: int) -> int:
        return (to != orig[tp]) - (frm != orig[tp])

    def link(tp: TopicPartition, frm: int) -> None:
        for other in work[tp]:
            if other != frm:
                edges[frm].setdefault(other, (set(), set(), set()))[cost(tp, frm, other) + 1].add(tp)

    def unlink(tp: TopicPartition, frm: int) -> None:
        for other in work[tp]:
            if other != frm:
                sets = edges[frm][other]
                sets[cost(tp, frm, other) + 1].discard(tp)
                if not any(sets):
                    del edges[frm][other]

    def cheapest(frm: int, to: int) -> int:
        return next(c for c, tps in enumerate(edges[frm][to], -1) if tps)

    def hand_over(tp: TopicPartition, frm: int, to: int) -> None:
        unlink(tp, frm)
        r = work[tp]
        i = r.index(to)
        r[0], r[i] = r[i], r[0]
        link(tp, to)
        leads[frm] -= 1
        leads[to] += 1

    for tp, r in work.items():
        leads[r[0]] += 1
        link(tp, r[0])

    # a unit of imbalance served outweighs every change a chain can cost (at most one per hand-over)
    unit = len(nodes_sorted) + 1

    def give_value(b: int) -> int | None:  # the worth of b giving one leadership (None: it may not)
        if leads[b] > ceiling[b]:
            return -unit
        return 0 if leads[b] > floor[b] else None

    def take_value(b: int) -> int | None:  # the worth of b taking one more
        if b in dead or leads[b] >= ceiling[b]:
            return None
        return -unit if leads[b] < floor[b] else 0

    def cheapest_chain() -> tuple[list[int], int, int] | None:
        """The cheapest chain worth taking (its brokers, its cost, how many partitions it can move)."""
        dist: dict[int, tuple[int, int]] = {}
        parent: dict[int, int | None] = {}
        for b in nodes_sorted:
            v = give_value(b)
            if v is not None:
                dist[b], parent[b] = (v, 0), None
        frontier = sorted(dist)
        for _ in range(len(nodes_sorted)):  # Bellman-Ford: no negative cycle (successive shortest paths)
            changed: set[int] = set()
            for u in frontier:
                du = dist[u]
                for v in sorted(edges[u]):
                    if v in dead:
                        continue
                    d = (du[0] + cheapest(u, v), du[1] + 1)
                    if v not in dist or d < dist[v]:
                        dist[v], parent[v] = d, u
                        changed.add(v)
            if not changed:
                break
            frontier = sorted(changed)
        best = None
        for b in sorted(dist):
            v = take_value(b)
            if v is None or parent[b] is None:
                continue
            total = (dist[b][0] + v, dist[b][1])
            if total[0] < 0 and (best is None or total < best[0]):
                best = (total, b)
        if best is None:
            return None
        path, seen = [best[1]], {best[1]}
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
            if path[-1] in seen:  # a cycle: cannot happen without a negative cycle; stop rather than loop
                return None
            seen.add(path[-1])
        path.reverse()
        src, dst = path[0], path[-1]
        room = [leads[src] - (ceiling[src] if leads[src] > ceiling[src] else floor[src]),
                (floor[dst] if leads[dst] < floor[dst] else ceiling[dst]) - leads[dst]]
        room += [len(edges[u][v][cheapest(u, v) + 1]) for u, v in zip(path, path[1:])]
        return path, best[0][0], min(room)

    while (found := cheapest_chain()) is not None:
        path, _cost, k = found
        moves = []
        for u, v in zip(path, path[1:]):
            moves.append((u, v, sorted(edges[u][v][cheapest(u, v) + 1])[:k]))
        for u, v, tps in moves:
            for tp in tps:
                hand_over(tp, u, v)
    return {tp: tuple(work.get(tp, r)) for tp, r in assignment.items()}
