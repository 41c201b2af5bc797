"""``kreassign sim-cluster``: serve a scenario's simulated cluster until stopped (SIGTERM/Ctrl-C).

The first line on standard output names the URL (``--port 0`` picks a free
port), so scripts and tests can read it; ``--cluster sim+URL`` style clients
(``engine.cluster.remote.RemoteCluster``) talk to it.
"""

from __future__ import annotations

import signal
import sys
import threading

from engine.cli import CliError
from engine.sim import scenario as scenario_file


def add_parser(sub) -> None:
    p = sub.add_parser("sim-cluster", help="serve a simulated cluster on a loopback port (HTTP+JSON)")
    p.add_argument("--scenario", required=True, metavar="FILE", help="scenario file (YAML or JSON)")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="simulated seconds per wall-clock second (default 1)")
    p.add_argument("--port", type=int, default=0, metavar="P", help="port on 127.0.0.1 (default: any free port)")
    p.set_defaults(func=run)


def _speed(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def run(args) -> int:
    from engine.sim.server import SimServer

    try:
        scenario = scenario_file.load(args.scenario)
    except scenario_file.ScenarioError as e:
        raise CliError(str(e)) from None
    try:
        server = SimServer(scenario, speed=args.speed, port=args.port)
    except OSError as e:
        raise CliError(f"cannot listen on 127.0.0.1:{args.port}: {e.strerror}") from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = server.start()
    print(f"kreassign sim-cluster: {scenario.name} at {server.url} (speed {args.speed:g})", flush=True)
    stop.wait()
    server.shutdown()
    thread.join(timeout=5)
    print("kreassign sim-cluster: stopped", file=sys.stderr, flush=True)
    return 0
