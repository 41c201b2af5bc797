"""Rebuild the state from the events topic: the fold of every event, in log order.

``replay`` reads the (single-partition) events topic from the latest snapshot
(``engine.log.snapshot``) or its first offset to its end, or up to an offset or a
time (always from offset 0), and folds the payloads with the core's
``engine.core.state.apply``. An event whose id was already applied (a re-delivered
write) is applied once. A message that cannot be decoded is reported in the
result's ``dead_letters`` and skipped; replay is read-only, so it writes
nothing to the dead-letter topic (the engine does, when it consumes).
"""

from __future__ import annotations

from collections import deque
from datetime import datetime
from typing import Any, Callable, Iterable, NamedTuple

from engine.kafka.broker_profile import KAFKA, BrokerProfile
from engine.kafka.client_config import ClientConfig
from engine.log.dead_letter import DeadLetter
from engine.log.envelope import EventEnvelope
from engine.log.eventlog import DEFAULT_TIMEOUT, decoder_for, read_topic
from engine.core import events as ev
from engine.views.progress import Progress
from engine.log.snapshot import Fold, gc_paused
from engine.core.state import EMPTY, State, apply
from engine.kafka.topics import DEFAULT_PREFIX, EVENTS, Topics, reader_group

DEDUPE_WINDOW = 100_000
"""Ids of this many latest events are remembered to drop duplicates: a
re-delivered write lands close to the original."""


class ReplayError(RuntimeError):
    """The log cannot be folded (an event does not apply to the state before it)."""


class Replayed(NamedTuple):
    state: State
    events: int  # events applied
    duplicates: int  # events skipped because their id was already applied
    next_offset: int  # offset after the last event read (where a later replay would go on)
    last_recorded_at: datetime | None
    dead_letters: tuple[DeadLetter, ...]
    snapshot: dict | None = None  # the snapshot it started from (id, next_offset, events, written_at)
    notes: tuple[str, ...] = ()  # why a snapshot was not used
    paced: tuple[EventEnvelope, ...] = ()  # the LooksPaced events folded (after a snapshot: and its recent ones)


def fold_log(
    records: Iterable[tuple[int, EventEnvelope]], until_time: datetime | None = None,
    state: State = EMPTY, window: int = DEDUPE_WINDOW,
    on_event: Callable[[State, EventEnvelope], None] | None = None,
    seen: set[str] | None = None, order: deque[str] | None = None,
) -> tuple[State, int, int, int, datetime | None]:
    """Fold (offset, envelope) records in order; stop before the first one recorded after ``until_time``.

    ``on_event(state_before, envelope)`` sees every event applied (for folds kept
    beside the state, e.g. ``engine.views.progress``); ``seen``/``order`` carry the
    duplicate window over from an earlier call when a fold goes on later.
    Returns (state, applied, duplicates, next offset, last recorded_at).
    """
    with gc_paused():  # the fold makes acyclic values only; the collector would walk them again and again
        return _fold(records, until_time, state, window, on_event, set() if seen is None else seen,
                     deque() if order is None else order)


def _fold(records, until_time, state, window, on_event, seen, order):
    applied = duplicates = 0
    next_offset = 0
    last = None
    for offset, envelope in records:
        if until_time is not None and envelope.recorded_at > until_time:
            break
        next_offset = offset + 1
        if envelope.id in seen:
            duplicates += 1
            continue
        seen.add(envelope.id)
        order.append(envelope.id)
        if len(order) > window:
            seen.discard(order.popleft())
        if on_event is not None:
            on_event(state, envelope)
        try:
            state = apply(state, envelope.payload)
        except Exception as e:  # noqa: BLE001 - a log the core cannot fold is reported, not a traceback
            raise ReplayError(
                f"event at offset {offset} ({type(envelope.payload).__name__}, id {envelope.id}) "
                f"does not apply to the state before it: {type(e).__name__}: {e}"
            ) from None
        applied += 1
        last = envelope.recorded_at
    return state, applied, duplicates, next_offset, last


