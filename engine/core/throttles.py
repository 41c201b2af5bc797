"""KIP-73 replication throttles: exactly what the steps in flight need.

For every step that copies data (NR not empty):

* ``leader.replication.throttled.replicas`` of the topic gets
  ``partition:broker`` for each replica of CR, the step's existing replicas
  (move origins: whichever of them leads serves the new followers);
* ``follower.replication.throttled.replicas`` gets ``partition:broker`` for
  each replica of NR (move destinations);
* every broker named on the leader side gets ``leader.replication.throttled.rate``
  and every broker named on the follower side ``follower.replication.throttled.rate``.

A partition has at most one step in flight, so its entries belong to that step
alone: they are removed the moment the step completes or is aborted (measured
on Kafka 4.0: a follower left in the throttled list after it joined the ISR can
stall acks=all producers). A broker gets its rate with the first step that names
it and keeps it between steps while a partition not ended names it (a rate
throttles only listed replicas); it loses it once nothing left names it, when
the engine is paused and its steps in flight have ended, when throttling is
disabled, or with its last step in flight if the ``keep_throttle_rates`` limit
is 0 (``engine.core.decide``, ``_keeping_rates``; docs/algorithm.md, section 3).
With throttling disabled (rate ``None``) nothing is set at all.

The rate given to Kafka is the throttle plus the ``throttle_margin_pct`` limit (M, 8 % by
default): a follower quota once used up lets a fetcher of few partitions through less than its
rate (a refused fetcher backs off ``replica.fetch.backoff.ms`` and the quota opens meanwhile with
nobody asking): kreassign's steps took 1.089 x bytes / rate on Kafka 4.0, 1.075 to 1.099 x by
Kafka's rule fetch by fetch (``python -m benchmarks.quota --by-rate``), so at T + 8 % they copy
at about T, as Kafka's tool's moves do (``with_margin``; docs/algorithm.md, section 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, NamedTuple

from engine.core.partition import TopicPartition
from engine.core.step import Step

DEFAULT_THROTTLE_RATE = 50_000_000
"""Default replication throttle, bytes/s per broker and direction: about 40 %
of a 1 Gbit/s link, leaving room for producers and consumers. A 100 GB replica
copies in about 35 minutes at this rate."""


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    rate: int | None = DEFAULT_THROTTLE_RATE  # bytes/s; None: unthrottled


class ThrottledReplica(NamedTuple):
    topic: str
    partition: int
    broker: int

    def config_entry(self) -> str:
        """The ``partition:broker`` form Kafka's throttled-replicas configs use."""
        return f"{self.partition}:{self.broker}"


def parse_config_entries(topic: str, value: str | None) -> list[ThrottledReplica]:
    """Entries of a ``*.replication.throttled.replicas`` value (``partition:broker,...``).

    The wildcard ``*`` (every replica) is not a list of entries: it is left out.
    """
    out = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item or item == "*":
            continue
        p, _, b = item.partition(":")
        out.append(ThrottledReplica(topic, int(p), int(b)))
    return out


UNSET_RATE = 2**63 - 1
"""What Kafka answers for a ``*.replication.throttled.rate`` no one set: Long.MAX_VALUE (KIP-73's
default, no throttle)."""


def rate_value(text: str | None) -> int | None:
    """A broker's ``*.replication.throttled.rate`` config value as read back (bytes/s), ``None`` when it
    is not set: absent, empty, or Kafka's default Long.MAX_VALUE."""
    if text is None or text.strip() == "":
        return None
    value = int(text)
    return None if value >= UNSET_RATE else value


class RateRead(NamedTuple):
    """The rates a read-back found on one broker (bytes/s; ``None``: not set)."""

    broker: int
    leader: int | None = None
    follower: int | None = None


class ThrottleSet(NamedTuple):
    """Throttle configuration in force (or needed) on the cluster.

    ``rate`` is the one rate of every broker named (what kreassign sets; in a read-back, the highest
    read). ``rates`` are the values read back, one per broker read that has a rate: only a read-back
    and the differences it shows (``ThrottlesDiffered``, ``ThrottlesDrifted``) carry them."""

    leader: frozenset[ThrottledReplica] = frozenset()
    follower: frozenset[ThrottledReplica] = frozenset()
    leader_brokers: frozenset[int] = frozenset()
    follower_brokers: frozenset[int] = frozenset()
    rate: int | None = None
    rates: tuple[RateRead, ...] = ()

    def is_empty(self) -> bool:
        return not (self.leader or self.follower or self.leader_brokers or self.follower_brokers)

    def by_topic(self) -> dict[str, tuple[list[str], list[str]]]:
        """topic -> (leader entries, follower entries) as Kafka config values."""
        out: dict[str, tuple[list[str], list[str]]] = {}
        for side, entries in ((0, self.leader), (1, self.follower)):
            for e in sorted(entries):
                out.setdefault(e.topic, ([], []))[side].append(e.config_entry())
        return out


