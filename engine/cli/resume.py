"""``kreassign resume``: start steps again after a pause."""

from __future__ import annotations

from engine.cli import verdicts
from engine.cli.connection import add_arguments
from engine.core.commands import Resume


def add_parser(sub) -> None:
    p = sub.add_parser("resume", help="start steps again after a pause")
    add_arguments(p, signing=True)
    verdicts.add_arguments(p)
    p.set_defaults(func=lambda args: verdicts.send(args, Resume(), "resume"))
