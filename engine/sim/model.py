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

from engine.partition import PartitionState, Replicas, TopicInfo, TopicPartition
from engine.throttles import ThrottledReplica, ThrottleSet

REPLICA_LAG_TIME_MAX = 30.0  # replica.lag.time.max.ms: a follower behind this long leaves the ISR
JOIN_EPSILON = 1.0  # bytes: a replica this close to its leader has caught up


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


class Throttles(NamedTuple):
    """KIP-73 configuration as the brokers hold it."""

    leader: immutables.Map = immutables.Map()  # topic -> frozenset of (partition, broker); "*" for all
    follower: immutables.Map = immutables.Map()
    leader_rate: immutables.Map = immutables.Map()  # broker -> bytes/s
    follower_rate: immutables.Map = immutables.Map()

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

        def rated(rates):
            return frozenset(b for b in rates if brokers is None or b in brokers)

        leader_brokers, follower_brokers = rated(self.leader_rate), rated(self.follower_rate)
        rates = [self.leader_rate[b] for b in leader_brokers] + [self.follower_rate[b] for b in follower_brokers]
        return ThrottleSet(entries(self.leader), entries(self.follower), leader_brokers, follower_brokers,
                           max(rates) if rates else None)


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
    next_event: float = float("inf")  # earliest join or ISR shrink under the current allocation
    copy_rate: float = 0.0  # bytes/s copied, all copies together, under the current allocation
    stats: Stats = Stats()

    def min_insync(self, tp: TopicPartition) -> int:
        info: TopicInfo | None = self.topics.get(tp.topic)
        return info.min_insync_replicas if info else 1

    def alive(self, broker: int) -> bool:
        b = self.brokers.get(broker)
        return b is not None and b.alive
