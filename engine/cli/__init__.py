"""The ``kreassign`` command line: one module per subcommand, each a thin shell.

Conventions follow Kafka's own tools: ``--bootstrap-server``,
``--command-config``, ``--reassignment-json-file``. Usage errors and bad input
files exit with status 2 and one line naming the file and the problem.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = (
    "plan",
    "broker", "topics", "execute", "cancel", "limits", "throttle", "pause", "resume", "replay",
    "dead-letters", "simulate", "sim-cluster", "balance", "engine", "status", "verify", "list", "demo",
    "analytics", "acls",
)


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line like every other error (exit status 2):
    argparse's own print the whole usage block first, burying the line that says what is wrong."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def unrecognized(self, extras: list[str]):
        """argparse leaves a subcommand's unknown options to the top parser, which names neither the
        subcommand nor its --help: say them here, each with the option it is closest to, if any."""
        import difflib

        known = [o for action in self._actions for o in action.option_strings if o.startswith("--")]
        words = []
        for extra in extras:
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1)
            words.append(f"{extra} (did you mean {close[0]}?)" if extra.startswith("-") and close else extra)
        self.error(f"unrecognized arguments: {' '.join(words)}")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="kreassign",
        description="Incremental, throttled, cancellable partition reassignment for Apache Kafka.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"engine.cli.{name.replace('-', '_')}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # said by the (sub)command that was given them, e.g. 'kreassign topics create'
        chosen = parser
        while (subs := [a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)]) \
                and getattr(args, subs[0].dest, None) in subs[0].choices:
            chosen = subs[0].choices[getattr(args, subs[0].dest)]
        chosen.unrecognized(extras)
    try:
        return args.func(args) or 0
    except CliError as e:
        print(f"kreassign {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback, the shell's status for SIGINT
        print(f"kreassign {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # the reader went away (| head): nothing more to say to it, and no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would fail again
        return 1


INTERRUPTED = 130


def console_for(file):
    """A rich console writing to ``file``: colours and the terminal's width on a terminal; on anything
    else (a pipe, a log file) plain text whose lines are never wrapped at 80 columns (a command or an
    address split over lines cannot be copied)."""
    from rich.console import Console

    probe = Console(file=file)
    if probe.is_terminal:
        return probe
    return Console(file=file, soft_wrap=True)


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CliError(f"{path}: {e.strerror}") from None
