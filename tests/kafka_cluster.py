"""A real KRaft cluster for the contract tests: testcontainers, apache/kafka, one controller + 4
brokers on 2 racks. Skips, with the reason, when no Docker engine answers."""

from __future__ import annotations

import os
import socket
import time

import pytest

KAFKA_IMAGE = os.environ.get("KAFKA_IMAGE", "apache/kafka:4.1.0")
BROKERS = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b"}
STARTED = r".*Kafka Server started.*"


def docker_or_skip() -> None:
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as e:
        pytest.skip(f"no Docker engine: docker SDK not installed ({e})")
    try:
        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except DockerException as e:
        pytest.skip(f"no Docker engine answers: {e}")
    except Exception as e:  # noqa: BLE001 - a hung or half-configured daemon
        pytest.skip(f"no Docker engine answers: {type(e).__name__}: {e}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _env(cluster_id: str) -> dict[str, str]:
    return {"CLUSTER_ID": cluster_id, "KAFKA_CONTROLLER_QUORUM_VOTERS": "100@controller:9093",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_LOG_DIRS": "/tmp/kraft-logs"}


def start_cluster():
    """Yields the bootstrap string; stops every container it started."""
    docker_or_skip()
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.docker_client import DockerClient
    from testcontainers.core.network import Network
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    host = DockerClient().host()
    cluster_id = "q1Sh-9_ISia_zwGINzRvyQ"
    containers = []
    with Network() as net:
        try:
            ctl = (DockerContainer(KAFKA_IMAGE).with_network(net).with_network_aliases("controller")
                   .with_envs(**_env(cluster_id), KAFKA_NODE_ID="100", KAFKA_PROCESS_ROLES="controller",
                              KAFKA_LISTENERS="CONTROLLER://:9093",
                              KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="CONTROLLER:PLAINTEXT",
                              KAFKA_HEAP_OPTS="-Xmx256m -Xms256m")
                   .waiting_for(LogMessageWaitStrategy(STARTED).with_startup_timeout(120)))
            ctl.start()
            containers.append(ctl)
            ports = []
            for node, rack in BROKERS.items():
                port = _free_port()
                alias = f"broker-{node}"
                b = (DockerContainer(KAFKA_IMAGE).with_network(net).with_network_aliases(alias)
                     .with_bind_ports(9092, port)
                     .with_envs(**_env(cluster_id), KAFKA_NODE_ID=str(node), KAFKA_PROCESS_ROLES="broker",
                                KAFKA_BROKER_RACK=rack, KAFKA_LISTENERS="INTERNAL://:19092,EXTERNAL://:9092",
                                KAFKA_ADVERTISED_LISTENERS=f"INTERNAL://{alias}:19092,EXTERNAL://{host}:{port}",
                                KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                                KAFKA_INTER_BROKER_LISTENER_NAME="INTERNAL",
                                KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR="3",
                                KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR="3",
                                KAFKA_TRANSACTION_STATE_LOG_MIN_ISR="2",
                                KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS="0",
                                KAFKA_AUTO_CREATE_TOPICS_ENABLE="false",
                                KAFKA_AUTO_LEADER_REBALANCE_ENABLE="false",
                                KAFKA_HEAP_OPTS="-Xmx384m -Xms384m")
                     .waiting_for(LogMessageWaitStrategy(STARTED).with_startup_timeout(120)))
                b.start()
                containers.append(b)
                ports.append(f"{host}:{port}")
            bootstrap = ",".join(ports)
            _wait_registered(bootstrap, len(BROKERS))
            yield bootstrap
        finally:
            for c in reversed(containers):
                try:
                    c.stop()
                except Exception:  # noqa: BLE001
                    pass


def _wait_registered(bootstrap: str, expected: int, timeout: float = 90) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(admin.describe_cluster(request_timeout=5).result().nodes) >= expected:
                return
        except Exception:  # noqa: BLE001 - still starting
            pass
        time.sleep(1)
    raise TimeoutError(f"{expected} brokers not registered after {timeout}s")


def create_topic(bootstrap: str, name: str, assignment: list[list[int]], min_isr: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment,
                     config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)
