"""``kreassign engine``: run one engine worker (Faust) until SIGINT/SIGTERM.

Several workers with the same ``--prefix`` share the work (docs/engine.md):
commands are routed by all of them, one decides; if it dies another takes
over. The first line on standard output names the worker and its web address
(``/status``, ``/metrics``).
"""

from __future__ import annotations

import argparse
import time

from engine.cli import CliError
from engine.core.budget import DEFAULT_BUDGET as DEFAULT_REQUEST_BUDGET
from engine.cli.connection import (
    add_arguments, add_cluster_arguments, broker_profile, client_config, int_at_least, positive_seconds, registry,
)


def add_parser(sub) -> None:
    p = sub.add_parser("engine", help="run an engine worker (Faust): commands in, steps on the cluster, events out")
    add_arguments(p)
    add_cluster_arguments(p, required=True)
    g = p.add_argument_group("engine")
    g.add_argument("--web-port", type=int_at_least(0, "a port"), default=6066, metavar="N",
                   help="port of /status and /metrics (default 6066; each worker on a host needs its own)")
    g.add_argument("--web-bind", default="127.0.0.1", metavar="ADDRESS",
                   help="address the web server listens on (default 127.0.0.1)")
    g.add_argument("--poll-interval", type=positive_seconds, default=1.0, metavar="S",
                   help="the most seconds between two looks at a partition in flight or waiting (the ceiling); "
                        "copies are also looked at when they are predicted to reach their release point or end "
                        "(default 1)")
    g.add_argument("--fast-interval", type=positive_seconds, default=0.1, metavar="S",
                   help="the least seconds between two looks (the floor): steps whose end is near and pending "
                        "elections are looked at this often until seen done; the timer checks what is due this often, "
                        "without a request when nothing is (default 0.1)")
    g.add_argument("--request-budget", type=_budget, default=DEFAULT_REQUEST_BUDGET, metavar="N",
                   help="the most requests a second the engine's looks send one broker of the reassigned cluster, "
                        "counted over the last second with the actions (never deferred) and the broker watch's "
                        "probes; a request whose broker the client library chooses counts at every broker. A look "
                        "that would pass it waits (at most 1 s): status, the log and /metrics say so "
                        "(docs/engine.md, The request budget; default %(default)g; 0: none)")
    g.add_argument("--verify-interval", type=positive_seconds, default=10.0, metavar="S",
                   help="seconds between read-backs of the throttle configuration from the cluster: what is "
                        "missing is set again (default 10)")
    g.add_argument("--signing-keys", metavar="FILE",
                   help='accept only commands signed with one of these keys: a JSON file {"key id": "secret"}')
    g.add_argument("--adaptive-throttle", metavar="MIN:MAX",
                   help="adapt the throttle rate within MIN:MAX bytes/s to what copies achieve (e.g. 10MB/s:200MB/s)")
    g.add_argument("--snapshot-every", type=int_at_least(0, "a number of events"), default=10_000, metavar="N",
                   help="write a snapshot of the state to <prefix>snapshots every N events, and at a clean "
                        "shutdown; recovery and status fold only the events after the latest one (default "
                        "10000; 0: only at shutdown)")
    g.add_argument("--lease", type=positive_seconds, default=0.5, metavar="S",
                   help="seconds the decider may change the cluster after the start of a commit of its own to the "
                        "log; a new decider waits as long after its claim before acting (fencing, docs/engine.md). "
                        "Every worker of a prefix needs the same value: change it only with all workers stopped. "
                        "Raise it where a commit to kreassign's topics takes more than a small part of it: a "
                        "decider whose renewals outlast the lease gives its decisions up and retries (status: "
                        "last_retry) (default 0.5)")
    g.add_argument("--call-deadline", type=positive_seconds, default=1.0, metavar="S",
                   help="seconds the decider waits for one call to the cluster; a call still unanswered is left to "
                        "finish in the background and its outcome counts as unknown (retried, or seen by the next "
                        "look), so no broker holds the decider up (default 1, the default poll interval)")
    g.add_argument("--broker-deadline", type=positive_seconds, default=1.0, metavar="S",
                   help="seconds a broker may leave the engine's probe unanswered (one every S/2) before status, "
                        "the log and /metrics name it as not answering; nothing new is sent to it meanwhile "
                        "(default 1)")
    g.add_argument("--max-waiting-calls", type=int_at_least(1, "a number of calls"), default=16, metavar="N",
                   help="cluster calls left to finish in the background at once; past it a call fails at once, "
                        "naming the oldest (default 16)")
    g.add_argument("--time-scale", type=positive_seconds, metavar="X",
                   help="the cluster's clock runs X times the wall clock (a simulated cluster): /status and the "
                        "status page show rates in cluster time, labelled (default: a sim+http cluster's own "
                        "speed, else 1)")
    g.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="Faust's log level (default warning)")
    p.set_defaults(func=run)


