"""``kreassign sim-cluster``: serve a scenario's simulated cluster until stopped (SIGTERM/Ctrl-C).

The first line on standard output names the URL (``--port 0`` picks a free
port), so scripts and tests can read it; ``--cluster sim+URL`` style clients
(``engine.cluster.remote.RemoteCluster``) talk to it. With ``--kafka-port P``
the same cluster also speaks the Kafka protocol (``engine.sim.kafka_front``),
one listener per simulated broker, and the first line ends with
``Kafka bootstrap HOST:PORT,...``: any Kafka client or tool can use it, and
``--cluster kafka://HOST:PORT`` runs the engine's real Kafka adapter on it.
Refused and unsupported Kafka requests are logged on standard error.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading

from engine.cli import CliError
from engine.sim import scenario as scenario_file


def add_parser(sub) -> None:
    p = sub.add_parser("sim-cluster", help="serve a simulated cluster on loopback ports (HTTP+JSON, and the "
                                           "Kafka protocol with --kafka-port)")
    p.add_argument("--scenario", required=True, metavar="FILE", help="scenario file (YAML or JSON)")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="simulated seconds per wall-clock second (default 1)")
    p.add_argument("--port", type=int, default=0, metavar="P", help="port on 127.0.0.1 (default: any free port)")
    p.add_argument("--kafka-port", type=_port, default=None, metavar="P",
                   help="also serve the Kafka protocol: broker i (in id order) on 127.0.0.1:P+i; 0 = free ports")
    p.add_argument("--max-request-partition-size-limit", type=int, default=None, metavar="N",
                   help="the Kafka front's brokers' max.request.partition.size.limit: the most partitions one "
                        "DescribeTopicPartitions answer holds (Kafka's default 2000)")
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


def _port(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, got {value}")
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
    front = None
    if args.kafka_port is not None:
        from engine.sim.kafka_front import FrontError, KafkaFront

        logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("kreassign.sim.kafka").setLevel(logging.INFO)
        try:
            front = KafkaFront(server, port=args.kafka_port,
                               max_request_partition_size_limit=args.max_request_partition_size_limit)
        except FrontError as e:
            server.httpd.server_close()
            raise CliError(str(e)) from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = server.start()
    line = f"kreassign sim-cluster: {scenario.name} at {server.url} (speed {args.speed:g})"
    if front is not None:
        front.start()
        line += f"; Kafka bootstrap {front.bootstrap}"
        if server.security is not None:
            listener = "SASL_PLAINTEXT (PLAIN)" if server.security.sasl else "PLAINTEXT"
            line += (f" ({listener}, {len(server.security.users)} users, "
                     f"{len(server.security.authorizer.acls)} ACLs)")
    print(line, flush=True)
    stop.wait()
    if front is not None:
        front.shutdown()
    server.shutdown()
    thread.join(timeout=5)
    print("kreassign sim-cluster: stopped", file=sys.stderr, flush=True)
    return 0
