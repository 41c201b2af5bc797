"""Inputs to ``decide``: operator commands, cluster observations, executor reports, ticks.

Commands come from operators and services (the commands topic, the CLI).
Observations and reports come from the engine's own shells (the ISR watcher,
the executor). None of them changes state by itself: ``decide`` turns each into
events, and only events change state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from engine.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition


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


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel a request, or some of its partitions; optionally roll them back."""

    request_id: str
    partitions: tuple[TopicPartition, ...] | None = None  # None: the whole request
    rollback: bool = False
    command_id: str = ""


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
    Only what differs from the state becomes an event.
    """

    brokers: tuple[Broker, ...] | None = None
    topics: Mapping[str, TopicInfo | None] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepStartReport:
    """The executor's result of starting a step on the cluster."""

    request_id: str
    tp: TopicPartition
    step: int
    error: str | None = None  # None: the cluster accepted the step


@dataclass(frozen=True, slots=True)
class Tick:
    """Reconcile and schedule: complete what is done, start what may start."""


@dataclass(frozen=True, slots=True)
class Unverified:
    """A command the engine's signature check refused (``engine.signing``): decide
    rejects it with ``reason`` and changes nothing else."""

    command: Command
    reason: str


@dataclass(frozen=True, slots=True)
class AdaptThrottle:
    """The adaptive throttle (``engine.adaptive``) proposes a new rate for new steps."""

    rate: int  # bytes/s
    reason: str


Input = Command | Observation | StepStartReport | Tick | Unverified | AdaptThrottle
