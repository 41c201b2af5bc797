"""``ClusterSnapshot``: the whole cluster at one moment, for planners.

The ISR watcher polls only the partitions it watches (an ``Observation``); a
planner (the balancer, ``kreassign simulate``) needs everything at once:
brokers with racks and liveness, topics with their ISR floor, and every
partition with its replicas, ISR, leader and size in bytes where the cluster
reports it. ``to_document``/``from_document`` give it a JSON form (the
sim-cluster's HTTP API and files use it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from engine.core.commands import Observation
from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition


class SnapshotError(ValueError):
    """A snapshot document that does not have the expected shape."""


@dataclass(frozen=True)
class ClusterSnapshot:
    brokers: tuple[Broker, ...]
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)

    def assignment(self) -> dict[TopicPartition, Replicas]:
        return {tp: p.replicas for tp, p in sorted(self.partitions.items())}

    def observation(self) -> Observation:
        """The snapshot as one full observation (sizes left out: they change all the time)."""
        return Observation(
            brokers=self.brokers,
            topics=dict(self.topics),
            partitions={tp: p._replace(size_bytes=None) for tp, p in self.partitions.items()},
        )

    def racks(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}

    def live_brokers(self) -> frozenset[int]:
        return frozenset(b.id for b in self.brokers if b.alive)

    def to_document(self) -> dict:
        return {
            "version": 1,
            "brokers": [{"id": b.id, "rack": b.rack, "alive": b.alive} for b in sorted(self.brokers)],
            "topics": {
                t: {"partitions": i.partitions, "min_insync_replicas": i.min_insync_replicas}
                for t, i in sorted(self.topics.items())
            },
            "partitions": [partition_document(tp, p) for tp, p in sorted(self.partitions.items())],
        }

    @classmethod
    def from_document(cls, doc: object) -> "ClusterSnapshot":
        try:
            brokers = tuple(Broker(int(b["id"]), b.get("rack"), bool(b.get("alive", True))) for b in doc["brokers"])
            topics = {
                str(t): TopicInfo(int(i["partitions"]), int(i.get("min_insync_replicas", 1)))
                for t, i in doc["topics"].items()
            }
            partitions = dict(partition_from_document(p) for p in doc["partitions"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SnapshotError(f"not a cluster snapshot document: {type(e).__name__}: {e}") from None
        return cls(brokers, topics, partitions)


def partition_document(tp: TopicPartition, p: PartitionState) -> dict:
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "replicas": list(p.replicas),
        "isr": sorted(p.isr),
        "leader": p.leader,
        "size_bytes": p.size_bytes,
        "adding": list(p.adding),
        "removing": list(p.removing),
    }


def partition_from_document(d: Mapping) -> tuple[TopicPartition, PartitionState]:
    leader = d.get("leader")
    size = d.get("size_bytes")
    return TopicPartition(str(d["topic"]), int(d["partition"])), PartitionState(
        tuple(int(b) for b in d["replicas"]),
        frozenset(int(b) for b in d.get("isr", ())),
        None if leader is None else int(leader),
        None if size is None else int(size),
        tuple(int(b) for b in d.get("adding", ())),
        tuple(int(b) for b in d.get("removing", ())),
    )
