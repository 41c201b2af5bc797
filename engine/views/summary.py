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

from engine.core import events as ev
from engine.core.partition import TopicPartition
from engine.core.decide import kept_rates
from engine.core.state import STATUSES, TERMINAL, State
from engine.core.units import format_rate
from engine.views.progress import cancel_skips, counts_of, held_counts, kafka_rate, outcome, request_line, skip_lines


def summarize(state: State) -> dict:
    by_status = Counter(entry.status for entry in state.partitions.values())
    by_status.update(dict(state.retired_partitions.items()))  # those that left the state with their request
    requests = state.every_request()
    throttles = state.throttles
    held = held_counts(state)
    return {
        "requests": [
            {
                "id": r.request_id,
                "status": r.status,
                "outcome": outcome(r.status, {s: r.count(s) for s in STATUSES}),
                "partitions": r.partitions,
                "by_status": {s: r.count(s) for s in STATUSES if r.count(s)},
                "held": held[r.request_id],
                "cancel_skipped": cancel_skips(state, r),
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
            # rates no step in flight needs, kept while a partition not ended names their broker
            "kept": dict(zip(("leader_brokers", "follower_brokers"), map(sorted, kept_rates(state)))),
            "topics": {
                topic: {"leader": leader, "follower": follower}
                for topic, (leader, follower) in sorted(throttles.by_topic().items())
            },
        },
        "throttle_rate": state.throttle_rate,
        **kafka_rate(state),
        "limits": state.limits.as_dict(),
        "paused": state.paused,
        "rejected": dict(sorted(state.rejected.items())),
        "rejections": [rejection_row(e) for e in state.rejections],
        "problems": problems(state),
    }


def pacings(envelopes, looks_paced: str | None) -> list[dict]:
    """The pacings of the decider's looks (``LooksPaced``) among ``envelopes`` (``EventEnvelope``s in log
    order), each a start and its end paired: ``line`` (the start's: the first deferral's broker and the
    budget), ``started_at``, ``ended_at`` (ISO 8601; None: not among the envelopes, or still on), and the
    end's figures ``deferred``, ``longest_wait_seconds`` and ``lasted_seconds`` (None where the end has
    none: a restart). ``looks_paced`` is the folded state's: a pacing on whose start is not among the
    envelopes (before a snapshot's recent events) is listed with its line and no start time, so the list
    agrees with the state ``status`` shows."""
    out: list[dict] = []
    for envelope in envelopes:
        e = envelope.payload
        if not isinstance(e, ev.LooksPaced):
            continue
        at = envelope.recorded_at.isoformat()
        if e.reason is not None:
            out.append({"line": e.reason, "started_at": at, "ended_at": None, "deferred": None,
                        "longest_wait_seconds": None, "lasted_seconds": None})
            continue
        if not out or out[-1]["ended_at"] is not None:  # its start is not among the envelopes
            out.append({"line": None, "started_at": None})
        out[-1].update(ended_at=at, deferred=e.deferred, longest_wait_seconds=e.longest_wait, lasted_seconds=e.lasted)
    if looks_paced is not None and (not out or out[-1]["ended_at"] is not None):
        out.append({"line": looks_paced, "started_at": None, "ended_at": None, "deferred": None,
                    "longest_wait_seconds": None, "lasted_seconds": None})
    return out


def pacing_lines(rows: list[dict]) -> list[str]:
    """``pacings`` in words, a line each: when it started and ended, its line and what it came to."""
    out = []
    for p in rows:
        when = (f"from {p['started_at'] or '(before the events read)'} "
                + (f"to {p['ended_at']}" if p["ended_at"] else "(still on where the fold stops)"))
        line = p["line"] or "looks paced by the request budget (its start is before the events read)"
        if p["ended_at"] is None:
            out.append(f"  {when}: {line}")
            continue
        came = describe(ev.LooksPaced(None, p["deferred"], p["longest_wait_seconds"], p["lasted_seconds"]))
        out.append(f"  {when}: {line}; then {came}")
    return out


def rejection_row(e) -> dict:
    """A ``CommandRejected`` event as JSON-ready data."""
    return {"command": e.command, "command_id": e.command_id, "request": e.request_id, "reasons": list(e.reasons)}


def problems(state: State, limit: int = 200) -> list[dict]:
    """What is failing now and when it is tried again: the cluster unreachable, throttle changes
    that failed, steps the cluster did not start or abort, elections that did not happen. Each
    entry: ``kind``, ``message`` and, where they apply, ``partition``, ``request``, ``step``,
    ``attempt``, ``retry_at`` (the engine's clock, epoch seconds)."""
    out: list[dict] = []
    if state.cluster_error is not None:
        out.append({"kind": "cluster", "message": f"cannot observe the cluster: {state.cluster_error}"})
    if state.denied:  # only topics with partitions still to move (a rejected request leaves none)
        open_topics = {tp.topic for tp, e in state.partitions.items() if e.status not in TERMINAL}
    for topic, reason in sorted(state.denied.items()):
        if topic not in open_topics:
            continue
        busy = sum(1 for tp in state.steps.keys() if tp.topic == topic)
        out.append({"kind": "access", "topic": topic,
                    "message": f"topic {topic}: {reason}; its partitions wait"
                               + (f" ({busy} steps in flight on it cannot be observed)" if busy else "")})
    if state.throttle_error is not None:
        failed = state.throttle_failed
        what = ", ".join([f"topic {t}" for t in sorted(failed.by_topic())] + [
            f"broker {b}" for b in sorted(failed.leader_brokers | failed.follower_brokers)])
        out.append({"kind": "throttles", "attempt": state.throttle_attempt, "retry_at": state.throttle_retry_at,
                    "message": f"throttle change failed ({what or 'retrying'}): {state.throttle_error}; "
                               f"steps that need it wait"})
    for tp, f in state.steps.items():
        if f.error is None:
            continue
        what = "abort of" if f.aborting else ("start of" if not f.started else "")
        out.append({"kind": "abort" if f.aborting else "step", "partition": str(tp), "request": f.request_id,
                    "step": f.number, "attempt": f.attempt, "retry_at": f.retry_at if f.retry else None,
                    "message": f"{what} step {f.number} failed: {f.error}".strip()})
        if len(out) >= limit:
            return out
    for tp, el in state.elections.items():
        if el.error is None:
            continue
        out.append({"kind": "election", "partition": str(tp), "attempt": el.attempt,
                    "retry_at": el.retry_at if el.retry else None,
                    "message": f"preferred leader election of broker {el.leader} failed: {el.error}"})
        if len(out) >= limit:
            return out
    return out


def describe(e: ev.Event) -> str:
    """One line an operator can read for an event that reports a failure or a correction."""
    where = " ".join(x for x in (
        f"request {e.request_id}" if getattr(e, "request_id", None) else "",
        f"partition {e.tp}" if getattr(e, "tp", None) is not None else "",
        f"step {e.number}" if getattr(e, "number", None) is not None else "",
    ) if x)
    if isinstance(e, ev.ActionFailed):
        then = ("not retried" if e.final else "retrying at once" if e.retry_at is None
                else f"retrying at {e.retry_at:.0f} (epoch s)")
        what = e.action.replace('_', ' ')
        said = f"{what} had no effect" if e.code == "IN_PROGRESS_AFTER_CANCEL" else f"cluster refused {what}"
        return f"{said}{' for ' + where if where else ''}: {e.code}: {e.message} (attempt {e.attempt}; {then})"
    if isinstance(e, ev.StepFailed):
        return f"{where}: {e.reason}"
    if isinstance(e, ev.ClusterUnreachable):
        return f"cannot observe the cluster: {e.reason}" if e.reason else "the cluster can be observed again"
    if isinstance(e, ev.LooksPaced):
        if e.reason:
            return e.reason
        came = [" ".join(x for x in (
            None if e.deferred is None else f"{e.deferred} look{'' if e.deferred == 1 else 's'} deferred",
            None if e.lasted is None else f"over {e.lasted:.0f} s") if x)]
        if e.longest_wait is not None:
            came.append(f"the longest wait {e.longest_wait:.2f} s")
        came = [x for x in came if x]
        return "the engine's looks no longer wait for the request budget" + (f" ({', '.join(came)})" if came else "")
    if isinstance(e, ev.TopicAccessDenied):
        return f"topic {e.topic}: {e.reason}" if e.reason else f"topic {e.topic} can be described again"
    if isinstance(e, ev.ThrottlesDrifted):
        rates = rates_differing(e.missing)
        return (f"throttle configuration differed from the log: {_count(e.missing)} missing or at another rate "
                f"(set again), {_count(e.unexpected)} left over (removed)" + (f"; {'; '.join(rates)}" if rates else ""))
    if isinstance(e, ev.CancelSkipped):
        return f"{where}: cancel skipped: {e.reason}"
    if isinstance(e, ev.TopicMissing):
        what = "does not exist" if e.topic_id is None else f"has another topic id ({e.topic_id})"
        return (f"topic {e.topic}: a look says it {what}; believed only if a look "
                f"5 s later still says so (a broker's metadata may lag)")
    if isinstance(e, ev.ClockSetBack):
        return (f"the clock reads {e.seen - e.now:.0f} s before its latest reading in the log (set back, or a "
                f"standby whose clock lags took over): every retry and grace time moves back with it")
    return type(e).__name__ + (f" {where}" if where else "")


def throttle_change(e: ev.ThrottleRateChanged) -> str:
    """A throttle change as the status page lists it: the rate and who made it ("throttle rate for new
    steps 20 MB/s, by an operator (command c1)"; "... by request r1 (execute --throttle)"; "... by the
    adaptive throttle: <why>")."""
    rate = "none (unthrottled)" if e.rate is None else format_rate(e.rate)
    command = f" (command {e.command_id})" if e.command_id else ""
    if e.reason == "operator":
        who = f"an operator: kreassign throttle{command}"
    elif e.reason.startswith("request "):
        who = f"{e.reason} (execute --throttle){command}"
    else:
        who = f"the adaptive throttle: {e.reason.removeprefix('adaptive: ')}" if e.reason else "the engine"
    return f"throttle rate for new steps {rate}, set by {who}"


def rates_differing(missing) -> list[str]:
    """A line per broker rate of a throttle difference (``ThrottlesDiffered`` / ``ThrottlesDrifted``'s
    ``missing``) read at another value than the one in force, or not set: "broker 2:
    leader.replication.throttled.rate 500000000 read, 54000000 in force" (bytes/s, as Kafka's configs
    hold them). Empty for a difference recorded without the rate in force (a log from before it was)."""
    if missing.rate is None:
        return []
    reads = {r.broker: r for r in missing.rates}
    out = []
    for side, brokers in (("leader", missing.leader_brokers), ("follower", missing.follower_brokers)):
        for b in sorted(brokers):
            value = getattr(reads[b], side) if b in reads else None  # a broker with no rate is not read
            out.append(f"broker {b}: {side}.replication.throttled.rate "
                       f"{'not set' if value is None else f'{value} read'}, {missing.rate} in force")
    return out


def _count(t) -> str:
    return f"{len(t.leader) + len(t.follower)} entries, {len(t.leader_brokers | t.follower_brokers)} broker rates"


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
    for p in summary.get("problems", ()):
        retry = f" (attempt {p['attempt']}, retry at {p['retry_at']:.0f})" if p.get("retry_at") else (
            f" (attempt {p['attempt']})" if p.get("attempt") else "")
        where = f"{p['partition']}: " if p.get("partition") else ""
        lines.append(f"PROBLEM {where}{p['message']}{retry}")
    requests = summary["requests"]
    lines.append(f"requests: {len(requests)}")
    for r in requests:
        lines.append("  " + request_line(r["id"], r["outcome"], r["partitions"], counts_of(r["by_status"], r.get("held", 0))))
        lines.extend("    " + line for line in skip_lines(r.get("cancel_skipped") or []))
    parts = summary["partitions"]
    lines.append("partitions: " + (", ".join(f"{n} {STATUS_WORDS.get(s, s)}" for s, n in parts.items()) or "none"))
    lines.append(f"steps in flight: {summary['steps_in_flight']}")
    for reason, n in summary["waiting"].items():
        lines.append(f"  waiting ({n}): {reason}")
    t = summary["throttles"]
    if t["topics"] or t["leader_brokers"] or t["follower_brokers"]:
        lines.append(f"throttles in force: rate {_rate(t['rate'])}, leader brokers {t['leader_brokers']}, "
                     f"follower brokers {t['follower_brokers']}")
        kept = t.get("kept") or {}
        if kept.get("leader_brokers") or kept.get("follower_brokers"):
            lines.append(f"  kept between steps (no step in flight needs them; partitions not ended name their "
                         f"brokers, keep_throttle_rates): leader rates on brokers {kept['leader_brokers']}, "
                         f"follower rates on brokers {kept['follower_brokers']}")
        for topic, sides in t["topics"].items():
            lines.append(f"  {topic}: leader {','.join(sides['leader']) or '-'}; "
                         f"follower {','.join(sides['follower']) or '-'}")
    else:
        lines.append("throttles in force: none")
    lines.append(f"throttle rate for new steps: {_rate(summary['throttle_rate'])}" + margin_note(summary))
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


STATUS_WORDS = {"reverted": "rolled back", "in_flight": "in flight"}
"""The state's partition statuses in the words ``status`` uses."""


def margin_note(summary: dict) -> str:
    """What Kafka's rate is beside the throttle, when the margin makes it differ ("" otherwise)."""
    if not summary.get("margin_pct") or summary.get("kafka_rate") is None:
        return ""
    return (f" (Kafka's rate {format_rate(summary['kafka_rate'])}: + {summary['margin_pct']} %, throttle_margin_pct; "
            f"Kafka's quota lets through less than its rate, its refused fetchers back off)")


def _rate(rate: int | None) -> str:
    return "unthrottled" if rate is None else format_rate(rate)
