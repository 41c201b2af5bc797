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


def verify(front, tmp_path, through: str = "kafka") -> list[str]:
    """verify's command line, reading the cluster through its Kafka front or its HTTP API (``sim+``)."""
    cluster = "kafka://" + front.bootstrap if through == "kafka" else "sim+" + front.sim.url
    return ["verify", "--bootstrap-server", front.bootstrap, "--cluster", cluster,
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


LOG_DIRS = "replica.alter.log.dirs.io.max.bytes.per.second"


def set_broker_config(front, broker: int, name: str, value: str | None) -> None:
    """SET (or DELETE, value None) a broker's config over the Kafka front, as kafka-configs.sh would, and check
    it reads back."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": front.bootstrap})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, str(broker),
                              incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    configs = next(iter(admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))]).values())).result()
    assert configs[name].value == (value if value is not None else str(2**63 - 1))


@pytest.mark.parametrize("through", ["kafka", "http"])
def test_a_log_dirs_throttle_left_on_a_broker_is_a_throttle_left(front, tmp_path, capsys, through):
    """Kafka's tool's --verify deletes replica.alter.log.dirs.io.max.bytes.per.second on every broker with the
    replication rates (ReassignPartitionsCommand.BROKER_LEVEL_THROTTLES; its --replica-alter-log-dirs-throttle
    sets it). kreassign never sets it: verify names it as a throttle left, as it names a rate left, with the
    command that removes it, and exits 1; through the sim-cluster's HTTP API too (/v1/state gives what the front
    keeps). Before: not read ("Throttles are cleared", exit 0)."""
    command = verify(front, tmp_path, through)
    set_broker_config(front, 2, LOG_DIRS, "10000000")
    assert main(command) == 1
    out = capsys.readouterr().out
    assert "Reassignment of partition v-0 is completed." in out and "Throttles are cleared" not in out
    assert f"Brokers [2] still have a {LOG_DIRS} (10 MB/s), set outside kreassign" in out, out
    bootstrap = front.bootstrap if through == "kafka" else "HOST:PORT"  # the HTTP API gives no Kafka address
    removal = (f"  To remove: kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type brokers "
               f"--entity-name 2 --delete-config {LOG_DIRS}\n")
    assert removal in out, out

    set_broker_config(front, 2, LOG_DIRS, None)  # the removal the output gives
    assert main(command) == 0
    assert "Throttles are cleared" in capsys.readouterr().out


def test_a_log_dirs_throttle_counts_against_a_request_too(front, broker, topics, capsys):
    """With --request a log-dirs throttle is no running request's (kreassign never sets one): it counts, as
    another tool's replication rate does."""
    common = base.logged_request(front.sim.url, broker, topics)
    options = [*common[:-1], "kafka://" + front.bootstrap]
    assert main(["verify", "--request", "req-1", *options]) == 0
    capsys.readouterr()
    set_broker_config(front, 4, LOG_DIRS, "5000000")
    assert main(["verify", "--request", "req-1", *options]) == 1
    out = capsys.readouterr().out
    assert "Reassignment of partition v-0 is completed." in out and "Throttles are cleared" not in out
    assert f"Brokers [4] still have a {LOG_DIRS} (5 MB/s), set outside kreassign" in out, out
