"""The simulated cluster over the Kafka protocol (``engine.sim.kafka_front``), through real clients.

confluent-kafka (librdkafka) and kafka-python admin clients against the front, and a few raw
requests (kafka-python's protocol classes on a plain socket) for what the clients would not send:
a BROKER config sent to another broker than the one it names, an API the front does not serve, an
ApiVersions version above the highest, an API key no schema knows. One cluster for the module:
every test leaves it as it found it.
"""

from __future__ import annotations

import io
import socket
import struct
import time

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest
from kafka.protocol.admin import IncrementalAlterConfigsResponse
from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.structs import TopicPartition as KTP

from engine.kafka.client_config import ClientConfig
from engine.cluster import Ok, Unavailable
from engine.cluster.kafka import KafkaCluster
from engine.core.partition import TopicPartition
from engine.sim import scenario as S
from engine.sim.kafka_api import SUPPORTED
from engine.sim.kafka_front import KafkaFront
from engine.sim.server import SimServer
from tests.sim_helpers import kafka_front
from tests.engine_harness import wait_for

TOPIC = "front"
RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b"}
SCENARIO = {
    "name": "front",
    "brokers": [{"id": b, "rack": r, "network_in": "50 MB/s", "network_out": "50 MB/s"} for b, r in RACKS.items()],
    "topics": [{"name": TOPIC, "min_insync_replicas": 2, "assignment": [
        {"replicas": [1, 2, 3], "size": "10 MB"}, {"replicas": [2, 3, 4], "size": "10 MB"},
        {"replicas": [3, 4, 1], "size": "400 MB", "produce_rate": "100 kB/s"}]},
        {"name": "other", "min_insync_replicas": 1, "assignment": [{"replicas": [4, 1], "size": "1 MB"}]}],
}
ORIGINAL = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 1]}


@pytest.fixture(scope="module")
def front():
    with kafka_front(SCENARIO, speed=20) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def confluent(front):
    return AdminClient({"bootstrap.servers": front.bootstrap})


@pytest.fixture(scope="module")
def kp(front):
    client = KafkaAdminClient(bootstrap_servers=front.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def call(front, broker: int, request, version: int, response_cls=None):
    """One raw request to one broker; its decoded response (None if the connection was closed)."""
    request = request if request.API_VERSION == version else type(request)[version](**request.to_dict(json=False))
    request.with_header(correlation_id=7, client_id="raw-test")
    with socket.create_connection(("127.0.0.1", front.ports[broker]), timeout=10) as s:
        s.sendall(request.encode(header=True, framed=True))
        head = _read(s, 4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        body = _read(s, size)
    response_cls = response_cls or request.__class__.__mro__[0]
    return response_cls.decode(io.BytesIO(body) if response_cls is ApiVersionsResponse else body,
                               version=version, header=True)


def _read(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _describe(confluent, topic=TOPIC):
    desc = confluent.describe_topics(TopicCollection([topic]), request_timeout=10)[topic].result(15)
    return {p.id: ([r.id for r in p.replicas], sorted(r.id for r in p.isr), p.leader.id if p.leader else None)
            for p in desc.partitions}


def _configs(confluent, restype, name):
    fs = confluent.describe_configs([ConfigResource(restype, name)], request_timeout=10)
    return {k: v for k, v in next(iter(fs.values())).result(15).items()}


def _restore(confluent, kp):
    for p, replicas in ORIGINAL.items():
        kp.alter_partition_reassignments({KTP(TOPIC, p): None}, timeout_ms=10000)
        kp.alter_partition_reassignments({KTP(TOPIC, p): replicas}, timeout_ms=10000)
    wait_for(lambda: {p: r for p, (r, isr, _l) in _describe(confluent).items() if sorted(isr) == sorted(r)}
             == ORIGINAL, 30, "the topic back at its original replicas")


# --- brokers and topics -------------------------------------------------------------------------


def test_both_clients_list_every_broker_at_its_own_address(front, confluent, kp):
    nodes = confluent.describe_cluster(request_timeout=10).result(15).nodes
    assert {(n.id, n.host, n.port, n.rack) for n in nodes} == {
        (b, "127.0.0.1", front.ports[b], r) for b, r in RACKS.items()}
    assert len(set(front.ports.values())) == 4
    cluster = kp.describe_cluster()
    assert {(b["broker_id"], b["port"], b["rack"]) for b in cluster["brokers"]} == {
        (b, front.ports[b], r) for b, r in RACKS.items()}
    assert cluster["controller_id"] in RACKS


def test_both_clients_describe_replicas_isr_and_leader(confluent, kp):
    assert _describe(confluent) == {0: ([1, 2, 3], [1, 2, 3], 1), 1: ([2, 3, 4], [2, 3, 4], 2),
                                    2: ([3, 4, 1], [1, 3, 4], 3)}
    (topic,) = kp.describe_topics([TOPIC])
    assert topic["error_code"] == 0 and len(topic["partitions"]) == 3
    p2 = next(p for p in topic["partitions"] if p["partition_index"] == 2)
    assert p2["replica_nodes"] == [3, 4, 1] and sorted(p2["isr_nodes"]) == [1, 3, 4] and p2["leader_id"] == 3
    with pytest.raises(KafkaException) as e:
        confluent.describe_topics(TopicCollection(["no-such-topic"]), request_timeout=10)["no-such-topic"].result(15)
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- reassignments ---------------------------------------------------------------------------------


def test_alter_list_and_cancel_reassignments_through_kafka_python(front, confluent, kp):
    # slow the big partition's copy so that it is seen in progress
    throttle = [ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("follower.replication.throttled.replicas", "2:2", incremental_operation=AlterConfigOpType.APPEND)])]
    confluent.incremental_alter_configs(throttle, request_timeout=10)[throttle[0]].result(15)
    rate = [ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("follower.replication.throttled.rate", "100000", incremental_operation=AlterConfigOpType.SET)])]
    confluent.incremental_alter_configs(rate, request_timeout=10)[rate[0]].result(15)
    try:
        answers = kp.alter_partition_reassignments({KTP(TOPIC, 2): [2, 4, 1], KTP(TOPIC, 0): [1, 2, 4],
                                                    KTP(TOPIC, 9): [1, 2, 3]}, timeout_ms=10000)
        assert answers[KTP(TOPIC, 2)] is None and answers[KTP(TOPIC, 0)] is None
        assert answers[KTP(TOPIC, 9)].errno == 3  # UNKNOWN_TOPIC_OR_PARTITION
        ongoing = wait_for(lambda: (o := kp.list_partition_reassignments()) and KTP(TOPIC, 0) not in o and o,
                           30, "the small move to finish while the throttled one goes on")
        assert ongoing == {KTP(TOPIC, 2): {"replicas": [2, 4, 1, 3], "adding_replicas": [2],
                                            "removing_replicas": [3]}}  # only what is in progress
        assert kp.list_partition_reassignments([KTP(TOPIC, 0), KTP(TOPIC, 1)]) == {}
        cancel = kp.alter_partition_reassignments({KTP(TOPIC, 2): None, KTP(TOPIC, 1): None}, timeout_ms=10000)
        assert cancel[KTP(TOPIC, 2)] is None
        assert cancel[KTP(TOPIC, 1)].errno == 85  # NO_REASSIGNMENT_IN_PROGRESS
        assert kp.list_partition_reassignments() == {}
        assert _describe(confluent)[2][0] == [4, 1, 3]  # reverted: RS minus AR, in RS order (KRaft's revert)
        # alters over Kafka are recorded like HTTP ones
        assert {(a["partition"], tuple(a["replicas"])) for a in front.sim.alters} >= {(2, (2, 4, 1)), (0, (1, 2, 4))}
    finally:
        for r in (throttle, rate):
            for c in r:
                for e in c.incremental_configs:
                    e.incremental_operation = (AlterConfigOpType.SUBTRACT if e.name.endswith("replicas")
                                               else AlterConfigOpType.DELETE)
            confluent.incremental_alter_configs(r, request_timeout=10)[r[0]].result(15)
        _restore(confluent, kp)


