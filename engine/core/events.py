"""Events: the facts kreassign records. State is only ever the fold of these.

Every event carries what replay needs (a planned step carries its full replica
lists; a queued partition its original and target replicas), so ``apply``
never re-plans and replaying the log gives exactly the same state.
docs/events.md lists when each is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.limits import Limits
from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition
from engine.core.step import Step
from engine.core.throttles import ThrottleSet

# --- cluster observations ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokersObserved:
    brokers: tuple[Broker, ...]


@dataclass(frozen=True, slots=True)
class TopicObserved:
    topic: str
    info: TopicInfo | None  # None: the topic does not exist (any more)
    # (also emitted unchanged when a look shows again a topic a TopicMissing recorded as not seen)


@dataclass(frozen=True, slots=True)
class TopicMissing:
    """A look did not show a topic the state knows: Kafka answered UNKNOWN_TOPIC_OR_PARTITION, or showed
    a topic of that name with another id (``topic_id``). Not believed yet: a broker whose metadata lags
    answers so for a topic it has not seen created. The topic counts as deleted (``TopicObserved`` with
    no info) only when a look at least ``decide.METADATA_SETTLE`` later still does not show it, and no look
    in between did; a look that shows it again clears this (``TopicObserved``)."""

    topic: str
    at: float | None = None  # the shell's clock of the first look that did not show it
    topic_id: str | None = None  # the id of the topic the look showed under that name instead (None: none)


@dataclass(frozen=True, slots=True)
class PartitionObserved:
    """Replicas / ISR / leader of a partition changed ("ISR observed")."""

    tp: TopicPartition
    state: PartitionState
    at: float | None = None  # the shell's clock when it looked (a look older than what the state knows is ignored)


# --- requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestAccepted:
    request_id: str
    partitions: int
    digest: str  # of the submitted targets: a re-delivered submit is recognised
    command_id: str = ""
    steps: str = "incremental"  # how its partitions step (engine.core.step.STEP_MODES)


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
    weight: int = 8  # against the per-broker move caps, in eighths of a move (0: none; engine.core.scheduler)


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
    weight: int = 8  # against the per-broker move caps, in eighths of a move (0: none; engine.core.scheduler)


@dataclass(frozen=True, slots=True)
class StepStarted:
    """The cluster accepted the step (its answer, or the reassignment seen in progress)."""

    request_id: str
    tp: TopicPartition
    number: int
    at: float | None = None  # the shell's clock


@dataclass(frozen=True, slots=True)
class StepFailed:
    """The step ended without reaching its target (the cluster refused it, or the reassignment
    was reverted or changed outside kreassign): the partition waits and is planned again from
    ``retry_at`` on (``None``: at once)."""

    request_id: str
    tp: TopicPartition
    number: int
    reason: str
    retry_at: float | None = None
    at: float | None = None  # the shell's clock when it was decided


@dataclass(frozen=True, slots=True)
class StepCompleted:
    """Kafka finished the reassignment: replicas equal TR and no reassignment is in progress."""

    request_id: str
    tp: TopicPartition
    number: int
    elect_leader: bool  # TR[0] does not lead yet: elect the preferred leader
    at: float | None = None  # the shell's clock when it was seen (elections are checked from it)


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
    include_completed: bool = False  # a rollback also moves completed partitions back


@dataclass(frozen=True, slots=True)
class CancelSkipped:
    request_id: str
    tp: TopicPartition
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionCancelled:
    """Pending steps dropped; ``aborting`` names a step in flight being aborted. ``final``: the
    cancel is over and the partition stays where ``reason`` says."""

    request_id: str
    tp: TopicPartition
    rollback: bool
    aborting: int | None = None
    superseded_by: str | None = None
    final: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class StepAborted:
    """An observation taken after the cluster answered the cancel shows the step's reassignment over:
    reverted (KRaft: RS - AR, in RS order), completed before the cancel reached it, or moved
    elsewhere by another tool (``replicas`` says where)."""

    request_id: str
    tp: TopicPartition
    number: int
    replicas: Replicas  # where the partition stands after the abort
    at: float | None = None  # the shell's clock of that observation


@dataclass(frozen=True, slots=True)
class PartitionReverted:
    request_id: str
    tp: TopicPartition


# --- what the cluster said to an action ------------------------------------------------

ACTIONS = ("start_step", "cancel_step", "elect_leader", "apply_throttles", "remove_throttles")
"""The ``action`` of ``ActionFailed`` / ``ActionRetried`` / ``ActionSucceeded``."""


@dataclass(frozen=True, slots=True)
class ActionFailed:
    """The cluster refused an action (``code`` is Kafka's error name) or could not be asked
    (``code`` UNAVAILABLE), or the action did not take effect (``code`` IN_PROGRESS_AFTER_CANCEL:
    a step's reassignment still runs after its cancel was answered). It is tried again at
    ``retry_at`` (``None``: at the next tick) unless ``final``: then the rule it concerns decided
    what happens instead, and ``message`` says what."""

    action: str
    code: str
    message: str
    attempt: int  # 1 for the first try
    retry_at: float | None = None
    final: bool = False
    request_id: str | None = None
    tp: TopicPartition | None = None
    number: int | None = None
    throttles: ThrottleSet | None = None
    at: float | None = None  # the shell's clock of the answer (or of the look that showed it)


@dataclass(frozen=True, slots=True)
class ActionAnswered:
    """The cluster's answer to an action on a step in flight that no other event records: the cancel
    of a step (``note``: Kafka's NO_REASSIGNMENT_IN_PROGRESS, nothing was in progress, is a normal
    answer), or the alter of a step already being cancelled (it may have reached the controller after
    the cancel). Only an observation taken after ``at`` may judge the step."""

    action: str  # start_step or cancel_step
    request_id: str
    tp: TopicPartition
    number: int
    at: float | None = None  # the shell's clock of the answer
    note: str = ""  # what the cluster said, e.g. "no reassignment in progress"


@dataclass(frozen=True, slots=True)
class ActionRetried:
    """A failed action is carried out again (the executor asks the cluster once more)."""

    action: str
    attempt: int
    request_id: str | None = None
    tp: TopicPartition | None = None
    number: int | None = None
    replicas: Replicas | None = None  # start_step: the step's TR
    at: float | None = None


@dataclass(frozen=True, slots=True)
class ActionSucceeded:
    """An action that had failed before was carried out: its failure is over."""

    action: str
    attempt: int
    request_id: str | None = None
    tp: TopicPartition | None = None
    number: int | None = None
    throttles: ThrottleSet | None = None


@dataclass(frozen=True, slots=True)
class ClusterUnreachable:
    """The cluster could not be observed (``reason``), or can be again (``None``)."""

    reason: str | None


@dataclass(frozen=True, slots=True)
class LooksPaced:
    """The decider's looks wait for the request budget (``reason``: which budget), or no longer have for
    a while (``None``). Recorded when it changes; the runtime decides the pacing (``engine.runtime.decider``,
    docs/engine.md, *The request budget*): actions are never paced, only the reads that watch them.
    An end says what the pacing came to: the looks it ``deferred``, the ``longest_wait`` of a read (s),
    and how long it ``lasted`` from its first deferral to its last (s); None where unknown (a restart)."""

    reason: str | None
    deferred: int | None = None
    longest_wait: float | None = None
    lasted: float | None = None


@dataclass(frozen=True, slots=True)
class TopicAccessDenied:
    """The engine may not describe ``topic`` (or its configs): ``reason`` names the missing
    permission and its grant (``engine.kafka.access``); ``None``: it may again. Recorded when it changes.
    Its partitions wait; a request naming it is rejected with the reason."""

    topic: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class ClockSetBack:
    """An input's clock (``now``) read more than ``state.CLOCK_SET_BACK`` seconds before the newest
    time the log knows: the host's clock was set back, or a decider whose clock lags took over.
    ``seen`` is the clock's latest reading the log knows (``State.clock_read``). Every timer the state
    keeps (retries, election and revert graces, the release bucket, the times partitions are known as
    of) moves back by ``seen - now``, so none waits for the old clock and each keeps the time it had
    left."""

    seen: float
    now: float


# --- throttles, limits, control ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThrottlesApplied:
    """Set before the steps that need them start (KIP-73)."""

    throttles: ThrottleSet


@dataclass(frozen=True, slots=True)
class ThrottlesRemoved:
    throttles: ThrottleSet


@dataclass(frozen=True, slots=True)
class ThrottleReleased:
    """The step's copy is close to done: its throttle entries go before its replicas join the ISR."""

    request_id: str
    tp: TopicPartition
    number: int
    remaining: int  # bytes still to copy then (charged to its receiving brokers' release bucket)
    at: float | None = None  # the shell's clock


@dataclass(frozen=True, slots=True)
class ThrottlesDrifted:
    """The throttle configuration read back from the cluster differs from what the log says is
    in force: ``missing`` entries and rates are set again; ``unexpected`` entries (on partitions
    kreassign moves, needed by no step in flight) are removed. Other tools' entries and rates
    on anything else are left alone."""

    missing: ThrottleSet
    unexpected: ThrottleSet


@dataclass(frozen=True, slots=True)
class ThrottlesDiffered:
    """The throttle configuration read back differs from what the log says is in force, and no
    earlier read-back confirms it yet: a broker answers configs from its metadata, which may lag the
    controller (a change just made reads back as not made). Nothing is changed; a difference that a
    read-back taken at least ``decide.METADATA_SETTLE`` seconds later still shows is a
    ``ThrottlesDrifted``. Both sets empty: the last difference is gone (or was judged)."""

    missing: ThrottleSet
    unexpected: ThrottleSet
    at: float | None = None  # the shell's clock of the read-back


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
    already: bool = False  # the engine was paused already: nothing changed (a repeated pause is no error)


@dataclass(frozen=True, slots=True)
class Resumed:
    command_id: str = ""
    already: bool = False  # the engine was running already: nothing changed


Event = (
    BrokersObserved | TopicObserved | PartitionObserved
    | RequestAccepted | CommandRejected | PartitionQueued | PartitionReady | PartitionWaiting
    | StepPlanned | StepStarted | StepFailed | StepCompleted | PartitionCompleted | RequestCompleted
    | CancelRequested | CancelSkipped | PartitionCancelled | StepAborted | PartitionReverted
    | ThrottlesApplied | ThrottlesRemoved | LimitsChanged | ThrottleRateChanged | Paused | Resumed
    | ActionFailed | ActionRetried | ActionSucceeded | ClusterUnreachable | ThrottlesDrifted | ThrottleReleased
    | TopicAccessDenied | ActionAnswered | ClockSetBack | ThrottlesDiffered | TopicMissing | LooksPaced
)

EVENT_TYPES: tuple[type, ...] = Event.__args__  # type: ignore[attr-defined]
