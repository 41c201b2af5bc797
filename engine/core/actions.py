"""What the engine asks a cluster to do. Each action is idempotent.

``engine.runtime.executor`` derives them from the event log (and, after a restart,
from the state); a ``Cluster`` carries them out. They are values, so an action
can be logged, compared and repeated.

* ``StartStep``: set the partition's target replicas to ``replicas`` (one
  AlterPartitionReassignments entry: Kafka's controller then runs Phase U/A/B).
  Repeating it with the same target changes nothing.
* ``CancelStep``: cancel the partition's reassignment in progress (Kafka
  reverts to the replicas it had, minus the ones being added). With nothing in
  progress it is a no-op.
* ``ApplyThrottles`` / ``RemoveThrottles``: a KIP-73 delta. Topic lists are
  APPENDed / SUBTRACTed entry by entry, so throttles of other tools are left
  alone; broker rates are SET / DELETEd.
* ``ElectLeader``: preferred leader election (the partition's first replica).
"""

from __future__ import annotations

from typing import NamedTuple

from engine.core.partition import Replicas, TopicPartition
from engine.core.throttles import ThrottleSet


class StartStep(NamedTuple):
    request_id: str
    tp: TopicPartition
    number: int
    replicas: Replicas  # the step's TR


class CancelStep(NamedTuple):
    request_id: str
    tp: TopicPartition
    number: int


class ApplyThrottles(NamedTuple):
    throttles: ThrottleSet


class RemoveThrottles(NamedTuple):
    throttles: ThrottleSet


class ElectLeader(NamedTuple):
    tp: TopicPartition  # its preferred leader (first replica) should lead afterwards


Action = StartStep | CancelStep | ApplyThrottles | RemoveThrottles | ElectLeader
