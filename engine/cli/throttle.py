"""``kreassign throttle --rate BYTES_PER_SEC|none``: the replication throttle for steps from now on (KIP-73)."""

from __future__ import annotations

from engine.cli import verdicts
from engine.cli.connection import NONE_MEANS, RATE_OR_NONE, add_arguments, rate_or_none
from engine.core.commands import ChangeThrottle


def add_parser(sub) -> None:
    p = sub.add_parser("throttle", help="change the replication throttle rate (bytes/s, or none)")
    p.add_argument("--rate", required=True, type=rate_or_none, metavar=RATE_OR_NONE,
                   help=f"bytes/s per broker and direction for steps from now on; {NONE_MEANS}")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    return verdicts.send(args, ChangeThrottle(args.rate), "throttle")
