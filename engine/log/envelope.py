"""The envelopes that carry commands and events on Kafka, and their message keys.

Each Kafka message holds one envelope: an id (a UUID, so consumers can drop a
re-delivered message), a timestamp set by the shell that wrote it (the core
has no clock) and the payload, one command or one event of the core.
docs/events.md describes them; ``schemas/`` holds their Avro form.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from engine.core import commands as cmd
from engine.core import events as ev


class EventEnvelope(NamedTuple):
    id: str
    recorded_at: datetime
    payload: ev.Event


class CommandEnvelope(NamedTuple):
    id: str
    issued_at: datetime
    issued_by: str
    payload: cmd.Command
    signature: bytes | None = None  # reserved for signed commands; None: unsigned


COMMAND_TYPES: tuple[type, ...] = cmd.Command.__args__  # type: ignore[attr-defined]

CONTROL_KEY = "control"
CLUSTER_KEY = "cluster"


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> datetime:
    """The current time in UTC, to the millisecond (what ``timestamp-millis`` keeps)."""
    t = datetime.now(timezone.utc)
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def event_key(event: ev.Event) -> str:
    """``topic-N`` for an event about one partition, else its request id, else ``cluster``."""
    tp = getattr(event, "tp", None)
    if tp is not None:
        return str(tp)
    return getattr(event, "request_id", None) or CLUSTER_KEY


def command_key(command: cmd.Command) -> str:
    """The request id of a submit or cancel; ``control`` for limits, throttle, pause, resume."""
    return getattr(command, "request_id", None) or CONTROL_KEY


def millis(t: datetime) -> int:
    """Milliseconds since the epoch (Kafka's message timestamp)."""
    return (t - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
