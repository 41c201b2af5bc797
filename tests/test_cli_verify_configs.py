"""``kreassign verify`` through the Kafka adapter against the simulated cluster's Kafka front, which counts the
requests that arrive (``KafkaFront.counts``): what verify asks of the throttle configs, and how often."""

import json

import pytest

from engine.cli import main
from tests import test_cli_verify_list as base
from tests.sim_helpers import kafka_front

BROKERS = (1, 2, 3, 4)


@pytest.fixture
def front():
    with kafka_front(base.SCENARIO, speed=50) as kafka:
        yield kafka


def targets_file(tmp_path) -> str:
    """The scenario's partitions at the replicas they have: nothing to move, only throttles to check."""
    path = tmp_path / "targets.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "v", "partition": 0, "replicas": [1, 2]}, {"topic": "v", "partition": 1, "replicas": [2, 3]}]}))
    return str(path)


def verify(front, tmp_path) -> list[str]:
    return ["verify", "--bootstrap-server", front.bootstrap, "--cluster", "kafka://" + front.bootstrap,
            "--reassignment-json-file", targets_file(tmp_path)]


def requests(front, api: str) -> int:
    return sum(per[api]["requests"] for per in front.counts()["brokers"].values() if api in per)


def test_verify_reads_the_topics_configs_once(front, tmp_path, capsys):
    """One DescribeConfigs of the topics (their throttled-replicas lists, a '*' among them, and the
    min.insync.replicas the look would otherwise ask again) and one of each broker (librdkafka sends a
    broker's to that broker). Before: three of the topics (the look's min.insync.replicas, the throttles,
    the wildcard lists), seven in all."""
    command = verify(front, tmp_path)
    front.counts(reset=True)
    assert main(command) == 0
    assert "Throttles are cleared" in capsys.readouterr().out
    assert requests(front, "DescribeConfigs") == 1 + len(BROKERS)
