"""``kreassign status``: progress of each request, read from the event log.

It folds the events topic (the log is the source of truth, so status works
whether the engine runs or not) into the core's state and, beside it, the
progress in bytes and time (``engine.views.progress``), starting from the latest
snapshot (``<prefix>snapshots``), so it starts as fast on a long log as on a
short one; a snapshot it cannot use is named on standard error. First what needs attention
(``engine.views.attention``: partitions waiting and why, cancels skipped and why,
pause, the latest rejected commands with every reason); then per request its
outcome (running, completed, rolled back, cancelled or a mix), a bar of its
partitions by status, bytes copied / to copy, the recent copy rate and the ETA
it gives (``paused`` while paused); then the throttle and limits in force.
``--time-scale X`` labels a simulated cluster's rates in cluster time.
``--watch`` follows the log and redraws every second until Ctrl-C (exit status 0); when standard
output is not a terminal (a pipe, a file) it prints a frame per second as plain text instead, each
under a line with its time.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from engine.cli import CliError
from engine.cli.connection import add_arguments, broker_profile, client_config, positive_seconds, registry
from engine.views.progress import Progress, report
from engine.views.summary import margin_note
from engine.core.state import State
from engine.core.units import format_duration, format_rate, format_size


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="progress of each reassignment request (from the event log)")
    p.add_argument("--request", metavar="ID", help="only this request")
    p.add_argument("--watch", action="store_true", help="follow the log and redraw every second (Ctrl-C stops)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): what needs attention, then each request with its bar, bytes, rate and ETA; json: the same as one object")
    p.add_argument("--time-scale", type=positive_seconds, default=1.0, metavar="X",
                   help="the cluster's clock runs X times the wall clock (a simulated cluster, e.g. the demo's "
                        "--speed): rates are shown in cluster time, labelled (default 1)")
    add_arguments(p)
    p.set_defaults(func=run)


class Follower:
    """The state and progress folded from the events topic: from the latest snapshot at first
    (so starting does not depend on the log's length), then read on from where it stopped."""

    def __init__(self, args):
        from engine.log.replay import START

        self.args = args
        self.fold = START
        self.started = False
        self.notes: list[str] = []

    @property
    def state(self) -> State:
        return self.fold.state

    @property
    def progress(self) -> Progress:
        return self.fold.progress

    def poll(self) -> None:
        from engine.log.envelope import EventEnvelope
        from engine.log.eventlog import ReadError, decoder_for, read_topic
        from engine.log.replay import ReplayError, extend
        from engine.log.snapshot_store import latest, resume
        from engine.kafka.topics import EVENTS, Topics, reader_group

        args = self.args
        config, profile = client_config(args), broker_profile(args)
        topic = Topics.named(args.prefix).events
        try:
            if not self.started:
                found = latest(config, prefix=args.prefix, profile=profile, timeout=args.timeout)
                self.notes = list(found.assembled.skipped) + ([found.problem] if found.problem else [])
                snap, records, note = resume(config, found.assembled.snapshot, prefix=args.prefix, profile=profile,
                                             registry=registry(args), timeout=args.timeout)
                self.notes += [note] if note else []
                start = snap.fold if snap is not None else self.fold
            else:
                messages = read_topic(
                    config, topic, decoder_for(EventEnvelope, registry(args), topic), lambda _d: None,
                    group_id=reader_group(args.prefix), profile=profile, idle_timeout=args.timeout,
                    expect_partitions=EVENTS.partitions, start_offset=self.fold.next_offset,
                )
                records = ((m.offset, m.value) for m in messages)
                start = self.fold
            self.fold = extend(start, records)
        except (ReadError, ReplayError) as e:
            raise CliError(str(e)) from None
        self.started = True


SEGMENTS = (  # (count key, word, style, bar character): the bar's segments, in this order
    ("completed", "completed", "green", "█"),
    ("rolled_back", "rolled back", "yellow", "▓"),
    ("cancelled", "cancelled", "bright_black", "▒"),
    ("in_flight", "in flight", "blue", "▞"),
    ("waiting", "waiting", "red", "!"),
    ("queued", "queued", "white", "░"),
)
"""Colours for a terminal and a character each for where there are none (a log file, NO_COLOR)."""
BAR = 40
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow"}


def segments(r: dict, width: int = BAR) -> list[tuple[str, int]]:
    """(count key, characters) of a request's bar: each partition status in proportion, every
    non-empty one at least one character, the total exactly ``width`` (when there are partitions)."""
    counts = [(key, r[key]) for key, *_ in SEGMENTS if r[key]]
    total = sum(n for _k, n in counts)
    if not total:
        return []
    cells = [(key, max(1, round(width * n / total))) for key, n in counts]
    while sum(c for _k, c in cells) > width:  # rounding up the small ones took too much: trim the largest
        i = max(range(len(cells)), key=lambda j: cells[j][1])
        cells[i] = (cells[i][0], cells[i][1] - 1)
    if sum(c for _k, c in cells) < width:
        i = max(range(len(cells)), key=lambda j: cells[j][1])
        cells[i] = (cells[i][0], cells[i][1] + width - sum(c for _k, c in cells))
    return cells


def render(doc: dict, time_scale: float = 1.0):
    """A rich renderable of ``report``'s data with ``attention``: what needs attention first, then a
    block per request (a bar of its partitions by status, bytes, rate, ETA), then what is in force.
    ``time_scale``: how many times faster than the wall clock the cluster's clock runs (a simulated
    cluster); rates are then given in cluster time, durations on the wall clock, each labelled."""
    from rich.console import Group
    from rich.text import Text

    parts: list = attention_lines(doc.get("attention", []))
    scaled = time_scale != 1
    if not doc["requests"]:
        parts.append(Text("no reassignment requests"))
    for r in doc["requests"]:
        parts.append(Text.assemble(("request ", "bold"), (r["id"], "bold cyan"), "  ", _outcome(r)))
        bar = Text("  ")
        for key, n in segments(r):
            style, char = next((st, ch) for k, _w, st, ch in SEGMENTS if k == key)
            bar.append(char * n, style=style)
        total = r["bytes_total"]
        back = r["rolled_back"] or r.get("rolling_back")
        if r["eta_state"] == "done" and r["rolled_back"]:  # "100% of bytes" would read as moved forward
            bar.append(f"  {r['rolled_back']} of {r['partitions']} partitions rolled back to their original replicas")
        elif total:
            bar.append(f"  {min(r['bytes_done'] / total, 1.0):4.0%} of bytes"
                       + (" (the rollback's copies back included)" if back else ""))
        if r["eta_state"] != "done":
            bar.append(f"  ETA {_eta(r)}{' wall clock' if scaled and r['eta_state'] == 'estimated' else ''}")
        parts.append(bar)
        line = Text("  partitions: ")
        shown = [(key, word, style) for key, word, style, _c in SEGMENTS if r[key] or key in ("completed",)]
        for i, (key, word, style) in enumerate(shown):
            line.append(("" if i == 0 else ", ") + f"{r[key]} {word}", style=style)
        line.append(f" (of {r['partitions']})")
        parts.append(line)
        if r["eta_state"] == "done" and back:
            copied = f"{format_size(r['bytes_done'])} in all (moves forward and the rollback's copies back)"
        else:
            copied = (f"{format_size(r['bytes_done'])} of {format_size(total)}" if total
                      else f"{format_size(r['bytes_done'])} (sizes unknown)" if total is None
                      else f"{format_size(r['bytes_done'])}: nothing to copy (no replica to add)")
        rate = r["rate_bytes_per_s"]
        rate_text = format_rate(rate / time_scale) if rate else "-"
        where = (" (all brokers, cluster time)" if scaled else " (all brokers)") if rate else ""
        which = "average rate" if r["eta_state"] == "done" else "rate"
        parts.append(Text(f"  copied {copied}, {which} {rate_text}{where}"))
    rate = doc["throttle_rate"]
    brokers = ",".join(map(str, doc["throttled_brokers"]))
    parts.append(Text(
        f"throttle {format_rate(rate) if rate else 'none'}{' per broker' if rate else ''}"
        f"{margin_note(doc)}"
        f"{' in force on brokers ' + brokers if brokers else ''}; "
        f"steps in flight {len(doc['steps_in_flight'])}; paused {'yes' if doc['paused'] else 'no'}"
    ))
    parts.append(Text("limits: " + ", ".join(f"{k}={v}" for k, v in doc["limits"].items())))
    history = doc.get("rejection_history")
    if history:
        parts.append(Text(history["line"], style="bright_black"))
    if scaled:
        parts.append(Text(f"rates and the throttle are in cluster time (the cluster runs {time_scale:g}x the wall "
                          "clock); ETAs on the wall clock", style="italic"))
    return Group(*parts)


def attention_lines(entries: list[dict]) -> list:
    """``engine.views.attention`` entries as rich lines: each title marked by severity, its lines below."""
    from rich.text import Text

    if not entries:
        return []
    out = [Text("needs attention:", style="bold")]
    for e in entries:
        at = f"  ({e['at'][11:19]} UTC)" if e.get("at") else ""
        out.append(Text.assemble(("  ! " if e["severity"] == "error" else "  ~ ", SEVERITY_STYLE[e["severity"]]),
                                 (e["title"], SEVERITY_STYLE[e["severity"]]), at))
        for line in e["lines"]:
            out.append(Text(f"      {line}"))
    return out


def _outcome(r: dict):
    from rich.text import Text

    word = r["outcome"]
    style = {"completed": "green", "running": "", "rolled back": "yellow", "cancelled": "bright_black"}.get(word, "yellow")
    return Text(word, style=style)


def _eta(r: dict) -> str:
    state = r["eta_state"]
    if state == "estimated":
        return format_duration(r["eta_seconds"])
    return {"paused": "paused (no new step starts)", "unknown": "unknown"}[state]


def document(follower: "Follower", request: str | None, time_scale: float) -> dict:
    """``report`` with what needs attention and the time scale: what status prints (JSON too)."""
    from engine.views.attention import attention, rejection_history

    now = datetime.now(timezone.utc)
    doc = report(follower.state, follower.progress, now, request)
    rejected_at = follower.progress.rejected_at
    return {"attention": attention(follower.state, rejected_at, request, now=now.timestamp(),
                                   ended_at=follower.progress.requests),
            "rejection_history": rejection_history(follower.state, rejected_at, now.timestamp()),
            "time_scale": time_scale, **doc, "rejected": dict(sorted(follower.state.rejected.items()))}


WATCH_INTERVAL = 1.0  # seconds between frames of --watch


def run(args) -> int:
    import sys

    from engine.cli import console_for

    follower = Follower(args)
    try:
        in_background(follower.poll)
    except KeyboardInterrupt:  # before the first frame: a watch ends so, and a one-shot status is interrupted
        if args.watch:
            return 0
        raise
    for note in follower.notes:
        print(f"kreassign status: note: {note}", file=sys.stderr)
    if args.request and follower.state.request(args.request) is None and not args.watch:
        raise CliError(f"unknown request '{args.request}'")
    if args.format == "json":
        print(json.dumps(document(follower, args.request, args.time_scale)))
        return 0
    console = console_for(sys.stdout)
    if not args.watch:
        console.print(render(document(follower, args.request, args.time_scale), args.time_scale))
        return 0
    try:
        if console.is_terminal:
            live_frames(console, follower, args)
        else:
            plain_frames(console, follower, args)
    except KeyboardInterrupt:  # Ctrl-C is how a watch ends
        pass
    return 0


def live_frames(console, follower: "Follower", args) -> None:
    """A terminal: one frame, redrawn in place every ``WATCH_INTERVAL``."""
    from rich.live import Live

    with Live(console=console, refresh_per_second=2) as live:
        while True:
            live.update(render(document(follower, args.request, args.time_scale), args.time_scale))
            time.sleep(WATCH_INTERVAL)
            in_background(follower.poll)


def plain_frames(console, follower: "Follower", args) -> None:
    """Not a terminal (a pipe, a file): a frame per ``WATCH_INTERVAL`` as plain text, each under a line
    with its time, flushed as it is written."""
    while True:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        console.print(f"--- kreassign status at {stamp} ---")
        console.print(render(document(follower, args.request, args.time_scale), args.time_scale))
        console.file.flush()
        time.sleep(WATCH_INTERVAL)
        in_background(follower.poll)


def in_background(fn):
    """``fn()`` in a thread of its own, its result (or exception) here: the main thread waits in short
    steps, so Ctrl-C takes effect at once even while a Kafka client call blocks (a Python signal
    handler runs only when such a call returns, up to ``--timeout`` later)."""
    import threading

    box: dict = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="status-read").start()  # daemon: never holds the exit
    while not done.wait(0.1):
        pass
    if "error" in box:
        raise box["error"]
    return box.get("value")
