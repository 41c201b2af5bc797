"""Replica balance (KAFKA-5319): replica counts per broker within a threshold of the average.

Target range. With ``avg`` replicas per eligible broker and threshold ``t``
(KAFKA-5319's default: 10 % of the average), a broker is balanced when its
count is in [L, U] with U = max(floor(avg (1 + t)), ceil(avg)) and
L = min(ceil(avg (1 - t)), floor(avg)): the threshold's range, widened to the
nearest integers so that a balanced assignment always exists in counts.

Moves. Replicas on brokers that are not eligible (being removed, or outside
``--broker-list``) must move: they go first, each to the least loaded broker
that may take it. Then, while a broker is above U (or below L), one replica
moves from the fullest broker to the emptiest one that may take it. "May take
it": it holds no replica of that partition, and the partition does not span
fewer distinct racks afterwards (``racks``). Among the replicas a broker could
give, the smallest partition goes first (fewer bytes), and a move that spreads
the partition over more racks is preferred. A replaced broker keeps its place
in the replica list, so the preferred leader changes only where the leader's
own replica moves (leader balance, run after, evens that out).

Preferred leaders kept (``keep_preferred_leaders``, after the moves above). A
preferred leader that changes is a leadership change on the cluster when the
move completes. Where a broker gave a replica it led and holds, as a follower,
a partition no larger that the receiver does not hold, the follower's replica
goes instead, where that costs nothing: the same replica counts, no more
bytes nor replicas moved, no partition on fewer racks than the greedy's, and
only while the receiver leads more than floor(avg) and the giver fewer than
ceil(avg) (partitions / eligible brokers). The greedy moves are not changed
as they are chosen (a different choice early changes every later one: that
copied more bytes in some cases); the exchange is a pass over their result.

Pinned brokers. The placement rules can leave a broker outside the range with
no move at all: after a decommission, a rack's last broker holds a replica of
every partition that spans all racks, and none of them may leave the rack.
Before counts are evened out, a broker above the range none of whose replicas
may go to any other broker is pinned (reported as ``pinned``) and the range is
recomputed over the others, until no more is pinned; the others are then
balanced among themselves.

Lower bound. Every replica on an ineligible broker and every replica above U
must move once, and every replica missing below L must arrive once:
``max(forced + excess, deficit)``, over the brokers that are not pinned and
with the range they end up with. The report compares the moves made with it.

All of this is a pure function of its inputs: same input, same proposal.
"""

from __future__ import annotations

import bisect
import math
from typing import Iterable, Mapping, NamedTuple

from engine.core.balancer.racks import can_gain, distinct_racks, rack_gain
from engine.core.partition import Replicas, TopicPartition

_GAIN_SCAN = 64  # candidates examined for a rack-improving move before taking the smallest


class BalanceError(ValueError):
    """The request cannot be balanced at all (no eligible broker, replication factor above the broker count)."""


class ReplicaBalance(NamedTuple):
    assignment: dict[TopicPartition, Replicas]  # every partition in scope, after the moves
    moves: int  # replicas moved
    lower_bound: int
    target: tuple[int, int]  # (L, U)
    balanced: bool  # every eligible broker that is not pinned ended within [L, U]
    notes: tuple[str, ...]
    pinned: tuple[int, ...] = ()  # brokers outside the range that the placement rules left no move


def target_range(total: int, brokers: int, threshold: float) -> tuple[int, int]:
    avg = total / brokers
    upper = max(math.floor(avg * (1 + threshold) + 1e-9), math.ceil(avg))
    lower = min(math.ceil(avg * (1 - threshold) - 1e-9), math.floor(avg))
    return lower, upper


