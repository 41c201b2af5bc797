"""The simulated cluster's Kafka front with a ``security`` section: SASL/PLAIN and Kafka's ACL authorizer.

The authorizer's rules as Kafka's StandardAuthorizer has them (small cases, and properties
over random ACL sets), then every authorization answer the front gives, through the real
clients (confluent-kafka / librdkafka, kafka-python) and raw requests: what a client sees
from a KRaft broker with ``allow.everyone.if.no.acl.found=false``.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from hypothesis import given, settings, strategies as st
from kafka.admin import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse
from kafka.structs import TopicPartition as KTP

from engine.kafka.access import AuthWatch, KafkaPythonAuthLog
from engine.sim import scenario as S
from engine.sim.security import (
    Acl, Authorizer, SecurityError, SUPPORTED_OPERATIONS, operation_name, parse_acl_command,
)
from tests.sim_helpers import kafka_front
from tests.engine_harness import wait_for

# --- the authorizer's rules ---------------------------------------------------------------------


def authorizer(*commands: str, supers=(), everyone=False) -> Authorizer:
    return Authorizer([a for c in commands for a in parse_acl_command(c)], frozenset(supers), everyone)


def test_read_write_delete_alter_imply_describe_and_alter_configs_implies_describe_configs():
    a = authorizer("--add --allow-principal User:u --operation Read --topic r",
                   "--add --allow-principal User:u --operation AlterConfigs --topic c",
                   "--add --allow-principal User:u --operation Alter --cluster")
    assert a.authorize("User:u", "DESCRIBE", "TOPIC", "r")
    assert not a.authorize("User:u", "WRITE", "TOPIC", "r")
    assert a.authorize("User:u", "DESCRIBE_CONFIGS", "TOPIC", "c") and not a.authorize("User:u", "DESCRIBE", "TOPIC", "c")
    assert a.authorize("User:u", "DESCRIBE", "CLUSTER", "kafka-cluster")
    assert not a.authorize("User:u", "ALTER_CONFIGS", "CLUSTER", "kafka-cluster")


def test_a_deny_wins_and_implies_nothing():
    a = authorizer("--add --allow-principal User:u --operation All --topic t",
                   "--add --deny-principal User:u --operation Read --topic t")
    assert not a.authorize("User:u", "READ", "TOPIC", "t")
    assert a.authorize("User:u", "DESCRIBE", "TOPIC", "t")  # a DENY of Read does not deny Describe
    assert a.authorize("User:u", "WRITE", "TOPIC", "t")


def test_literal_prefixed_and_wildcard_patterns_and_any_user():
    a = authorizer("--add --allow-principal User:u --operation Read --topic orders",
                   "--add --allow-principal User:u --operation Write --topic 'app.' --resource-pattern-type prefixed",
                   "--add --allow-principal User:* --operation Describe --group '*'")
    assert a.authorize("User:u", "READ", "TOPIC", "orders") and not a.authorize("User:u", "READ", "TOPIC", "orders2")
    assert a.authorize("User:u", "WRITE", "TOPIC", "app.x") and not a.authorize("User:u", "WRITE", "TOPIC", "ap")
    assert a.authorize("User:anyone", "DESCRIBE", "GROUP", "g")
    assert not a.authorize("User:v", "READ", "TOPIC", "orders")


def test_super_users_and_resources_without_acls():
    a = authorizer("--add --allow-principal User:u --operation Read --topic t", supers=["User:admin"])
    assert a.authorize("User:admin", "ALTER", "CLUSTER", "kafka-cluster")
    assert not a.authorize("User:u", "DESCRIBE", "TOPIC", "no-acl-on-it")
    everyone = authorizer("--add --allow-principal User:u --operation Read --topic t", everyone=True)
    assert everyone.authorize("User:v", "DESCRIBE", "TOPIC", "no-acl-on-it")
    assert not everyone.authorize("User:v", "READ", "TOPIC", "t")  # t has ACLs: the default does not apply


def test_acl_commands_that_cannot_be_used_are_named():
    with pytest.raises(SecurityError, match="--producer is not supported"):
        parse_acl_command("--add --allow-principal User:u --producer --topic t")
    with pytest.raises(SecurityError, match="Read is not an operation of a cluster"):
        parse_acl_command("--add --allow-principal User:u --operation Read --cluster")
    with pytest.raises(SecurityError, match="not TYPE:NAME"):
        parse_acl_command("--add --allow-principal alice --operation Read --topic t")
    with pytest.raises(SecurityError, match="unknown operation"):
        operation_name("Reed")
    acls = parse_acl_command("kafka-acls.sh --bootstrap-server b:9092 --command-config a.properties --add "
                             "--allow-principal User:a --allow-principal User:b --operation Read --operation Describe "
                             "--topic t --group g")
    assert len(acls) == 8 and {a.resource_type for a in acls} == {"TOPIC", "GROUP"}


_ops = st.sampled_from(["READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                        "ALL"])
_acl = st.builds(Acl, st.sampled_from(["User:u", "User:v", "User:*"]), _ops, st.just("TOPIC"),
                 st.sampled_from(["t", "t2", "*", "t"]), st.sampled_from(["LITERAL", "PREFIXED"]), st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(_acl, max_size=6), _acl, st.sampled_from(["t", "t2", "x"]), _ops.filter(lambda o: o != "ALL"))
def test_an_allow_never_takes_a_permission_away_and_a_deny_never_grants_one(acls, extra, name, op):
    before = Authorizer(list(acls)).authorize("User:u", op, "TOPIC", name)
    after = Authorizer(list(acls) + [extra]).authorize("User:u", op, "TOPIC", name)
    if extra.allow:
        assert after or not before
    else:
        assert before or not after


@settings(max_examples=100, deadline=None)
@given(st.lists(_acl, max_size=6), st.sampled_from(["t", "t2", "x"]))
def test_authorized_operations_are_exactly_the_supported_operations_authorize_allows(acls, name):
    a = Authorizer(list(acls))
    codes = a.authorized_operations("User:u", "TOPIC", name)
    from engine.sim.security import OPERATION_CODES

    assert codes == {OPERATION_CODES[o] for o in SUPPORTED_OPERATIONS["TOPIC"] if a.authorize("User:u", o, "TOPIC", name)}


# --- the front, secured ------------------------------------------------------------------------------

USERS = {"admin": "admin-secret", "eng": "eng-secret", "ops": "ops-secret"}
SCENARIO = {
    "name": "secured",
    "brokers": [{"id": b, "network_in": "50 MB/s", "network_out": "50 MB/s"} for b in (1, 2, 3)],
    "topics": [{"name": "orders", "min_insync_replicas": 2, "assignment": [
        {"replicas": [1, 2], "size": "1 MB"}, {"replicas": [2, 3], "size": "1 MB"}]},
        {"name": "secret", "assignment": [{"replicas": [3, 1], "size": "1 MB"}]}],
    "security": {"users": USERS, "super_users": ["User:admin"], "acls": [
        "--add --allow-principal User:eng --operation Describe --operation DescribeConfigs --topic orders",
        "--add --allow-principal User:eng --operation Describe --group readers",
    ]},
}


@pytest.fixture(scope="module")
def front():
    with kafka_front(SCENARIO, speed=20) as kafka:
        yield kafka


def sasl(front, user, password=None, **extra):
    return {"bootstrap.servers": front.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user] if password is None else password, **extra}


@pytest.fixture(scope="module")
def eng(front):
    return AdminClient(sasl(front, "eng"))


@pytest.fixture(scope="module")
def eng_kp(front):
    client = KafkaAdminClient(bootstrap_servers=front.bootstrap, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="eng", sasl_plain_password=USERS["eng"],
                              request_timeout_ms=10000)
    yield client
    client.close()


def code_of(future, timeout=15):
    try:
        future.result(timeout)
    except KafkaException as e:
        return e.args[0].code()
    return KafkaError.NO_ERROR


def test_a_wrong_password_is_sasl_authentication_failed_which_librdkafka_reports_on_its_error_callback(front):
    watch = AuthWatch()
    client = AdminClient(sasl(front, "eng", "wrong", **watch.config()))
    with pytest.raises(KafkaException) as e:
        client.list_topics(timeout=3)
    assert e.value.args[0].code() == KafkaError._TRANSPORT  # what a caller sees: "Broker transport failure"
    assert "Invalid username or password" in wait_for(lambda: watch.failure(client), 5, "the _AUTHENTICATION error")


def test_kafka_python_logs_the_failed_authentication_and_times_out_bootstrapping(front):
    with KafkaPythonAuthLog() as auth, pytest.raises(Exception) as e:
        KafkaAdminClient(bootstrap_servers=front.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                         sasl_plain_username="eng", sasl_plain_password="wrong", request_timeout_ms=2000,
                         bootstrap_timeout_ms=2000)
    assert type(e.value).__name__ == "KafkaTimeoutError"
    assert auth.last == "Authentication failed: Invalid username or password"


def _raw(front, request, version, response_cls, authenticate=False):
    request = type(request)[version](**request.to_dict(json=False)) if request.API_VERSION != version else request
    request.with_header(correlation_id=3, client_id="raw")
    with socket.create_connection(("127.0.0.1", front.ports[1]), timeout=10) as s:
        s.sendall(request.encode(header=True, framed=True))
        head = s.recv(4)
        if not head:
            return None
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
    return response_cls.decode(body, version=version, header=True)


def test_a_request_before_authentication_closes_the_connection_and_only_plain_is_offered(front):
    assert _raw(front, MetadataRequest(topics=None), 12, MetadataResponse) is None
    answer = _raw(front, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1, SaslHandshakeResponse)
    assert answer.error_code == 33 and answer.mechanisms == ["PLAIN"]  # UNSUPPORTED_SASL_MECHANISM


def _exchange(s, request, version, correlation):
    """One request on an open connection; the raw answer body, or None if the broker closed the connection."""
    request = type(request)[version](**request.to_dict(json=False)) if request.API_VERSION != version else request
    request.with_header(correlation_id=correlation, client_id="raw")
    s.sendall(request.encode(header=True, framed=True))
    head = s.recv(4)
    if not head:
        return None
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def test_a_second_api_versions_before_authentication_closes_the_connection_as_kafka_does(front):
    """SaslServerAuthenticator: one ApiVersions, then the next request must be SaslHandshake; a second one
    is "Unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST" and the
    connection is closed (the old front answered every one). A version above the highest is answered with
    UNSUPPORTED_VERSION and does not count, so the client may ask again lower."""
    from kafka.protocol.metadata import ApiVersionsRequest

    with socket.create_connection(("127.0.0.1", front.ports[1]), timeout=10) as s:
        assert _exchange(s, ApiVersionsRequest(), 0, 1) is not None
        assert _exchange(s, ApiVersionsRequest(), 0, 2) is None
    with socket.create_connection(("127.0.0.1", front.ports[1]), timeout=10) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 99, 3, -1))  # ApiVersions v99: Kafka answers at v0, UNSUPPORTED_VERSION
        (size,) = struct.unpack(">i", s.recv(4))
        assert struct.unpack(">h", s.recv(size)[4:6])[0] == 35
        assert _exchange(s, ApiVersionsRequest(), 0, 4) is not None
        answer = _exchange(s, SaslHandshakeRequest(mechanism="PLAIN"), 1, 5)
        assert SaslHandshakeResponse.decode(answer, version=1, header=True).error_code == 0


def test_the_broker_watch_keeps_answering_on_a_sasl_listener(front):
    """The review's finding 5: the watch reused one unauthenticated connection for every ApiVersions probe;
    Kafka closes it at the second, so every other probe failed and healthy brokers were named unresponsive
    (and the clients rebuilt) every few seconds. Through the adapter's own watch, probing while steps are in
    flight: every broker answers every probe, nothing is ever named."""
    from engine.cluster.kafka import KafkaCluster
    from engine.core.partition import TopicPartition
    from engine.kafka.client_config import ClientConfig

    cluster = KafkaCluster(ClientConfig(sasl(front, "admin")), timeout=10)
    changes = []
    cluster._silence = changes.append  # what the watch would report (and rebuild the clients for)
    try:
        cluster.observe([TopicPartition("orders", 0)])  # the brokers' addresses (DescribeCluster)
        front.counts(reset=True)
        cluster.watch_brokers(0.3, interval=0.1, demand=lambda: "busy")  # each broker every 0.6 s
        watch = cluster._brokers_watch
        deadline = time.monotonic() + 3.0
        named = set()
        while time.monotonic() < deadline:
            named |= set(watch.unresponsive())
            time.sleep(0.05)
        probes = {b: per.get("ApiVersions", {}).get("requests", 0) for b, per in front.counts()["brokers"].items()}
        assert watch.probes >= 9 and all(n >= 3 for n in probes.values()) and set(probes) == {1, 2, 3}, probes
        assert named == set() and changes == [], (named, changes)
    finally:
        cluster.close()


def test_topics_a_principal_may_not_describe_are_left_out_of_a_listing_and_refused_by_name(front, eng):
    assert sorted(t for t in eng.list_topics(timeout=10).topics) == ["orders"]
    futures = eng.describe_topics(TopicCollection(["orders", "secret", "missing"]), include_authorized_operations=True)
    assert {o.name for o in futures["orders"].result(15).authorized_operations} == {"DESCRIBE", "DESCRIBE_CONFIGS"}
    assert code_of(futures["secret"]) == code_of(futures["missing"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient(sasl(front, "admin"))
    assert sorted(admin.list_topics(timeout=10).topics) == ["orders", "secret"]
    assert code_of(admin.describe_topics(TopicCollection(["missing"]))["missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_configs_need_describe_configs_and_alter_configs_on_the_topic_or_the_cluster_for_a_broker(eng):
    described = eng.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")], request_timeout=10)
    assert next(iter(described.values())).result(15)["min.insync.replicas"].value == "2"
    assert code_of(next(iter(eng.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()))) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    topic = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[ConfigEntry(
        "leader.replication.throttled.replicas", "0:1", incremental_operation=AlterConfigOpType.APPEND)])
    assert code_of(next(iter(eng.incremental_alter_configs([topic]).values()))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry(
        "leader.replication.throttled.rate", "1000", incremental_operation=AlterConfigOpType.SET)])
    assert code_of(next(iter(eng.incremental_alter_configs([broker]).values()))) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_reassignments_and_elections_need_the_cluster(eng, eng_kp):
    with pytest.raises(ClusterAuthorizationFailedError):
        eng_kp.alter_partition_reassignments({KTP("orders", 0): [2, 1]}, timeout_ms=5000)
    with pytest.raises(ClusterAuthorizationFailedError):
        eng_kp.list_partition_reassignments(None)
    # the top-level error code fails the whole call in librdkafka
    assert code_of(eng.elect_leaders(ElectionType.PREFERRED, [CTP("orders", 0)])) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert eng.describe_cluster(include_authorized_operations=True).result(15).authorized_operations is None


def test_groups_need_describe_and_an_assign_only_consumer_still_asks_for_its_coordinator(front, eng):
    assert code_of(eng.describe_consumer_groups(["other"])["other"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    described = eng.describe_consumer_groups(["readers"], include_authorized_operations=True)["readers"].result(15)
    assert [o.name for o in described.authorized_operations] == ["DESCRIBE"]
    # what the issue saw: librdkafka sends FindCoordinator for a consumer's group.id although it only
    # assigns partitions (and commits nothing); DESCRIBE on the group is refused -> error 30
    consumer = Consumer(sasl(front, "eng", **{"group.id": "not-granted", "enable.auto.commit": False}))
    try:
        consumer.assign([CTP("orders", 0, 0)])

        def group_error():
            for m in consumer.consume(10, 0.2):
                if m.error() is not None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    return m.error().str()

        assert "FindCoordinator" in wait_for(group_error, 15, "the consumer's FindCoordinator refusal")
    finally:
        consumer.close()


def test_create_topics_needs_create_and_validate_only_creates_nothing(front, eng):
    assert code_of(eng.create_topics([NewTopic("new", 1, 1)], validate_only=True)["new"]) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient(sasl(front, "admin"))
    assert code_of(admin.create_topics([NewTopic("new", 1, 1)], validate_only=True)["new"]) == KafkaError.NO_ERROR
    assert code_of(admin.create_topics([NewTopic("orders", 1, 1)], validate_only=True)["orders"]) \
        == KafkaError.TOPIC_ALREADY_EXISTS
    assert "new" not in admin.list_topics(timeout=10).topics
    assert code_of(admin.create_topics([NewTopic("new", 1, 1)])["new"]) == KafkaError.NO_ERROR
    assert "new" in admin.list_topics(timeout=10).topics


def test_acls_added_over_http_take_effect_at_once(front, eng):
    import json
    import urllib.request

    grant = "--add --allow-principal User:eng --operation Describe --topic secret"

    def post(body):
        req = urllib.request.Request(front.sim.url + "/v1/acls", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    try:
        post({"add": [grant]})
        assert code_of(eng.describe_topics(TopicCollection(["secret"]))["secret"]) == KafkaError.NO_ERROR
    finally:
        post({"remove": [grant]})
    assert code_of(eng.describe_topics(TopicCollection(["secret"]))["secret"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_scenario_with_a_bad_security_section_is_refused_by_name():
    doc = {**SCENARIO, "security": {"acls": ["--add --allow-principal User:u --operation Read --cluster"]}}
    with pytest.raises(S.ScenarioError, match="Read is not an operation of a cluster"):
        S.from_document(doc)
    with pytest.raises(S.ScenarioError, match="unknown keys"):
        S.from_document({**SCENARIO, "security": {"user": {}}})
