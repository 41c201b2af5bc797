"""What a producer feels of a move: an acks=all probe producer, computed from the simulated run.

The probe is the one of the measured runs (docs/simulator.md, "Calibration"):
``rate`` messages per second, round robin over every partition of the
cluster (message k at k / rate to the k-th partition modulo their number, in
topic-partition order), acks=all, no batching delay. A message is complete
when every member of its partition's ISR has fetched it; while a partition
cannot complete acks=all writes (``Stats.blocked_log``: no leader, fewer
in-sync replicas than min.insync.replicas, or a follower in the ISR that does
not fetch) its messages wait for the end of that interval.

Head-of-line blocking: the producer has one connection to each leader, and
a Kafka broker handles the requests of one connection one at a time, in
order, answering each before reading the next (Kafka's protocol guide: "the
server guarantees that on a single TCP connection, requests will be processed
in the order they are sent and responses will return in that order"; an
acks=all produce request is answered only when its writes are complete). So a
message to one partition that waits holds up every later message to the same
leader: a message completes no earlier than every message sent before it on
its connection.

The latency counted is what the move adds: an unaffected message counts 0
(the measured baseline, p99 6-8 ms, is not modelled). Messages are spread
evenly over a connection's share of partitions (a fluid count) except the
first message of a blocked partition, which is placed exactly: a short stall
between two of its messages costs nothing.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from engine.core.partition import TopicPartition


@dataclass(frozen=True)
class ProbeResult:
    messages: float  # sent during the move
    p50: float  # seconds of latency the move added, per message
    p99: float
    max: float
    blocked_seconds: float  # seconds during which at least one partition could not complete acks=all writes
    blocked_partition_seconds: float  # the same, summed over partitions
    per_second: tuple[float, ...] = ()  # the most latency added to a message sent in each second from 0


NOTHING = ProbeResult(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


class _Leaders:
    """Each partition's leader over time, and how many partitions each broker leads."""

    def __init__(self, leader_log: Sequence[tuple[float, TopicPartition, int | None]]):
        self.changes: dict[TopicPartition, tuple[list[float], list]] = {}
        counts: dict[int, int] = {}
        steps: dict[int, tuple[list[float], list[int]]] = {}
        current: dict[TopicPartition, int | None] = {}
        for t, tp, leader in leader_log:
            times, leaders = self.changes.setdefault(tp, ([], []))
            times.append(t)
            leaders.append(leader)
            old = current.get(tp)
            current[tp] = leader
            for b, d in ((old, -1), (leader, 1)):
                if b is not None:
                    counts[b] = counts.get(b, 0) + d
                    ts, cs = steps.setdefault(b, ([], []))
                    if ts and ts[-1] == t:
                        cs[-1] = counts[b]
                    else:
                        ts.append(t)
                        cs.append(counts[b])
        self.steps = steps

    def at(self, tp: TopicPartition, t: float) -> int | None:
        times, leaders = self.changes.get(tp, ((), ()))
        i = bisect.bisect_right(times, t) - 1
        return leaders[i] if i >= 0 else None

    def led(self, broker: int, t: float) -> int:
        times, counts = self.steps.get(broker, ((), ()))
        i = bisect.bisect_right(times, t) - 1
        return counts[i] if i >= 0 else 0


