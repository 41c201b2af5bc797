"""The engine's Faust tables, as pure functions of the state: views of the events topic.

The decider keeps four tables (``engine.worker``); each row is JSON-ready and
derived from ``engine.state.State`` alone, so a table is always what folding
the events topic gives (``rows(fold(log))``), which the test suite checks:

| table | key | row |
| --- | --- | --- |
| ``partitions`` | ``topic-N`` | request, status, replicas observed, target, original, steps planned/done, waiting reason |
| ``requests`` | request id | status, partitions, count per partition status |
| ``in_flight`` | ``topic-N`` | request, step number, CR, TR, started, aborting |
| ``control`` | ``control`` | limits, throttle rate for new steps, paused, throttles in force |

``touched(events)`` names the keys a batch of events can change, so the
decider rewrites only those rows after each decision.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from engine import events as ev
from engine.partition import TopicPartition
from engine.state import State

TABLES = ("partitions", "requests", "in_flight", "control")
CONTROL = "control"


def partition_row(s: State, tp: TopicPartition) -> dict | None:
    e = s.partitions.get(tp)
    if e is None:
        return None
    obs = s.observed.get(tp)
    return {
        "request": e.request_id,
        "status": e.status,
        "replicas": list(obs.replicas) if obs is not None else None,
        "target": list(e.target),
        "original": list(e.original) if e.original is not None else None,
        "steps_planned": e.steps_planned,
        "steps_done": e.steps_done,
        "rolling_back": e.rolling_back,
        "waiting": s.waiting.get(tp),
        "note": e.note,
    }


def request_row(s: State, request_id: str) -> dict | None:
    r = s.requests.get(request_id)
    if r is None:
        return None
    return {"status": r.status, "partitions": r.partitions, "by_status": dict(sorted(r.counts.items()))}


def in_flight_row(s: State, tp: TopicPartition) -> dict | None:
    f = s.steps.get(tp)
    if f is None:
        return None
    return {
        "request": f.request_id, "number": f.number, "cr": list(f.step.cr), "tr": list(f.step.tr),
        "started": f.started, "aborting": f.aborting,
    }


def control_row(s: State) -> dict:
    t = s.throttles
    return {
        "limits": s.limits.as_dict(),
        "throttle_rate": s.throttle_rate,
        "paused": s.paused,
        "throttles": {
            "rate": t.rate,
            "leader_brokers": sorted(t.leader_brokers),
            "follower_brokers": sorted(t.follower_brokers),
            "topics": {topic: {"leader": lead, "follower": follow}
                       for topic, (lead, follow) in sorted(t.by_topic().items())},
        },
    }


class Keys(NamedTuple):
    partitions: frozenset  # TopicPartition
    requests: frozenset  # request ids


def touched(events: Iterable[ev.Event]) -> Keys:
    tps: set[TopicPartition] = set()
    rids: set[str] = set()
    for e in events:
        tp = getattr(e, "tp", None)
        if tp is not None:
            tps.add(tp)
        rid = getattr(e, "request_id", None)
        if rid:
            rids.add(rid)
    return Keys(frozenset(tps), frozenset(rids))


def rows(s: State, keys: Keys | None = None) -> dict[str, dict[str, dict | None]]:
    """table -> key -> row (``None``: the key has no row). Every row if ``keys`` is None."""
    tps = s.partitions.keys() if keys is None else keys.partitions
    rids = s.requests.keys() if keys is None else keys.requests
    out: dict[str, dict[str, dict | None]] = {
        "partitions": {str(tp): partition_row(s, tp) for tp in tps},
        "requests": {rid: request_row(s, rid) for rid in rids},
        "in_flight": {str(tp): in_flight_row(s, tp) for tp in (s.steps.keys() if keys is None else tps)},
        "control": {CONTROL: control_row(s)},
    }
    if keys is None:
        out["in_flight"].update({str(tp): None for tp in s.partitions.keys() if tp not in s.steps})
    return out


def present(table: dict[str, dict | None]) -> dict[str, dict]:
    """The rows that exist (a table's contents)."""
    return {k: v for k, v in table.items() if v is not None}
