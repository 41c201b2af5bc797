"""Open a cluster by name, as the command line says it: the one place that picks an implementation.

* ``kafka``: a real cluster at ``--bootstrap-server`` with ``--command-config`` settings;
* ``kafka://HOST:PORT[,HOST:PORT...]``: another Kafka cluster than the one holding
  kreassign's topics, with its own settings (``--cluster-command-config``); a
  ``kreassign sim-cluster --kafka-port`` is one;
* ``sim+http://HOST:PORT``: a running ``kreassign sim-cluster``;
* ``sim:FILE``: a scenario's simulated cluster in this process, on the wall clock.

``snapshot_of`` gives planners (the balancer) a ``ClusterSnapshot`` from a
scenario file or from a live cluster.
"""

from __future__ import annotations

import time

from engine.kafka.client_config import ClientConfig
from engine.cluster import Cluster, ClusterSnapshot
from engine.core.outcomes import Unavailable


class ConnectError(ValueError):
    """A cluster name or setting that cannot be used; the message says why."""


def kafka_addresses(spec: str) -> str:
    """The bootstrap list of ``kafka://HOST:PORT[,HOST:PORT...]``, or ConnectError saying what is wrong."""
    rest = spec[len("kafka://"):].rstrip("/")
    addresses = [a.strip() for a in rest.split(",")]
    for a in addresses:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConnectError(f"{spec!r}: expected kafka://HOST:PORT[,HOST:PORT...], and {a!r} is not HOST:PORT")
    return ",".join(addresses)


def open_cluster(spec: str, bootstrap: str | None = None, command_config: str | None = None,
                 timeout: float = 30.0, cluster_command_config: str | None = None) -> Cluster:
    """``cluster_command_config`` is the settings file of a ``kafka://`` cluster (``command_config``
    belongs to the ``--bootstrap-server`` cluster)."""
    if cluster_command_config is not None and not spec.startswith("kafka://"):
        raise ConnectError("--cluster-command-config goes with --cluster kafka://HOST:PORT "
                           "(--command-config already configures the --bootstrap-server cluster)")
    if spec == "kafka" or spec.startswith("kafka://"):
        from engine.kafka.client_config import ClientConfigError
        from engine.cluster.kafka import KafkaCluster, KafkaClusterError

        try:
            if spec == "kafka":
                config = ClientConfig.load(command_config).with_bootstrap(bootstrap)
            else:
                config = ClientConfig.load(cluster_command_config).with_bootstrap(kafka_addresses(spec))
        except ClientConfigError as e:
            raise ConnectError(str(e)) from None
        if not config.bootstrap:
            raise ConnectError("--bootstrap-server (or bootstrap.servers in --command-config) is required")
        try:
            return KafkaCluster(config, timeout=timeout)
        except KafkaClusterError as e:
            raise ConnectError(str(e)) from None
    if spec.startswith("sim+http://"):
        from engine.cluster.remote import RemoteCluster

        return RemoteCluster(spec[len("sim+"):], timeout=timeout)
    if spec.startswith("sim:"):
        from engine.sim import scenario
        from engine.sim.cluster import SimulatedCluster

        try:
            loaded = scenario.load(spec[len("sim:"):])
        except scenario.ScenarioError as e:
            raise ConnectError(str(e)) from None
        start = time.monotonic()
        return SimulatedCluster.from_scenario(loaded, clock=lambda: time.monotonic() - start)
    raise ConnectError(f"unknown cluster {spec!r}: expected kafka, kafka://HOST:PORT[,HOST:PORT...], "
                       "sim:SCENARIO_FILE or sim+http://HOST:PORT")


def snapshot_of(scenario_file: str | None = None, bootstrap: str | None = None,
                command_config: str | None = None, timeout: float = 30.0, cluster: str = "kafka",
                cluster_command_config: str | None = None) -> ClusterSnapshot:
    """The cluster a planner works on: a scenario's starting point, or a live cluster now
    (``cluster`` as ``open_cluster`` takes it)."""
    if scenario_file is not None:
        from engine.sim import scenario

        try:
            return scenario.load(scenario_file).snapshot()
        except scenario.ScenarioError as e:
            raise ConnectError(str(e)) from None
    live = open_cluster(cluster, bootstrap, command_config, timeout, cluster_command_config)
    try:
        snap = live.snapshot()
    finally:
        live.close()
    if isinstance(snap, Unavailable):
        raise ConnectError(f"cannot read the cluster at {bootstrap if cluster == 'kafka' else cluster}: {snap.message}")
    return snap
