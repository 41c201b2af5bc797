"""The simulated cluster's state: immutable values, changed only by ``controller`` and ``physics``.

Terms are the controller's: RS (``replicas``: while a reassignment is in
progress, TRS followed by the removing replicas, as KRaft orders them), AR
(``adding``), RR (``removing``), ISR, leader.

Every replica out of the ISR has an entry in ``lags``: how many bytes it is
behind its leader. A new replica starts ``size`` bytes behind (it copies the
whole retained log); a replica whose broker went down falls behind by what is
produced meanwhile. A replica joins the ISR when its lag reaches zero. Between
two events every rate is constant, so a lag is kept as (bytes at ``since``,
``drift`` in bytes/s) and read at any time with ``Lag.at``: advancing the clock
costs nothing until something happens.

What producers feel (docs/simulator.md has the sources):

* ``fetch``: followers in the ISR that do not fetch right now. After a leader
  epoch bump a follower whose broker applies the change no later than the
  leader's is ``refused`` (UNKNOWN_LEADER_EPOCH: its fetcher leaves the
  partition out for replica.fetch.backoff.ms), one whose broker applies it
  later is ``fenced`` until it has (the leader refuses fetches at the old
  epoch); then, if it is listed in its broker's
  ``follower.replication.throttled.replicas`` and that broker has a rate,
  ``fresh``: its fetcher does not know it is in sync, so the follower quota
  applies to it and it waits for a turn. Meanwhile the leader cannot complete
  acks=all writes for the partition.
* ``ready``: a new replica, or a copy whose epoch changed, fetches only from
  this time on (its broker applies metadata changes in order: ``meta_free``).
* ``quotas``: every broker's leader and follower quota as token buckets (the
  fluid form of Kafka's sampled rate).

Derived values kept with the state so the physics never scans every
partition: ``hosted`` (broker -> partitions with a replica on it), the
in-sync traffic each broker carries (``isr_in``/``isr_out``: produce into
leaders, replication to in-sync followers), which takes its share of the
network before any copy does, and, from the last allocation of bandwidth,
the time of the next event. ``dirty`` says the allocation must be redone.
"""

from __future__ import annotations

from typing import Collection, NamedTuple

import immutables

from engine.core.partition import PartitionState, Replicas, TopicInfo, TopicPartition
from engine.core.throttles import RateRead, ThrottledReplica, ThrottleSet, read_back

REPLICA_LAG_TIME_MAX = 30.0  # replica.lag.time.max.ms: a follower behind this long leaves the ISR
JOIN_EPSILON = 1.0  # bytes: a replica this close to its leader has caught up
# Kafka's replication quota (ReplicationQuotaManager): a SimpleRate over replication.quota.window.num
# samples of replication.quota.window.size.seconds each; the rate is measured from the oldest kept sample,
# over at least one sample window.
QUOTA_WINDOW_NUM = 11
QUOTA_WINDOW_SIZE = 1.0
QUOTA_WINDOW = QUOTA_WINDOW_NUM * QUOTA_WINDOW_SIZE  # seconds of history a recording quota remembers
# The follower's fetch (ReplicaFetcherThread, num.replica.fetchers = 1: one fetcher per source broker)
REPLICA_FETCH_MAX_BYTES = 1_048_576  # replica.fetch.max.bytes: per partition per response
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10_485_760  # replica.fetch.response.max.bytes: per response
REPLICA_FETCH_BACKOFF = 1.0  # replica.fetch.backoff.ms: a fetcher with nothing it may fetch waits this long
REPLICA_FETCH_WAIT_MAX = 0.5  # replica.fetch.wait.max.ms: a leader holds a fetch without new data this long
# A follower quota's rate as it delivers it: a refused fetcher backs off replica.fetch.backoff.ms, and the
# quota may open meanwhile with no one asking. Kafka's rule fetch by fetch (``python -m benchmarks.quota``)
# copies 1.079-1.082 x bytes / rate with one or two fetchers of one partition each (kreassign's steps),
# 1.048 with three of six (Kafka's tool on the measured move): the fluid quota lets rate / (1 + this)
# through once used up.
DEFAULT_FOLLOWER_QUOTA_LOSS = 0.08


