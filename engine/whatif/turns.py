"""Kafka's follower quota fetch by fetch: how one receiving broker's fetchers take turns.

The simulator shares a used-up follower quota fluidly (``engine.sim.physics``).
This module runs Kafka's own rule one fetch at a time, in milliseconds, for the
fetchers of one receiving broker, to say what the fluid form cannot: which
source's moves end first and how long a follower in the ISR then waits for a
turn. Read from Kafka 4.0's source (the 4.0 line, October 2024):

* ``RemoteLeaderEndPoint.buildFetch`` leaves a partition out of the fetch while
  ``shouldFollowerThrottle``: not known to be in sync
  (``PartitionFetchState.isReplicaInSync``: its lag is known and 0), listed in
  ``follower.replication.throttled.replicas`` (``quota.isThrottled``) and
  ``quota.isQuotaExceeded``. Partitions left out of a fetch session are sent
  once as "forgotten" (``FetchSessionHandler.Builder.build``: ``toForget``;
  answered at once, nothing to read); with nothing left to ask for,
  ``AbstractFetcherThread.maybeFetch`` waits ``replica.fetch.backoff.ms`` (1 s)
  on ``partitionMapCond``, which ``addPartitions`` signals (a partition added,
  or re-added at a new leader epoch, wakes the fetcher at once;
  ``removePartitions`` does not).
* A fetch that passes asks up to ``replica.fetch.max.bytes`` (1 MiB) per
  partition and ``replica.fetch.response.max.bytes`` (10 MiB) in all; the
  partitions fetched move to the end of the fetcher's order
  (``partitionStates.updateAndMoveToEnd``). The fetcher asks again as soon as the
  response is processed.
* ``ReplicaFetcherThread.processPartitionData`` records every throttled
  partition's bytes in the quota (``ReplicationQuotaManager.record``) as it
  processes the response. ``isQuotaExceeded`` is ``Sensor.checkQuotas``: a
  ``SimpleRate`` over a ``SampledStat`` of ``replication.quota.window.num`` (11)
  samples of ``replication.quota.window.size.seconds`` (1) kept in a ring of 12;
  a sample starts at the record that finds the current one a window old, a
  sample with no record for 11 windows is reset, and the rate is the samples' sum
  over the time since the oldest kept sample started, at least one window;
  exceeded when above the bound (``SampledRate`` below is exactly that).
* When a partition's moves are all in sync the controller completes the
  reassignment and bumps the leader epoch; the receiving broker applies the
  commit (``ReplicaManager.applyLocalFollowersDelta``) and re-adds the partition
  to its fetcher with its lag unknown (``AbstractFetcherThread.partitionFetchState``:
  ``lag = None``): listed, it may be fetched only when the quota is not exceeded,
  and until then its leader cannot complete acks=all writes. A partition the
  receiving broker now leads leaves its fetcher.

``run`` plays one receiving broker's fetchers through a move. ``draw`` does it
for a record of Kafka's tool (``../shared/measurements/``): every new replica on
one broker, one fetcher per source broker, and turns the outcome into what the
record's acks=all probe felt (``engine.sim.probe``, the simulator's probe, with
the simulator's rules for the other followers: refused once at the new epoch,
``engine.sim.model.refused_epoch_stall``). ``lottery`` repeats it over seeded
draws of the fetchers' timing. Times the records do not hold (how long each
source takes to answer a fetch, how far a fetcher's asks drift from exactly a
backoff apart, how long a completion takes to reach the brokers) are parameters
of a ``Timing``; ``TIMINGS`` are the ones docs/simulator.md ("Calibration")
reports, none fitted to the record.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from engine.core.partition import TopicPartition
from engine.sim.model import (
    QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE, REPLICA_FETCH_BACKOFF, REPLICA_FETCH_MAX_BYTES,
    REPLICA_FETCH_RESPONSE_MAX_BYTES, refused_epoch_stall,
)
from engine.sim.probe import probe
from engine.sim.scenario import DEFAULT_NETWORK

WINDOW_MS = int(QUOTA_WINDOW_SIZE * 1000)
BACKOFF_MS = int(REPLICA_FETCH_BACKOFF * 1000)
FORGET_MS = 1  # the fetch that only forgets the session's partitions: answered at once, nothing to read
HARNESS_POLL = 0.5  # the records' harness read the cluster every 0.5 s (engine.whatif.calibration)


class SampledRate:
    """One ``ReplicationQuotaManager`` sensor: ``SimpleRate`` over ``SampledStat`` samples, as Kafka keeps
    them (times in milliseconds, values in bytes)."""

    def __init__(self, bound: float, samples: int = QUOTA_WINDOW_NUM, window_ms: int = WINDOW_MS):
        self.bound = bound  # bytes per second
        self.samples_max = samples
        self.window_ms = window_ms
        self.samples: list[list[float]] = []  # [start, last event, value]
        self.current = 0

    def _purge(self, now: int) -> None:
        for s in self.samples:
            if now - s[1] >= self.samples_max * self.window_ms:
                s[0], s[1], s[2] = now, now, 0.0

    def record(self, now: int, value: float) -> None:
        if not self.samples:
            self.samples.append([now, now, 0.0])
        s = self.samples[self.current]
        if now - s[0] >= self.window_ms:
            self.current = (self.current + 1) % (self.samples_max + 1)
            if self.current >= len(self.samples):
                s = [now, now, 0.0]
                self.samples.append(s)
            else:
                s = self.samples[self.current]
                s[0], s[1], s[2] = now, now, 0.0
        s[2] += value
        s[1] = now

    def rate(self, now: int) -> float:
        self._purge(now)
        if not self.samples:
            self.samples.append([now, now, 0.0])
        oldest = min(s[0] for s in self.samples)
        return sum(s[2] for s in self.samples) / (max(now - oldest, self.window_ms) / 1000)

    def exceeded(self, now: int) -> bool:
        return self.rate(now) > self.bound


@dataclass(frozen=True)
class Fetcher:
    """The receiving broker's fetcher for one source broker: the partitions it copies (partition, bytes),
    the fixed part of its responses' time (the leader's handling and the follower's append, beside the
    bytes over the network), and which of its partitions the receiving broker leads once they complete."""

    leader: int
    partitions: tuple[tuple[int, int], ...]
    response_ms: int = 10
    leads_after: frozenset = frozenset()


@dataclass(frozen=True)
class Outcome:
    """Per source broker (its fetcher): when its copies were all fetched, when the receiving broker applied
    their completion (the new leader epoch), when its fetcher next fetched the followers that stay (they
    waited from the completion until then; None if none stay), and how many responses it took."""

    done_ms: Mapping[int, int]
    applied_ms: Mapping[int, int]
    served_ms: Mapping[int, int | None]
    turns: Mapping[int, int]


def run(fetchers: Sequence[Fetcher], rate: float, start_ms: int = 0, network: float = DEFAULT_NETWORK,
        apply_ms: int = 50, jitter_ms: int = 0, seed: int = 0, backoff_ms: int = BACKOFF_MS) -> Outcome:
    """Kafka's rule, fetch by fetch, for one receiving broker's fetchers (the module doc). They start
    together at ``start_ms`` (the broker adds the partitions of one request to its fetchers together, once
    their logs exist: ``controller.one_delta``), in the order given. A fetcher's response takes its
    ``response_ms`` plus its bytes over ``network`` (bytes/s); a fetcher's completion reaches the
    receiving broker ``apply_ms`` after its last copy was fetched (the leader adds the follower to the
    ISR on its next fetch, the controller completes the reassignment and commits it after
    controller.quorum.append.linger.ms, 25 ms, the brokers fetch and apply the commit); each ask after a
    backoff comes up to ``jitter_ms`` later than exactly ``backoff_ms`` (drawn from ``seed``)."""
    rnd = random.Random(seed)
    quota = SampledRate(rate)
    per_ms = network / 1000
    left = {f.leader: {p: b for p, b in f.partitions} for f in fetchers}
    order = {f.leader: [p for p, _b in f.partitions] for f in fetchers}
    spec = {f.leader: f for f in fetchers}
    phase = {f.leader: "copy" for f in fetchers}  # copy -> in sync (until applied) -> waiting -> served
    session = {f.leader: False for f in fetchers}
    done: dict[int, int] = {}
    applied: dict[int, int] = {}
    served: dict[int, int | None] = {}
    turns = {f.leader: 0 for f in fetchers}
    events = [(start_ms, i, f.leader) for i, f in enumerate(fetchers)]
    heapq.heapify(events)
    rank = {f.leader: i for i, f in enumerate(fetchers)}

    def later(t: int, leader: int) -> None:
        heapq.heappush(events, (t, rank[leader], leader))

    def refused(t: int, leader: int) -> None:
        if session[leader]:  # the partitions it fetched last time are forgotten first (one request)
            session[leader] = False
            later(t + FORGET_MS, leader)
        else:
            later(t + backoff_ms + (rnd.randint(0, jitter_ms) if jitter_ms else 0), leader)

    while events:
        t, _r, leader = heapq.heappop(events)
        f = spec[leader]
        if phase[leader] == "in sync":  # the completion is applied now: its followers are re-added, lag unknown
            applied[leader] = t
            if len(f.leads_after) == len(f.partitions):
                phase[leader], served[leader] = "served", None
                continue
            phase[leader] = "waiting"
            session[leader] = True  # it fetched them (in sync, not throttled) until now
        if phase[leader] == "served":
            continue
        if quota.exceeded(t):
            refused(t, leader)
            continue
        if phase[leader] == "waiting":  # its turn: the followers are fetched, in sync again (a few bytes)
            served[leader] = t + f.response_ms
            phase[leader] = "served"
            turns[leader] += 1
            continue
        response, fetched = 0, []
        for p in order[leader]:
            if response >= REPLICA_FETCH_RESPONSE_MAX_BYTES:
                break
            if left[leader][p] > 0:
                chunk = min(REPLICA_FETCH_MAX_BYTES, left[leader][p], REPLICA_FETCH_RESPONSE_MAX_BYTES - response)
                left[leader][p] -= chunk
                response += chunk
                fetched.append(p)
        order[leader] = [p for p in order[leader] if p not in fetched] + fetched
        end = t + f.response_ms + math.ceil(response / per_ms)
        quota.record(end, response)
        session[leader] = True
        turns[leader] += 1
        if not any(left[leader].values()):
            done[leader] = end
            phase[leader] = "in sync"
            later(end + apply_ms, leader)
        else:
            later(end, leader)
    return Outcome(done, applied, served, turns)


# --- a record of Kafka's tool ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """What the records do not hold, for ``draw``: each source's fixed response time is ``response_ms``
    plus up to ``spread_ms`` (drawn per draw), each ask after a backoff comes up to ``jitter_ms`` late,
    and a completion reaches the brokers ``apply_ms`` after its last copy was fetched."""

    name: str
    response_ms: int = 10
    spread_ms: int = 0
    jitter_ms: int = 0
    apply_ms: int = 50


TIMINGS = (
    Timing("sources answer within 5 ms of each other, asks on time", spread_ms=5),
    Timing("the same, asks up to 30 ms late", spread_ms=5, jitter_ms=30),
    Timing("sources answer up to 50 ms apart, asks up to 30 ms late", spread_ms=50, jitter_ms=30),
    Timing("the same, completions reach the brokers 150 ms later", spread_ms=50, jitter_ms=30, apply_ms=150),
)


@dataclass(frozen=True)
class Draw:
    seed: int
    waves: tuple[float, ...]  # each source's moves completed (s from the launch, as the harness saw them), sorted
    stalls: tuple[float, ...]  # per wave, in the same order: seconds its staying followers waited for a turn
    p99: float  # the probe's, seconds added
    max: float


def moves(record: dict) -> tuple[int, list[Fetcher]]:
    """The record's receiving broker and its fetchers, one per source broker (the partition's leader: the
    records' leaders were their preferred ones), with the partitions it will lead after the move."""
    added = {p: set(t) - set(c) for p, (c, t) in enumerate(zip(record["current"], record["target"])) if set(t) != set(c)}
    receivers = set().union(*added.values())
    if len(receivers) != 1 or any(len(a) != 1 for a in added.values()):
        raise ValueError("a record whose moves each add one replica, all on one broker")
    receiver = receivers.pop()
    by_leader: dict[int, list[tuple[int, int]]] = {}
    leads: dict[int, set] = {}
    for p in sorted(added):
        leader = record["current"][p][0]
        by_leader.setdefault(leader, []).append((p, int(record["partition_bytes"][p])))
        target = record["target"][p]
        if _leader_after(record["current"][p], target) == receiver:
            leads.setdefault(leader, set()).add(p)
    return receiver, [Fetcher(leader, tuple(ps), leads_after=frozenset(leads.get(leader, ())))
                      for leader, ps in sorted(by_leader.items())]


