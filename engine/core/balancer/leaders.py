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
First nobody above ceil(avg) (a broker that is down: above 0), then nobody
alive below floor(avg). When no chain exists the remaining imbalance is forced
by the placement of the replicas, and only replica moves could remove it.

Fewest preferred-leader changes. A partition whose preferred leader ends other
than it was before the proposal (``original``) changes leader on the cluster
when its reassignment completes (an election, a leader epoch bump, producers
told NOT_LEADER_OR_FOLLOWER). A partition still led by its original leader is
*anchored*: handing it over costs one change. Any other partition (its leader's
replica moved, or handed over before) is *free*: handing it over costs none,
and handing it back to its original leader gives one back. An edge A -> B
costs 0 where A leads a free partition with a replica on B, else 1, and each
search takes the cheapest chain (a 0-1 breadth-first search from every broker
that must give, ending at the first broker that may take reached at the
lowest cost). Along the chain each hand-over takes a partition given back to
its original leader first, then a free one, then an anchored one (one whose
replica list changes anyway first: a reorder-only partition is one more
step). A chain moves at once as many partitions as its two ends need and each
of its edges has at its cost, so one search serves many units: the searches
number about the brokers' imbalance in chains, not in partitions.

The searches count changes against what is known when each runs: giving
back one that an earlier chain made does not count as a gain, and no chain
is taken only to save changes. ``change_bound`` is a lower bound on the
changes of any order of the same replica sets that gives each broker as many
preferred leaderships: partitions whose original leader holds no replica (or
is down), plus, per broker, the partitions it led and still holds beyond the
number it leads.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from engine.core.partition import Replicas, TopicPartition


def balance_leaders(
    assignment: Mapping[TopicPartition, Replicas], brokers: Iterable[int] | None = None,
    down: Iterable[int] = (), original: Mapping[TopicPartition, Replicas] | None = None,
) -> dict[TopicPartition, Replicas]:
    """Every partition of ``assignment``, with replica lists reordered to even out preferred leaders.
    A broker that is ``down`` is never given a preferred leadership (it may give its own away).
    ``original``: each partition's replicas before the proposal (default: ``assignment``); for the
    same balance, as few partitions as the searches find end led by another broker than before."""
    work = {tp: tuple(assignment[tp]) for tp in sorted(assignment) if assignment[tp]}
    before = original if original is not None else assignment
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
    leads = {b: 0 for b in nodes_sorted}
    first: dict[TopicPartition, int] = {}  # the original preferred leader
    # the partitions led by a with a replica on b: free[a][b] those whose hand-over to b costs no
    # change (a is not their original leader), anchored[a][b] the others (a is)
    free: dict[int, dict[int, set[TopicPartition]]] = {b: {} for b in nodes_sorted}
    anchored: dict[int, dict[int, set[TopicPartition]]] = {b: {} for b in nodes_sorted}
    handed: set[TopicPartition] = set()

    def link(tp: TopicPartition, frm: int) -> None:
        edges = (anchored if frm == first[tp] else free)[frm]
        for other in work[tp]:
            if other != frm:
                s = edges.get(other)
                if s is None:
                    edges[other] = {tp}
                else:
                    s.add(tp)

    def unlink(tp: TopicPartition, frm: int) -> None:
        edges = (anchored if frm == first[tp] else free)[frm]
        for other in work[tp]:
            if other != frm:
                s = edges[other]
                s.discard(tp)
                if not s:
                    del edges[other]

    def hand_over(tp: TopicPartition, frm: int, to: int) -> None:
        unlink(tp, frm)
        r = list(work[tp])
        i = r.index(to)
        r[0], r[i] = r[i], r[0]
        work[tp] = tuple(r)
        handed.add(tp)
        link(tp, to)
        leads[frm] -= 1
        leads[to] += 1

    for tp, r in work.items():
        lead = r[0]
        o = before.get(tp)
        first[tp] = o[0] if o else lead
        leads[lead] += 1
        link(tp, lead)

    def chain(sources: list[int], is_sink) -> list[int] | None:
        """The cheapest chain from a source to a sink: a 0-1 breadth-first search by levels of cost
        (each level closed under free edges before the next is reached by anchored ones); the first
        sink found at the lowest cost."""
        parent: dict[int, int | None] = {s: None for s in sources}

        def path(v: int) -> list[int]:
            out = [v]
            while parent[out[-1]] is not None:
                out.append(parent[out[-1]])
            return out[::-1]

        def reach(u: int, edges, out: list[int]) -> list[int] | None:
            """The brokers ``edges`` lead to from u, not reached yet, added to ``out``; the chain to the
            first sink among them, if any."""
            for v in edges[u]:
                if v in parent or v in dead:
                    continue
                parent[v] = u
                if is_sink(v):
                    return path(v)
                out.append(v)
            return None

        level = list(sources)
        while level:
            i = 0
            while i < len(level):  # this level's cost: through free edges
                found = reach(level[i], free, level)
                if found is not None:
                    return found
                i += 1
            nxt: list[int] = []
            for u in level:  # one more: an anchored edge
                found = reach(u, anchored, nxt)
                if found is not None:
                    return found
            level = nxt
        return None

    def taken(u: int, v: int, k: int) -> list[TopicPartition]:
        """The ``k`` partitions (at most) u hands to v: free ones if the edge has any (one given back
        to its original leader first), else anchored ones (one whose replica list changes anyway first)."""
        if v in free[u]:
            return sorted(free[u][v], key=lambda tp: (first[tp] != v, tp))[:k]
        return sorted(anchored[u][v], key=lambda tp: (work[tp] == tuple(before.get(tp) or ()), tp))[:k]

    def room(u: int, v: int) -> int:
        return len(free[u][v]) if v in free[u] else len(anchored[u][v])

    ceiling = {b: 0 if b in dead else hi for b in nodes_sorted}
    floor = {b: 0 if b in dead else lo for b in nodes_sorted}
    for cap, goal in ((ceiling, lo), (ceiling, hi), (floor, lo)):
        # phase 1: nobody above ceil(avg) (a broker that is down: above 0), giving first to the
        # brokers below floor(avg), then to any below ceil(avg); phase 2: nobody alive below
        # floor(avg). Sinks: live brokers below the goal; sources: brokers above their cap.
        def is_sink(b: int) -> bool:
            return leads[b] < goal and b not in dead

        while True:
            if goal == lo and not any(leads[b] < lo for b in alive):
                break
            sources = [b for b in nodes_sorted if leads[b] > cap[b]]
            if not sources:
                break
            path = chain(sources, is_sink)
            if path is None:
                break
            src, dst = path[0], path[-1]
            k = min([leads[src] - cap[src], goal - leads[dst]] + [room(u, v) for u, v in zip(path, path[1:])])
            moves = [(u, v, taken(u, v, k)) for u, v in zip(path, path[1:])]
            for u, v, tps in moves:
                for tp in tps:
                    hand_over(tp, u, v)
    out = {tp: tuple(r) for tp, r in assignment.items()}
    for tp in handed:
        out[tp] = work[tp]
    return out


