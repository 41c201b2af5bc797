"""What needs an operator's attention now, as a list of entries (a pure function of the state).

Waits, refusals and rejections are the answers operators look for first, and
a list of recent events scrolls them away within seconds. ``attention`` turns
the state into a short list that holds them for as long as they are true
(and the latest rejections for good): ``kreassign status``, ``/status`` and
the status page show it first, in this order:

| kind | severity | when |
| --- | --- | --- |
| ``blocked`` | error | the engine cannot act on or observe the cluster (the decider says why) |
| ``broker`` | error | a broker does not answer (the engine's broker watch), or is down while a step in flight needs it: what waits on it, the steps that cannot finish, the queued partitions held behind a limit those steps take (``engine.views.brokers``) |
| ``cluster``, ``throttles``, ``step``, ``abort``, ``election`` | error | what the cluster refused or could not be asked (``engine.views.summary.problems``): one entry per kind and error, with the partitions, the attempt and when it is tried again |
| ``waiting`` | warning | partitions that cannot take their next step, one entry per reason (and when a refused step is planned again) |
| ``pinned`` | warning | ready partitions the dominant-source rule holds (docs/algorithm.md, section 2): the leader that copies into one broker alone, why, and the partitions that wait for it, by reason (``engine.views.brokers``) |
| ``paused`` | warning | the engine starts no new step |
| ``paced`` | warning | the decider's looks wait for the request budget (``LooksPaced``): steps are seen to end, and the next started, up to a second later; shown from the first deferral until none came for ``PACED_SHOWN`` (60 s) or nothing is left to look at |
| ``throttles_differ`` | warning | a throttle read-back differs from the log and is not judged yet (``ThrottlesDiffered``): a piece or broker rate missing, a broker rate at another value than the one in force ("rate X read, Y in force"), or an entry left over; set right if the read-back ``METADATA_SETTLE`` after still shows it |
| ``skipped`` | warning | partitions a cancel left alone (KIP-236's rules), one entry per reason, while their request runs and for ``SKIPS_NEED_ATTENTION_FOR`` after it ended (then only in its history: ``kreassign list``, ``kreassign replay``) |
| ``rejected`` | error | the latest rejected commands, each with every reason and its time, for ``REJECTIONS_NEED_ATTENTION_FOR`` after the rejection (then only in history: ``rejection_history``, ``kreassign replay``) |

Every entry has the same shape, so a renderer needs no knowledge of kinds::

    {"kind": str, "severity": "error" | "warning", "title": str, "lines": [str],
     "count": int, "at": ISO time or None, "partitions": [str], "reason": str or None,
     "attempt": int or None, "retry_at": ISO time or None}

A new kind is added here, from the state, in the same shape; the renderers
show it as it is. Times of retries are the engine's clock (epoch seconds in
the state), shown as UTC times and, given ``now``, as "in N s".
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timezone
from typing import Iterable, Mapping

from engine.core.budget import PACED_SHOWN
from engine.core.decide import METADATA_SETTLE
from engine.core.state import COMPLETED, State
from engine.core.step import DROPS_HELD
from engine.views.progress import cancel_skipped
from engine.views.summary import problems, rates_differing

SHOWN_PARTITIONS = 12  # partitions named per entry; the rest are counted
SHOWN_REJECTIONS = 5
REJECTIONS_NEED_ATTENTION_FOR = 600.0
"""Seconds a rejected command needs attention. A rejection is an answer, not a condition: it changed
nothing, its issuer was told at once (exit status 1, every reason), and nothing will resolve it, so
it must not hold the top of ``status`` and the status page for ever. Ten minutes lets whoever
watches the page see a colleague's rejected command; after that it is history (``rejection_history``:
``status`` says how many and when the latest was; ``replay --format json`` and ``/metrics`` keep
them)."""
SKIPS_NEED_ATTENTION_FOR = 600.0
"""Seconds a skipped cancel needs attention after its request ended. While the request runs a skip
is a condition (the partition stays where the cancel did not reach it); once the request has ended it
is an answer like a rejection: the engine keeps the partition (the latest finished requests) but
nothing will change it, so it leaves ``status`` and the status page ten minutes after the end, and
stays in the request's history (``kreassign list``, ``kreassign replay``)."""


