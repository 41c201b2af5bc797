"""Publish a command and wait for the engine's verdict on it: what every command subcommand does.

``execute``, ``cancel``, ``limits``, ``throttle``, ``pause``, ``resume`` and
``balance --execute`` publish one command, then follow the events topic from
where it ended before publishing until the engine's verdict on that command id
appears (``engine.views.verdict``), and print it:

* accepted: one line on standard output naming what (the request id, labelled),
  then what it did (partitions waiting and why, cancels skipped and why);
  exit status 0;
* rejected: every reason on standard error; exit status 1 (nothing changed);
* no verdict within ``--wait-timeout`` seconds (no engine running, or one busy
  recovering): a line saying so on standard error; exit status 3. The command
  stays on the commands topic and an engine decides it when it runs.

``--no-wait`` publishes and prints only the id (the request id for a submit,
the command id otherwise), as scripts that follow the log themselves want.
"""

from __future__ import annotations

import argparse
import sys
import time

from engine.cli import CliError
from engine.cli.connection import broker_profile, client_config, positive_seconds, publish, registry

ACCEPTED, REJECTED, NO_VERDICT = 0, 1, 3
DEFAULT_WAIT = 30.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verdict")
    g.add_argument("--wait-timeout", type=positive_seconds, default=DEFAULT_WAIT, metavar="SECONDS",
                   help=f"wait this long for the engine's verdict (default {DEFAULT_WAIT:g}); "
                        f"exit status {NO_VERDICT} if none came")
    g.add_argument("--no-wait", action="store_true",
                   help="publish and print the id only (request id for execute), without waiting for the verdict")


def send(args, command, name: str) -> int:
    """Publish ``command``, then print the engine's verdict (see the module doc); the exit status."""
    envelope, verdict = publish_and_wait(args, command)
    return show(args, name, command, envelope.id, verdict)


def publish_and_wait(args, command):
    """Publish ``command``; (its envelope, the verdict or ``None``). No waiting with ``--no-wait``.
    The publisher is made first (it checks that this principal may write the commands topic, so a
    missing grant is named as such), then the events' end is read, then the command is sent."""
    from engine.log.eventlog import ReadError, end_offset
    from engine.kafka.topics import Topics, reader_group

    start = None

    def send_after_the_end(publisher):
        nonlocal start
        if not args.no_wait:
            try:
                start = end_offset(client_config(args), Topics.named(args.prefix).events,
                                   profile=broker_profile(args), group_id=reader_group(args.prefix),
                                   timeout=args.timeout)
            except ReadError as e:
                raise CliError(str(e)) from None
        return publisher.send(command)

    envelope = publish(args, send_after_the_end)
    return envelope, (None if args.no_wait else wait_for_verdict(args, envelope.id, start))


def exit_status(args, verdict) -> int:
    if args.no_wait:
        return ACCEPTED
    return NO_VERDICT if verdict is None else (ACCEPTED if verdict.accepted else REJECTED)


def show(args, name: str, command, command_id: str, verdict) -> int:
    """Print the verdict as the module doc says; the exit status."""
    request_id = getattr(command, "request_id", None)
    if args.no_wait:
        print(request_id if request_id and name in ("execute", "balance") else command_id)
    elif verdict is None:
        print(f"kreassign {name}: no verdict within {args.wait_timeout:g} s: no engine decided command {command_id}"
              f"{f' (request {request_id})' if request_id else ''}. Is an engine running for --prefix {args.prefix} "
              "(kreassign engine)? The command stays on the commands topic and is decided when an engine runs; "
              f"kreassign status lists the outcome then. Exit status {NO_VERDICT}.", file=sys.stderr)
    elif verdict.accepted:
        print(verdict.summary)
        for line in verdict.details:
            print(f"  {line}")
    else:
        print(f"kreassign {name}: {verdict.summary}; nothing changed (command {command_id}):", file=sys.stderr)
        for reason in verdict.details:
            print(f"  - {reason}", file=sys.stderr)
    return exit_status(args, verdict)


def wait_for_verdict(args, command_id: str, start: int):
    """The verdict on ``command_id`` from the events at offset ``start`` on, or ``None`` after the wait."""
    from engine.log.envelope import EventEnvelope
    from engine.log.eventlog import ReadError, decoder_for, follow
    from engine.kafka.topics import Topics, reader_group
    from engine.views.verdict import Watch

    events = Topics.named(args.prefix).events
    watch = Watch(command_id)
    deadline = time.monotonic() + args.wait_timeout
    messages = follow(client_config(args), events, decoder_for(EventEnvelope, registry(args), events),
                      lambda _letter: None, start_offset=start, group_id=reader_group(args.prefix),
                      profile=broker_profile(args))
    try:
        for m in messages:
            if m is None:
                watch.end()
            else:
                watch.feed(m.value)
            if watch.verdict is not None:
                return watch.verdict
            if time.monotonic() > deadline:
                return None
    except ReadError as e:
        raise CliError(str(e)) from None
    finally:
        messages.close()
    return None


def already_accepted(args, request_id: str, digest: str):
    """For ``execute --request-id``: the request if the log has it with exactly these targets
    (the engine then decides nothing new and records no verdict), else ``None``."""
    from engine.cli.status import Follower

    follower = Follower(args)
    follower.poll()
    known = follower.state.request(request_id)
    return known if known is not None and known.digest == digest else None
