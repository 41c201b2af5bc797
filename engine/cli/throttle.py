"""``kreassign throttle --rate BYTES_PER_SEC|none``: the replication throttle for steps from now on (KIP-73)."""

from __future__ import annotations

import argparse

from engine.cli.connection import add_arguments, positive_rate, publish


def add_parser(sub) -> None:
    p = sub.add_parser("throttle", help="change the replication throttle rate (bytes/s, or none)")
    p.add_argument("--rate", required=True, type=_rate, metavar="BYTES_PER_SEC|none",
                   help="bytes/s per broker and direction; 'none' removes throttling")
    add_arguments(p, signing=True)
    p.set_defaults(func=run)


def _rate(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        return positive_rate(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (or 'none')") from None


def run(args) -> int:
    print(publish(args, lambda p: p.change_throttle(args.rate)))
    return 0
