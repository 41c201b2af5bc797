"""``kreassign status``: progress of each request, read from the event log.

It folds the events topic (the log is the source of truth, so status works
whether the engine runs or not) into the core's state and, beside it, the
progress in bytes and time (``engine.progress``), starting from the latest
snapshot (``<prefix>snapshots``), so it starts as fast on a long log as on a
short one. A snapshot it cannot use is named on standard error. Per request: partitions
done / in flight / waiting / total, bytes copied / to copy, the recent copy
rate and the ETA it gives; then the throttle and limits in force, and the
reasons of anything waiting or skipped. ``--watch`` follows the log and
redraws every second until Ctrl-C.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from engine.cli import CliError
from engine.cli.connection import add_arguments, broker_profile, client_config, registry
from engine.progress import Progress, report
from engine.state import State
from engine.units import format_duration, format_rate, format_size


def add_parser(sub) -> None:
    p = sub.add_parser("status", help="progress of each reassignment request (from the event log)")
    p.add_argument("--request", metavar="ID", help="only this request")
    p.add_argument("--watch", action="store_true", help="follow the log and redraw every second (Ctrl-C stops)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_arguments(p)
    p.set_defaults(func=run)


class Follower:
    """The state and progress folded from the events topic: from the latest snapshot at first
    (so starting does not depend on the log's length), then read on from where it stopped."""

    def __init__(self, args):
        from engine.replay import START

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
        from engine.envelope import EventEnvelope
        from engine.eventlog import ReadError, decoder_for, read_topic
        from engine.replay import ReplayError, extend
        from engine.snapshot_store import latest, resume
        from engine.topics import EVENTS, Topics, reader_group

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


def render(doc: dict):
    """A rich renderable of ``report``'s data: a block per request, then what is in force."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    parts: list = []
    if not doc["requests"]:
        parts.append(Text("no reassignment requests"))
    for r in doc["requests"]:
        total = r["bytes_total"] or None
        fraction = (r["bytes_done"] / total) if total else (r["done"] / r["partitions"] if r["partitions"] else 1.0)
        fraction = min(fraction, 1.0)
        eta = r["eta_seconds"]
        eta_text = "done" if r["status"] == "completed" else (format_duration(eta) if eta is not None else "unknown")
        parts.append(Text.assemble(("request ", "bold"), (r["id"], "bold cyan"), f"  {r['status']}"))
        bar = Table.grid(padding=(0, 1))
        bar.add_row("  ", ProgressBar(total=1.0, completed=fraction, width=40), f"{fraction:4.0%}", f"ETA {eta_text}")
        parts.append(bar)
        by = r["by_status"]
        ended = ", ".join(f"{by[s]} {word}" for s, word in (("completed", "completed"), ("reverted", "rolled back"),
                                                             ("cancelled", "cancelled")) if by.get(s))
        parts.append(Text(
            f"  partitions {r['done']}/{r['partitions']} done"
            f"{f' ({ended})' if ended and by.get('completed', 0) != r['done'] else ''}, {r['in_flight']} in flight, "
            f"{r['waiting']} waiting, {r['queued']} queued"
        ))
        copied = (f"{format_size(r['bytes_done'])} of {format_size(total)}" if total
                  else f"{format_size(r['bytes_done'])} (sizes unknown)")
        rate = format_rate(r["rate_bytes_per_s"]) if r["rate_bytes_per_s"] else "-"
        parts.append(Text(f"  copied {copied}, rate {rate}"))
    rate = doc["throttle_rate"]
    brokers = ",".join(map(str, doc["throttled_brokers"]))
    parts.append(Text(
        f"throttle {format_rate(rate) if rate else 'none'}{' in force on brokers ' + brokers if brokers else ''}; "
        f"steps in flight {len(doc['steps_in_flight'])}; paused {'yes' if doc['paused'] else 'no'}"
    ))
    parts.append(Text("limits: " + ", ".join(f"{k}={v}" for k, v in doc["limits"].items())))
    for reason, n in list(doc["waiting"].items())[:8]:
        parts.append(Text(f"waiting ({n}): {reason}"))
    for s in doc["skipped"][:8]:
        parts.append(Text(f"skipped {s['partition']}: {s['reason']}"))
    return Group(*parts)


def run(args) -> int:
    import sys

    from rich.console import Console

    follower = Follower(args)
    follower.poll()
    for note in follower.notes:
        print(f"kreassign status: note: {note}", file=sys.stderr)
    if args.request and args.request not in follower.state.requests and not args.watch:
        raise CliError(f"unknown request '{args.request}'")
    if args.format == "json":
        now = datetime.now(timezone.utc)
        print(json.dumps(report(follower.state, follower.progress, now, args.request)))
        return 0
    console = Console()
    if not args.watch:
        console.print(render(report(follower.state, follower.progress, datetime.now(timezone.utc), args.request)))
        return 0
    from rich.live import Live

    with Live(console=console, refresh_per_second=2) as live:
        try:
            while True:
                now = datetime.now(timezone.utc)
                live.update(render(report(follower.state, follower.progress, now, args.request)))
                time.sleep(1.0)
                follower.poll()
        except KeyboardInterrupt:
            pass
    return 0
