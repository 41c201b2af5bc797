"""Security end to end against a real protocol peer that authenticates and authorizes: the simulated
cluster's Kafka front with SASL/PLAIN users and exactly the ACLs ``kreassign acls`` prints.

* the documented grants let the engine start and reassign (throttles, elections, sizes), and
  each of the engine's own grants is needed: without it the start-up check names it;
* every command names a denial ("... is not authorized to Read and Describe on topic T
  (TOPIC_AUTHORIZATION_FAILED): grant it with: kafka-acls.sh ...") and a wrong password
  ("authentication failed for user U"), exit 2;
* a request on a topic the engine may not describe is rejected with the grant; a throttle
  change it may not make is a visible wait naming the grant, and goes on once granted.

The front serves the admin APIs only: producing, fetching and joining groups are not
simulated, so what readers and the Faust worker do after their checks is covered by the
request/ACL table of ``engine.kafka.acls`` (read from Kafka's source), not run here.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from engine.kafka import acls
from engine.core import events as ev
from engine.cli import main
from engine.kafka.client_config import ClientConfig
from engine.cluster.kafka import KafkaCluster
from engine.core.outcomes import Refused
from engine.core.commands import PartitionTarget, Submit
from engine.runtime.decider import Decider, MemoryLog
from engine.core.partition import TopicPartition
from engine.kafka.preflight import check_cluster, check_log, faust_topics
from engine.kafka.probe import Prober
from engine.kafka.broker_profile import KAFKA
from tests.sim_helpers import kafka_front
from engine.core.state import COMPLETED
from engine.views.summary import problems

PREFIX = "kreassign."
USERS = {"admin": "admin-secret", "engine": "engine-secret", "operator": "operator-secret",
         "analyst": "analyst-secret", "intruder": "intruder-secret"}
PRINCIPALS = {acls.ENGINE: ["User:engine"], acls.OPERATOR: ["User:operator"], acls.ANALYST: ["User:analyst"]}
SCOPE = acls.TopicScope(names=("orders",))
DOCUMENTED = acls.bindings(PRINCIPALS, PREFIX, SCOPE)
OWN = ["commands", "events", "decisions", "dead-letters", "snapshots"]
SCENARIO = {
    "name": "secured",
    "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
    "topics": [
        {"name": "orders", "min_insync_replicas": 1, "assignment": [
            {"replicas": [1, 2], "size": "2 MB"}, {"replicas": [2, 3], "size": "2 MB"}]},
        {"name": "secret", "assignment": [{"replicas": [3, 4], "size": "1 MB"}]},
        {"name": "other.events", "assignment": [{"replicas": [1], "size": "0 MB"}]},
        {"name": faust_topics(PREFIX)[-1], "assignment": [{"replicas": [1], "size": "0 MB"}]},
    ] + [{"name": PREFIX + t, "assignment": [{"replicas": [1], "size": "0 MB"}]} for t in OWN],
    "security": {
        "users": USERS, "super_users": ["User:admin"],
        "acls": [b.command() for b in DOCUMENTED]
        + ["--add --allow-principal User:analyst --operation Read --operation Describe --topic other.events"],
    },
}


@pytest.fixture(scope="module")
def front():
    with kafka_front(SCENARIO, speed=50) as kafka:
        yield kafka


def config(front, user, password=None) -> ClientConfig:
    return ClientConfig({"bootstrap.servers": front.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": user,
                         "sasl.password": USERS[user] if password is None else password})


@pytest.fixture
def properties(front, tmp_path):
    def write(user, password=None):
        path = tmp_path / f"{user}.properties"
        path.write_text("\n".join(f"{k}={v}" for k, v in config(front, user, password).properties.items()
                                  if k != "bootstrap.servers"))
        return str(path)

    return write


def acl_change(front, add=(), remove=()):
    body = json.dumps({"add": list(add), "remove": list(remove)}).encode()
    req = urllib.request.Request(front.sim.url + "/v1/acls", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class Without:
    """The documented ACLs minus some, for the duration of a ``with``."""

    def __init__(self, front, *commands):
        self.front, self.commands = front, commands

    def __enter__(self):
        acl_change(self.front, remove=self.commands)

    def __exit__(self, *exc):
        acl_change(self.front, add=self.commands)


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# --- the engine's own grants ------------------------------------------------------------------


def test_with_the_documented_acls_the_engine_may_do_all_it_needs(front):
    cfg = config(front, "engine")
    found = check_log(cfg, PREFIX, KAFKA, timeout=10)
    assert found.missing_topics == [] and found.problems == []
    assert check_cluster(cfg, timeout=10) == []


ENGINE_OWN = [b for b in DOCUMENTED if b.role == acls.ENGINE and b.need.resource.name not in ("*", "orders")
              and b.need.resource.kind != "transactional-id"]  # not asked at start-up: claimed (below)


def test_without_write_on_the_deciders_transactional_id_the_claim_names_the_grant(monkeypatch):
    """The simulated cluster's front has no transactions (librdkafka then refuses before asking), so
    librdkafka's answer to a refused claim is given here as it reports it: a fatal
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED from init_transactions (FindCoordinator or InitProducerId)."""
    from confluent_kafka import KafkaError, KafkaException

    from engine.log import eventlog
    from engine.log.eventlog import PublishError, _Writer

    class Refusing:
        def __init__(self, conf):
            assert conf["transactional.id"] == PREFIX + "decider"

        def init_transactions(self, timeout):
            raise KafkaException(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal=True))

    monkeypatch.setattr(eventlog, "Producer", Refusing)
    cfg = ClientConfig({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": "engine", "sasl.password": "x"})
    with pytest.raises(PublishError) as e:
        _Writer(cfg, PREFIX + "events", KAFKA, 10.0, check=False, transactional_id=PREFIX + "decider")
    assert str(e.value).startswith(f"User:engine is not authorized to Write on transactional-id {PREFIX}decider "
                                   "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED): grant it with: kafka-acls.sh")
    assert f"--allow-principal User:engine --operation Write --transactional-id {PREFIX}decider" in str(e.value)


@pytest.mark.parametrize("binding", ENGINE_OWN, ids=[str(b.need.resource) for b in ENGINE_OWN])
def test_each_of_the_engines_own_grants_is_needed_and_the_start_up_check_names_it(front, binding):
    cfg = config(front, "engine")
    need = binding.need
    for op in need.operations:
        single = acls.Binding(binding.role, binding.principal, acls.Need((op,), need.resource, need.why)).command()
        with Without(front, single):
            found = check_log(cfg, PREFIX, KAFKA, timeout=10)
            named = found.problems + check_cluster(cfg, timeout=10)
        lacking = [p for p in named if f"--operation {op}" in p and need.resource.options() in p]
        assert lacking, f"without {op} on {need.resource} the check said: {named}"
        assert all("User:engine is not authorized to" in p for p in named), named


def test_the_engine_refuses_to_start_naming_every_missing_grant(front, properties, capsys):
    cluster_alter = acls.Binding("engine", "User:engine", acls.Need(("Alter",), acls.THE_CLUSTER)).command()
    with Without(front, cluster_alter):
        code, _out, err = cli(capsys, "engine", "--bootstrap-server", front.bootstrap, "--command-config",
                              properties("engine"), "--cluster", "kafka", "--timeout", "10")
    assert code == 2
    assert err.startswith("kreassign engine: error: the engine may not do what it needs as User:engine on ")
    # without Alter (which implies Describe) Kafka tells nothing of the cluster: the grant asks for all it needs
    assert "--operation Alter --operation AlterConfigs --cluster" in err and err.count("  - ") == 1
    code, _out, err = cli(capsys, "engine", "--bootstrap-server", front.bootstrap, "--command-config",
                          properties("engine"), "--cluster", "kafka", "--prefix", "other.", "--timeout", "10")
    assert code == 2 and "not authorized to Read on topic other.commands" in err
    assert "group other.engine" in err and "group other.reader" in err  # the groups follow --prefix


def test_a_wrong_password_is_named_by_every_command(front, properties, capsys):
    bad = properties("operator", "wrong")
    for argv in (["status"], ["replay"], ["pause"], ["dead-letters"],
                 ["engine", "--cluster", "kafka"]):
        code, _out, err = cli(capsys, *argv, "--bootstrap-server", front.bootstrap, "--command-config", bad,
                              "--timeout", "10")
        assert code == 2, (argv, err)
        assert "authentication failed for user operator" in err and "Invalid username or password" in err, err


def test_commands_name_the_missing_permission_and_its_grant(front, properties, capsys):
    code, _out, err = cli(capsys, "status", "--bootstrap-server", front.bootstrap, "--command-config",
                          properties("intruder"))
    assert code == 2 and "User:intruder is not authorized to Read on topic kreassign.events" in err
    assert "kafka-acls.sh --bootstrap-server" in err and "--allow-principal User:intruder" in err
    code, _out, err = cli(capsys, "pause", "--bootstrap-server", front.bootstrap, "--command-config",
                          properties("analyst"))
    assert code == 2 and "User:analyst is not authorized to Write on topic kreassign.commands" in err
    # the readers' group follows --prefix: Read on other.events is not enough without Describe on other.reader
    code, _out, err = cli(capsys, "replay", "--bootstrap-server", front.bootstrap, "--command-config",
                          properties("analyst"), "--prefix", "other.")
    assert code == 2 and "not authorized to Describe on group other.reader (GROUP_AUTHORIZATION_FAILED)" in err
    code, _out, err = cli(capsys, "dead-letters", "--bootstrap-server", front.bootstrap, "--command-config",
                          properties("analyst"))
    assert code == 2 and "Read on topic kreassign.dead-letters" in err


def test_following_the_events_names_the_missing_grant(front):
    """``follow`` (``status --follow``, the verdict of a command) reads as the log grows; a refusal
    there names the grant as every other reader does, not librdkafka's bare error."""
    from engine.log.eventlog import ReadError, follow

    events = follow(config(front, "intruder"), PREFIX + "events", lambda v: v, lambda _d: None, start_offset=0,
                    group_id=PREFIX + "reader")
    with pytest.raises(ReadError) as e:
        for _ in range(300):  # None at each poll without a message (0.1 s): the refusal comes within seconds
            next(events)
    assert "User:intruder is not authorized to" in str(e.value) and "kafka-acls.sh" in str(e.value)
    events.close()