def probe(partitions: Sequence[TopicPartition], rate: float, end: float,
          blocked: Sequence[tuple[TopicPartition, float, float]],
          leader_log: Sequence[tuple[float, TopicPartition, int | None]],
          busy: Mapping[int, Sequence[tuple[float, float]]] | None = None) -> ProbeResult:
    """The probe's latencies for messages sent in [0, ``end``]; ``blocked``: (partition, start, end)
    intervals during which it could not complete acks=all writes; ``leader_log``: (time, partition,
    leader), oldest first, every partition's leader at time 0 included; ``busy``: broker -> (start,
    end) windows during which a produce request it receives waits until ``end`` (``engine.sim.load``:
    the engine's requests queued ahead of it)."""
    n = len(partitions)
    blocked_seconds = union_length((a, b) for _tp, a, b in blocked)
    partition_seconds = sum(b - a for _tp, a, b in blocked)
    if not n or rate <= 0 or end <= 0:
        return ProbeResult(0.0, 0.0, 0.0, 0.0, blocked_seconds, partition_seconds)
    ordered = sorted(partitions)
    index = {tp: i for i, tp in enumerate(ordered)}
    leaders = _Leaders(leader_log)
    pieces: list[tuple[float, float, float]] = []  # (lowest latency, highest, messages spread evenly between)
    segments: list[tuple[float, float, float]] = []  # (first sent, last sent, completed) of waiting messages
    windows: dict[int, list[tuple[float, float]]] = {}
    for broker, ws in (busy or {}).items():
        for a, b in ws:
            if a > end:
                continue
            first = _first_led(ordered, leaders, broker, a, b, rate)
            if first is not None:
                windows.setdefault(broker, []).append((first, b))
    for tp, a, b in blocked:
        i = index.get(tp)
        if i is None:
            continue
        j = max(0, math.ceil((a * rate - i) / n - 1e-9))
        first = (i + j * n) / rate  # its first message at or after the start of the interval
        if first >= b or first > end:
            continue
        leader = leaders.at(tp, first)
        if leader is None:  # nowhere to send: only its own messages wait
            last_j = math.floor((min(b, end) * rate - i) / n + 1e-9)
            last = (i + last_j * n) / rate
            if last >= b:
                last_j -= 1
                last = (i + last_j * n) / rate
            pieces.append((b - last, b - first, float(last_j - j + 1)))
            segments.append((first, last, b))
            continue
        windows.setdefault(leader, []).append((first, b))
    for leader, ws in windows.items():
        ws.sort()
        done = -math.inf  # a message sent now completes no earlier than this
        for k, (start, stop) in enumerate(ws):
            done = max(done, stop)
            seg_end = min(ws[k + 1][0] if k + 1 < len(ws) else math.inf, done, end)
            if seg_end <= start:
                continue
            share = leaders.led(leader, start) / n
            count = (seg_end - start) * rate * share
            if count > 0:
                pieces.append((done - seg_end, done - start, count))
                segments.append((start, seg_end, done))
    total = end * rate
    return _summary(pieces, total, blocked_seconds, partition_seconds, _per_second(segments, end))


def _first_led(ordered: Sequence[TopicPartition], leaders: "_Leaders", broker: int, a: float, b: float,
               rate: float) -> float | None:
    """When the probe first sends to a partition ``broker`` leads, at or after ``a`` and before ``b``."""
    n = len(ordered)
    k = max(0, math.ceil(a * rate - 1e-9))
    for _ in range(n):
        t = k / rate
        if t >= b:
            return None
        if leaders.at(ordered[k % n], t) == broker:
            return t
        k += 1
    return None


def _per_second(segments: Sequence[tuple[float, float, float]], end: float) -> tuple[float, ...]:
    """The most latency of a message sent in each whole second of [0, ``end``): a waiting message's
    latency falls as it is sent later, so a segment's highest in a second is at its first send in it."""
    out = [0.0] * max(0, math.ceil(end - 1e-9))
    for start, stop, done in segments:
        for sec in range(max(0, math.floor(start)), min(len(out), math.floor(stop) + 1)):
            first = max(start, float(sec))
            if first <= stop and first < sec + 1:
                out[sec] = max(out[sec], done - first)
    return tuple(out)


def _summary(pieces, total, blocked_seconds, partition_seconds, per_second=()) -> ProbeResult:
    waiting = sum(c for _lo, _hi, c in pieces)
    total = max(total, waiting)

    def above(x: float) -> float:
        m = 0.0
        for lo, hi, c in pieces:
            if hi <= x:
                continue
            m += c if lo >= x or hi == lo else c * (hi - x) / (hi - lo)
        return m

    def quantile(q: float) -> float:
        allowed = (1 - q) * total
        if waiting <= allowed:
            return 0.0
        lo, hi = 0.0, max(h for _l, h, _c in pieces)
        for _ in range(60):
            mid = (lo + hi) / 2
            if above(mid) > allowed:
                lo = mid
            else:
                hi = mid
        return hi

    largest = max((hi for _lo, hi, c in pieces if c > 0), default=0.0)
    return ProbeResult(total, quantile(0.5), quantile(0.99), largest, blocked_seconds, partition_seconds,
                       tuple(per_second))
