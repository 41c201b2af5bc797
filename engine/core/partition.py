"""Values that describe a cluster as kreassign sees it.

All of them are immutable ``NamedTuple`` values: cheap to create and hash,
which matters when a state holds a million partitions.

A replica list is a plain ``tuple[int, ...]`` (``Replicas``). Its order is
meaningful: the first replica is the *preferred leader*, exactly as in Kafka's
reassignment JSON.
"""

from __future__ import annotations

from typing import NamedTuple

Replicas = tuple[int, ...]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class Broker(NamedTuple):
    id: int
    rack: str | None = None
    alive: bool = True


class TopicInfo(NamedTuple):
    """What the engine needs to know of a topic: its size, its ISR floor, whether Kafka may elect an
    out-of-sync replica leader on it (``unclean.leader.election.enable``: a cancel then reverts
    uncleanly, ``engine.core.cancellation``), and its Kafka topic id (``None``: not given), which tells a
    topic deleted and made again under the same name from the old one: leader epochs
    (``PartitionState.leader_epoch``) compare only within one topic id."""

    partitions: int
    min_insync_replicas: int = 1
    topic_id: str | None = None
    unclean_leader_election: bool = False


class PartitionState(NamedTuple):
    """One observation of a partition on the cluster.

    ``replicas`` is the full replica set Kafka reports; while a reassignment is
    in progress that is RS = TRS + ORS, with ``adding`` (AR) and ``removing``
    (RR) naming the difference. ``leader`` is ``None`` when the partition is
    offline. ``leader_epoch`` is Kafka's, as the broker that answered had it (``None``: not given): KRaft
    bumps it at every leader change and every replica removal (a step that drops one, its completion, a
    cancel's revert), so a look with a lower epoch than one recorded comes from a broker whose metadata
    predates that (``engine.core.decide``).
    """

    replicas: Replicas
    isr: frozenset[int]
    leader: int | None
    size_bytes: int | None = None
    adding: Replicas = ()
    removing: Replicas = ()
    leader_epoch: int | None = None

    @property
    def reassignment_in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def online(self) -> bool:
        return self.leader is not None and bool(self.isr)


def preferred_leader(replicas: Replicas) -> int | None:
    return replicas[0] if replicas else None


def in_sync(replicas: Replicas) -> PartitionState:
    """A healthy partition: every replica in sync, the first one leading."""
    return PartitionState(tuple(replicas), frozenset(replicas), replicas[0] if replicas else None)


def runs(partitions: list[int], most: int) -> list[tuple[int, int]]:
    """``partitions`` (sorted) as at most ``most`` ranges (lo, hi) covering them, split at the widest gaps
    (the Kafka adapter's DescribeTopicPartitions slices, and the simulator's count of them)."""
    if not partitions:
        return []
    gaps = sorted(range(1, len(partitions)), key=lambda i: partitions[i] - partitions[i - 1], reverse=True)
    cuts = sorted(i for i in gaps[:most - 1] if partitions[i] - partitions[i - 1] > 1)
    out, start = [], 0
    for i in cuts + [len(partitions)]:
        out.append((partitions[start], partitions[i - 1]))
        start = i
    return out