def test_operators_may_check_what_they_need_and_verify_names_a_topic_it_may_not_describe(front, properties, capsys,
                                                                                           tmp_path):
    p = Prober(config(front, "operator"), 10)
    p.topic(PREFIX + "commands", ("Write", "Describe"))
    p.topic(PREFIX + "events", ("Read", "Describe"))
    p.group(PREFIX + "reader", ("Describe",))
    p.cluster(("Describe", "DescribeConfigs"))
    targets = tmp_path / "t.json"
    targets.write_text(json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2]}]}))
    code, out, err = cli(capsys, "verify", "--reassignment-json-file", str(targets), "--bootstrap-server",
                         front.bootstrap, "--command-config", properties("operator"))
    assert code in (0, 1) and "Status of partition reassignment" in out, err
    targets.write_text(json.dumps({"version": 1, "partitions": [{"topic": "secret", "partition": 0, "replicas": [3, 4]}]}))
    code, out, err = cli(capsys, "verify", "--reassignment-json-file", str(targets), "--bootstrap-server",
                         front.bootstrap, "--command-config", properties("operator"))
    assert code == 2 and "not authorized to Describe on topic secret" in err and "does not exist" not in out + err


# --- requests on topics the engine may not touch -----------------------------------------------------


def run_until(d: Decider, condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not condition(d):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {problems(d.state)}"
        d.tick()
        time.sleep(0.2)


def test_the_engine_rejects_a_request_it_may_not_describe_and_waits_visibly_for_a_throttle_grant(front):
    cluster = KafkaCluster(config(front, "engine"), timeout=10)
    log = MemoryLog()
    d = Decider(log, cluster, clock=time.time)
    d.recover(None)
    d.decide(Submit("nope", (PartitionTarget("secret", 0, (4, 1)),), throttle_rate=10_000_000))
    (rejected,) = [e.payload for e in log.records if isinstance(e.payload, ev.CommandRejected)]
    assert rejected.request_id == "nope"
    assert "User:engine is not authorized to Describe on topic secret (TOPIC_AUTHORIZATION_FAILED)" in rejected.reasons[0]
    assert "kafka-acls.sh" in rejected.reasons[0] and "nope" not in d.state.requests

    alter_configs = acls.Binding("engine", "User:engine", acls.Need(("AlterConfigs",), acls.topic("orders"))).command()
    describe_configs = alter_configs.replace("AlterConfigs", "DescribeConfigs")  # what AlterConfigs implied
    acl_change(front, add=[describe_configs], remove=[alter_configs])
    try:
        # 2 MB at 1 MB/s: more than the throttle gives it in throttle_release_ms, so it needs its entries (at
        # 50 MB/s it would start released, with no throttle to set: release_at_start)
        d.decide(Submit("r1", (PartitionTarget("orders", 0, (3, 4)),), throttle_rate=1_000_000))

        def waiting_for_the_grant(d):
            return any("--operation AlterConfigs --topic orders" in p["message"] for p in problems(d.state))

        run_until(d, waiting_for_the_grant, 20, "the throttle refusal in status problems")
        assert not any(f.started for f in d.state.steps.values())  # never unthrottled
        failed = [e.payload for e in log.records if isinstance(e.payload, ev.ActionFailed)]
        assert failed and failed[0].code == "TOPIC_AUTHORIZATION_FAILED"
    finally:
        acl_change(front, add=[alter_configs], remove=[describe_configs])
    run_until(d, lambda d: d.state.requests["r1"].status == COMPLETED, 60, "the request to complete once granted")
    assert problems(d.state) == []
    assert front.sim.cluster.state.partitions[TopicPartition("orders", 0)].replicas == (3, 4)
    t = front.sim.cluster.state.throttles
    assert not any(t.leader.values()) and not any(t.follower.values()) and not t.leader_rate and not t.follower_rate
    cluster.close()


def test_the_adapter_names_a_wrong_password_for_both_client_libraries(front):
    cluster = KafkaCluster(config(front, "engine", "wrong"), timeout=10)  # a loaded machine is slow
    obs = cluster.observe([TopicPartition("orders", 0)])
    assert "authentication failed for user engine" in str(obs)
    (result,) = cluster.alter_reassignments({TopicPartition("orders", 0): (1, 2)}).values()
    assert isinstance(result, Refused) and result.code == "SASL_AUTHENTICATION_FAILED"
    assert "authentication failed for user engine" in result.message
    cluster.close()
