"""Options shared by the subcommands that talk to Kafka, in Kafka tool conventions.

``--bootstrap-server``, ``--command-config`` (a Java client properties file,
SASL/SSL included, passed to every client), ``--prefix`` (topic names),
``--broker-profile kafka|embedded`` (``kreassign broker`` prints the one to
use) and, for the commands that encode or decode, ``--schema-registry-url``.
"""

from __future__ import annotations

import argparse

from engine.kafka.broker_profile import NAMES, BrokerProfile, profile
from engine.cli import CliError
from engine.kafka.client_config import ClientConfig, ClientConfigError
from engine.kafka.topics import DEFAULT_PREFIX


def add_arguments(p: argparse.ArgumentParser, registry: bool = True, required: bool = True,
                  signing: bool = False) -> None:
    """``signing``: the command publishes commands, so it can sign them (``add_signing_arguments``)."""
    g = p.add_argument_group("connection")
    g.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT", help="Kafka bootstrap server(s)")
    g.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties file (SASL/SSL settings included), passed to every client")
    g.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"prefix of kreassign's topic names (default {DEFAULT_PREFIX})")
    g.add_argument("--broker-profile", choices=NAMES, default="kafka",
                   help="kafka (default) or embedded (the broker of 'kreassign broker')")
    if registry:
        g.add_argument("--schema-registry-url", metavar="URL",
                       help="write Confluent Schema Registry framing (default: Avro single-object encoding)")
    g.add_argument("--timeout", type=_seconds, default=30.0, metavar="SECONDS",
                   help="give up on the cluster after this long (default 30)")
    if signing:
        add_signing_arguments(p)
    p.set_defaults(reached=False)  # fail_fast: not yet checked


def add_signing_arguments(p: argparse.ArgumentParser) -> None:
    """``--signing-keys FILE [--signing-key-id ID]``: sign the command (``engine.log.signing``)."""
    g = p.add_argument_group("signing")
    g.add_argument("--signing-keys", metavar="FILE",
                   help='sign the command with HMAC-SHA256: a JSON file {"key id": "secret"}')
    g.add_argument("--signing-key-id", metavar="ID", help="the key of --signing-keys to use (default: its only key)")


CLUSTER_HELP = ("the cluster to reassign: kafka (the --bootstrap-server cluster), kafka://HOST:PORT[,HOST:PORT] "
                "(another Kafka cluster, e.g. a kreassign sim-cluster --kafka-port), sim+http://HOST:PORT (a running "
                "kreassign sim-cluster over HTTP) or sim:SCENARIO (a scenario's simulated cluster in this process)")


def add_cluster_arguments(p, required: bool) -> None:
    """``--cluster`` (which cluster the partitions live on) and ``--cluster-command-config`` (its settings
    when it is not the ``--bootstrap-server`` cluster)."""
    g = p.add_argument_group("cluster")
    g.add_argument("--cluster", required=required, default=None if required else "kafka",
                   metavar="kafka|kafka://HOST:PORT|sim+http://HOST:PORT|sim:SCENARIO",
                   help=CLUSTER_HELP + ("" if required else " (default kafka)"))
    g.add_argument("--cluster-command-config", metavar="FILE",
                   help="Kafka client properties (SASL/SSL ...) of a --cluster kafka://... cluster")


def fail_fast(args) -> None:
    """CliError at once when no bootstrap address the command will use accepts a connection
    (``--bootstrap-server`` or the ``--command-config``'s, and a ``--cluster kafka://...``'s): a
    refused connection is a clear answer within a moment, not after ``--timeout`` per request
    (``engine.kafka.reach``); an address that stays silent fails after ``--timeout``. Asked once
    per command, when it first needs the cluster (its own checks of its input come first)."""
    from engine.kafka.reach import unreachable

    if getattr(args, "reached", True):  # checked already, or not a command of add_arguments
        return
    args.reached = True
    wanted = [_client_config(args).bootstrap]
    cluster = getattr(args, "cluster", None) or ""
    if cluster.startswith("kafka://"):
        from engine.cluster.connect import ConnectError, kafka_addresses

        try:
            wanted.append(kafka_addresses(cluster))
        except ConnectError as e:
            raise CliError(str(e)) from None
    for bootstrap in dict.fromkeys(b for b in wanted if b):
        problem = unreachable(bootstrap, args.timeout)
        if problem is not None:
            raise CliError(problem)


def open_cluster_of(args):
    """The cluster the options name, or CliError."""
    from engine.cluster.connect import ConnectError, open_cluster

    fail_fast(args)
    try:
        return open_cluster(args.cluster, args.bootstrap_server, args.command_config, args.timeout,
                            args.cluster_command_config)
    except ConnectError as e:
        raise CliError(str(e)) from None


def signing_key(args):
    """The ``SigningKey`` the options name, or ``None``."""
    from engine.log.signing import SigningError, signing_key as load

    path = getattr(args, "signing_keys", None)
    if path is None:
        if getattr(args, "signing_key_id", None):
            raise CliError("--signing-key-id needs --signing-keys")
        return None
    try:
        return load(path, args.signing_key_id)
    except SigningError as e:
        raise CliError(str(e)) from None


def client_config(args) -> ClientConfig:
    """The client settings of ``--command-config`` and ``--bootstrap-server``; the first call of a
    command checks that something listens there (``fail_fast``)."""
    fail_fast(args)
    return _client_config(args)


def _client_config(args) -> ClientConfig:
    try:
        return ClientConfig.load(args.command_config).with_bootstrap(args.bootstrap_server)
    except ClientConfigError as e:
        raise CliError(str(e)) from None


def broker_profile(args) -> BrokerProfile:
    return profile(args.broker_profile)


def registry(args):
    return getattr(args, "schema_registry_url", None)


def int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= ``minimum``; ``what`` names it in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_rate = int_at_least(1, "a number of bytes per second")


RATE_OR_NONE = "BYTES_PER_SEC|none"
"""The metavar of every option that takes a throttle rate."""
NONE_MEANS = "'none': unthrottled (no replication throttle on the moves)"
"""What ``none`` means, in every such option's help."""
class _Keep:
    def __repr__(self) -> str:
        return "keep"


KEEP = _Keep()
"""The default of an option that may leave the throttle as it is (execute --throttle, balance --throttle):
not a string, which argparse would parse as a value."""


def submit_throttle(value) -> dict:
    """An option parsed by ``rate_or_none`` with default ``KEEP``, as a ``Submit``'s throttle fields."""
    return {"throttle_rate": None if value is KEEP else value, "unthrottled": value is None}


def rate_or_none(text: str) -> int | None:
    """An argparse type: a throttle rate in bytes per second (at least 1), or ``none`` (``None``): the
    one parser of ``throttle --rate``, ``execute --throttle`` and ``balance --throttle``."""
    if text.strip().lower() == "none":
        return None
    try:
        return positive_rate(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (or 'none')") from None


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    return _seconds(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def publish(args, action):
    """Run ``action(publisher)`` with a ``Publisher`` built from the options; its result."""
    from engine.log.eventlog import Publisher, PublishError

    try:
        with Publisher(
            config=client_config(args), prefix=args.prefix, profile=broker_profile(args),
            registry=registry(args), timeout=args.timeout, signing_key=signing_key(args),
        ) as publisher:
            return action(publisher)
    except (PublishError, RuntimeError) as e:
        raise CliError(str(e)) from None