def test_invalid_assignments_get_kafkas_codes(kp):
    answers = kp.alter_partition_reassignments({KTP(TOPIC, 0): [1, 1, 2], KTP(TOPIC, 1): [2, 3, 99]},
                                               timeout_ms=10000)  # (kafka-python refuses an empty list itself)
    assert {tp.partition: e.errno for tp, e in answers.items()} == {0: 39, 1: 39}  # INVALID_REPLICA_ASSIGNMENT


# --- elections --------------------------------------------------------------------------------------


def test_preferred_election_per_partition_codes_through_both_clients(confluent, kp):
    kp.alter_partition_reassignments({KTP(TOPIC, 1): [4, 3, 2]}, timeout_ms=10000)  # a reorder: leader stays 2
    wait_for(lambda: _describe(confluent)[1][0] == [4, 3, 2], 10, "the reorder")
    try:
        answers = confluent.elect_leaders(ElectionType.PREFERRED, [CTP(TOPIC, 1), CTP(TOPIC, 0), CTP(TOPIC, 7)]
                                          ).result(15)
        codes = {tp.partition: (None if e is None else e.code()) for tp, e in answers.items()}
        assert codes == {1: None, 0: KafkaError.ELECTION_NOT_NEEDED, 7: KafkaError.UNKNOWN_TOPIC_OR_PART}
        assert _describe(confluent)[1][2] == 4
        answer = kp.elect_leaders(0, {TOPIC: [1]}, raise_errors=False)
        (result,) = answer.replica_election_results
        assert [(r.partition_id, r.error_code) for r in result.partition_result] == [(1, 84)]  # ELECTION_NOT_NEEDED
    finally:
        _restore(confluent, kp)
        confluent.elect_leaders(ElectionType.PREFERRED, [CTP(TOPIC, 1)]).result(15)


# --- throttle configs --------------------------------------------------------------------------------