def balance_replicas(
    assignment: Mapping[TopicPartition, Replicas],
    racks: Mapping[int, str | None],
    brokers: Iterable[int],
    sizes: Mapping[TopicPartition, int] | None = None,
    threshold: float = 0.10,
    rack_aware: bool = True,
) -> ReplicaBalance:
    """Balance replica counts of ``assignment`` over the eligible ``brokers``."""
    eligible = sorted(set(brokers))
    if not eligible:
        raise BalanceError("no eligible brokers")
    sizes = sizes or {}
    rk: Mapping[int, str | None] = racks if rack_aware else {}
    work = {tp: list(r) for tp, r in assignment.items()}
    rf_max = max((len(r) for r in work.values()), default=0)
    if rf_max > len(eligible):
        raise BalanceError(f"replication factor {rf_max} is larger than the {len(eligible)} eligible brokers")
    count = {b: 0 for b in eligible}
    orphans: list[tuple[TopicPartition, int]] = []
    for tp in sorted(work):
        for b in work[tp]:
            if b in count:
                count[b] += 1
            else:
                orphans.append((tp, b))
    total = sum(len(r) for r in work.values())
    lower, upper = target_range(total, len(eligible), threshold)
    initial = dict(count)
    active = set(eligible)  # the brokers not pinned
    pinned: list[int] = []
    # per broker: (size, tp) of the replicas it holds, smallest first
    held: dict[int, list[tuple[int, TopicPartition]]] = {b: [] for b in eligible}
    for tp in sorted(work):
        for b in work[tp]:
            if b in held:
                held[b].append((sizes.get(tp, 0), tp))
    for b in eligible:
        held[b].sort()

    rack_count = len({rk.get(b) for b in eligible}) if rk else 1
    spreadable = {tp for tp, r in work.items() if rk and can_gain(r, rk, rack_count)}
    spreadable_on = {b: 0 for b in eligible}  # partitions on b that could gain a rack
    for tp in spreadable:
        for b in work[tp]:
            if b in spreadable_on:
                spreadable_on[b] += 1
    start = {b: 0 for b in eligible}  # entries of held[b] before this index have left b

    def may_take(tp: TopicPartition, src: int, dst: int) -> bool:
        replicas = work[tp]
        return dst not in replicas and (not rk or rack_gain(replicas, src, dst, rk) >= 0)

    def move(tp: TopicPartition, src: int, dst: int) -> None:
        replicas = work[tp]
        if tp in spreadable:
            for b in replicas:
                if b in spreadable_on:
                    spreadable_on[b] -= 1
            spreadable.discard(tp)
        replicas[replicas.index(src)] = dst
        if src in count:
            count[src] -= 1
        count[dst] += 1
        entry = (sizes.get(tp, 0), tp)
        at = bisect.bisect_left(held[dst], entry)
        held[dst].insert(at, entry)
        if at < start[dst]:
            start[dst] = at
        if rk and can_gain(replicas, rk, rack_count):
            spreadable.add(tp)
            for b in replicas:
                if b in spreadable_on:
                    spreadable_on[b] += 1

    moves = 0
    notes: list[str] = []
    # 1. forced moves off ineligible brokers: to the least loaded broker that may take it
    for tp, src in orphans:
        options = [d for d in eligible if may_take(tp, src, d)]
        if not options:
            options = [d for d in eligible if d not in work[tp]]  # rack rule cannot hold: keep the data safe
            notes.append(f"{tp}: no broker keeps its rack spread when leaving broker {src}")
        dst = min(options, key=lambda d: (count[d] >= upper, count[d], -rack_gain(work[tp], src, d, rk) if rk else 0, d))
        move(tp, src, dst)
        moves += 1

    # 2. pin the brokers above the range that no replica may leave, and take the range over the others
    while True:
        stuck = [b for b in sorted(active) if count[b] > upper and not any(
            may_take(tp, b, d) for _size, tp in held[b] if b in work[tp] for d in active if d != b)]
        if not stuck or len(stuck) == len(active):
            break
        pinned.extend(stuck)
        active.difference_update(stuck)
        lower, upper = target_range(sum(count[b] for b in active), len(active), threshold)

    # 3. even out counts
    def pick(src: int, dst: int) -> TopicPartition | None:
        """The replica ``src`` gives to ``dst``: smallest first, a rack-spreading one if near."""
        entries = held[src]
        i = start[src]
        while i < len(entries) and src not in work[entries[i][1]]:
            i += 1
        start[src] = i
        look_for_gain = spreadable_on[src] > 0
        first = None
        scanned = 0
        for _size, tp in entries[i:]:
            if src not in work[tp] or not may_take(tp, src, dst):
                continue
            if not look_for_gain:
                return tp
            if tp in spreadable and rack_gain(work[tp], src, dst, rk) > 0:
                return tp
            if first is None:
                first = tp
            scanned += 1
            if scanned >= _GAIN_SCAN:
                break
        return first

    while True:
        over = sorted((b for b in active if count[b] > upper), key=lambda b: (-count[b], b))
        under = sorted((b for b in active if count[b] < lower), key=lambda b: (count[b], b))
        if over:
            srcs = over
            dsts = sorted((b for b in active if count[b] < upper), key=lambda b: (count[b], b))
        elif under:
            dsts = under
            srcs = sorted((b for b in active if count[b] > lower), key=lambda b: (-count[b], b))
        else:
            break
        found = next(((tp, s, d) for s in srcs for d in dsts if (tp := pick(s, d)) is not None), None)
        if found is None:
            notes.append("no further move satisfies the constraints; some brokers stay outside the range")
            break
        tp, s, d = found
        move(tp, s, d)
        moves += 1

    if pinned:
        held_at = ", ".join(f"{b} ({count[b]})" for b in sorted(pinned))
        notes.append(f"brokers {held_at} stay outside the range: one replica per broker and the rack spread "
                     "leave them no move; the other brokers are balanced among themselves")
    bound = max(len(orphans) + sum(max(0, initial[b] - upper) for b in active),
                sum(max(0, lower - initial[b]) for b in active))
    balanced = all(lower <= count[b] <= upper for b in active)
    return ReplicaBalance({tp: tuple(r) for tp, r in work.items()}, moves, bound, (lower, upper), balanced,
                          tuple(notes), tuple(sorted(pinned)))


