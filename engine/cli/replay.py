"""``kreassign replay``: fold the events topic into the state and print a summary.

It starts from the latest snapshot (``<prefix>snapshots``) and folds the events
after it; ``--from-start`` folds every event from offset 0 instead (the same
state: a check of the snapshot). ``--until-offset N`` folds the events at
offsets below N; ``--until-time T``
(ISO 8601, UTC unless an offset is given, or milliseconds since the epoch)
stops before the first event recorded after T. Both give a prefix of the log,
the only thing a fold can be cut to. ``--format json`` prints the summary as
one JSON object. Undecodable messages are skipped and reported on stderr.
Beside the summary it lists the pacings of the engine's looks by the request
budget (``LooksPaced``, ``pacings`` in JSON): each start with its line and
time, and its end with what it came to (looks deferred, the longest wait,
how long it lasted), or still on where the fold stops, as ``status`` shows it.
From a snapshot, those among its recent events and the events after it; a
pacing on whose start is older is listed with its line alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

from engine.cli import CliError
from engine.cli.connection import add_arguments, broker_profile, client_config, int_at_least, registry
from engine.log.replay import ReplayError, replay
from engine.views.summary import pacing_lines, pacings, summarize, to_text


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="rebuild the state from the events topic and summarise it")
    until = p.add_mutually_exclusive_group()
    until.add_argument("--until-offset", type=int_at_least(0, "an offset"), metavar="N", help="fold only the events at offsets below N")
    until.add_argument("--until-time", type=parse_time, metavar="T",
                       help="stop before the first event recorded after T (ISO 8601 or epoch milliseconds)")
    p.add_argument("--from-start", action="store_true",
                   help="fold every event from offset 0, not from the latest snapshot (same result: a check)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): the summary in words; json: the summary as one object, with the latest rejected commands")
    add_arguments(p)
    p.set_defaults(func=run)


def parse_time(text: str) -> datetime:
    text = text.strip()
    if text.isdigit():
        return datetime.fromtimestamp(int(text) / 1000, tz=timezone.utc)
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (ISO 8601 like 2025-01-31T12:00:00Z, or epoch milliseconds)"
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def run(args) -> int:
    try:
        result = replay(
            client_config(args), prefix=args.prefix, profile=broker_profile(args), registry=registry(args),
            until_offset=args.until_offset, until_time=args.until_time, timeout=args.timeout,
            from_start=args.from_start,
        )
    except ReplayError as e:  # the log itself is inconsistent: not a usage error
        print(f"kreassign replay: error: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # unreachable cluster, missing topic, registry extra missing
        raise CliError(str(e)) from None
    for note in result.notes:
        print(f"kreassign replay: note: {note}", file=sys.stderr)
    for letter in result.dead_letters:
        print(f"kreassign replay: skipped {letter.source}: {letter.reason}", file=sys.stderr)
    summary = {
        "events": result.events,
        "duplicates": result.duplicates,
        "next_offset": result.next_offset,
        "last_recorded_at": result.last_recorded_at.isoformat() if result.last_recorded_at else None,
        "undecodable": len(result.dead_letters),
        "from_snapshot": result.snapshot,
        **summarize(result.state),
        "pacings": pacings(result.paced, result.state.looks_paced),
    }
    if args.format == "json":
        print(json.dumps(summary))
    else:
        read = f"read to offset {result.next_offset - 1}" if result.next_offset else "the topic is empty"
        last = f", last recorded {summary['last_recorded_at']}" if result.last_recorded_at else ""
        skipped = "".join((
            f", {result.duplicates} duplicates skipped" if result.duplicates else "",
            f", {len(result.dead_letters)} undecodable skipped" if result.dead_letters else "",
        ))
        snap = result.snapshot
        since = (f", {result.events - snap['events']} folded after snapshot {snap['id']} (offset "
                 f"{snap['next_offset']}, written {snap['written_at']})" if snap else "")
        print(f"events: {result.events} ({read}{last}){skipped}{since}")
        print(to_text(summarize(result.state)))
        paced = summary["pacings"]
        print("looks paced by the request budget (LooksPaced): " + ("none" if not paced else f"{len(paced)}"))
        for line in pacing_lines(paced):
            print(line)
    return 0