def test_throttle_configs_set_read_and_delete_as_kip_73_configs(confluent):
    topic = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("leader.replication.throttled.replicas", "0:1,0:2", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("follower.replication.throttled.replicas", "0:3", incremental_operation=AlterConfigOpType.APPEND)])
    broker = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("leader.replication.throttled.rate", "7000000", incremental_operation=AlterConfigOpType.SET)])
    for r in (topic, broker):
        confluent.incremental_alter_configs([r], request_timeout=10)[r].result(15)
    configs = _configs(confluent, ResourceType.TOPIC, TOPIC)
    assert configs["leader.replication.throttled.replicas"].value == "0:1,0:2"
    assert configs["follower.replication.throttled.replicas"].value == "0:3"
    assert configs["min.insync.replicas"].value == "2"
    b1 = _configs(confluent, ResourceType.BROKER, "1")
    assert b1["leader.replication.throttled.rate"].value == "7000000"
    assert b1["leader.replication.throttled.rate"].source == 2  # DYNAMIC_BROKER_CONFIG (librdkafka's enum)
    assert b1["follower.replication.throttled.rate"].value == str(2**63 - 1)  # unset: Long.MAX_VALUE, default
    # SUBTRACT one entry, then DELETE the rest
    sub = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("leader.replication.throttled.replicas", "0:2", incremental_operation=AlterConfigOpType.SUBTRACT)])
    confluent.incremental_alter_configs([sub], request_timeout=10)[sub].result(15)
    assert _configs(confluent, ResourceType.TOPIC, TOPIC)["leader.replication.throttled.replicas"].value == "0:1"
    delete = [ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry(n, None, incremental_operation=AlterConfigOpType.DELETE)
        for n in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")]),
        ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("leader.replication.throttled.rate", None, incremental_operation=AlterConfigOpType.DELETE)])]
    for r in delete:
        confluent.incremental_alter_configs([r], request_timeout=10)[r].result(15)
    configs = _configs(confluent, ResourceType.TOPIC, TOPIC)
    assert configs["leader.replication.throttled.replicas"].value == ""
    assert _configs(confluent, ResourceType.BROKER, "1")["leader.replication.throttled.rate"].value == str(2**63 - 1)


def _refusal(confluent, resource, validate_only=False):
    future = confluent.incremental_alter_configs([resource], request_timeout=10, validate_only=validate_only)[resource]
    try:
        future.result(15)
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    return None


def test_config_refusals_are_kafkas(confluent):
    def topic(name, value, op=AlterConfigOpType.SET):
        return ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])

    code, message = _refusal(confluent, topic("no.such.config", "1"))
    assert code == KafkaError.INVALID_CONFIG and "Unknown topic config name: no.such.config" in message
    code, message = _refusal(confluent, topic("min.insync.replicas", "3", AlterConfigOpType.APPEND))
    assert code == KafkaError.INVALID_CONFIG and "type is not LIST" in message
    code, message = _refusal(confluent, topic("leader.replication.throttled.replicas", "zero:one"))
    assert code == KafkaError.INVALID_CONFIG and "[partitionId]:[brokerId]" in message
    rate = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
        ConfigEntry("follower.replication.throttled.rate", "fast", incremental_operation=AlterConfigOpType.SET)])
    code, message = _refusal(confluent, rate)
    assert code == KafkaError.INVALID_REQUEST and "Not a number of type LONG" in message
    frozen = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
        ConfigEntry("broker.rack", "rack-z", incremental_operation=AlterConfigOpType.SET)])
    code, message = _refusal(confluent, frozen)
    assert code == KafkaError.INVALID_REQUEST and "Cannot update these configs dynamically" in message
    unknown = ConfigResource(ResourceType.TOPIC, "no-such-topic", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    assert _refusal(confluent, unknown)[0] == KafkaError.UNKNOWN_TOPIC_OR_PART
    # validate_only: accepted, nothing changes
    assert _refusal(confluent, topic("min.insync.replicas", "1"), validate_only=True) is None
    assert _configs(confluent, ResourceType.TOPIC, TOPIC)["min.insync.replicas"].value == "2"


def test_min_insync_replicas_change_reaches_the_simulation(front, confluent):
    set1 = ConfigResource(ResourceType.TOPIC, "other", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    confluent.incremental_alter_configs([set1], request_timeout=10)[set1].result(15)
    with front.sim.lock:
        assert front.sim.cluster.state.topics["other"].min_insync_replicas == 2
    delete = ConfigResource(ResourceType.TOPIC, "other", incremental_configs=[
        ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)])
    confluent.incremental_alter_configs([delete], request_timeout=10)[delete].result(15)
    entry = _configs(confluent, ResourceType.TOPIC, "other")["min.insync.replicas"]
    assert entry.value == "1" and entry.source == 5  # DEFAULT_CONFIG: the broker's default again
    with front.sim.lock:
        assert front.sim.cluster.state.topics["other"].min_insync_replicas == 1
    restore = ConfigResource(ResourceType.TOPIC, "other", incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
    confluent.incremental_alter_configs([restore], request_timeout=10)[restore].result(15)


def test_a_broker_config_sent_to_another_broker_is_refused_like_kafka(front):
    request = IncrementalAlterConfigsRequest[1](resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=4, resource_name="2", configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name="leader.replication.throttled.rate", config_operation=0, value="1000")])], validate_only=False)
    answer = call(front, 1, request, 1, IncrementalAlterConfigsResponse)
    (r,) = answer.responses
    assert r.error_code == 42 and r.error_message == "Unexpected broker id, expected 1, but received 2"
    with front.sim.lock:
        assert 2 not in front.sim.cluster.state.throttles.leader_rate  # nothing changed
    describe = DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name="3", configuration_keys=None)], include_synonyms=True,
        include_documentation=False)
    (d,) = call(front, 1, describe, 4, DescribeConfigsResponse).results
    assert d.error_code == 42 and "expected 1 or empty string, but received 3" in d.error_message
    (own,) = call(front, 3, describe, 4, DescribeConfigsResponse).results
    assert own.error_code == 0 and {c.name: c.value for c in own.configs}["broker.id"] == "3"


