"""Inputs to ``decide``: operator commands, cluster observations, executor reports, ticks.

Commands come from operators and services (the commands topic, the CLI).
Observations and action outcomes come from the engine's own shells (the ISR
watcher, the executor). None of them changes state by itself: ``decide`` turns each into
events, and only events change state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition

if TYPE_CHECKING:  # values of engine.cluster, which itself imports this module
    from engine.core.actions import Action
    from engine.core.outcomes import Result
    from engine.core.throttles import ThrottleSet


@dataclass(frozen=True, slots=True)
class PartitionTarget:
    """One entry of Kafka's reassignment JSON."""

    topic: str
    partition: int
    replicas: Replicas
    log_dirs: tuple[str, ...] | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# --- operator commands -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submit:
    """Reassign partitions to the given targets (Kafka's reassignment JSON)."""

    request_id: str
    partitions: tuple[PartitionTarget, ...]
    throttle_rate: int | None = None  # bytes/s for this and later moves; None: keep current
    command_id: str = ""
    allow_below_min_insync: bool = False  # accept targets with fewer replicas than min.insync.replicas
    # how its partitions step (engine.core.step.STEP_MODES): incremental, kip-435 or whole
    steps: str = "incremental"
    unthrottled: bool = False  # this and later moves unthrottled (execute --throttle none); throttle_rate is None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel a request, or some of its partitions; optionally roll them back."""

    request_id: str
    partitions: tuple[TopicPartition, ...] | None = None  # None: the whole request
    rollback: bool = False
    command_id: str = ""
    include_completed: bool = False  # with rollback: move completed partitions back too


@dataclass(frozen=True, slots=True)
class ChangeLimits:
    changes: Mapping[str, int]  # field names or KIP aliases -> value
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class ChangeThrottle:
    rate: int | None  # bytes/s; None: unthrottled
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class Pause:
    command_id: str = ""


@dataclass(frozen=True, slots=True)
class Resume:
    command_id: str = ""


Command = Submit | Cancel | ChangeLimits | ChangeThrottle | Pause | Resume


# --- from the engine's shells --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """What a watcher saw on the cluster. Any part may be absent.

    ``topics`` maps a topic to its info, or to ``None`` if it does not exist.
    ``denied`` maps a topic the engine may not describe (or whose configs it may not
    describe) to the explanation, with the grant (``engine.kafka.access``): Kafka does not
    say whether such a topic exists. Only what differs from the state becomes an
    event. ``now`` is the shell's clock (seconds) when it looked; ``None`` when the
    caller keeps no clock.
    """

    brokers: tuple[Broker, ...] | None = None
    topics: Mapping[str, TopicInfo | None] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)
    now: float | None = None
    denied: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ObservationFailed:
    """The watcher could not observe the cluster (``reason``): nothing is known of it now."""

    reason: str
    now: float | None = None


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What the cluster said to one action the log asked for (``engine.core.actions``):
    ``Ok``, ``Refused`` (Kafka's error) or ``Unavailable`` (``engine.core.outcomes``).

    Every outcome is an input of the core, like an observation: the rule each action
    concerns decides what happens next (retry when, wait, or give up and say so)."""

    action: "Action"
    result: "Result"
    now: float | None = None


@dataclass(frozen=True, slots=True)
class ThrottlesObserved:
    """KIP-73 configuration read back from the cluster, for these topics and brokers."""

    throttles: "ThrottleSet"
    topics: frozenset[str] = frozenset()
    brokers: frozenset[int] = frozenset()
    now: float | None = None


@dataclass(frozen=True, slots=True)
class CatchUpObserved:
    """Bytes the new replicas of steps in flight still miss (the most any of a step's NR misses),
    measured on the cluster (DescribeLogDirs: the leader's log size minus theirs)."""

    remaining: Mapping[TopicPartition, int]
    now: float | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    """Reconcile and schedule: complete what is done, retry what is due, start what may start.
    ``now`` is the shell's clock (seconds); ``None``: no clock, every retry is due. ``looked``: what
    the shell's look just before this tick showed of each partition it looked at
    (``engine.core.decide.starting`` names those it should); only they may start a step, and only
    where the state holds the leader that look showed (a look the state set aside, which it could not
    order after what it knew, showing another leader starts nothing), so each step is charged to its
    partition's leader as it is now. ``None``: every observation the state holds counts as fresh (a shell that looks at
    everything it feeds, or keeps no rounds)."""

    now: float | None = None
    looked: Mapping[TopicPartition, PartitionState] | None = None


@dataclass(frozen=True, slots=True)
class Unverified:
    """A command the engine's signature check refused (``engine.log.signing``): decide
    rejects it with ``reason`` and changes nothing else."""

    command: Command
    reason: str


@dataclass(frozen=True, slots=True)
class LooksPaced:
    """The runtime's pacing of its reads by the request budget (``reason``), or its end (``None``, with what
    the pacing came to: ``events.LooksPaced``): recorded once per change."""

    reason: str | None
    now: float | None = None
    deferred: int | None = None
    longest_wait: float | None = None
    lasted: float | None = None


@dataclass(frozen=True, slots=True)
class AdaptThrottle:
    """The adaptive throttle (``engine.core.adaptive``) proposes a new rate for new steps."""

    rate: int  # bytes/s
    reason: str


Input = (
    Command | Observation | ObservationFailed | ActionOutcome | ThrottlesObserved | CatchUpObserved | Tick | Unverified
    | AdaptThrottle | LooksPaced
)
