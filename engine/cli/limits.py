"""``kreassign limits``: change reassignment limits from the engine's next decision on.

``--set NAME=VALUE`` (repeatable) takes our names (``max_partitions_in_flight``,
also with dashes or dots) or the KIP aliases (``reassignment.parallel.partition.count``,
``num.concurrent.partition.movements.per.broker`` sets both per-broker caps and the new-replica cap);
``--list`` prints every name with the value in force (folded from the event log, as ``status``
does; only the defaults without ``--bootstrap-server``) and its default; ``--explain NAME`` what a
limit bounds and why its default is what it is (``engine.core.limits.SETTINGS``).
"""

from __future__ import annotations

from engine.cli import CliError
from engine.cli import verdicts
from engine.cli.connection import add_arguments
from engine.core.commands import ChangeLimits
from engine.core.limits import SETTINGS, resolve_changes, settings_named


def add_parser(sub) -> None:
    p = sub.add_parser("limits", help="change reassignment limits (KIP-435 names or ours)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="changes",
                   help="a limit and its new value (repeatable)")
    p.add_argument("--list", action="store_true", help="print each limit's value in force (from the event log; the defaults without "
                        "--bootstrap-server), default and aliases; publish nothing")
    p.add_argument("--explain", metavar="NAME", help="say what a limit bounds and why its default is what it is "
                   "(our name or a KIP alias); publish nothing")
    add_arguments(p, required=False, signing=True)  # --list and --explain need no cluster
    verdicts.add_arguments(p)
    p.set_defaults(func=run)


def parse_changes(items: list[str]) -> dict[str, int]:
    changes: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--set {item!r}: expected NAME=VALUE")
        try:
            changes[name.strip()] = int(value)
        except ValueError:
            raise CliError(f"--set {item!r}: {value!r} is not an integer") from None
    _resolved, problems = resolve_changes(changes)
    if problems:
        unknown = [name for name in changes if not settings_named(name)]
        raise CliError("; ".join(problems) + (f" ({_closest(unknown)}kreassign limits --list names them all)"
                                              if unknown else ""))
    return changes


def _closest(names: list[str]) -> str:
    """'did you mean X? ' for the first of ``names`` close to a limit's name or alias, or ''."""
    import difflib

    known = [n for s in SETTINGS for n in (s.name, *s.aliases)]
    for name in names:
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            return f"did you mean {close[0]}? "
    return ""


def run(args) -> int:
    if args.explain:
        return explain(args.explain)
    if args.list:
        return list_limits(args)
    if not args.changes:
        raise CliError("give at least one --set NAME=VALUE (or --list, or --explain NAME)")
    if not args.bootstrap_server:
        raise CliError("--bootstrap-server is required")
    changes = parse_changes(args.changes)
    return verdicts.send(args, ChangeLimits(changes), "limits")


def list_limits(args) -> int:
    """Every limit with its value in force (the log's latest ``LimitsChanged``, folded as ``status``
    does) beside its default, or only the defaults when no cluster is named."""
    from engine.core.limits import DEFAULT_LIMITS

    if args.bootstrap_server or args.command_config:
        from engine.cli.status import Follower

        follower = Follower(args)
        follower.poll()
        limits = follower.state.limits
        print(f"the limits in force (the event log on {args.bootstrap_server or 'the --command-config cluster'}, "
              f"prefix {args.prefix}):")
    else:
        limits = DEFAULT_LIMITS
        print("the defaults (give --bootstrap-server for the limits in force):")
    for s in SETTINGS:
        value = getattr(limits, s.name)
        default = "default" if value == s.default else f"default {s.default}"
        print(f"{s.name} ({s.symbol}): {value} ({default}{_span(s)}); aliases: {', '.join(s.aliases) or '-'}")
    print("(kreassign limits --explain NAME: what a limit bounds and why its default is what it is)")
    return 0


def _span(s) -> str:
    if (s.least, s.most) == (1, None):
        return ""
    if s.most == s.least + 1:
        return f"; {s.least} or {s.most}"
    return f"; from {s.least}" + (f" to {s.most}" if s.most else "")


def explain(name: str) -> int:
    import textwrap

    found = settings_named(name) or [s for s in SETTINGS if s.symbol == name.strip()]  # ("P", as --list shows it)
    if not found:
        raise CliError(f"unknown limit '{name}' ({_closest([name])}kreassign limits --list names them all)")
    if len(found) > 1:
        print(f"{name.strip()} sets {len(found)} limits at once: {', '.join(s.name for s in found)}.")
    for i, s in enumerate(found):
        if i:
            print()
        print(f"{s.name} ({s.symbol}), default {s.default}{_span(s)}; aliases: {', '.join(s.aliases) or '-'}")
        print(textwrap.fill(s.why, width=100))
    return 0