def attention(state: State, rejected_at: dict | None = None, only: str | None = None,
              blocked: str | None = None, now: float | None = None, brokers: dict | None = None,
              rejections_for: float = REJECTIONS_NEED_ATTENTION_FOR, ended_at: Mapping | None = None,
              skips_for: float = SKIPS_NEED_ATTENTION_FOR) -> list[dict]:
    """The entries, most urgent first (see the module doc). ``only``: one request's partitions
    (and its rejections); ``blocked``: the decider's reason for holding actions back, if any;
    ``now``: the time of the question (epoch seconds; the caller's clock, never read here), to say
    how soon a retry comes and which rejections are recent: those of the last ``rejections_for``
    seconds (all of them when ``now`` is not given); ``brokers``: the brokers that do not answer
    (broker -> {"seconds", "waiting"}, the engine's broker watch); ``ended_at``: request id -> its
    progress (``engine.views.progress.Progress.requests``), whose ``completed_at`` says when it
    ended: its skipped cancels need attention for ``skips_for`` seconds after (all of them when
    ``now`` is not given; none of an ended request whose end time is unknown)."""
    from engine.views.brokers import pinned_source, stuck_brokers

    rejected_at = rejected_at or {}
    members = None
    if only is not None:
        r = state.request(only)
        members = set(r.members.keys()) if r is not None else set()
    out: list[dict] = []
    found = problems(state)
    if blocked and not any(p["kind"] == "cluster" for p in found):
        out.append(_entry("blocked", "error", f"the engine is held back: {blocked}"))
    out.extend(stuck_brokers(state, brokers, members))
    out.extend(_refusals(state, found, members, now))
    by_reason: dict[str, list] = defaultdict(list)
    for tp, reason in state.waiting.items():
        if members is None or tp in members:
            by_reason[reason].append(tp)
    for shape, reasons in _by_shape(by_reason):
        tps = [tp for r in reasons for tp in by_reason[r]]
        requests = sorted({state.partitions[tp].request_id for tp in tps})
        said = reasons[0]
        if len(reasons) == 1:
            lines = [_named(tps)]
        else:  # the same wait for different brokers: one entry, a line per broker
            differ = _differing([_numbered(r) for r in reasons])
            lines = [f"{_numbers(r, differ)}: {_named(by_reason[r])}"
                     for r in sorted(reasons, key=lambda r: (-len(by_reason[r]), r))]
            said = _shared(reasons)
        if shape.startswith(DROPS_HELD):  # a line per request and leader, naming the request
            lines.extend(_held_for(state, tps, now))
        else:
            lines.append(f"request{'s' if len(requests) > 1 else ''} {', '.join(requests)}")
        retries = [state.partitions[tp].retry_at for tp in tps if state.partitions[tp].retry_at is not None]
        if retries:  # steps the cluster refused: planned again after a backoff
            lines.append(f"planned again {_when(min(retries), now)}")
        out.append(_entry(
            "waiting", "warning", f"{_n(len(tps), 'partition')} waiting: {said}",
            lines, count=len(tps), partitions=tps, reason=shape if len(reasons) > 1 else reasons[0],
            retry_at=_iso(min(retries)) if retries else None,
        ))
    out.extend(pinned_source(state, members))
    if state.paused:
        n = len(state.steps)
        out.append(_entry("paused", "warning", "paused: no new step starts until kreassign resume"
                          + (f" ({_n(n, 'step')} in flight finish{'es' if n == 1 else ''})" if n else "")))
    if state.looks_paced:
        out.append(_entry("paced", "warning", state.looks_paced, [
            "the engine's reads of the cluster wait for it (kreassign engine --request-budget); its actions never do",
            "a step's end may be seen, and the next step started, up to a second later",
            f"shown until no read has waited for {PACED_SHOWN:g} s or the move is done (kreassign engine's /status: "
            "request_budget.paced counts the looks deferred and the longest wait)"],
            reason=state.looks_paced))
    differed = state.throttles_differed
    if differed is not None and members is None:
        m, u = differed.missing, differed.unexpected
        entries, left = len(m.leader) + len(m.follower), len(u.leader) + len(u.follower)
        lines = rates_differing(m) + [x for x in (
            f"{_entries(entries)} missing" if entries else "",
            f"{_entries(left)} left over" if left else "") if x]
        confirm = None if differed.at is None else differed.at + METADATA_SETTLE
        lines.append(f"set right if the read-back {_when(confirm, now) if confirm else 'after the next'} still shows "
                     f"it (a broker's configs may lag the controller)")
        out.append(_entry("throttles_differ", "warning", "the throttle configuration read back differs from the log",
                          lines, reason="; ".join(lines[:-1]) or None, at=_iso(differed.at), retry_at=_iso(confirm)))
    skipped: dict[tuple[str, str], list] = defaultdict(list)
    ended_at = ended_at or {}
    for tp, entry in state.partitions.items():
        if cancel_skipped(entry) and (members is None or tp in members):
            skipped[(entry.note, entry.request_id)].append(tp)
    for (reason, rid), tps in sorted(skipped.items(), key=lambda x: (-len(x[1]), x[0])):
        r = state.request(rid)
        if r is None or r.status != COMPLETED:
            where = f"request {rid} (running)"
        else:
            p = ended_at.get(rid)
            end = p.completed_at if p is not None else None
            if now is not None and not _recent(end, now, skips_for):
                continue  # its request ended a while ago: history (list, replay)
            where = (f"request {rid} ended" + (f" at {end.astimezone(timezone.utc):%H:%M:%S} UTC" if end else "")
                     + f": shown for {_span(skips_for)} after, then in kreassign list and replay")
        out.append(_entry("skipped", "warning", f"{_n(len(tps), 'partition')} not cancelled: {reason}",
                          [_named(tps), where], count=len(tps), partitions=tps, reason=reason))
    rejections = [e for e in state.rejections if (only is None or e.request_id == only)
                  and _recent(rejected_at.get(e.command_id), now, rejections_for)]
    shown = rejections[-SHOWN_REJECTIONS:]
    total = len(rejections)
    for e in reversed(shown):
        at = rejected_at.get(e.command_id)
        what = e.command + (f" of request {e.request_id}" if e.request_id else "")
        n = len(e.reasons)
        title = f"{what} rejected: {e.reasons[0]}" if n == 1 else f"{what} rejected ({n} reasons)"
        lines = ([] if n == 1 else list(e.reasons[:SHOWN_PARTITIONS])
                 + ([f"and {n - SHOWN_PARTITIONS} more reasons"] if n > SHOWN_PARTITIONS else []))
        lines.append(f"command {e.command_id}" if e.command_id else "command without an id")
        if e is shown[0] and total > len(shown):
            lines.append(f"{total - len(shown)} earlier rejections in the last {_span(rejections_for)}: kreassign "
                         f"replay --format json lists the latest {len(state.rejections)}")
        out.append(_entry("rejected", "error", title, lines,
                          at=at.isoformat() if isinstance(at, datetime) else None, reason="; ".join(e.reasons)))
    return out