def _leader_after(current: Sequence[int], target: Sequence[int]) -> int:
    """Phase B keeps the leader if it stays, else elects the first of the target (all in sync)."""
    return current[0] if current[0] in target else target[0]


def draw(record: dict, timing: Timing, seed: int, creation_time: float = 0.1) -> Draw:
    """One run of Kafka's tool's move as its record's receiving broker's fetchers would take it, timed by
    ``timing`` and ``seed``, and what the record's probe would have felt. The copies start when the
    record's harness first saw a move (less half a read, as the simulator's twin) plus the creation of
    every new log (``creation_time`` each, the quiet machine's)."""
    rnd = random.Random(seed)
    receiver, fetchers = moves(record)
    fetchers = [Fetcher(f.leader, f.partitions, timing.response_ms + rnd.randint(0, timing.spread_ms),
                        f.leads_after) for f in fetchers]
    logs = sum(len(f.partitions) for f in fetchers)
    start = record["first_move_seen_s"] - HARNESS_POLL / 2 + logs * creation_time
    out = run(fetchers, float(record["throttle"]), round(start * 1000), apply_ms=timing.apply_ms,
              jitter_ms=timing.jitter_ms, seed=rnd.randrange(1 << 30))
    topic = record["topic"]
    n = record["partitions"]
    tps = [TopicPartition(topic, p) for p in range(n)]
    leaders = [(0.0, tps[p], record["current"][p][0]) for p in range(n)]
    blocked = []
    refused_stall = refused_epoch_stall(REPLICA_FETCH_BACKOFF)
    for f in fetchers:
        applied = out.applied_ms[f.leader] / 1000
        served = out.served_ms[f.leader]
        for p, _b in f.partitions:
            # the followers that stay and are not listed are refused once at the new epoch (the simulator's
            # rule, engine.sim.controller); the receiving broker's, listed, waits for its fetcher's turn
            end = applied + refused_stall
            if p in f.leads_after:
                leaders.append((applied, tps[p], receiver))
            elif served is not None:
                end = max(end, served / 1000)
            blocked.append((tps[p], applied, end))
    leaders.sort(key=lambda x: x[0])
    finish = _seen(max(out.applied_ms.values()) / 1000)  # the probe's window ends when the harness saw done
    result = probe(tps, float(record["probe_rate"]), finish, blocked, leaders)
    order = sorted(fetchers, key=lambda f: out.applied_ms[f.leader])
    waves = tuple(_seen(out.applied_ms[f.leader] / 1000) for f in order)
    stalls = tuple(0.0 if out.served_ms[f.leader] is None
                   else (out.served_ms[f.leader] - out.applied_ms[f.leader]) / 1000 for f in order)
    return Draw(seed, waves, stalls, result.p99, result.max)


