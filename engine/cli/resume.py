"""``kreassign resume``: start steps again after a pause."""

from __future__ import annotations

from engine.cli.connection import add_arguments, publish


def add_parser(sub) -> None:
    p = sub.add_parser("resume", help="start steps again after a pause")
    add_arguments(p, signing=True)
    p.set_defaults(func=lambda args: print(publish(args, lambda pub: pub.resume())))