def replay(
    config: ClientConfig, *, prefix: str = DEFAULT_PREFIX, profile: BrokerProfile = KAFKA, registry: Any = None,
    until_offset: int | None = None, until_time: datetime | None = None, timeout: float = DEFAULT_TIMEOUT,
    from_start: bool = False,
) -> Replayed:
    """The state folded from the events topic (see the module doc): from the latest usable snapshot
    and the events after it, unless ``from_start`` or a cut (``until_offset``/``until_time``) is
    asked for, which fold every event from offset 0."""
    from engine.log.snapshot_store import latest, resume

    topic = Topics.named(prefix).events
    dead: list[DeadLetter] = []
    notes: list[str] = []
    if not from_start and until_offset is None and until_time is None:
        found = latest(config, prefix=prefix, profile=profile, timeout=timeout)
        notes = list(found.assembled.skipped) + ([found.problem] if found.problem else [])
        snap, records, note = resume(config, found.assembled.snapshot, prefix=prefix, profile=profile,
                                     registry=registry, timeout=timeout, set_aside=dead.append)
        notes += [note] if note else []
        start = snap.fold if snap is not None else START
        paced = [e for e in start.recent if type(e.payload) is ev.LooksPaced]  # the snapshot's recent events

        def noted(records):
            for offset, envelope in records:
                if type(envelope.payload) is ev.LooksPaced and envelope.id not in {e.id for e in paced}:
                    paced.append(envelope)
                yield offset, envelope

        fold = extend(start, noted(records))
        used = None if snap is None else {"id": snap.id, "next_offset": snap.fold.next_offset,
                                          "events": snap.fold.events, "written_at": snap.written_at}
        if dead:
            fold = fold._replace(next_offset=max(fold.next_offset, max(d.source_offset for d in dead) + 1))
        return Replayed(fold.state, fold.events, fold.duplicates, fold.next_offset, fold.last_recorded_at,
                        tuple(dead), used, tuple(notes), tuple(paced))
    messages = read_topic(
        config, topic, decoder_for(EventEnvelope, registry, topic), dead.append,
        group_id=reader_group(prefix), profile=profile, until_offset=until_offset, idle_timeout=timeout,
        expect_partitions=EVENTS.partitions,
    )
    paced = []

    def note(_before: State, envelope: EventEnvelope) -> None:  # (events applied only: not those after the cut)
        if type(envelope.payload) is ev.LooksPaced:
            paced.append(envelope)

    try:
        state, applied, duplicates, next_offset, last = fold_log(((m.offset, m.value) for m in messages), until_time,
                                                                 on_event=note)
    finally:
        messages.close()
    if dead:
        next_offset = max(next_offset, max(d.source_offset for d in dead) + 1)
    return Replayed(state, applied, duplicates, next_offset, last, tuple(dead), paced=tuple(paced))


RECENT = 50
"""Latest events a fold keeps for the status page."""
QUIET = frozenset({ev.BrokersObserved, ev.TopicObserved, ev.PartitionObserved, ev.ThrottlesApplied,
                   ev.ThrottlesRemoved, ev.PartitionReady, ev.ThrottlesDiffered})
"""Events left out of the status page's recent events: every tick can append some (observations,
a step's throttles set and removed, a throttle read-back that differs until a later one confirms it),
and they would push everything else out. Throttles in force, waits and the latest observations are
shown from the state instead."""

START = Fold(EMPTY, Progress(), (), (), {}, 0, 0, 0, None, None)
"""The fold of no event."""


def extend(fold: Fold, records: Iterable[tuple[int, EventEnvelope]], until_time: datetime | None = None,
           window: int = DEDUPE_WINDOW) -> Fold:
    """``fold`` (a snapshot's, or ``START``) followed by ``records``: state, progress, duplicate
    window, recent events, when the steps in flight were planned, counts. Folding a log in two
    parts this way gives what folding it in one does (tests/test_snapshot.py)."""
    progress = fold.progress
    recent = deque(fold.recent, maxlen=RECENT)
    planned = dict(fold.planned)
    last_id = fold.last_event

    def track(before: State, envelope: EventEnvelope) -> None:
        nonlocal progress
        payload = envelope.payload
        progress = progress.after(before, payload, envelope.recorded_at)
        if type(payload) not in QUIET:
            recent.append(envelope)
        if type(payload) is ev.StepPlanned:
            planned[payload.tp] = envelope.recorded_at.timestamp()

    def watch(records):
        nonlocal last_id
        for offset, envelope in records:
            if until_time is None or envelope.recorded_at <= until_time:
                last_id = envelope.id
            yield offset, envelope

    order = deque(fold.window)
    state, applied, duplicates, next_offset, last = fold_log(
        watch(records), until_time, fold.state, window, on_event=track, seen=set(order), order=order)
    return Fold(state, progress, tuple(order), tuple(recent),
                {tp: t for tp, t in planned.items() if tp in state.steps},
                fold.events + applied, fold.duplicates + duplicates, next_offset or fold.next_offset,
                last_id, last or fold.last_recorded_at)
