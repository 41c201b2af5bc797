"""What ``kreassign simulate`` reports, as text or JSON."""

from __future__ import annotations

import json
import textwrap

from engine.sim.bound import Bound
from engine.sim.scenario import Scenario
from engine.whatif.strategies import RunResult
from engine.core.units import format_duration, format_rate, format_size


def latency(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def measures(result: RunResult, bound: Bound) -> dict:
    s = result.stats
    p = result.probe
    return {
        "strategy": result.strategy,
        "finished": result.finished,
        "makespan_seconds": round(result.makespan, 3),
        "lower_bound_seconds": round(bound.seconds, 3),
        "ratio": round(result.makespan / bound.seconds, 4) if bound.seconds else None,
        "moves": result.moves,
        "peak_copies_in_per_broker": max(s.peak_copies_in.values(), default=0),
        "peak_copies_out_per_broker": max(s.peak_copies_out.values(), default=0),
        "peak_throttled_in_bytes_per_second": round(max(s.peak_throttled_in.values(), default=0.0)),
        "peak_throttled_out_bytes_per_second": round(max(s.peak_throttled_out.values(), default=0.0)),
        "peak_traffic_in_bytes_per_second": round(max(s.peak_traffic_in.values(), default=0.0)),
        "lowest_isr_headroom": s.min_headroom,
        "under_min_isr_partition_seconds": round(s.under_min_seconds, 3),
        "partitions_under_min_isr": len(s.under_min_partitions),
        "bytes_copied": round(s.bytes_copied),
        "peak_under_replicated_partitions": s.peak_under_replicated,
        "probe": None if p is None else {
            "messages": round(p.messages),
            "p50_ms": round(p.p50 * 1000, 1),
            "p99_ms": round(p.p99 * 1000, 1),
            "max_ms": round(p.max * 1000, 1),
        },
        "acks_all_blocked_seconds": None if p is None else round(p.blocked_seconds, 3),
        "acks_all_blocked_partition_seconds": None if p is None else round(p.blocked_partition_seconds, 3),
        "isr_joins_throttled_and_saturated": s.throttled_joins,
        "engine_requests_per_broker": {  # kreassign: what its looks and actions sent each broker
            str(r.broker): {"requests": r.requests, "mean_per_second": round(r.mean, 2), "peak_per_second": r.peak}
            for r in result.request_rates()
        },
        "throttle_entries_left_when_done": result.throttles_after,  # when the move ended
        "at_target": result.at_target,
        "throttles_left": result.throttles_left,  # after the settling (and --verify, for Kafka's tool)
        "throttles_cleared_by_verify": result.cleared_by_verify,
    }


BURST_NOTE = (
    "above the throttle ({throttle}) without the throttle failing: Kafka's replication quota is a rate over 11 "
    "samples of 1 s, so a quota that recorded less than its rate lets the bytes it saved up through at network "
    "speed (up to 11 s x rate at once), then holds its rate (docs/simulator.md, the quota window's early burst)")
"""Why a peak of throttled traffic passes the throttle, said where the figure is (text: a note under the table)."""


def notes(scenario: Scenario, results: list[dict]) -> list[str]:
    """The notes the figures need: a peak of throttled traffic above the throttle."""
    if scenario.throttle is None:
        return []
    over = any(m[k] > scenario.throttle for m in results
               for k in ("peak_throttled_in_bytes_per_second", "peak_throttled_out_bytes_per_second"))
    return [BURST_NOTE.format(throttle=format_rate(scenario.throttle))] if over else []


def document(scenario: Scenario, bound: Bound, results: list[RunResult]) -> dict:
    rows = [measures(r, bound) for r in results]
    return {
        "scenario": scenario.name,
        "partitions": len(scenario.partitions),
        "brokers": len(scenario.brokers),
        "partitions_moved": len(scenario.targets),
        "bytes_to_copy": bound.bytes_to_copy,
        "throttle_bytes_per_second": scenario.throttle,
        "probe_messages_per_second": scenario.probe_rate,
        "lower_bound": {"seconds": round(bound.seconds, 3), "binding": bound.binding},
        "bytes_over_throttle_seconds": round(bound.bytes_over_throttle, 3),
        "results": rows,
        "notes": notes(scenario, rows),
    }


_ROWS = (
    ("makespan", lambda m: format_duration(m["makespan_seconds"]) + ("" if m["finished"] else " (gave up)")),
    ("lower bound", lambda m: format_duration(m["lower_bound_seconds"])),
    ("makespan / bound", lambda m: f"{m['ratio']:.3f}" if m["ratio"] is not None else "-"),
    ("moves (alter entries)", lambda m: str(m["moves"])),
    ("peak copies per broker in/out", lambda m: f"{m['peak_copies_in_per_broker']}/{m['peak_copies_out_per_broker']}"),
    ("peak throttled traffic per broker in", lambda m: format_rate(m["peak_throttled_in_bytes_per_second"])),
    ("peak throttled traffic per broker out", lambda m: format_rate(m["peak_throttled_out_bytes_per_second"])),
    ("peak inbound traffic per broker", lambda m: format_rate(m["peak_traffic_in_bytes_per_second"])),
    ("lowest ISR headroom", lambda m: str(m["lowest_isr_headroom"])),
    ("time under min ISR (partition-s)", lambda m: f"{m['under_min_isr_partition_seconds']:.0f}"),
    ("partitions ever under min ISR", lambda m: str(m["partitions_under_min_isr"])),
    ("peak under-replicated partitions", lambda m: str(m["peak_under_replicated_partitions"])),
    ("acks=all probe latency p50", lambda m: latency(m["probe"]["p50_ms"] / 1000) if m["probe"] else "-"),
    ("acks=all probe latency p99", lambda m: latency(m["probe"]["p99_ms"] / 1000) if m["probe"] else "-"),
    ("acks=all probe latency max", lambda m: latency(m["probe"]["max_ms"] / 1000) if m["probe"] else "-"),
    ("acks=all blocked, any partition", lambda m: f"{m['acks_all_blocked_seconds']:.1f} s"
                                                  if m["acks_all_blocked_seconds"] is not None else "-"),
    ("ISR joins throttled and saturated", lambda m: str(m["isr_joins_throttled_and_saturated"])),
    ("engine requests/s, busiest broker", lambda m: _busiest(m["engine_requests_per_broker"])),
    ("throttle entries left when the move ends", lambda m: str(m["throttle_entries_left_when_done"])
     + (" (until --verify)" if m["throttles_cleared_by_verify"] else "")),
    ("ends at target, throttles cleared", lambda m: f"{'yes' if m['at_target'] else 'NO'}, "
                                                    f"{'NO' if m['throttles_left'] else 'yes'}"
                                                    + (" (by --verify)" if m["throttles_cleared_by_verify"] else "")),
)
_NOTED = ("peak throttled traffic per broker in", "peak throttled traffic per broker out")
"""The rows ``BURST_NOTE`` explains: marked (*) when the note is printed."""


def _busiest(per_broker: dict) -> str:
    """The broker that got the most of the engine's requests: mean and peak per second."""
    if not per_broker:
        return "-"
    b, r = max(per_broker.items(), key=lambda kv: (kv[1]["requests"], kv[0]))
    return f"{r['mean_per_second']:.1f} / {r['peak_per_second']} (broker {b})"


def text(scenario: Scenario, bound: Bound, results: list[RunResult]) -> str:
    doc = document(scenario, bound, results)
    throttle = "none" if scenario.throttle is None else format_rate(scenario.throttle)
    probe = (f"acks=all probe: {scenario.probe_rate:g} messages/s round robin over every partition, "
             "latency added by the move (messages sent during it)") if scenario.probe_rate else "no probe producer"
    lines = [
        f"scenario {scenario.name}: {doc['brokers']} brokers, {doc['partitions']} partitions, "
        f"{doc['partitions_moved']} to move, {format_size(bound.bytes_to_copy)} to copy, throttle {throttle}",
        f"lower bound {format_duration(bound.seconds)} ({bound.binding})"
        + (f"; bytes / throttle into the busiest broker {format_duration(bound.bytes_over_throttle)} (a quota's "
           "burst and kreassign's released tails can beat it)" if bound.bytes_over_throttle else ""),
        probe,
        "",
    ]
    rows = [m for m in doc["results"]]
    marked = [(label + (" (*)" if doc["notes"] and label in _NOTED else ""), cell) for label, cell in _ROWS]
    width = max(len(label) for label, _ in marked)
    col = 2 + max(len(m["strategy"]) for m in rows)
    col = max(col, 2 + max(len(cell(m)) for _label, cell in marked for m in rows))
    lines.append(" " * width + "  " + "".join(f"{m['strategy']:>{col}}" for m in rows))
    for label, cell in marked:
        lines.append(f"{label:<{width}}  " + "".join(f"{cell(m):>{col}}" for m in rows))
    lines.extend(textwrap.fill(note, max(len(lines[-1]), 80), initial_indent="(*) ", subsequent_indent="    ")
                 for note in doc["notes"])
    return "\n".join(lines)


def as_json(scenario: Scenario, bound: Bound, results: list[RunResult]) -> str:
    return json.dumps(document(scenario, bound, results), indent=2)
