"""What an operator wants to know of a state: a pure function of ``State``.

``summarize(state)`` gives a JSON-ready dict (requests, partitions per status,
steps in flight, why partitions wait, throttles in force, limits, pause, the
commands the engine rejected with every reason);
``to_text`` renders it for a terminal. ``kreassign replay`` prints it for the
state folded from the events topic; ``kreassign status`` can print it for the
engine's live state.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from engine.partition import TopicPartition
from engine.state import STATUSES, TERMINAL, State


def summarize(state: State) -> dict:
    by_status = Counter(entry.status for entry in state.partitions.values())
    requests = sorted(state.requests.values(), key=lambda r: r.seq)
    throttles = state.throttles
    return {
        "requests": [
            {
                "id": r.request_id,
                "status": r.status,
                "partitions": r.partitions,
                "by_status": {s: r.count(s) for s in STATUSES if r.count(s)},
            }
            for r in requests
        ],
        "partitions": {s: by_status[s] for s in STATUSES if by_status[s]},
        "steps_in_flight": len(state.steps),
        "waiting": dict(Counter(state.waiting.values()).most_common()),
        "throttles": {
            "rate": throttles.rate,
            "leader_brokers": sorted(throttles.leader_brokers),
            "follower_brokers": sorted(throttles.follower_brokers),
            "topics": {
                topic: {"leader": leader, "follower": follower}
                for topic, (leader, follower) in sorted(throttles.by_topic().items())
            },
        },
        "throttle_rate": state.throttle_rate,
        "limits": state.limits.as_dict(),
        "paused": state.paused,
        "rejected": dict(sorted(state.rejected.items())),
        "rejections": [rejection_row(e) for e in state.rejections],
    }


def rejection_row(e) -> dict:
    """A ``CommandRejected`` event as JSON-ready data."""
    return {"command": e.command, "command_id": e.command_id, "request": e.request_id, "reasons": list(e.reasons)}


def bytes_remaining(state: State, sizes: Mapping[TopicPartition, int]) -> int:
    """Bytes still to copy: for each unfinished partition of known size, its size times the
    replicas of its goal it does not have yet (as last observed)."""
    total = 0
    for tp, entry in state.partitions.items():
        size = sizes.get(tp)
        goal = entry.goal
        if entry.status in TERMINAL or size is None or goal is None:
            continue
        obs = state.observed.get(tp)
        have = set(obs.replicas) - set(obs.adding) if obs is not None else set()
        total += size * len(set(goal) - have)
    return total


def to_text(summary: dict) -> str:
    lines = []
    requests = summary["requests"]
    lines.append(f"requests: {len(requests)}")
    for r in requests:
        counts = ", ".join(f"{s} {n}" for s, n in r["by_status"].items()) or "no partitions"
        lines.append(f"  {r['id']}: {r['status']}, {r['partitions']} partitions ({counts})")
    parts = summary["partitions"]
    lines.append("partitions: " + (", ".join(f"{s} {n}" for s, n in parts.items()) or "none"))
    lines.append(f"steps in flight: {summary['steps_in_flight']}")
    for reason, n in summary["waiting"].items():
        lines.append(f"  waiting ({n}): {reason}")
    t = summary["throttles"]
    if t["topics"] or t["leader_brokers"] or t["follower_brokers"]:
        lines.append(f"throttles in force: rate {_rate(t['rate'])}, leader brokers {t['leader_brokers']}, "
                     f"follower brokers {t['follower_brokers']}")
        for topic, sides in t["topics"].items():
            lines.append(f"  {topic}: leader {','.join(sides['leader']) or '-'}; "
                         f"follower {','.join(sides['follower']) or '-'}")
    else:
        lines.append("throttles in force: none")
    lines.append(f"throttle rate for new steps: {_rate(summary['throttle_rate'])}")
    lines.append("limits: " + ", ".join(f"{k}={v}" for k, v in summary["limits"].items()))
    lines.append(f"paused: {'yes' if summary['paused'] else 'no'}")
    rejected = summary["rejected"]
    if rejected:
        kept = summary["rejections"]
        lines.append(f"rejected commands: {sum(rejected.values())} ("
                     + ", ".join(f"{c} {n}" for c, n in rejected.items())
                     + (f"; the latest {len(kept)} below)" if len(kept) < sum(rejected.values()) else ")"))
        for r in kept:
            lines.append(f"  {r['command']} {r['command_id'] or '(no command id)'}"
                         + (f" request {r['request']}" if r["request"] else "") + ": " + "; ".join(r["reasons"]))
    else:
        lines.append("rejected commands: none")
    return "\n".join(lines)


def _rate(rate: int | None) -> str:
    return "unthrottled" if rate is None else f"{rate} B/s"
