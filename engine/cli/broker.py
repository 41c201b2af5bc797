"""``kreassign broker``: run the embedded broker (tansu) until interrupted.

Starts tansu on a free loopback port (or ``--port``), creates kreassign's
topics (unless ``--no-topics``), prints the bootstrap address on the first
line and the options to give the other subcommands on the second, and stops
on SIGINT or SIGTERM. Memory storage: nothing survives a stop.
"""

from __future__ import annotations

import signal
import sys
import threading

from engine.cli import CliError
from engine.kafka.embedded import EMBEDDED, EmbeddedBroker, EmbeddedBrokerError
from engine.kafka.topics import DEFAULT_PREFIX, TopicsError, create


def add_parser(sub) -> None:
    p = sub.add_parser("broker", help="run the embedded broker (tansu, memory storage) until interrupted")
    p.add_argument("--port", type=int, metavar="PORT", help="loopback port (default: a free one)")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"prefix of the topics to create (default {DEFAULT_PREFIX})")
    p.add_argument("--no-topics", action="store_true", help="do not create kreassign's topics")
    p.set_defaults(func=run)


def run(args) -> int:
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    broker = EmbeddedBroker(args.port)
    try:
        try:
            broker.start()
            if not args.no_topics:
                create({"bootstrap.servers": broker.bootstrap}, args.prefix)
        except (EmbeddedBrokerError, TopicsError) as e:
            raise CliError(str(e)) from None
        print(broker.bootstrap)
        print(f"use: --bootstrap-server {broker.bootstrap} --broker-profile {EMBEDDED.name}"
              + ("" if args.prefix == DEFAULT_PREFIX else f" --prefix {args.prefix}"))
        print("memory storage: everything is lost when this broker stops (Ctrl-C or SIGTERM)", file=sys.stderr)
        sys.stdout.flush()
        while not stop.wait(0.5):
            if not broker.running():
                raise CliError(f"tansu exited: {broker.log_tail()}")
        return 0
    finally:
        broker.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