def rejection_history(state: State, rejected_at: dict | None, now: float | None,
                      rejections_for: float = REJECTIONS_NEED_ATTENTION_FOR) -> dict | None:
    """The rejected commands that no longer need attention (older than ``rejections_for`` at ``now``),
    as ``{"count", "latest_at", "line"}``, or ``None`` if there is none. ``count`` counts every one
    the engine ever rejected but the recent ones (the state counts them all, and keeps the latest)."""
    if now is None or not state.rejected:
        return None
    rejected_at = rejected_at or {}
    recent = sum(1 for e in state.rejections if _recent(rejected_at.get(e.command_id), now, rejections_for))
    count = sum(state.rejected.values()) - recent
    if count <= 0:
        return None
    times = [t for e in state.rejections if isinstance(t := rejected_at.get(e.command_id), datetime)
             and not _recent(t, now, rejections_for)]
    latest = max(times) if times else None
    when = f", the latest at {latest.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC" if latest else ""
    line = (f"{_n(count, 'rejected command')} before the last {_span(rejections_for)}{when}: no longer needing "
            f"attention (kreassign replay --format json lists the latest {len(state.rejections)})")
    return {"count": count, "latest_at": latest.isoformat() if latest else None, "line": line}


def _recent(at, now: float | None, window: float) -> bool:
    """Whether a rejection recorded at ``at`` (a datetime, or None if unknown) is within ``window``
    seconds before ``now``; everything is, when no time is given."""
    if now is None:
        return True
    return isinstance(at, datetime) and at.timestamp() >= now - window