def _seen(t: float) -> float:
    return math.ceil(t / HARNESS_POLL - 1e-9) * HARNESS_POLL


def lottery(record: dict, timing: Timing, draws: int = 40) -> list[Draw]:
    """``draw`` for seeds 0 to ``draws`` - 1."""
    return [draw(record, timing, seed) for seed in range(draws)]


@dataclass(frozen=True)
class Summary:
    timing: Timing
    draws: int
    first_wave: tuple[float, float, float]  # the first source's moves done, s from the launch: 10th, 50th, 90th percentile
    last_wave: tuple[float, float, float]
    p99: tuple[float, float, float]  # ms
    max: tuple[float, float, float]  # ms
    p99_rank: float  # fraction of the draws below the record's p99
    max_rank: float
    within: int  # draws within ``tolerance`` of the record on both p99 and max
    tolerance: float = field(default=0.20)


def summary(record: dict, timing: Timing, draws: int = 40, tolerance: float = 0.20) -> Summary:
    ds = lottery(record, timing, draws)
    m = record["probe_move"]
    p99s = sorted(d.p99 * 1000 for d in ds)
    maxes = sorted(d.max * 1000 for d in ds)

    def q(xs: list[float]) -> tuple[float, float, float]:
        xs = sorted(xs)
        return tuple(xs[min(len(xs) - 1, int(f * len(xs)))] for f in (0.1, 0.5, 0.9))

    within = sum(1 for d in ds if abs(d.p99 * 1000 - m["p99_ms"]) <= tolerance * m["p99_ms"]
                 and abs(d.max * 1000 - m["max_ms"]) <= tolerance * m["max_ms"])
    return Summary(
        timing, draws, q([d.waves[0] for d in ds]), q([d.waves[-1] for d in ds]), q(p99s), q(maxes),
        sum(1 for x in p99s if x < m["p99_ms"]) / draws, sum(1 for x in maxes if x < m["max_ms"]) / draws,
        within, tolerance)


