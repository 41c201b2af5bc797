"""Events: the facts kreassign records. State is only ever the fold of these.

Every event carries what replay needs (a planned step carries its full replica
lists; a queued partition its original and target replicas), so ``apply``
never re-plans and replaying the log gives exactly the same state.
docs/events.md lists when each is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.limits import Limits
from engine.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition
from engine.step import Step
from engine.throttles import ThrottleSet

# --- cluster observations ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokersObserved:
    brokers: tuple[Broker, ...]


@dataclass(frozen=True, slots=True)
class TopicObserved:
    topic: str
    info: TopicInfo | None  # None: the topic does not exist (any more)


@dataclass(frozen=True, slots=True)
class PartitionObserved:
    """Replicas / ISR / leader of a partition changed ("ISR observed")."""

    tp: TopicPartition
    state: PartitionState


# --- requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestAccepted:
    request_id: str
    partitions: int
    digest: str  # of the submitted targets: a re-delivered submit is recognised
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class CommandRejected:
    """A command was refused; nothing else changed. ``reasons`` names every problem."""

    command: str  # submit, cancel, limits, throttle, pause, resume
    reasons: tuple[str, ...]
    request_id: str | None = None
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class PartitionQueued:
    request_id: str
    tp: TopicPartition
    original: Replicas | None  # ORS (KIP-236 original_replicas)
    target: Replicas  # FTR


@dataclass(frozen=True, slots=True)
class PartitionReady:
    """The partition's next step may be scheduled; ``step`` is what it needs."""

    request_id: str
    tp: TopicPartition
    step: Step


@dataclass(frozen=True, slots=True)
class PartitionWaiting:
    request_id: str
    tp: TopicPartition
    reason: str


@dataclass(frozen=True, slots=True)
class StepPlanned:
    """Decision to start a step: the executor sets exactly this TR on the cluster."""

    request_id: str
    tp: TopicPartition
    number: int  # 1-based within the request for this partition
    step: Step


@dataclass(frozen=True, slots=True)
class StepStarted:
    request_id: str
    tp: TopicPartition
    number: int


@dataclass(frozen=True, slots=True)
class StepFailed:
    """The cluster refused the step; the partition waits and is re-planned."""

    request_id: str
    tp: TopicPartition
    number: int
    reason: str


@dataclass(frozen=True, slots=True)
class StepCompleted:
    """Replicas equal TR and all of TR is in the ISR."""

    request_id: str
    tp: TopicPartition
    number: int
    elect_leader: bool  # TR[0] does not lead yet: elect the preferred leader


@dataclass(frozen=True, slots=True)
class PartitionCompleted:
    request_id: str
    tp: TopicPartition
    replicas: Replicas


@dataclass(frozen=True, slots=True)
class RequestCompleted:
    request_id: str
    completed: int
    cancelled: int
    reverted: int


# --- cancellation (KIP-236) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CancelRequested:
    request_id: str
    partitions: tuple[TopicPartition, ...] | None  # None: the whole request
    rollback: bool
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class CancelSkipped:
    request_id: str
    tp: TopicPartition
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionCancelled:
    """Pending steps dropped; ``aborting`` names a step in flight being aborted."""

    request_id: str
    tp: TopicPartition
    rollback: bool
    aborting: int | None = None
    superseded_by: str | None = None


@dataclass(frozen=True, slots=True)
class StepAborted:
    request_id: str
    tp: TopicPartition
    number: int
    replicas: Replicas  # where the partition stands after the abort


@dataclass(frozen=True, slots=True)
class PartitionReverted:
    request_id: str
    tp: TopicPartition


# --- throttles, limits, control ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThrottlesApplied:
    """Set before the steps that need them start (KIP-73)."""

    throttles: ThrottleSet


@dataclass(frozen=True, slots=True)
class ThrottlesRemoved:
    throttles: ThrottleSet


@dataclass(frozen=True, slots=True)
class LimitsChanged:
    limits: Limits
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class ThrottleRateChanged:
    rate: int | None
    reason: str = ""
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class Paused:
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class Resumed:
    command_id: str = ""


Event = (
    BrokersObserved | TopicObserved | PartitionObserved
    | RequestAccepted | CommandRejected | PartitionQueued | PartitionReady | PartitionWaiting
    | StepPlanned | StepStarted | StepFailed | StepCompleted | PartitionCompleted | RequestCompleted
    | CancelRequested | CancelSkipped | PartitionCancelled | StepAborted | PartitionReverted
    | ThrottlesApplied | ThrottlesRemoved | LimitsChanged | ThrottleRateChanged | Paused | Resumed
)

EVENT_TYPES: tuple[type, ...] = Event.__args__  # type: ignore[attr-defined]