def run(args) -> int:
    from engine.core.adaptive import BoundsError, parse_bounds
    from engine.cluster.connect import ConnectError, open_cluster
    from engine.log.signing import SigningError, load_keys
    from confluent_kafka.admin import AdminClient

    from engine.kafka.client_config import logged
    from engine.kafka.probe import ProbeError

    from engine.kafka.topics import TopicsError, create, layout_problems
    from engine.runtime.worker import Engine, Settings, run_worker

    args.web_port = check_port(args.web_bind, args.web_port)
    config = client_config(args)
    try:
        keys = load_keys(args.signing_keys) if args.signing_keys else None
        adaptive = parse_bounds(args.adaptive_throttle) if args.adaptive_throttle else None
        problems = start_up_check(args, config)  # before anything is decided (engine.kafka.preflight)
        if problems:
            raise CliError(problems)
        if layout_problems(AdminClient(logged(config.confluent())), args.prefix, args.timeout):
            create(config.confluent(), args.prefix, timeout=args.timeout)  # names what is wrong if it cannot
        cluster = open_cluster(args.cluster, args.bootstrap_server, args.command_config, args.timeout,
                               args.cluster_command_config)
    except (SigningError, BoundsError, TopicsError, ConnectError, ProbeError) as e:
        raise CliError(str(e)) from None
    try:
        cluster_answers(cluster, args.cluster, args.timeout)  # before the worker joins: nothing to decide without it
    except CliError:
        cluster.close()
        raise
    time_scale = args.time_scale or cluster_speed(cluster)
    engine = Engine(Settings(
        config=config, cluster=cluster, prefix=args.prefix, profile=broker_profile(args), registry=registry(args),
        web_port=args.web_port, web_bind=args.web_bind, poll_interval=args.poll_interval,
        fast_interval=args.fast_interval, request_budget=args.request_budget or None, signing_keys=keys,
        adaptive=adaptive, timeout=args.timeout, time_scale=time_scale, verify_interval=args.verify_interval,
        snapshot_every=args.snapshot_every,
        lease=args.lease, call_deadline=args.call_deadline, broker_deadline=args.broker_deadline,
        max_waiting_calls=args.max_waiting_calls,
    ))
    run_worker(engine, args.log_level)
    return 0