def change_bound(assignment: Mapping[TopicPartition, Replicas], original: Mapping[TopicPartition, Replicas],
                 down: Iterable[int] = ()) -> int:
    """A lower bound on the preferred-leader changes (against ``original``) of any order of
    ``assignment``'s replica lists that gives every broker as many preferred leaderships as
    ``assignment`` does: the partitions whose original leader holds no replica or is down, plus, per
    broker, the partitions it led and still holds beyond the number it leads."""
    dead = set(down)
    leads: dict[int, int] = {}
    kept: dict[int, int] = {}
    forced = 0
    for tp, r in assignment.items():
        if not r:
            continue
        leads[r[0]] = leads.get(r[0], 0) + 1
        lead = (original.get(tp) or r)[0]
        if lead in dead or lead not in r:
            forced += 1
        else:
            kept[lead] = kept.get(lead, 0) + 1
    return forced + sum(max(0, n - leads.get(b, 0)) for b, n in kept.items())


def leader_imbalance(
    assignment: Mapping[TopicPartition, Replicas], brokers: Iterable[int], down: Iterable[int] = (),
) -> int:
    """How far preferred leaders are from leader balance's range: leaderships above ceil(avg) or
    missing below floor(avg) per live broker, and every one a broker that is down holds (0: balanced)."""
    dead = set(down)
    nodes = set(brokers)
    for r in assignment.values():
        nodes.update(r)
    alive = [b for b in nodes if b not in dead] or sorted(nodes)
    led = [r[0] for r in assignment.values() if r]
    if not led:
        return 0
    lo, hi = math.floor(len(led) / len(alive)), math.ceil(len(led) / len(alive))
    leads = {b: 0 for b in nodes}
    for b in led:
        leads[b] += 1
    return sum(n if b in dead and b not in alive else max(0, n - hi, lo - n) for b, n in leads.items())