def test_describe_configs_synonyms_as_kafka_configs_prints_them(front):
    describe = DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=TOPIC, configuration_keys=["min.insync.replicas", "retention.ms"])],
        include_synonyms=True, include_documentation=True)
    (d,) = call(front, 2, describe, 4, DescribeConfigsResponse).results
    configs = {c.name: c for c in d.configs}
    assert set(configs) == {"min.insync.replicas", "retention.ms"}
    mir = configs["min.insync.replicas"]
    assert (mir.value, mir.config_source, mir.config_type) == ("2", 1, 3)  # TOPIC_CONFIG, INT
    assert [(s.name, s.value, s.source) for s in mir.synonyms] == [
        ("min.insync.replicas", "2", 1), ("min.insync.replicas", "1", 5)]
    assert configs["retention.ms"].config_source == 5 and configs["retention.ms"].documentation


# --- log dirs ------------------------------------------------------------------------------------------


def test_describe_log_dirs_sizes_per_broker(front, kp):
    for broker in (1, 3):
        (answer,) = kp.describe_log_dirs(topic_partitions={TOPIC: [0, 1, 2]}, brokers=[broker])
        (log_dir,) = answer["log_dirs"]
        sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
        hosted = {p for p, r in ORIGINAL.items() if broker in r}
        assert set(sizes) == hosted
        assert sizes[0] == 10_000_000 and sizes[2] >= 400_000_000


def test_the_adapter_reads_sizes_through_the_front(front):
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    try:
        sizes = cluster.sizes([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2)])
        assert sizes[TopicPartition(TOPIC, 0)] == 10_000_000 and sizes[TopicPartition(TOPIC, 2)] >= 400_000_000
    finally:
        cluster.close()


# --- what the front does not serve ------------------------------------------------------------------------


def test_an_unserved_api_is_answered_with_unsupported_version_not_dropped(front):
    answer = call(front, 1, ListGroupsRequest[4](states_filter=[]), 4, ListGroupsResponse)
    assert answer.error_code == 35 and answer.groups == []
    # the connection stays usable: ApiVersions lists what is served
    versions = call(front, 1, ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), 3,
                    ApiVersionsResponse)
    assert versions.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys} == SUPPORTED


def test_api_versions_above_the_highest_falls_back_to_v0(front):
    """Kafka answers an ApiVersions it cannot parse at v0 with UNSUPPORTED_VERSION and its versions."""
    request = ApiVersionsRequest[3](client_software_name="future", client_software_version="9")
    request.with_header(correlation_id=11, client_id="raw-test")
    raw = bytearray(request.encode(header=True, framed=True))
    raw[6:8] = struct.pack(">h", 99)  # request_api_version
    with socket.create_connection(("127.0.0.1", front.ports[2]), timeout=10) as s:
        s.sendall(bytes(raw))
        (size,) = struct.unpack(">i", _read(s, 4))
        body = _read(s, size)
    answer = ApiVersionsResponse.decode(io.BytesIO(body), version=0, header=True)
    assert answer.header.correlation_id == 11 and answer.error_code == 35
    assert {k.api_key for k in answer.api_keys} == set(SUPPORTED)


def test_an_api_key_no_schema_knows_closes_the_connection_as_kafka_does(front):
    with socket.create_connection(("127.0.0.1", front.ports[1]), timeout=10) as s:
        s.sendall(struct.pack(">ihhih", 10, 999, 0, 5, -1))
        assert _read(s, 4) is None


# --- a dead broker -----------------------------------------------------------------------------------------


def test_a_dead_broker_refuses_connections_and_leaves_metadata_until_it_is_back(front, confluent, kp):
    with front.sim.lock:
        front.sim.cluster.inject(4, "down")
    try:
        def refused():
            try:
                socket.create_connection(("127.0.0.1", front.ports[4]), timeout=1).close()
                return False
            except ConnectionRefusedError:
                return True

        wait_for(refused, 10, "broker 4's listener to close")
        nodes = confluent.describe_cluster(request_timeout=10).result(15).nodes
        assert sorted(n.id for n in nodes) == [1, 2, 3]
        fenced = {b["broker_id"]: b["is_fenced"] for b in kp.describe_cluster()["brokers"]}
        assert fenced == {1: False, 2: False, 3: False, 4: True}  # DescribeCluster v2 with fenced brokers
        cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
        try:
            obs = cluster.observe([TopicPartition(TOPIC, 1)])
            assert {b.id: b.alive for b in obs.brokers} == {1: True, 2: True, 3: True, 4: False}
            assert 4 not in obs.partitions[TopicPartition(TOPIC, 1)].isr
        finally:
            cluster.close()
    finally:
        with front.sim.lock:
            front.sim.cluster.inject(4, "up")
    wait_for(lambda: not refused(), 10, "broker 4 to listen again")
    wait_for(lambda: _describe(confluent)[1][1] == [2, 3, 4], 30, "broker 4 back in the ISR")


