"""``kreassign pause``: start no new step; steps in flight finish."""

from __future__ import annotations

from engine.cli.connection import add_arguments, publish


def add_parser(sub) -> None:
    p = sub.add_parser("pause", help="start no new step (steps in flight finish)")
    add_arguments(p, signing=True)
    p.set_defaults(func=lambda args: print(publish(args, lambda pub: pub.pause())))
