"""One partition's history -> its steps and its under-replicated spans (pure, no Spark).

The analytics job groups the audit table by topic-partition and folds each
partition's events in log order with ``advance``; the state between
micro-batches is ``History`` (JSON in Spark's state store). A span is emitted
when it ends, so a step still in flight or a partition still under-replicated
appears once it finishes.

Definitions (docs/analytics.md):

* **Step**: from its ``StepPlanned`` to its ``StepCompleted``, ``StepAborted``
  or ``StepFailed`` (matched by request id and step number). ``started`` is its
  ``StepStarted`` (the cluster accepted it).
* **Bytes moved** by a completed step: each new replica (NR) copied one whole
  replica, ``size_bytes`` of the partition as last observed before the step
  completed. The destination broker receives ``size_bytes`` (direction
  ``in``), the step's source (the leader when it was planned, ``Step.source``)
  sends ``size_bytes`` per new replica (direction ``out``). All of it is
  attributed at the completion time: a copy counts as moved when it is in sync.
  Aborted and failed steps move nothing (an aborted copy's partial bytes are
  unknown, and they are dropped); an unknown size gives null bytes.
* **Under-replicated**: Kafka's definition (KIP-455: the replication factor of
  a partition being reassigned excludes the replicas being added): fewer
  in-sync replicas than ``replicas - adding``, as ``PartitionObserved`` shows.
  The span runs from the first observation that shows it to the first that
  does not.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, NamedTuple

STEP = "step"
UNDER_REPLICATED = "under_replicated"
COMPLETED, ABORTED, FAILED, IN_SYNC = "completed", "aborted", "failed", "in_sync"
STEP_ENDS = {"StepCompleted": COMPLETED, "StepAborted": ABORTED, "StepFailed": FAILED}
EVENT_TYPES = ("PartitionObserved", "StepPlanned", "StepStarted", *STEP_ENDS)
"""The events the fold reads; it ignores every other."""


class PartitionEvent(NamedTuple):
    offset: int
    recorded_ms: int
    event_type: str
    request_id: str | None
    step_number: int | None
    payload: dict


class Transfer(NamedTuple):
    broker: int
    direction: str  # "in" | "out"
    bytes: int | None


class Span(NamedTuple):
    kind: str  # STEP | UNDER_REPLICATED
    start_ms: int
    end_ms: int
    outcome: str  # completed | aborted | failed | in_sync
    request_id: str | None = None
    step_number: int | None = None
    started_ms: int | None = None
    source_broker: int | None = None
    new_replicas: tuple[int, ...] = ()
    dropped_replicas: tuple[int, ...] = ()
    moves_leader: bool | None = None
    size_bytes: int | None = None
    bytes_moved: int | None = None
    transfers: tuple[Transfer, ...] = ()


@dataclass
class History:
    size_bytes: int | None = None
    under_replicated_since: int | None = None
    open_steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # "request/number" -> step

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> "History":
        return cls(**json.loads(text)) if text else cls()


def under_replicated(state: dict) -> bool:
    expected = len(set(state["replicas"]) - set(state.get("adding") or ()))
    return len(state["isr"]) < expected


def transfers(source: int | None, new_replicas: Iterable[int], size_bytes: int | None) -> tuple[Transfer, ...]:
    """Bytes a completed step moved, per broker and direction (see the module doc)."""
    new_replicas = tuple(new_replicas)
    if not new_replicas:
        return ()
    out = tuple(Transfer(b, "in", size_bytes) for b in new_replicas)
    if source is not None:
        out += (Transfer(source, "out", None if size_bytes is None else size_bytes * len(new_replicas)),)
    return out


def advance(history: History, event: PartitionEvent) -> list[Span]:
    """Apply one event of the partition to ``history`` (in place); the spans it ends."""
    kind, p = event.event_type, event.payload
    if kind == "PartitionObserved":
        state = p["state"]
        if state.get("size_bytes") is not None:
            history.size_bytes = state["size_bytes"]
        if under_replicated(state):
            if history.under_replicated_since is None:
                history.under_replicated_since = event.recorded_ms
        elif history.under_replicated_since is not None:
            start, history.under_replicated_since = history.under_replicated_since, None
            return [Span(UNDER_REPLICATED, start, event.recorded_ms, IN_SYNC)]
        return []
    key = f"{event.request_id}/{event.step_number}"
    if kind == "StepPlanned":
        step = p["step"]
        history.open_steps[key] = {
            "planned": event.recorded_ms, "started": None, "nr": step["nr"], "dr": step["dr"],
            "source": step["leader"] if step["nr"] else None, "moves_leader": step["moves_leader"],
        }
    elif kind == "StepStarted":
        if key in history.open_steps:
            history.open_steps[key]["started"] = event.recorded_ms
    elif kind in STEP_ENDS:
        step = history.open_steps.pop(key, None)
        if step is None:  # its StepPlanned is not in the log read (started before it)
            return []
        outcome = STEP_ENDS[kind]
        size = history.size_bytes
        moved = transfers(step["source"], step["nr"], size) if outcome == COMPLETED else ()
        total = (None if size is None else size * len(step["nr"])) if outcome == COMPLETED else 0
        return [Span(
            STEP, step["planned"], event.recorded_ms, outcome, event.request_id, event.step_number,
            step["started"], step["source"], tuple(step["nr"]), tuple(step["dr"]), step["moves_leader"],
            size, total, moved,
        )]
    return []


def fold(history: History, events: Iterable[PartitionEvent]) -> list[Span]:
    """``advance`` over events in offset order; every span they end."""
    spans: list[Span] = []
    for event in sorted(events, key=lambda e: e.offset):
        spans.extend(advance(history, event))
    return spans