def _span(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:g} minutes" if minutes >= 1 else f"{seconds:g} s"


NOUNS = {"step": ("step the cluster did not start", "steps the cluster did not start"),
         "abort": ("abort of a step that failed", "aborts of steps that failed"),
         "election": ("preferred leader election that failed", "preferred leader elections that failed")}


def _refusals(state: State, found: list[dict], members: set | None, now: float | None) -> list[dict]:
    """``engine.views.summary.problems`` as entries: the cluster and throttle ones as they are, the
    per-partition ones grouped by kind and error (numbers as N), each with its partitions, the
    highest attempt and the soonest retry."""
    out: list[dict] = []
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for p in found:
        if "partition" in p:
            if members is None or _tp_in(p["partition"], members):
                why = p["message"].split(" failed: ", 1)[-1]  # the cluster's answer, without "step 3"
                groups[(p["kind"], _NUMBER.sub("N", why))].append(p)
            continue
        lines = []
        if p.get("attempt"):
            lines.append(f"attempt {p['attempt']}; next try {_when(p.get('retry_at'), now)}")
        out.append(_entry(p["kind"], "error", p["message"], lines, attempt=p.get("attempt"),
                          retry_at=_iso(p.get("retry_at")), reason=p["message"]))
    for (kind, shape), ps in sorted(groups.items(), key=lambda x: (-len(x[1]), x[0])):
        tps = [p["partition"] for p in ps]
        attempt = max(p.get("attempt") or 1 for p in ps)
        retries = [p["retry_at"] for p in ps if p.get("retry_at") is not None]
        why = ps[0]["message"].split(" failed: ", 1)[-1] if len(ps) == 1 else shape
        one, many = NOUNS.get(kind, (kind, kind))
        title = f"{len(ps)} {one if len(ps) == 1 else many}: {why}"
        requests = sorted({p["request"] for p in ps if p.get("request")})
        lines = [_named(tps)] + ([f"request{'s' if len(requests) > 1 else ''} {', '.join(requests)}"]
                                 if requests else [])
        lines.append(f"attempt {attempt}{' (highest)' if len(ps) > 1 else ''}; next try "
                     + (_when(min(retries), now) if retries else "at the next decision"))
        out.append(_entry(kind, "error", title, lines, count=len(ps), partitions=tps, reason=shape,
                          attempt=attempt, retry_at=_iso(min(retries)) if retries else None))
    return out


def _tp_in(name: str, members: set) -> bool:
    return any(str(tp) == name for tp in members)


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def _when(t: float | None, now: float | None) -> str:
    """A retry time as an operator reads it: "at 17:01:04 UTC (in 12 s)"."""
    if t is None:
        return "at the next decision"
    at = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%H:%M:%S UTC")
    if now is None:
        return f"at {at}"
    return f"at {at} ({'now' if t <= now else f'in {t - now:.0f} s'})"


def _by_shape(by_reason: dict[str, list]) -> list[tuple[str, list[str]]]:
    """Reasons grouped by their shape (numbers as N: "waiting for broker N to become leader"), the
    groups with the most partitions first."""
    shapes: dict[str, list[str]] = defaultdict(list)
    for reason in by_reason:
        shapes[_NUMBER.sub("N", reason)].append(reason)
    size = {shape: sum(len(by_reason[r]) for r in reasons) for shape, reasons in shapes.items()}
    return sorted(shapes.items(), key=lambda x: (-size[x[0]], x[0]))


_NUMBER = re.compile(r"\b\d+\b")