def refused_epoch_stall(backoff: float) -> float:
    """How long a follower refused UNKNOWN_LEADER_EPOCH (it applied a leader epoch change before its
    leader did) does not fetch the partition: its fetcher leaves it out for replica.fetch.backoff.ms
    (``backoff``), then takes it up again with its next request. The one in progress is held
    replica.fetch.wait.max.ms (no new data reaches a leader whose writes wait: each producer's later
    requests queue behind the held one on its connection), so on average half of that later
    (docs/simulator.md, "The epoch bump")."""
    return backoff + REPLICA_FETCH_WAIT_MAX / 2
# How long a broker takes to create the log of a new replica (its metadata changes are applied one at a
# time, in order). Not a Kafka setting: fitted to a measured run, see docs/simulator.md ("Calibration").
DEFAULT_REPLICA_CREATION_TIME = 0.1
# One round trip of the engine's requests to the cluster (an admin request; a log append takes
# APPEND_ROUND_TRIPS). Not a Kafka setting: fitted to the measured runs, see docs/simulator.md ("Calibration").
DEFAULT_REQUEST_TIME = 0.03


class SimBroker(NamedTuple):
    id: int
    rack: str | None
    network_in: float  # bytes/s it can receive
    network_out: float  # bytes/s it can send
    alive: bool = True
    slow: float = 1.0  # fraction of its network left (a slow broker)

    @property
    def capacity_in(self) -> float:
        return self.network_in * self.slow if self.alive else 0.0

    @property
    def capacity_out(self) -> float:
        return self.network_out * self.slow if self.alive else 0.0


class SimPartition(NamedTuple):
    replicas: Replicas  # RS
    isr: frozenset[int]
    leader: int | None
    size: int  # bytes in the log; retention removes what producers add
    produce_rate: float  # bytes/s
    adding: Replicas = ()  # AR
    removing: Replicas = ()  # RR
    leader_epoch: int = 0  # KRaft's: bumped when the leader changes or the replica set loses a member (controller.put)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def out_of_sync(self) -> set[int]:
        return set(self.replicas) - self.isr

    def view(self) -> PartitionState:
        """What Kafka reports for it (metadata plus ListPartitionReassignments)."""
        return PartitionState(self.replicas, self.isr, self.leader, self.size, self.adding, self.removing)


class Lag(NamedTuple):
    """Bytes a replica is behind its leader: ``bytes`` at time ``since``, changing by ``drift`` bytes/s."""

    bytes: float
    since: float
    drift: float = 0.0  # produce rate minus fetch rate: negative while it catches up

    def at(self, t: float) -> float:
        return max(0.0, self.bytes + self.drift * (t - self.since))


class Quota(NamedTuple):
    """One broker's leader or follower replication quota, as a token bucket.

    Kafka lets replication through while the rate it measured over its kept
    samples is under the quota; a quota that has recorded for a whole window
    with little traffic therefore lets up to ``QUOTA_WINDOW`` x rate through at
    once, and one that just started recording one sample window's worth. So:
    ``tokens`` bytes may pass above the rate (measured at ``since``; they change
    by rate - ``flow`` per second, never below 0 nor above rate x the window
    the quota has recorded, at most ``QUOTA_WINDOW``). ``started``: when it
    began recording (a leader quota records every follower fetch, so it is
    always full); ``idle_since``: when it stopped (no listed replica left), or
    None while it records. After ``QUOTA_WINDOW`` idle its samples are gone.
    """

    tokens: float
    since: float
    flow: float = 0.0  # bytes/s it records under the current allocation
    started: float = float("-inf")
    idle_since: float | None = None

    def window(self, t: float) -> float:
        return min(QUOTA_WINDOW, max(QUOTA_WINDOW_SIZE, t - self.started))

    def at(self, t: float, rate: float, refill: float | None = None) -> float:
        """Tokens at ``t`` under the current flow; they refill at ``refill`` (default ``rate``: what the
        quota lets through once used up) up to ``rate`` x the window it has recorded."""
        grown = self.tokens + ((rate if refill is None else refill) - self.flow) * (t - self.since)
        return max(0.0, min(rate * self.window(t), grown))


