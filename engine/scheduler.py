"""KIP-435 batch scheduler: which ready steps start next, under the limits.

Limits (``engine.limits``): P partitions with a step in flight, L steps in
flight that move a leader, A replica additions in flight cluster-wide, and
per-broker caps on incoming copies (a broker in NR) and outgoing copies (the
leader that feeds NR). No limit is ever exceeded: the planner never plans a
step that could not fit on its own (|NR| <= the outgoing cap and A, the
min.insync catch-up included), and a step planned before a limit was lowered
is planned again when it is reached.

Order. Leader-moving steps first (up to L), then the others (KIP-435). Within
each class, partitions that already started their reassignment ("continuing")
go before fresh ones, so the cluster finishes what it began. Then requests
take turns: each request has a rank, the steps it has started plus where it
joined (a request accepted while others run starts level with the least
served of them), and the lowest rank goes first, so a small urgent request is
interleaved with a decommission already running instead of waiting behind it
(start-time fair queueing). Within a request, first come first served.

No starvation. When the highest-priority step that could start is refused by
a per-broker cap or by A (it needs two copies out of a broker that has one
free, say), the capacity it needs is reserved for it for the rest of the
decision: younger steps may not take it, so it starts as soon as enough is
free, however many smaller steps keep arriving.

Cost. Ready partitions sit in *buckets* keyed by everything feasibility depends
on (leader move, source broker, new-replica brokers), one lane per request and
readiness class. All partitions of a lane are admitted or refused together, so a
decision looks at each lane's head once and walks into a lane only while it
admits steps: O(lanes + k log lanes) for k steps chosen, never a scan of the
queue. A decision with P already full returns at once.

Everything here is an immutable value; the ready index lives in the state and
is changed only by ``engine.state.apply``.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterator, NamedTuple

import immutables

from engine.limits import Limits
from engine.partition import Replicas, TopicPartition
from engine.step import Step


WEIGHT_UNITS = 8
"""A move's weight against the per-broker move caps, in eighths of a move: a copy that takes at least
``full_move_seconds`` at the throttle rate is a whole move (8); a shorter one its share, at least 1/8."""


class SchedulingKey(NamedTuple):
    """What a ready step needs: the partitions in one bucket are interchangeable."""

    moves_leader: bool
    source: int | None
    nr: Replicas  # sorted
    weight: int = WEIGHT_UNITS  # of each copy against the per-broker caps, in eighths of a move

    @classmethod
    def of(cls, step: Step, weight: int = WEIGHT_UNITS) -> "SchedulingKey":
        return cls(step.moves_leader, step.source, tuple(sorted(step.nr)), weight)


CONTINUING, FRESH = 0, 1  # lanes of a bucket, in priority order


class Lane(NamedTuple):
    """Persistent FIFO of (seq, tp): positions head..tail-1, gaps allowed."""

    items: immutables.Map = immutables.Map()
    head: int = 0
    tail: int = 0

    def push(self, entry: tuple[int, TopicPartition]) -> tuple["Lane", int]:
        return Lane(self.items.set(self.tail, entry), self.head, self.tail + 1), self.tail

    def delete(self, pos: int) -> "Lane":
        items = self.items.delete(pos)
        head = self.head
        if pos == head:
            head = self._next(items, head)
        return Lane(items, head, self.tail)

    def _next(self, items: immutables.Map, pos: int) -> int:
        pos += 1
        while pos < self.tail and pos not in items:
            pos += 1
        return pos

    def next_after(self, pos: int) -> int:
        return self._next(self.items, pos)

    def __len__(self) -> int:
        return len(self.items)


class Slot(NamedTuple):
    """Where a ready partition sits in the index (kept on the partition)."""

    key: SchedulingKey
    lane: int
    pos: int
    request_id: str = ""


class ReadyIndex(NamedTuple):
    buckets: immutables.Map = immutables.Map()  # SchedulingKey -> Map(request id -> (Lane, Lane))
    size: int = 0

    def add(self, key: SchedulingKey, lane: int, seq: int, tp: TopicPartition,
            request_id: str = "") -> tuple["ReadyIndex", Slot]:
        bucket = self.buckets.get(key) or immutables.Map()
        lanes = bucket.get(request_id) or (Lane(), Lane())
        new_lane, pos = lanes[lane].push((seq, tp))
        lanes = (new_lane, lanes[1]) if lane == CONTINUING else (lanes[0], new_lane)
        return (ReadyIndex(self.buckets.set(key, bucket.set(request_id, lanes)), self.size + 1),
                Slot(key, lane, pos, request_id))

    def remove(self, slot: Slot) -> "ReadyIndex":
        bucket = self.buckets[slot.key]
        lanes = bucket[slot.request_id]
        new_lane = lanes[slot.lane].delete(slot.pos)
        lanes = (new_lane, lanes[1]) if slot.lane == CONTINUING else (lanes[0], new_lane)
        if not len(lanes[0]) and not len(lanes[1]):
            bucket = bucket.delete(slot.request_id)
        else:
            bucket = bucket.set(slot.request_id, lanes)
        buckets = self.buckets.set(slot.key, bucket) if len(bucket) else self.buckets.delete(slot.key)
        return ReadyIndex(buckets, self.size - 1)

    def __iter__(self) -> Iterator[TopicPartition]:  # type: ignore[override]
        for bucket in self.buckets.values():
            for lanes in bucket.values():
                for lane in lanes:
                    for _seq, tp in lane.items.values():
                        yield tp


class InFlight(NamedTuple):
    """Counters of the steps in flight, one per limit."""

    partitions: int = 0
    leader_moves: int = 0
    additions: int = 0
    incoming: immutables.Map = immutables.Map()  # broker -> copies into it, in WEIGHT_UNITS
    outgoing: immutables.Map = immutables.Map()  # broker -> copies out of it, in WEIGHT_UNITS

    def plus(self, step: Step, sign: int = 1, weight: int = WEIGHT_UNITS) -> "InFlight":
        incoming, outgoing = self.incoming, self.outgoing
        if step.nr:
            with incoming.mutate() as m:
                for b in step.nr:
                    _bump(m, b, sign * weight)
                incoming = m.finish()
            with outgoing.mutate() as m:
                _bump(m, step.source, sign * weight * len(step.nr))
                outgoing = m.finish()
        return InFlight(
            self.partitions + sign,
            self.leader_moves + (sign if step.moves_leader else 0),
            self.additions + sign * len(step.nr),
            incoming,
            outgoing,
        )

    def minus(self, step: Step, weight: int = WEIGHT_UNITS) -> "InFlight":
        return self.plus(step, -1, weight)


def _bump(m, key, delta: int) -> None:
    value = m.get(key, 0) + delta
    if value:
        m[key] = value
    else:
        del m[key]


A = "additions"  # the cluster-wide cap on replica additions, as a resource


def refusal(c: InFlight, limits: Limits, key: SchedulingKey) -> object | None:
    """What stops one more step with ``key`` from starting given the counters ``c``: ``None`` (it
    may start), ``"P"``, ``"L"``, ``A`` or the per-broker resource ``("in", b)`` / ``("out", b)``."""
    if c.partitions >= limits.max_partitions_in_flight:
        return "P"
    if key.moves_leader and c.leader_moves >= limits.max_leader_moves_in_flight:
        return "L"
    n = len(key.nr)
    if n:
        if c.additions + n > limits.max_replica_additions_in_flight:
            return A
        w = key.weight
        cap_in = limits.max_incoming_moves_per_broker * WEIGHT_UNITS
        for b in key.nr:
            if c.incoming.get(b, 0) + w > cap_in:
                return ("in", b)
        if c.outgoing.get(key.source, 0) + n * w > limits.max_outgoing_moves_per_broker * WEIGHT_UNITS:
            return ("out", key.source)
    return None


def admits(c: InFlight, limits: Limits, key: SchedulingKey) -> bool:
    """Whether one more step with ``key`` may start given the counters ``c``."""
    return refusal(c, limits, key) is None


def oversized(limits: Limits, key: SchedulingKey) -> bool:
    """A step that could never start under these limits, even alone (planned before they shrank)."""
    n = len(key.nr)
    return n > limits.max_replica_additions_in_flight or n > limits.max_outgoing_moves_per_broker


def resources(key: SchedulingKey) -> set:
    """The capacity a step with ``key`` takes: its copies' brokers and the cluster-wide additions
    (any step that copies takes some of those)."""
    if not key.nr:
        return set()
    return {A, ("out", key.source), *(("in", b) for b in key.nr)}


# --- a decision ------------------------------------------------------------


class Start(NamedTuple):
    tp: TopicPartition
    step: Step
    weight: int = WEIGHT_UNITS


class Requeue(NamedTuple):
    """The partition's next step changed since it became ready (new observation)."""

    tp: TopicPartition
    step: Step


