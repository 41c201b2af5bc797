"""``kreassign cancel``: cancel a request, or some of its partitions, optionally rolling back (KIP-236).

Without ``--rollback`` it touches only what is in progress, as Kafka's
``--cancel`` does: steps in flight are aborted, and a partition holding a
replica more than it had is settled back to its original size (nothing is
copied). ``--rollback`` moves partitions in progress back to their original
replicas; ``--include-completed`` also those that had completed.

``--partitions`` takes Kafka's reassignment JSON (a file, or the JSON text
itself): ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``; replica
lists may be present (the same file as ``execute``) and are ignored. Prints the
engine's verdict: what was cancelled, which copies in flight are being aborted,
what was skipped and why (KIP-236), or why the cancel was rejected
(``engine.cli.verdicts``).
"""

from __future__ import annotations

import json

from engine.cli import CliError, read_text
from engine.cli import verdicts
from engine.cli.connection import add_arguments
from engine.core.commands import Cancel
from engine.core.partition import TopicPartition


def add_parser(sub) -> None:
    p = sub.add_parser("cancel", help="cancel a request or some of its partitions (KIP-236)")
    p.add_argument("--request", required=True, metavar="ID", help="request id (as execute printed it)")
    p.add_argument("--partitions", metavar="JSON",
                   help="only these partitions: a reassignment JSON file, or the JSON itself")
    p.add_argument("--rollback", action="store_true",
                   help="move the partitions in progress back to their original replicas (partitions that had "
                        "completed stay at their target, as with Kafka's --cancel)")
    p.add_argument("--include-completed", action="store_true",
                   help="with --rollback: also move partitions that had completed back to their original replicas")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=run)


def parse_partitions(text: str, where: str) -> tuple[TopicPartition, ...]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"{where}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CliError(f"{where}: expected {{\"partitions\": [{{\"topic\": ..., \"partition\": ...}}, ...]}}")
    out = []
    for i, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise CliError(f"{where}: partitions[{i}].topic must be a non-empty string")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f"{where}: partitions[{i}].partition must be an integer >= 0")
        out.append(TopicPartition(topic, partition))
    if len(set(out)) != len(out):
        twice = sorted({str(tp) for tp in out if out.count(tp) > 1})
        raise CliError(f"{where}: partitions listed more than once: {', '.join(twice)}")
    return tuple(out)


def run(args) -> int:
    if not args.request.strip():
        raise CliError("--request must not be empty")
    partitions = None
    if args.partitions is not None:
        inline = args.partitions.lstrip().startswith(("{", "["))
        text = args.partitions if inline else read_text(args.partitions)
        partitions = parse_partitions(text, "--partitions" if inline else args.partitions)
    if args.include_completed and not args.rollback:
        raise CliError("--include-completed only applies with --rollback")
    command = Cancel(args.request, partitions, args.rollback, include_completed=args.include_completed)
    envelope, verdict = verdicts.publish_and_wait(args, command)
    if verdict is not None and verdict.accepted and partitions is None:
        verdict = verdict._replace(details=verdict.details + completed_line(args))
    return verdicts.show(args, "cancel", command, envelope.id, verdict)


def completed_line(args) -> tuple[str, ...]:
    """For a cancel of a whole request: its partitions that had completed and stay at their target,
    from the log folded now (the cancel's own events name only what it touched; a cancel of named
    partitions says of each completed one that it was skipped)."""
    from engine.cli.status import Follower
    from engine.views.verdict import completed_staying

    follower = Follower(args)
    follower.poll()
    line = completed_staying(follower.state.requests.get(args.request), args.include_completed, args.rollback)
    return (line,) if line else ()
