"""A real Apache Kafka (the ``apache/kafka`` image, KRaft, one node) via testcontainers.

``real_kafka()`` yields its bootstrap address, or skips the test with the
reason when no Docker engine answers (that check fails in milliseconds).
"""

from __future__ import annotations

import contextlib
import socket
import time

import pytest

IMAGE = "apache/kafka:3.9.0"


def docker_problem() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:  # noqa: BLE001 - any failure means: no Docker engine to use
        return f"no Docker engine answers ({type(e).__name__}: {str(e)[:120]})"
    return None


@contextlib.contextmanager
def real_kafka(start_timeout: float = 120.0):
    problem = docker_problem()
    if problem:
        pytest.skip(f"real Apache Kafka tests need Docker: {problem}")
    from confluent_kafka.admin import AdminClient
    from testcontainers.core.container import DockerContainer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    container = DockerContainer(IMAGE).with_bind_ports(9092, port)
    for key, value in {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    }.items():
        container = container.with_env(key, value)
    with container:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                admin.list_topics(timeout=2)
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield bootstrap