class Hold(NamedTuple):
    """The partition cannot progress now (or is done): the caller decides what it is."""

    tp: TopicPartition
    result: object  # step.Waiting or step.Done


Decision = Start | Requeue | Hold

Replan = Callable[[TopicPartition], object]  # -> Step | Waiting | Done
Rank = Callable[[str], int]  # request id -> its rank (steps started + where it joined)
Weigh = Callable[[TopicPartition, Step], int]  # -> the step's weight, in WEIGHT_UNITS


def next_batch(index: ReadyIndex, in_flight: InFlight, limits: Limits, replan: Replan,
               rank: Rank = lambda _rid: 0, weigh: Weigh = lambda _tp, _step: WEIGHT_UNITS) -> list[Decision]:
    """Choose the steps to start now (the module doc has the order and the rules).

    ``replan(tp)`` returns the partition's next step from the latest observation;
    a partition whose step changed since it was queued is re-queued (or held)
    instead of started, so a stale plan never runs. ``rank(request_id)`` orders
    requests (lowest first); it grows by one per step a request starts here.
    """
    if in_flight.partitions >= limits.max_partitions_in_flight:
        return []
    started: dict[str, int] = {}

    def priority(key: SchedulingKey, lane_no: int, rid: str, seq: int) -> tuple:
        return (0 if key.moves_leader else 1, lane_no, rank(rid) + started.get(rid, 0), seq)

    heads: list[tuple[tuple, SchedulingKey, str, int, int]] = []
    for key, bucket in index.buckets.items():
        for rid, lanes in bucket.items():
            for lane_no in (CONTINUING, FRESH):
                lane = lanes[lane_no]
                if lane.head < lane.tail:
                    seq = lane.items[lane.head][0]
                    heads.append((priority(key, lane_no, rid, seq), key, rid, lane_no, lane.head))
    heapq.heapify(heads)
    c = in_flight
    reserved: set = set()
    out: list[Decision] = []
    while heads and c.partitions < limits.max_partitions_in_flight:
        prio, key, rid, lane_no, pos = heapq.heappop(heads)
        lane = index.buckets[key][rid][lane_no]
        seq, tp = lane.items[pos]
        now = priority(key, lane_no, rid, seq)
        if now != prio:  # its request started steps since: take its turn again later
            heapq.heappush(heads, (now, key, rid, lane_no, pos))
            continue
        why = refusal(c, limits, key)
        if why is None and reserved & resources(key):
            why = "reserved"
        if why is not None and not oversized(limits, key):
            if why not in ("P", "L", "reserved") and not reserved:
                # the oldest blocked step keeps its brokers' capacity (and the cluster-wide additions,
                # if those are what it lacks), so no younger step can take it first
                reserved = {r for r in resources(key) if r != A or why == A}
            continue  # the whole lane waits for the next decision
        result = replan(tp)
        if isinstance(result, Step):
            new_key = SchedulingKey.of(result, weigh(tp, result))
            if new_key == key and why is None:
                out.append(Start(tp, result, key.weight))
                c = c.plus(result, 1, key.weight)
                started[rid] = started.get(rid, 0) + 1
            elif new_key != key:
                out.append(Requeue(tp, result))
            else:
                continue  # still too big for the limits: it waits until they are raised
        else:
            out.append(Hold(tp, result))
        nxt = lane.next_after(pos)
        if nxt < lane.tail:
            heapq.heappush(heads, (priority(key, lane_no, rid, lane.items[nxt][0]), key, rid, lane_no, nxt))
    return out
