"""Views of the events topic: tables of rows, as pure functions of the state.

The worker serves them at ``/tables`` (``engine.runtime.worker``), computed from the
decider's state when asked; each row is JSON-ready and derived from
``engine.core.state.State`` alone, so a table is always what folding the events
topic gives (``rows(fold(log))``), which the test suite checks after a run
with kills. They are not Faust tables: a changelog of them would only repeat
the log, and a new decider would read it back row by row before deciding.

| table | key | row |
| --- | --- | --- |
| ``partitions`` | ``topic-N`` | request, status, replicas observed, target, original, steps planned/done, waiting reason |
| ``requests`` | request id | status, partitions, count per partition status |
| ``in_flight`` | ``topic-N`` | request, step number, CR, TR, started, aborting |
| ``control`` | ``control`` | limits, throttle rate for new steps, paused, throttles in force |
"""

from __future__ import annotations

from engine.core.partition import TopicPartition
from engine.core.state import State

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
    r = s.request(request_id)
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


def rows(s: State) -> dict[str, dict[str, dict | None]]:
    """table -> key -> row, every row of every table."""
    return {
        "partitions": {str(tp): partition_row(s, tp) for tp in s.partitions.keys()},
        "requests": {r.request_id: request_row(s, r.request_id) for r in s.every_request()},
        "in_flight": {str(tp): in_flight_row(s, tp) for tp in s.steps.keys()},
        "control": {CONTROL: control_row(s)},
    }


def present(table: dict[str, dict | None]) -> dict[str, dict]:
    """The rows that exist (a table's contents)."""
    return {k: v for k, v in table.items() if v is not None}