def _numbered(reason: str) -> list[str]:
    """Each number of a reason with the word before it ("broker 3"), punctuation left out."""
    words = [w.strip(",;:()") for w in reason.split()]
    return [" ".join(words[max(i - 1, 0):i + 1]) for i, w in enumerate(words) if _NUMBER.fullmatch(w)]


def _differing(numbered: list[list[str]]) -> set[int] | None:
    """The places (``_numbered``) where reasons of one shape do not all have the same number: a shape has
    its numbers in the same places, whatever they are. None (every place) where none differs there (a
    number ``_numbered`` does not see, "[1, 2]", tells them apart): the lines say what they said before."""
    if len({len(n) for n in numbered}) > 1:
        return None
    return {i for i in range(len(numbered[0])) if len({n[i] for n in numbered}) > 1} or None


def _numbers(reason: str, differ: set[int] | None = None) -> str:
    """What tells a reason from others of its shape: its numbers with the word before each ("broker 3"),
    only those in the places where the reasons differ (``differ``; None: all); the others are in the
    title (``_shared``)."""
    return ", ".join(x for i, x in enumerate(_numbered(reason)) if differ is None or i in differ)


def _shared(reasons: list[str]) -> str:
    """The shape of ``reasons`` (``_by_shape``) with each number all of them have in that place written
    out: "attempt 2 failed", not "attempt N failed", when every one says 2 (their lines leave it out)."""
    found = [_NUMBER.findall(r) for r in reasons]
    places = iter(range(len(found[0])))

    def one(m):
        i = next(places)
        return found[0][i] if len({f[i] for f in found}) == 1 else "N"
    return _NUMBER.sub(one, reasons[0])


def _held_for(state: State, tps, now: float | None = None) -> list[str]:
    """For drops ``--steps grouped`` holds: a line per (request, leader) naming the copies they wait for,
    those in flight out of that leader and how many are queued (its lanes of the ready index), and when
    they go at the latest (``max_drop_hold_seconds`` after the first of them was held)."""
    out = []
    hold = state.limits.max_drop_hold_seconds
    live = state.live_brokers()
    for rid, leader in sorted({state.drop_group[tp] for tp in tps if tp in state.drop_group},
                              key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        # the copies that hold them, as ``decide.copies_out`` counts them: into live brokers only
        running = [tp for tp, f in state.steps.items() if f.request_id == rid and f.source == leader and f.step.nr
                   and (live is None or set(f.step.nr) <= live)]
        lanes = state.ready.sources.get(leader) or {}
        queued = sum(len(chain) for name, chain in lanes.items() if name[0] == rid)
        copies = [f"{_named(running)} in flight"] if running else []
        if queued:
            copies.append(f"{queued}{' more' if running else ''} queued")
        since = state.drops_since.get((rid, leader))
        latest = f"; they go {_when(since + hold, now)} at the latest" if since is not None else ""
        out.append(f"request {rid}: broker {leader}'s copies still to end: "
                   + (", ".join(copies) if copies else "none (released at the next tick)") + latest)
    return out


def _entry(kind: str, severity: str, title: str, lines: Iterable[str] = (), *, count: int = 1,
           at: str | None = None, partitions: Iterable = (), reason: str | None = None, attempt: int | None = None,
           retry_at: str | None = None) -> dict:
    return {"kind": kind, "severity": severity, "title": title, "lines": list(lines), "count": count, "at": at,
            "partitions": _names(partitions)[:1000], "reason": reason, "attempt": attempt,
            "retry_at": retry_at}


def _names(tps) -> list[str]:
    """Partition names in topic, then partition number order ("t-2" before "t-10")."""
    def key(name: str):
        topic, _, n = name.rpartition("-")
        return (topic, int(n)) if n.isdigit() else (name, -1)

    return sorted((str(tp) for tp in tps), key=key)


def _named(tps) -> str:
    names = _names(tps)
    more = len(names) - SHOWN_PARTITIONS
    return "partitions " + ", ".join(names[:SHOWN_PARTITIONS]) + (f" and {more} more" if more > 0 else "")


def _entries(n: int) -> str:
    return f"{n} throttled-replica {'entry' if n == 1 else 'entries'}"


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
