"""``kreassign pause``: start no new step; steps in flight finish."""

from __future__ import annotations

from engine.cli import verdicts
from engine.cli.connection import add_arguments
from engine.core.commands import Pause


def add_parser(sub) -> None:
    p = sub.add_parser("pause", help="start no new step (steps in flight finish)")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=lambda args: verdicts.send(args, Pause(), "pause"))