EMPTY = ThrottleSet()


LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
"""A broker's throttle on moving replicas between its own log directories (bytes/s): Kafka's tool sets it with
``--replica-alter-log-dirs-throttle`` and its ``--verify`` deletes it with the replication rates on every broker
(``ReassignPartitionsCommand.BROKER_LEVEL_THROTTLES``). kreassign never sets it; ``verify`` reports one left."""


class ThrottleConfigs(NamedTuple):
    """The throttle configs ``kreassign verify`` reads (``Cluster.throttle_configs``): the throttles in force as
    ``Cluster.throttles`` reads them; topic -> its sides ("leader", "follower") whose throttled-replicas list is
    the wildcard ``*`` (``Cluster.wildcard_throttles``), from one read of the topics' configs; and broker -> its
    ``LOG_DIRS_RATE`` where one is set, from the same read of the brokers' configs."""

    throttles: ThrottleSet
    wildcards: Mapping[str, frozenset[str]]
    log_dirs: Mapping[int, int]


def read_back(leader: Iterable[ThrottledReplica], follower: Iterable[ThrottledReplica],
              rates: Iterable[RateRead]) -> ThrottleSet:
    """A read-back as the core takes it: the entries found, and each broker's rates as read (a broker with
    neither rate set may be left out); ``leader_brokers`` / ``follower_brokers`` name those with one, and
    ``rate`` is the highest read."""
    reads = tuple(sorted((r for r in rates if r.leader is not None or r.follower is not None),
                         key=lambda r: r.broker))
    values = [v for r in reads for v in (r.leader, r.follower) if v is not None]
    return ThrottleSet(frozenset(leader), frozenset(follower),
                       frozenset(r.broker for r in reads if r.leader is not None),
                       frozenset(r.broker for r in reads if r.follower is not None),
                       max(values) if values else None, reads)


def reads_of(t: ThrottleSet, brokers: Iterable[int] | None = None) -> tuple[RateRead, ...]:
    """``t``'s rates read, of ``brokers`` only when given."""
    if brokers is None:
        return t.rates
    keep = frozenset(brokers)
    return tuple(r for r in t.rates if r.broker in keep)


def noting(t: ThrottleSet, rate: int | None, source: ThrottleSet) -> ThrottleSet:
    """``t`` (a throttle difference) carrying the rate in force and ``source``'s values read, both of its
    brokers only: none where it names no broker."""
    brokers = t.leader_brokers | t.follower_brokers
    return t._replace(rate=rate if brokers else None, rates=reads_of(source, brokers))


@lru_cache(maxsize=1 << 16)
def step_throttles(tp: TopicPartition, step: Step) -> tuple[tuple[ThrottledReplica, ...], tuple[ThrottledReplica, ...]]:
    """(leader-side, follower-side) entries one step needs (memoised: a step in
    flight is asked about at every decision until it ends)."""
    if not step.nr:
        return (), ()
    topic, p = tp
    return (
        tuple(ThrottledReplica(topic, p, b) for b in step.cr),
        tuple(ThrottledReplica(topic, p, b) for b in step.nr),
    )


def with_margin(rate: int | None, margin_pct: int) -> int | None:
    """The rate given to Kafka for a throttle of ``rate`` bytes/s: ``margin_pct`` percent above it
    (rounded down), since Kafka's quota lets through less than its rate (the ``throttle_margin_pct``
    limit); ``None`` stays ``None`` (unthrottled)."""
    return None if rate is None else rate * (100 + margin_pct) // 100


def needed(steps: Iterable[tuple[TopicPartition, Step]], rate: int | None) -> ThrottleSet:
    """The throttle set the given steps in flight need at ``rate``."""
    if rate is None:
        return EMPTY
    leader: set[ThrottledReplica] = set()
    follower: set[ThrottledReplica] = set()
    for tp, step in steps:
        lead, follow = step_throttles(tp, step)
        leader.update(lead)
        follower.update(follow)
    if not leader and not follower:
        return EMPTY
    return ThrottleSet(
        frozenset(leader),
        frozenset(follower),
        frozenset(e.broker for e in leader),
        frozenset(e.broker for e in follower),
        rate,
    )