class FetchState(NamedTuple):
    """A follower in the ISR that is not fetching: ``refused`` (it applied a leader epoch change before
    its leader and was refused UNKNOWN_LEADER_EPOCH: ``until`` is when its fetcher takes the partition
    up again), ``fenced`` (its broker has not applied the leader epoch change yet; ``until`` is when it
    will) or ``fresh`` (lag unknown to its fetcher, throttled:
    ``until`` is its next turn at the follower quota, inf while it starves). ``since``: when it last
    fetched (the leader drops it from the ISR replica.lag.time.max.ms later). A fresh follower's fetcher
    first asks at ``asked`` and, refused, again every ``retry`` seconds."""

    kind: str
    since: float
    until: float
    asked: float = 0.0
    retry: float = REPLICA_FETCH_BACKOFF


class Throttles(NamedTuple):
    """KIP-73 configuration as the brokers hold it."""

    leader: immutables.Map = immutables.Map()  # topic -> frozenset of (partition, broker); "*" for all
    follower: immutables.Map = immutables.Map()
    leader_rate: immutables.Map = immutables.Map()  # broker -> bytes/s
    follower_rate: immutables.Map = immutables.Map()
    follower_listed: frozenset = frozenset()  # brokers named in a follower list: their follower quota records

    def follower_throttled(self, tp: TopicPartition, broker: int) -> bool:
        return broker in self.follower_rate and _listed(self.follower, tp, broker)

    def leader_throttled(self, tp: TopicPartition, broker: int) -> bool:
        return broker in self.leader_rate and _listed(self.leader, tp, broker)

    def is_empty(self) -> bool:
        return not (any(self.leader.values()) or any(self.follower.values())
                    or self.leader_rate or self.follower_rate)

    def as_set(self, topics: Collection[str] | None = None, brokers: Collection[int] | None = None) -> ThrottleSet:
        """The configuration as the core's ``ThrottleSet`` (wildcards left out), limited to
        ``topics`` / ``brokers`` when given."""
        def entries(lists):
            return frozenset(
                ThrottledReplica(topic, p, b) for topic, es in lists.items()
                if topics is None or topic in topics for e in es if e != "*" for p, b in [e]
            )

        rated = {b for b in (*self.leader_rate.keys(), *self.follower_rate.keys()) if brokers is None or b in brokers}
        return read_back(entries(self.leader), entries(self.follower),
                         [RateRead(b, self.leader_rate.get(b), self.follower_rate.get(b)) for b in sorted(rated)])


def listed_brokers(follower: immutables.Map, rated: Collection[int]) -> frozenset:
    out: set = set()
    for entries in follower.values():
        for e in entries:
            if e == "*":
                return frozenset(rated)
            out.add(e[1])
    return frozenset(out)


def _listed(lists: immutables.Map, tp: TopicPartition, broker: int) -> bool:
    entries = lists.get(tp.topic)
    return bool(entries) and ((tp.partition, broker) in entries or "*" in entries)


class Stats(NamedTuple):
    """What ``kreassign simulate`` reports, accumulated as time advances."""

    peak_copies_in: immutables.Map = immutables.Map()  # broker -> most replicas copied into it at once
    peak_copies_out: immutables.Map = immutables.Map()  # broker -> most copies it served at once
    peak_throttled_in: immutables.Map = immutables.Map()  # broker -> highest throttled bytes/s received
    peak_throttled_out: immutables.Map = immutables.Map()
    min_headroom: int | None = None  # lowest (in-sync replicas - min.insync.replicas) seen
    under_min: immutables.Map = immutables.Map()  # tp -> since when it is under min.insync.replicas
    under_min_seconds: float = 0.0  # partition-seconds under min.insync.replicas (closed intervals)
    under_min_partitions: frozenset = frozenset()
    bytes_copied: float = 0.0
    peak_traffic_in: immutables.Map = immutables.Map()  # broker -> highest total inbound bytes/s
    peak_traffic_out: immutables.Map = immutables.Map()
    under_replicated: int = 0  # partitions whose ISR is smaller than their replica set, now
    peak_under_replicated: int = 0
    blocked: immutables.Map = immutables.Map()  # tp -> since when it cannot complete acks=all writes
    blocked_log: tuple = ()  # closed intervals, newest first, as a linked list: ((tp, start, end), rest)
    leader_log: tuple = ()  # leader changes, newest first, linked: ((time, tp, leader), rest)
    done_log: tuple = ()  # reassignments completed (Phase B) or reverted, newest first, linked: ((time, tp), rest)
    throttled_joins: int = 0  # replicas that joined the ISR listed as throttled while their broker's quota was saturated