def markdown(record: dict, summaries: Sequence[Summary]) -> str:
    """The table docs/simulator.md shows (``python -m engine.whatif.calibration DIR --turns``)."""
    m = record["probe_move"]
    done = sorted(set(x for x in record["partition_done_s"] if x > 0.1))
    lines = [
        f"| Kafka's rule, {summaries[0].draws} seeded draws | first source done | last source done | "
        f"probe p99 (10th / 50th / 90th percentile) | probe max | draws below the record's p99 / max | "
        f"draws within {round(summaries[0].tolerance * 100)} % of both |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| measured | {done[0]:g} s | {done[-1]:g} s | {m['p99_ms']:,.0f} ms | {m['max_ms']:,.0f} ms | | |",
    ]
    for s in summaries:
        lines.append(
            f"| {s.timing.name} | {_q(s.first_wave, 's')} | {_q(s.last_wave, 's')} | {_q(s.p99, 'ms')} | "
            f"{_q(s.max, 'ms')} | {s.p99_rank:.0%} / {s.max_rank:.0%} | {s.within} of {s.draws} |")
    return "\n".join(lines)


def _q(v: tuple[float, float, float], unit: str) -> str:
    if unit == "ms":
        return " / ".join(f"{x:,.0f}" for x in v) + " ms"
    return " / ".join(f"{x:g}" for x in v) + " s"
