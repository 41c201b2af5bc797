"""``kreassign dead-letters``: the messages kreassign could not read, with their source and reason.

Reads ``<prefix>dead-letters`` from its first offset to its end. Text: one line
per letter (when it was set aside, ``topic/partition/offset`` of the original
message, its size, the reason). ``--format json``: one JSON object per line with
the original key and value in base64, so a message can be inspected, mended and
produced again. ``--source TOPIC`` keeps the letters of one source topic.
A message on the dead-letter topic that is not a dead letter is reported on
stderr and skipped, like everything else kreassign reads.
"""

from __future__ import annotations

import base64
import json
import sys

from engine.cli import CliError
from engine.cli.connection import add_arguments, broker_profile, client_config
from engine.log.dead_letter import DeadLetter, read_dead_letter
from engine.log.eventlog import read_topic
from engine.kafka.topics import Topics, reader_group


def add_parser(sub) -> None:
    p = sub.add_parser("dead-letters", help="list the messages kreassign could not read, with their source and reason")
    p.add_argument("--source", metavar="TOPIC", help="only the letters of this source topic")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default) or json: one object per line, key and value in base64")
    add_arguments(p, registry=False)
    p.set_defaults(func=run)


def run(args) -> int:
    topic = Topics.named(args.prefix).dead_letters
    unreadable: list[DeadLetter] = []
    try:
        letters = [
            m.value for m in read_topic(client_config(args), topic, read_dead_letter, unreadable.append,
                                        group_id=reader_group(args.prefix), profile=broker_profile(args),
                                        idle_timeout=args.timeout)
            if args.source is None or m.value.source_topic == args.source
        ]
    except RuntimeError as e:  # unreachable cluster, missing topic
        raise CliError(str(e)) from None
    for bad in unreadable:
        print(f"kreassign dead-letters: skipped {bad.source}: {bad.reason}", file=sys.stderr)
    letters.sort(key=lambda x: (x.recorded_at, x.source_topic, x.source_partition, x.source_offset))
    if args.format == "json":
        for letter in letters:
            print(json.dumps(to_document(letter)))
    else:
        for letter in letters:
            size = "no value" if letter.value is None else f"{len(letter.value)} bytes"
            print(f"{letter.recorded_at.isoformat()}  {letter.source}  ({size})  {letter.reason}")
        print(f"{len(letters)} dead letter{'s' if len(letters) != 1 else ''} on {topic}")
    return 0


def to_document(letter: DeadLetter) -> dict:
    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    return {
        "recorded_at": letter.recorded_at.isoformat(),
        "source_topic": letter.source_topic,
        "source_partition": letter.source_partition,
        "source_offset": letter.source_offset,
        "reason": letter.reason,
        "key": b64(letter.key),
        "value": b64(letter.value),
    }
