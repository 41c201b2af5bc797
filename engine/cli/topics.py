"""``kreassign topics create``: create kreassign's topics (idempotent).

Creates the commands, events, dead-letter, decisions and snapshots topics under ``--prefix`` with
their partition counts and configs (``engine.kafka.topics``). A topic that exists
is left as it is; running it twice is harmless. An events topic with more
than one partition is an error: the log of record must be totally ordered.
"""

from __future__ import annotations

from engine.cli import CliError
from engine.cli.connection import add_arguments, client_config
from engine.kafka.topics import TopicsError, create


def add_parser(sub) -> None:
    p = sub.add_parser("topics", help="manage kreassign's topics")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = actions.add_parser("create", help="create the commands, events, dead-letter, decisions and snapshots topics (idempotent)")
    c.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                   help="replicas per partition (default -1: the broker's default.replication.factor)")
    add_arguments(c, registry=False)
    c.set_defaults(func=run)


def run(args) -> int:
    try:
        outcome = create(client_config(args).confluent(), args.prefix, args.replication_factor, args.timeout)
    except TopicsError as e:
        raise CliError(str(e)) from None
    for name, what in outcome:
        print(f"{name}: {what}")
    return 0