def rack_spread_kept(
    before: Mapping[TopicPartition, Replicas], after: Mapping[TopicPartition, Replicas], racks: Mapping[int, str | None]
) -> bool:
    """No partition spans fewer distinct racks ``after`` than ``before``."""
    return all(distinct_racks(after[tp], racks) >= distinct_racks(r, racks) for tp, r in before.items())


def keep_preferred_leaders(
    before: Mapping[TopicPartition, Replicas],
    after: Mapping[TopicPartition, Replicas],
    racks: Mapping[int, str | None],
    brokers: Iterable[int],
    sizes: Mapping[TopicPartition, int] | None = None,
    rack_aware: bool = True,
) -> Mapping[TopicPartition, Replicas]:
    """``after`` (a replica balance of ``before``) with some moves of a leader's replica exchanged for
    moves of a follower's: the same brokers give and take as many replicas, no more bytes.

    Where broker S gave its replica of P (which it led) and X took P's lead in its place, and S holds a
    replica of Q as a follower that X does not hold, with Q no larger than P (sizes known for both or
    for neither), S keeps P (its preferred leadership unchanged) and Q's replica goes from S to X
    instead: every broker keeps its replica count, the bytes to copy do not grow (Q's size for P's;
    none where S's replica of Q was itself new) and the replicas moved do not either. Taken only where
    neither partition spans fewer racks than in ``after``, and where X leads more than floor(avg)
    partitions and S fewer than ceil(avg) (avg: partitions / brokers), so the preferred leaders X gives
    back to S leave leader balance no more to do. Largest P first, each with the smallest Q that
    qualifies among the first ``_GAIN_SCAN`` of S's followers that are no larger.
    """
    eligible = sorted(set(brokers))
    if not eligible:
        return after
    sizes = sizes or {}
    rk: Mapping[int, str | None] = racks if rack_aware else {}
    leads = {b: 0 for b in eligible}
    for r in after.values():
        if r and r[0] in leads:
            leads[r[0]] += 1
    # a leader's replica that left: P, led by S before, whose first replica is now X (new to P)
    gone = sorted(
        (tp for tp, r in after.items()
         if r and before.get(tp) and before[tp][0] in leads and before[tp][0] not in r and r[0] not in before[tp]),
        key=lambda tp: (-sizes.get(tp, 0), tp))
    givers = {before[tp][0] for tp in gone}
    if not givers:
        return after  # (the same object: nothing exchanged)
    work = {tp: list(r) for tp, r in after.items()}
    led = sum(1 for r in work.values() if r)
    lo, hi = math.floor(led / len(eligible)), math.ceil(led / len(eligible))
    # per giver, sizes known or not: (size, tp) of the partitions it follows, smallest first
    follows: dict[tuple[int, bool], list[tuple[int, TopicPartition]]] = {
        (b, known): [] for b in givers for known in (False, True)}
    for tp, r in work.items():
        for b in r[1:]:
            if b in givers:
                follows[b, tp in sizes].append((sizes.get(tp, 0), tp))
    for entries in follows.values():
        entries.sort()
    exchanged = 0
    for p in gone:
        s, x = before[p][0], work[p][0]
        if s in work[p] or not (leads[x] > lo and leads[s] < hi):
            continue
        p_after = [s] + work[p][1:]
        if rk and distinct_racks(p_after, rk) < distinct_racks(work[p], rk):
            continue
        p_size = sizes.get(p, 0)
        scanned = 0
        for q_size, q in follows[s, p in sizes]:
            if q_size > p_size or scanned >= _GAIN_SCAN:
                break
            r = work[q]
            if s not in r[1:] or x in r:
                continue
            scanned += 1
            q_after = [x if b == s else b for b in r]
            if rk and distinct_racks(q_after, rk) < distinct_racks(r, rk):
                continue
            work[p], work[q] = p_after, q_after
            leads[x] -= 1
            leads[s] += 1
            exchanged += 1
            break
    if not exchanged:
        return after
    return {tp: tuple(r) for tp, r in work.items()}
