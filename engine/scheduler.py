"""KIP-435 batch scheduler: which ready steps start next, under the limits.

Limits (``engine.limits``): P partitions with a step in flight, L steps in
flight that move a leader, A replica additions in flight cluster-wide, and
per-broker caps on incoming copies (a broker in NR) and outgoing copies (the
leader that feeds NR).

Order. Leader-moving steps first (up to L), then the others (KIP-435). Within
each class, partitions that already started their reassignment ("continuing")
go before fresh ones, so the cluster finishes what it began: fewer partitions
sit in a transitional state with an extra replica on disk. Ties break by the
time the partition became ready (FIFO), so no partition starves: every ready
partition eventually becomes the oldest of its class, and a partition that is
blocked by a busy broker keeps its place for the next decision.

Cost. Ready partitions sit in *buckets* keyed by everything feasibility depends
on (leader move, source broker, new-replica brokers). All partitions in a
bucket are admitted or refused together, so a decision looks at each bucket's
head once and walks into a bucket only while it admits steps:
O(buckets + k log buckets) for k steps chosen, never a scan of the queue. The
number of buckets is bounded by broker combinations, not by partitions.

A step larger than a cap on its own (the min.insync catch-up may add more than
R replicas) is admitted only when nothing else holds that cap, so it cannot
deadlock and the cap is exceeded by that one step alone.

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


class SchedulingKey(NamedTuple):
    """What a ready step needs: the partitions in one bucket are interchangeable."""

    moves_leader: bool
    source: int | None
    nr: Replicas  # sorted

    @classmethod
    def of(cls, step: Step) -> "SchedulingKey":
        return cls(step.moves_leader, step.source, tuple(sorted(step.nr)))


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


class ReadyIndex(NamedTuple):
    buckets: immutables.Map = immutables.Map()  # SchedulingKey -> (Lane, Lane)
    size: int = 0

    def add(self, key: SchedulingKey, lane: int, seq: int, tp: TopicPartition) -> tuple["ReadyIndex", Slot]:
        lanes = self.buckets.get(key) or (Lane(), Lane())
        new_lane, pos = lanes[lane].push((seq, tp))
        lanes = (new_lane, lanes[1]) if lane == CONTINUING else (lanes[0], new_lane)
        return ReadyIndex(self.buckets.set(key, lanes), self.size + 1), Slot(key, lane, pos)

    def remove(self, slot: Slot) -> "ReadyIndex":
        lanes = self.buckets[slot.key]
        new_lane = lanes[slot.lane].delete(slot.pos)
        lanes = (new_lane, lanes[1]) if slot.lane == CONTINUING else (lanes[0], new_lane)
        if not len(lanes[0]) and not len(lanes[1]):
            return ReadyIndex(self.buckets.delete(slot.key), self.size - 1)
        return ReadyIndex(self.buckets.set(slot.key, lanes), self.size - 1)

    def __iter__(self) -> Iterator[TopicPartition]:  # type: ignore[override]
        for lanes in self.buckets.values():
            for lane in lanes:
                for _seq, tp in lane.items.values():
                    yield tp


class InFlight(NamedTuple):
    """Counters of the steps in flight, one per limit."""

    partitions: int = 0
    leader_moves: int = 0
    additions: int = 0
    incoming: immutables.Map = immutables.Map()  # broker -> copies into it
    outgoing: immutables.Map = immutables.Map()  # broker -> copies out of it

    def plus(self, step: Step, sign: int = 1) -> "InFlight":
        incoming, outgoing = self.incoming, self.outgoing
        if step.nr:
            with incoming.mutate() as m:
                for b in step.nr:
                    _bump(m, b, sign)
                incoming = m.finish()
            with outgoing.mutate() as m:
                _bump(m, step.source, sign * len(step.nr))
                outgoing = m.finish()
        return InFlight(
            self.partitions + sign,
            self.leader_moves + (sign if step.moves_leader else 0),
            self.additions + sign * len(step.nr),
            incoming,
            outgoing,
        )

    def minus(self, step: Step) -> "InFlight":
        return self.plus(step, -1)


def _bump(m, key, delta: int) -> None:
    value = m.get(key, 0) + delta
    if value:
        m[key] = value
    else:
        del m[key]


def admits(c: InFlight, limits: Limits, key: SchedulingKey) -> bool:
    """Whether one more step with ``key`` may start given the counters ``c``."""
    if c.partitions >= limits.max_partitions_in_flight:
        return False
    if key.moves_leader and c.leader_moves >= limits.max_leader_moves_in_flight:
        return False
    n = len(key.nr)
    if n:
        if c.additions and c.additions + n > limits.max_replica_additions_in_flight:
            return False
        cap_in = limits.max_incoming_moves_per_broker
        for b in key.nr:
            if c.incoming.get(b, 0) >= cap_in:
                return False
        out = c.outgoing.get(key.source, 0)
        if out and out + n > limits.max_outgoing_moves_per_broker:
            return False
    return True


# --- a decision ------------------------------------------------------------


class Start(NamedTuple):
    tp: TopicPartition
    step: Step


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


def next_batch(index: ReadyIndex, in_flight: InFlight, limits: Limits, replan: Replan) -> list[Decision]:
    """Choose the steps to start now.

    ``replan(tp)`` returns the partition's next step from the latest
    observation; a partition whose step changed since it was queued is
    re-queued (or held) instead of started, so a stale plan never runs.
    """
    heads: list[tuple[tuple[int, int, int], SchedulingKey, int, int]] = []
    for key, lanes in index.buckets.items():
        for lane_no in (CONTINUING, FRESH):
            lane = lanes[lane_no]
            if lane.head < lane.tail:
                seq = lane.items[lane.head][0]
                heads.append(((0 if key.moves_leader else 1, lane_no, seq), key, lane_no, lane.head))
    heapq.heapify(heads)
    c = in_flight
    out: list[Decision] = []
    while heads and c.partitions < limits.max_partitions_in_flight:
        _prio, key, lane_no, pos = heapq.heappop(heads)
        if not admits(c, limits, key):
            continue  # the whole bucket waits for the next decision
        lane = index.buckets[key][lane_no]
        _seq, tp = lane.items[pos]
        result = replan(tp)
        if isinstance(result, Step):
            if SchedulingKey.of(result) == key:
                out.append(Start(tp, result))
                c = c.plus(result)
            else:
                out.append(Requeue(tp, result))
        else:
            out.append(Hold(tp, result))
        nxt = lane.next_after(pos)
        if nxt < lane.tail:
            heapq.heappush(heads, ((0 if key.moves_leader else 1, lane_no, lane.items[nxt][0]), key, lane_no, nxt))
    return out