def _budget(text: str) -> float:
    """An argparse type: requests per second, 0 (no budget) or at least 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of requests a second: {text!r}") from None
    if value != 0 and not value >= 1:
        raise argparse.ArgumentTypeError(f"must be 0 (no budget) or at least 1 request a second, got {text}")
    if not value.is_integer():  # the rule counts whole requests in a window: 1.5 would act as 1
        raise argparse.ArgumentTypeError(f"must be a whole number of requests a second, got {text}")
    return value


def start_up_check(args, config) -> str | None:
    """The paragraph naming every grant the engine lacks, or None (``engine.kafka.preflight``). Creates
    kreassign's topics first if some are missing (needs Create; names what is wrong if it cannot)."""
    from engine.kafka.client_config import ClientConfig, ClientConfigError
    from engine.cluster.connect import ConnectError, kafka_addresses
    from engine.kafka.preflight import check_cluster, check_log, paragraph
    from engine.kafka.probe import Prober
    from engine.kafka.topics import create

    profile = broker_profile(args)
    prober = Prober(config, args.timeout)
    found = check_log(config, args.prefix, profile, args.timeout, prober)
    if found.missing_topics:
        create(config.confluent(), args.prefix, timeout=args.timeout)
        found = check_log(config, args.prefix, profile, args.timeout, prober)
    problems = list(found.problems)
    if args.cluster == "kafka":
        problems += check_cluster(config, args.timeout, prober)
    elif args.cluster.startswith("kafka://"):
        try:
            other = ClientConfig.load(args.cluster_command_config).with_bootstrap(kafka_addresses(args.cluster))
        except (ClientConfigError, ConnectError) as e:
            raise CliError(str(e)) from None
        problems += [f"{args.cluster}: {p}" for p in check_cluster(other, args.timeout)]
    if not problems:
        return None
    return paragraph(prober.principal, config.bootstrap, problems)


ANSWER_RETRY = 1.0  # seconds between the start-up check's questions to a cluster that has not answered yet


def cluster_answers(cluster, spec: str, bound: float, clock=time.monotonic, sleep=time.sleep) -> None:
    """Return once the cluster the engine reassigns answers an observation; CliError (exit status 2)
    naming the last failure if it has not within ``bound`` seconds (``--timeout``). A sim-cluster
    whose port refuses the connection fails at once (``engine.kafka.reach``, as a wrong
    ``--bootstrap-server`` does); one that accepts and is not ready yet (starting, restarting) is
    asked again every ``ANSWER_RETRY`` seconds, and the wait is said once on standard error."""
    import sys

    from engine.core.outcomes import Unavailable
    from engine.kafka.reach import unreachable

    if spec.startswith("sim+http://"):
        problem = unreachable(spec[len("sim+http://"):].split("/", 1)[0], bound, "the sim-cluster", "address")
        if problem is not None:
            raise CliError(f"--cluster {spec}: {problem}")
    deadline = clock() + bound
    said = False
    while True:
        answer = cluster.observe([])
        if not isinstance(answer, Unavailable):
            return
        if clock() + ANSWER_RETRY > deadline:
            raise CliError(f"--cluster {spec}: the cluster did not answer within {bound:g} s (--timeout): {answer}")
        if not said:
            print(f"kreassign engine: --cluster {spec} does not answer yet ({answer}); asking again for up to "
                  f"{bound:g} s (--timeout)", file=sys.stderr, flush=True)
            said = True
        sleep(ANSWER_RETRY)


def cluster_speed(cluster) -> float:
    """A running sim-cluster's speed (its ``/v1/health``); 1 for any other cluster, whose clock is
    the wall clock (a Kafka cluster has no other)."""
    health = getattr(cluster, "health", None)
    if health is None:
        return 1.0
    answer = health()
    speed = answer.get("speed") if isinstance(answer, dict) else None
    return float(speed) if isinstance(speed, (int, float)) and speed > 0 else 1.0


def check_port(bind: str, port: int) -> int:
    """The port the web server will listen on; fail with one line if it could not listen there (before
    Faust starts, which would say it with a long traceback). Port 0 means any free port (Faust itself
    refuses 0: the free port is picked here)."""
    import errno
    import socket

    try:
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server does
            s.bind((bind, port))
            return s.getsockname()[1]
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} is in use on {bind}: pass --web-port with another port "
                           "(each worker on a host needs its own)") from None
        raise CliError(f"cannot listen on {bind}:{port} (--web-bind, --web-port): {e.strerror}") from None