def linked(log: tuple) -> list:
    """The entries of a linked log (``Stats.blocked_log``, ``leader_log``, ``done_log``), oldest first."""
    out = []
    while log:
        entry, log = log
        out.append(entry)
    out.reverse()
    return out


class SimState(NamedTuple):
    time: float
    brokers: immutables.Map  # id -> SimBroker
    topics: immutables.Map  # name -> TopicInfo
    partitions: immutables.Map  # tp -> SimPartition
    throttles: Throttles = Throttles()
    lags: immutables.Map = immutables.Map()  # (tp, broker) -> Lag, for every replica out of the ISR
    hosted: immutables.Map = immutables.Map()  # broker -> immutables.Map(tp -> True)
    isr_in: immutables.Map = immutables.Map()  # broker -> bytes/s of in-sync traffic it receives
    isr_out: immutables.Map = immutables.Map()  # broker -> bytes/s of in-sync traffic it sends
    behind_since: immutables.Map = immutables.Map()  # broker -> since when its network cannot carry its ISR traffic
    dirty: bool = True  # something changed since bandwidth was last allocated
    next_event: float = float("inf")  # earliest event under the current allocation
    copy_next: float = float("inf")  # earliest event of the copies, quotas and slow brokers (the allocation's)
    turns_dirty: bool = False  # only followers' fetch states changed: recompute their turns, not the allocation
    joining: tuple = ()  # the copies that catch up first under the current allocation, (tp, broker)
    copy_rate: float = 0.0  # bytes/s copied, all copies together, under the current allocation
    stats: Stats = Stats()
    fetch: immutables.Map = immutables.Map()  # (tp, broker) -> FetchState, for in-sync followers not fetching
    ready: immutables.Map = immutables.Map()  # (tp, broker) -> time a copy may fetch from (log created, epoch applied)
    meta_free: immutables.Map = immutables.Map()  # broker -> when it has applied every metadata change so far
    leader_quota: immutables.Map = immutables.Map()  # broker -> Quota
    follower_quota: immutables.Map = immutables.Map()  # broker -> Quota
    busy_until: immutables.Map = immutables.Map()  # broker -> its follower quota stays refused until (last turns' debt)
    saturated: frozenset = frozenset()  # brokers whose follower quota copies use up, under the current allocation
    rounds: immutables.Map = immutables.Map()  # broker -> seconds one round of turns at its follower quota takes
    pulls: immutables.Map = immutables.Map()  # (follower broker, leader) -> in-sync replicas it fetches normally
    fetchers: frozenset = frozenset()  # (receiver, leader) of fetchers with copies through the follower quota
    creation_time: float = DEFAULT_REPLICA_CREATION_TIME  # seconds a broker takes to create a new replica's log
    fetch_backoff: float = REPLICA_FETCH_BACKOFF  # the brokers' replica.fetch.backoff.ms, in seconds
    quota_loss: float = DEFAULT_FOLLOWER_QUOTA_LOSS  # what a used-up follower quota loses to backed-off fetchers

    def min_insync(self, tp: TopicPartition) -> int:
        info: TopicInfo | None = self.topics.get(tp.topic)
        return info.min_insync_replicas if info else 1

    def alive(self, broker: int) -> bool:
        b = self.brokers.get(broker)
        return b is not None and b.alive
