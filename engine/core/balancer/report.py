"""``--show-cluster-state``: replicas, leaders and bytes per broker and per rack.

Each figure comes with its deviation from the average over brokers (or racks),
and the overall imbalance is the largest absolute deviation, in percent of the
average, for replicas, preferred leaders and bytes.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from engine.core.partition import Replicas, TopicPartition


class Row(NamedTuple):
    name: str  # broker id or rack
    replicas: int
    leaders: int  # actual leaders
    preferred_leaders: int
    bytes: int | None  # None: sizes unknown


class ClusterState(NamedTuple):
    brokers: tuple[Row, ...]
    racks: tuple[Row, ...]
    imbalance: dict[str, float]  # figure -> max |deviation| in % of the average (brokers)

    def deviation(self, rows: tuple[Row, ...], field: str) -> dict[str, float]:
        values = [getattr(r, field) for r in rows]
        if not values or any(v is None for v in values):
            return {}
        avg = sum(values) / len(values)
        return {r.name: (0.0 if avg == 0 else 100.0 * (getattr(r, field) - avg) / avg) for r in rows}


def cluster_state(
    assignment: Mapping[TopicPartition, Replicas],
    racks: Mapping[int, str | None],
    leaders: Mapping[TopicPartition, int | None] | None = None,
    sizes: Mapping[TopicPartition, int] | None = None,
    brokers: Iterable[int] = (),
) -> ClusterState:
    ids = sorted(set(brokers) | set(racks) | {b for r in assignment.values() for b in r})
    replicas = {b: 0 for b in ids}
    preferred = {b: 0 for b in ids}
    actual = {b: 0 for b in ids}
    data: dict[int, int] = {b: 0 for b in ids}
    known_sizes = sizes is not None and all(tp in sizes for tp in assignment)
    for tp, r in assignment.items():
        for b in r:
            replicas[b] += 1
            if known_sizes:
                data[b] += sizes[tp]
        if r:
            preferred[r[0]] += 1
        leader = (leaders or {}).get(tp, r[0] if r and leaders is None else None)
        if leader is not None and leader in actual:
            actual[leader] += 1
    rows = tuple(
        Row(str(b), replicas[b], actual[b], preferred[b], data[b] if known_sizes else None) for b in ids
    )
    by_rack: dict[str, list[Row]] = {}
    for b, row in zip(ids, rows):
        by_rack.setdefault(racks.get(b) or "(no rack)", []).append(row)
    rack_rows = tuple(
        Row(rack, sum(r.replicas for r in rs), sum(r.leaders for r in rs), sum(r.preferred_leaders for r in rs),
            sum(r.bytes for r in rs) if known_sizes else None)
        for rack, rs in sorted(by_rack.items())
    )
    state = ClusterState(rows, rack_rows, {})
    for field in ("replicas", "leaders", "preferred_leaders", "bytes"):
        dev = state.deviation(rows, field)
        if dev:
            state.imbalance[field] = max(abs(v) for v in dev.values())
    return state
