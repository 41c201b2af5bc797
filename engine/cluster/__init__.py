"""The one interface kreassign talks to a cluster through.

Two implementations the engine cannot tell apart: ``engine.cluster.kafka``
(a real Apache Kafka cluster, through confluent-kafka and kafka-python) and the
simulated cluster of ``engine.sim`` (in process with a virtual clock, or as its
own process behind ``engine.cluster.remote``).

Observe:

* ``observe(partitions)``: brokers (id, rack, alive), the topics of those
  partitions (partition count, min.insync.replicas; ``None`` for a topic that
  does not exist) and the partitions (replicas RS, ISR, leader, adding AR,
  removing RR), as an ``engine.core.commands.Observation`` ready for ``decide``.
  ``None`` means every partition. Sizes are left out (``size_bytes`` None):
  they change with every produced byte and would make every poll an event.
* ``snapshot()``: the whole cluster with partition sizes, for planners.

Act (every action idempotent; results are values, never exceptions):

* ``alter_reassignments({tp: replicas})``: start a step (AlterPartitionReassignments).
* ``cancel_reassignments(tps)``: cancel reassignments in progress (no-op if none).
* ``apply_throttles(delta)`` / ``remove_throttles(delta)``: KIP-73 throttles: topic
  lists APPEND / SUBTRACT (other tools' entries are left alone), broker rates SET / DELETE.
* ``elect_preferred_leaders(tps)``: preferred leader election (no-op where it already leads).

Batch calls return one result per partition; a call that could not be made at
all returns ``Unavailable`` for each.

The package holds the interface and its adapters: ``kafka`` (Apache Kafka),
``remote`` (a ``kreassign sim-cluster`` process), ``connect`` (opens one by the
name the command line gives), and ``watch`` (which brokers answer: the Kafka
adapter's probe of every live broker; an adapter that has one also offers
``watch_brokers(deadline)`` and ``unresponsive()``), and ``requests`` (``RequestCounter``: the requests an
adapter sends, by broker, for the request budget). The actions and outcomes they speak are the core's
(``engine.core.actions``, ``engine.core.outcomes``). May import: ``engine.core``,
``engine.kafka``, ``engine.sim`` and itself; never the running engine.
"""

from __future__ import annotations

from typing import Collection, Mapping, Protocol, runtime_checkable

from engine.core.outcomes import OK, Ok, Refused, Result, Unavailable, first_failure
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import Observation
from engine.core.partition import Replicas, TopicPartition
from engine.core.throttles import ThrottleConfigs, ThrottleSet
from engine.core.budget import RequestsSent

__all__ = [
    "Cluster", "ClusterSnapshot", "OK", "Ok", "Refused", "Result", "Unavailable", "first_failure",
]


@runtime_checkable
class Cluster(Protocol):
    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation | Unavailable: ...

    def snapshot(self) -> ClusterSnapshot | Unavailable: ...

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas]) -> dict[TopicPartition, Result]: ...

    def cancel_reassignments(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]: ...

    def apply_throttles(self, throttles: ThrottleSet) -> Result: ...

    def remove_throttles(self, throttles: ThrottleSet) -> Result: ...

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]: ...

    def sizes(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int] | Unavailable:
        """Bytes of each partition's largest replica, where known (progress and ETA need them;
        observations leave sizes out because they change all the time)."""
        ...

    def catch_up(self, steps: Mapping[TopicPartition, tuple[int | None, Replicas]]) -> dict[TopicPartition, int] | Unavailable:
        """Bytes the new replicas of each step still miss: ``steps`` maps a partition to (its leader,
        its adding replicas); the answer is the leader's log size minus the smallest of theirs, for
        the partitions where all are known; with no adding replica, the leader's log size (what a new
        replica would copy: a step that may start released, ``decide.release_candidates``). The core
        releases a copy this close to done from the throttle before its replicas join the ISR
        (``engine.core.decide``)."""
        ...

    def throttles(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleSet | Unavailable:
        """KIP-73 configuration in force on those topics and brokers (``verify`` checks it is gone)."""
        ...

    def requests_sent(self) -> RequestsSent | None:
        """Every request this cluster was sent, by broker (``engine.core.budget.RequestsSent``: totals, and
        the ages of those of the last second), for the request budget the decider holds (docs/engine.md,
        *The request budget*). A request whose broker the client library chooses is counted under ``ANY``
        (None), charged to every broker. None: this implementation counts no requests, and the decider holds
        no budget on it. The Kafka adapter counts every request it sends and the broker watch's probes;
        ``RemoteCluster`` (a ``kreassign sim-cluster`` over HTTP) and the in-process simulated cluster
        count nothing (no Kafka request is sent: the Kafka front of a sim-cluster counts what arrives there).
        An implementation without this method is taken as counting nothing."""
        ...

    def close(self) -> None: ...

    def wildcard_throttles(self, topics: Collection[str]) -> dict[str, frozenset[str]] | Unavailable:
        """Topic -> its sides ("leader", "follower") whose ``*.replication.throttled.replicas`` is the wildcard
        ``*`` (KIP-73: every replica of the topic throttled wherever a broker has a rate). kreassign never
        writes ``*``: each was set outside it. ``throttles`` does not read a ``*`` as every replica;
        ``verify`` reports these beside it."""
        ...

    def throttle_configs(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleConfigs | Unavailable:
        """``throttles`` and ``wildcard_throttles`` of those topics and brokers from one read of each (the Kafka
        adapter: one DescribeConfigs of the topics, one per broker), for ``verify``."""
        ...
