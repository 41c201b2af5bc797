"""``kreassign throttle --rate BYTES_PER_SEC|none``: the replication throttle for steps from now on (KIP-73)."""

from __future__ import annotations

import argparse

from engine.cli import verdicts
from engine.cli.connection import add_arguments, positive_rate
from engine.core.commands import ChangeThrottle


def add_parser(sub) -> None:
    p = sub.add_parser("throttle", help="change the replication throttle rate (bytes/s, or none)")
    p.add_argument("--rate", required=True, type=_rate, metavar="BYTES_PER_SEC|none",
                   help="bytes/s per broker and direction; 'none' removes throttling")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=run)


def _rate(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        return positive_rate(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (or 'none')") from None


def run(args) -> int:
    return verdicts.send(args, ChangeThrottle(args.rate), "throttle")