# --- the adapter's client-side refusals now fail CI ------------------------------------------------------------


class _OneCallForEveryResource(KafkaCluster):
    """The adapter as it was before librdkafka's limit was respected: every config resource in one call."""

    def _describe_configs(self, resources):
        futures = self._admin.describe_configs(resources, request_timeout=self.timeout)
        return {r: self._wait(f) for r, f in futures.items()}


def test_a_client_side_refusal_of_the_adapter_fails_the_contract_against_the_front(front):
    """The contract suite runs the real adapter against this front, so a call shape the client library
    refuses (librdkafka: one BROKER ConfigResource per call) is a failing test, not a surprise in production."""
    from tests.test_cluster_contract import Harness, test_throttles_read_back_what_was_applied_and_leave_other_entries_alone as contract

    good = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    bad = _OneCallForEveryResource(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    try:
        seen = bad.throttles([TOPIC], [1, 2, 3, 4])
        assert not isinstance(seen, Ok) and "Only one ConfigResource of type BROKER" in str(seen)
        with pytest.raises(AssertionError):
            _contract_on(front, bad, contract)
        _contract_on(front, good, contract)  # the adapter as it is passes the same check
    finally:
        good.close()
        bad.close()


def _contract_on(front, cluster, check):
    """The contract's throttle test on this module's topic (it names its own topic 'contract')."""
    import tests.test_cluster_contract as contract

    saved = contract.TOPIC
    contract.TOPIC = TOPIC
    try:
        from tests.test_cluster_contract import Harness

        check(Harness(cluster, lambda: time.sleep(0.05), virtual=False))
    finally:
        contract.TOPIC = saved


def test_requests_are_counted_per_broker_and_api_where_they_arrive(front):
    """The front counts every request per broker, API and client, with its response's bytes (in process
    and over the sim-cluster's HTTP API): how the engine's own cost to a cluster is measured."""
    import json
    import urllib.request

    kp = KafkaAdminClient(bootstrap_servers=front.bootstrap, request_timeout_ms=10000)  # its own: a fresh view
    front.counts(reset=True)
    kp.describe_log_dirs(topic_partitions={TOPIC: [0]}, brokers=[2])
    kp.describe_log_dirs(brokers=[2])  # every partition of the broker: a larger answer
    kp.list_partition_reassignments()
    counted = front.counts()
    kp.close()
    logdirs = counted["brokers"][2]["DescribeLogDirs"]
    assert logdirs["requests"] == 2, counted
    assert logdirs["response_bytes"] > 0
    assert sum(per.get("ListPartitionReassignments", {}).get("requests", 0) for per in counted["brokers"].values()) == 1
    assert counted["clients"]  # kafka-python's client id
    assert counted["total"]["requests"] >= 3
    with urllib.request.urlopen(front.sim.url + "/v1/requests?reset=1") as answer:
        served = json.load(answer)
    assert served["brokers"]["2"]["DescribeLogDirs"] == logdirs
    assert "DescribeLogDirs" not in front.counts()["brokers"].get(2, {})  # counting anew


def test_a_look_costs_the_partitions_it_is_about_not_the_topic_nor_the_cluster():
    """Issue 26: a look at 2 partitions of a topic of 4,000 asks for those 2 (DescribeTopicPartitions from a
    cursor), not the whole topic's Metadata (168 kB here, at every look), and reuses the brokers and
    min.insync.replicas it read: counted where the requests arrive. The old adapter sent DescribeCluster,
    ListPartitionReassignments, Metadata of the whole topic and DescribeConfigs at every look."""
    doc = {"name": "big", "brokers": [{"id": b} for b in (1, 2, 3, 4)],
           "topics": [{"name": "big", "min_insync_replicas": 2, "assignment": [
               {"replicas": [1 + (p + i) % 4 for i in range(3)], "size": "1 MB"} for p in range(4000)]}]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    try:
        wanted = [TopicPartition("big", 7), TopicPartition("big", 3990)]
        first = cluster.observe(wanted)  # the first look learns the topic's partition count: whole
        assert first.topics["big"].partitions == 4000 and first.topics["big"].min_insync_replicas == 2
        front.counts(reset=True)
        for _ in range(10):
            obs = cluster.observe(wanted)
        counted = front.counts()
        by_api: dict = {}
        for per in counted["brokers"].values():
            for api, v in per.items():
                by_api[api] = by_api.get(api, 0) + v["requests"]
        print(f"10 looks at 2 of 4,000 partitions: {counted['total']}, {by_api}")
        assert set(obs.partitions) == set(wanted) and obs.topics["big"].partitions == 4000
        assert obs.partitions[wanted[1]].replicas == tuple(1 + (3990 + i) % 4 for i in range(3))
        assert by_api.get("Metadata", 0) == 0 and by_api.get("DescribeCluster", 0) == 0, by_api
        assert by_api.get("DescribeConfigs", 0) == 0, by_api
        assert by_api["DescribeTopicPartitions"] == 20 and by_api["ListPartitionReassignments"] == 10, by_api
        assert counted["total"]["response_bytes"] < 10 * 1000, counted["total"]  # whole: 168 kB a look
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


# --- DescribeTopicPartitions paged as Kafka pages it (the review's findings 1 and 11) ---------------------------

PAGED = {"name": "paged", "brokers": [{"id": b} for b in (1, 2, 3)],
         "topics": [{"name": n, "min_insync_replicas": 1, "assignment": [{"replicas": [1, 2], "size": "1 MB"}] * k}
                    for n, k in (("a", 3), ("b", 4), ("c", 2))]
         + [{"name": "solo", "min_insync_replicas": 1, "assignment": [{"replicas": [3], "size": "1 MB"}]}]}


@pytest.fixture(scope="module")
def paged_front():
    """A cluster whose brokers serve at most 5 partitions per DescribeTopicPartitions answer
    (max.request.partition.size.limit=5), broker 3 down: "solo" has no leader."""
    sim = SimServer(S.from_document(PAGED), speed=1)
    with sim.lock:
        sim.cluster.inject(3, "down")
    sim.start()
    kafka = KafkaFront(sim, max_request_partition_size_limit=5)
    kafka.start()
    yield kafka
    kafka.shutdown()
    sim.shutdown()


@pytest.fixture(scope="module")
def paged(paged_front):
    client = KafkaAdminClient(bootstrap_servers=paged_front.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def _pages(answer):
    return ([(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]]) for t in answer["topics"]],
            answer["next_cursor"])


def test_the_brokers_partition_limit_caps_an_answer_and_the_cursor_says_where_the_next_one_starts(paged):
    """Limit = max(min(max.request.partition.size.limit, the request's), 1) (DescribeTopicPartitionsRequestHandler);
    a topic cut by it sets the cursor to its next partition; a limit of 0 is 1 (the old front made it 2000)."""
    first = paged.describe_topic_partitions(["c", "b", "a"], response_partition_limit=100)
    assert _pages(first) == ([("a", 0, [0, 1, 2]), ("b", 0, [0, 1])], {"topic_name": "b", "partition_index": 2})
    second = paged.describe_topic_partitions(["a", "b", "c"], response_partition_limit=100, cursor=first["next_cursor"])
    assert _pages(second) == ([("b", 0, [2, 3]), ("c", 0, [0, 1])], None)
    assert _pages(paged.describe_topic_partitions(["a"], response_partition_limit=0)) == (
        [("a", 0, [0])], {"topic_name": "a", "partition_index": 1})
    # a cursor beyond the topic's last partition: the topic with no partitions, no cursor
    assert _pages(paged.describe_topic_partitions(["a"], cursor={"topic_name": "a", "partition_index": 9})) == (
        [("a", 0, [])], None)


def test_once_the_limit_is_used_up_the_next_topic_gets_the_cursor_known_or_not(paged):
    """KRaftMetadataCache: "if a partition is pointed in the NextTopicPartition, it does not mean this topic
    exists"; an unknown topic is an error entry only while the limit lasts (the old front gave it one after)."""
    answer = paged.describe_topic_partitions(["a", "no-such"], response_partition_limit=3)
    assert _pages(answer) == ([("a", 0, [0, 1, 2])], {"topic_name": "no-such", "partition_index": 0})
    answer = paged.describe_topic_partitions(["a", "no-such"], response_partition_limit=3, cursor=answer["next_cursor"])
    assert _pages(answer) == ([("no-such", 3, [])], None)
    assert _pages(paged.describe_topic_partitions(["a", "bad/name"])) == ([("a", 0, [0, 1, 2]), ("bad/name", 17, [])],
                                                                           None)


def test_a_cursor_kafka_refuses_is_invalid_request_for_every_topic_named(paged):
    """The cursor's topic must be among those named, its partition not negative (INVALID_REQUEST, the
    request's error response: every topic named, no partitions); the old front answered both."""
    outside = paged.describe_topic_partitions(["a", "b"], cursor={"topic_name": "c", "partition_index": 0})
    assert _pages(outside) == ([("a", 42, []), ("b", 42, [])], None)
    negative = paged.describe_topic_partitions(["b"], cursor={"topic_name": "b", "partition_index": -1})
    assert _pages(negative) == ([("b", 42, [])], None)


def test_a_partition_without_a_leader_has_no_error_code_in_describe_topic_partitions_unlike_metadata(paged):
    (p,) = paged.describe_topic_partitions(["solo"])["topics"][0]["partitions"]
    assert (p["error_code"], p["leader_id"], p["replica_nodes"]) == (0, -1, [3])
    (topic,) = paged.describe_topics(["solo"])
    assert topic["partitions"][0]["error_code"] == 5  # Metadata: LEADER_NOT_AVAILABLE


def test_the_adapter_pages_through_a_broker_that_answers_fewer_partitions_than_it_asks(paged_front):
    """A look at a, b and c (9 partitions asked together) from brokers that answer 5 at a time: the old adapter
    took the first answer (a, b-0, b-1, a cursor at b-2) for all of it, and c was missing from the look."""
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": paged_front.bootstrap}), timeout=10)
    try:
        wanted = [TopicPartition(t, p) for t, k in (("a", 3), ("b", 4), ("c", 2)) for p in range(k)]
        cluster.observe(wanted)  # counts the topics (Metadata)
        paged_front.counts(reset=True)
        obs = cluster.observe(wanted)
        assert set(obs.partitions) == set(wanted) and {t: i.partitions for t, i in obs.topics.items()} == {
            "a": 3, "b": 4, "c": 2}
        asked = sum(per.get("DescribeTopicPartitions", {}).get("requests", 0)
                    for per in paged_front.counts()["brokers"].values())
        assert asked == 2
    finally:
        cluster.close()


def test_a_topic_that_grew_does_not_drop_the_next_topic_from_the_adapters_looks():
    """The review's reproduction (dtp_repro.py): topics a and b of 10 partitions; another tool grows a to 20.
    The old adapter's looks held only a-0 from then on: b was missing from every look, for good."""
    doc = {"name": "grow", "brokers": [{"id": b} for b in (1, 2, 3)],
           "topics": [{"name": n, "min_insync_replicas": 1, "assignment": [
               {"replicas": [1 + (p + i) % 3 for i in range(2)], "size": "1 MB"} for p in range(10)]} for n in ("a", "b")]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    try:
        wanted = [TopicPartition("a", 0), TopicPartition("b", 0)]
        cluster.observe(wanted)
        with sim.lock:  # kafka-topics --alter --partitions 20 on a
            sim.cluster.create_topic("a", [tuple(1 + (p + i) % 3 for i in range(2)) for p in range(20)], 1)
        for _ in range(3):
            obs = cluster.observe(wanted)
            assert set(obs.partitions) == set(wanted) and sorted(obs.topics) == ["a", "b"], obs
        assert obs.topics["a"].partitions == 20 and obs.topics["b"].partitions == 10
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


# --- kafka-python's cached routing: a stopped controller id, a broker newer than its metadata (findings 3, 4) ------


def _refused(front, broker):
    try:
        socket.create_connection(("127.0.0.1", front.ports[broker]), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True


def test_the_broker_kafka_python_took_for_the_controller_stopping_does_not_blind_the_adapter():
    """The review's finding 3 (ctrl_repro.py): kafka-python sends ListPartitionReassignments and
    AlterPartitionReassignments to the controller id Metadata gave it once (KRaft: a random live broker) and
    asks again only on NOT_CONTROLLER. With that broker stopped cleanly (fenced, so never named by the broker
    watch), every look of the old adapter was Unavailable (UnknownBrokerIdError) until it came back, and an
    alter was even Refused. Now the id is asked anew: the looks and the alter after the stop go through."""
    doc = {"name": "ctl", "brokers": [{"id": b} for b in (1, 2, 3, 4)],
           "topics": [{"name": "t", "min_insync_replicas": 1, "assignment": [
               {"replicas": [1 + (p + i) % 4 for i in range(2)], "size": "1 MB"} for p in range(8)]}]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=5)
    try:
        wanted = [TopicPartition("t", p) for p in range(8)]
        assert not isinstance(cluster.observe(wanted), Unavailable)
        chosen = cluster._kp._controller_id
        with sim.lock:
            sim.cluster.inject(chosen, "down")  # a clean stop: a rolling restart, a decommission
        wait_for(lambda: _refused(front, chosen), 10, f"broker {chosen}'s listener to close")
        t = time.monotonic()
        for _ in range(3):
            obs = cluster.observe(wanted)
            assert not isinstance(obs, Unavailable), obs
        target = next(tp for tp in wanted if chosen not in obs.partitions[tp].replicas)
        others = [b for b in (1, 2, 3, 4) if b != chosen and b not in obs.partitions[target].replicas]
        moved = (others[0], obs.partitions[target].replicas[0])
        assert cluster.alter_reassignments({target: moved}) == {target: Ok()}
        assert time.monotonic() - t < 5
        assert cluster._kp._controller_id not in (None, chosen)
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


def test_a_broker_that_registered_after_kafka_pythons_metadata_is_measured_at_once():
    """The review's finding 4 (newbroker_repro.py): kafka-python knows only the brokers of its cached metadata
    (refreshed every 5 minutes); DescribeLogDirs to a broker that registered since failed at once
    (UnknownBrokerIdError), so a copy onto the new broker had no catch-up measurement and was never released
    from the throttle, and the log blamed an ACL. Now kafka-python's metadata is refreshed and the call made
    again: the first catch-up after the move is measured."""
    doc = {"name": "nb", "brokers": [{"id": b} for b in (1, 2, 3, 4)],
           "topics": [{"name": "t", "min_insync_replicas": 1, "assignment": [
               {"replicas": [1, 2], "size": "50 MB"} for _ in range(2)]}]}
    sim = SimServer(S.from_document(doc), speed=1)
    with sim.lock:
        sim.cluster.inject(4, "down")  # broker 4 not there yet
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=5)
    try:
        t0 = TopicPartition("t", 0)
        assert not isinstance(cluster.observe([t0]), Unavailable)  # kafka-python's client, built without broker 4
        assert cluster.catch_up({t0: (1, (2,))}) == {t0: 0}
        with sim.lock:
            sim.cluster.inject(4, "up")  # the new broker registers
        wait_for(lambda: not _refused(front, 4), 10, "broker 4 listening")
        assert cluster.alter_reassignments({t0: (4, 2)}) == {t0: Ok()}
        remaining = cluster.catch_up({t0: (1, (4,))})
        assert set(remaining) == {t0} and 0 < remaining[t0] <= 50 * 1000**2, remaining
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


def test_a_topic_throttled_with_the_wildcard_is_left_to_it_and_read_back_as_in_force():
    """The review's finding 8 (wild_repro.py): an operator set b's leader list to '*' (every replica). Kafka
    refuses anything appended to it (ThrottledReplicaListValidator: INVALID_CONFIG "*,0:1"), and the old adapter
    failed every throttle round for good (a permanent refusal), its read-backs reporting b's entries missing.
    Now the '*' side is left as it is (already throttled), the other side appended, the read-back says what
    kreassign needs is in force, and removing kreassign's entries leaves the operator's '*'."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from engine.core.throttles import ThrottledReplica, ThrottleSet

    doc = {"name": "w", "brokers": [{"id": b} for b in (1, 2, 3)],
           "topics": [{"name": n, "assignment": [{"replicas": [1, 2]}]} for n in ("a", "b")]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=5)
    try:
        admin = AdminClient({"bootstrap.servers": front.bootstrap})
        star = ConfigResource(ResourceType.TOPIC, "b", incremental_configs=[
            ConfigEntry("leader.replication.throttled.replicas", "*", incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([star]).values():
            f.result(10)
        want = ThrottleSet(leader=frozenset({ThrottledReplica("a", 0, 1), ThrottledReplica("b", 0, 1)}),
                           follower=frozenset({ThrottledReplica("a", 0, 3), ThrottledReplica("b", 0, 3)}))
        assert cluster.apply_throttles(want) == Ok()
        with sim.lock:
            lists = sim.cluster.state.throttles
            assert set(lists.leader["b"]) == {"*"} and set(lists.follower["b"]) == {(0, 3)}
            assert set(lists.leader["a"]) == {(0, 1)} and set(lists.follower["a"]) == {(0, 3)}
        read = cluster.throttles(["a", "b"], [])
        assert (read.leader, read.follower) == (want.leader, want.follower)
        assert cluster.remove_throttles(want) == Ok()
        read = cluster.throttles(["a", "b"], [])
        assert read.leader == read.follower == frozenset()
        with sim.lock:
            assert set(sim.cluster.state.throttles.leader["b"]) == {"*"}  # the operator's, untouched
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()


def test_looks_carry_kafkas_leader_epochs_and_one_topic_id_whichever_request_answered():
    """The review's finding 7: the adapter dropped DescribeTopicPartitions' leader epoch. A look now carries it
    (librdkafka's Metadata exposes none: the first look, which counts the topic, has None), and the topic id in
    Kafka's form, the same from Metadata and from DescribeTopicPartitions (else the core would take every other
    look for another topic). A step that drops a replica bumps the epoch when Kafka completes it."""
    import base64

    doc = {"name": "epochs", "brokers": [{"id": b} for b in (1, 2, 3)],
           "topics": [{"name": "t", "min_insync_replicas": 1, "assignment": [{"replicas": [1, 2], "size": "1 kB"}]}]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
    t0 = TopicPartition("t", 0)
    try:
        first = cluster.observe([t0])  # Metadata through librdkafka
        kafka_id = base64.urlsafe_b64encode(front.api.topic_id("t").bytes).rstrip(b"=").decode()
        assert first.topics["t"].topic_id == kafka_id and first.partitions[t0].leader_epoch is None
        second = cluster.observe([t0])  # DescribeTopicPartitions through kafka-python
        with sim.lock:
            epoch = sim.cluster.state.partitions[t0].leader_epoch
        assert second.topics["t"] == first.topics["t"] and second.partitions[t0].leader_epoch == epoch
        assert cluster.alter_reassignments({t0: (1, 3)}) == {t0: Ok()}
        done = wait_for(lambda: (o := cluster.observe([t0])).partitions[t0].replicas == (1, 3)
                        and not o.partitions[t0].reassignment_in_progress and o, 30, "the step to complete")
        assert done.partitions[t0].leader_epoch > epoch
    finally:
        cluster.close()
        front.shutdown()
        sim.shutdown()