def reconcile(applied: ThrottleSet, want: ThrottleSet) -> tuple[ThrottleSet, ThrottleSet]:
    """(to_remove, to_apply) that turn ``applied`` into ``want``.

    Brokers whose rate must change are in ``to_apply`` (setting a rate is
    idempotent); nothing still wanted is ever in ``to_remove``.
    """
    to_remove = ThrottleSet(
        applied.leader - want.leader,
        applied.follower - want.follower,
        applied.leader_brokers - want.leader_brokers,
        applied.follower_brokers - want.follower_brokers,
        applied.rate,  # what the removed rates were: a failed removal leaves them in force
    )
    rate_changed = applied.rate != want.rate
    to_apply = ThrottleSet(
        want.leader - applied.leader,
        want.follower - applied.follower,
        want.leader_brokers if rate_changed else want.leader_brokers - applied.leader_brokers,
        want.follower_brokers if rate_changed else want.follower_brokers - applied.follower_brokers,
        want.rate,
    )
    return to_remove, to_apply


def after_apply(applied: ThrottleSet, delta: ThrottleSet) -> ThrottleSet:
    brokers = delta.leader_brokers or delta.follower_brokers
    return ThrottleSet(
        applied.leader | delta.leader,
        applied.follower | delta.follower,
        applied.leader_brokers | delta.leader_brokers,
        applied.follower_brokers | delta.follower_brokers,
        delta.rate if brokers else applied.rate,
    )


def after_remove(applied: ThrottleSet, delta: ThrottleSet) -> ThrottleSet:
    leader_brokers = applied.leader_brokers - delta.leader_brokers
    follower_brokers = applied.follower_brokers - delta.follower_brokers
    return ThrottleSet(
        applied.leader - delta.leader,
        applied.follower - delta.follower,
        leader_brokers,
        follower_brokers,
        applied.rate if (leader_brokers or follower_brokers) else None,
    )


def union(a: ThrottleSet, b: ThrottleSet) -> ThrottleSet:
    """Everything either names; ``b``'s rate where it names brokers with one, else ``a``'s."""
    brokers = b.leader_brokers or b.follower_brokers
    return ThrottleSet(
        a.leader | b.leader, a.follower | b.follower,
        a.leader_brokers | b.leader_brokers, a.follower_brokers | b.follower_brokers,
        b.rate if brokers and b.rate is not None else a.rate,
    )


def minus(a: ThrottleSet, b: ThrottleSet) -> ThrottleSet:
    """``a`` without what ``b`` names (entries and brokers)."""
    return after_remove(a, b)


def split(delta: ThrottleSet) -> list[ThrottleSet]:
    """One piece per config resource: each topic's entries, then each broker's rates. A cluster
    changes one resource at a time (librdkafka sends each BROKER resource to its broker), so an
    outcome per piece says exactly which part is in force."""
    pieces = []
    for topic in sorted({e.topic for e in delta.leader | delta.follower}):
        pieces.append(ThrottleSet(
            frozenset(e for e in delta.leader if e.topic == topic),
            frozenset(e for e in delta.follower if e.topic == topic),
        ))
    for b in sorted(delta.leader_brokers | delta.follower_brokers):
        pieces.append(ThrottleSet(
            leader_brokers=frozenset({b}) & delta.leader_brokers,
            follower_brokers=frozenset({b}) & delta.follower_brokers,
            rate=delta.rate,
        ))
    return pieces


def in_force(applied: ThrottleSet, tp: TopicPartition, step: Step, live: frozenset[int] | None = None) -> bool:
    """Whether everything ``step`` needs is in force: its entries, and the rates of their brokers
    that are alive (``live``; ``None``: all). A rate is set on the broker itself, so a dead broker's
    rate is never set (it is set when the broker comes back); it serves and receives nothing meanwhile."""
    lead, follow = step_throttles(tp, step)

    def rated(broker: int, brokers: frozenset[int]) -> bool:
        return broker in brokers or (live is not None and broker not in live)

    return (
        all(e in applied.leader and rated(e.broker, applied.leader_brokers) for e in lead)
        and all(e in applied.follower and rated(e.broker, applied.follower_brokers) for e in follow)
    )
