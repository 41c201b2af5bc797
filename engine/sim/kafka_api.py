"""The Kafka APIs the simulated cluster answers, as a KRaft broker of Kafka 4.0 answers them.

Each handler takes a decoded request (kafka-python's protocol classes, generated
from Kafka's own JSON message schemas) and the id of the broker it was sent to,
and returns the response at the request's version. Handlers run under the
sim-cluster's lock against its ``SimulatedCluster`` (``engine.sim.server``), so
the HTTP API (faults, clock) and Kafka clients see one cluster.

| API | key | versions | what it does here |
| --- | --- | --- | --- |
| ApiVersions | 18 | 0-4 | this table; an unsupported version is answered at v0 with UNSUPPORTED_VERSION (Kafka's fallback) |
| Metadata | 3 | 0-13 | live brokers only (a dead broker is fenced: absent), topics with ids, partitions with leader (-1 and LEADER_NOT_AVAILABLE without one), leader epoch (KRaft's), RS, ISR, offline replicas; controller = the broker asked (KRaft answers a random live broker) |
| DescribeCluster | 60 | 0-2 | brokers with racks; fenced (dead) ones only if asked (v2) |
| DescribeTopicPartitions | 75 | 0 | as Metadata, topics in name order, paged by a cursor and a partition limit capped by the front's `max.request.partition.size.limit` (Kafka's cursor rules and INVALID_REQUEST) |
| DescribeConfigs | 32 | 1-4 | ``engine.sim.kafka_configs``: topic and broker configs, sources, synonyms, documentation |
| IncrementalAlterConfigs | 44 | 0-1 | SET/DELETE/APPEND/SUBTRACT, validate_only; a BROKER resource only on its own broker |
| AlterConfigs | 33 | 0-2 | the legacy whole-resource replacement |
| AlterPartitionReassignments | 45 | 0-1 | the simulated KRaft controller (``engine.sim.controller``); null replicas cancel |
| ListPartitionReassignments | 46 | 0 | only partitions with a reassignment in progress; null topics = all |
| ElectLeaders | 43 | 0-2 | PREFERRED and UNCLEAN, Kafka's per-partition codes |
| DescribeLogDirs | 35 | 1-5 | the receiving broker's replicas; one out of sync holds its size minus its lag |
| FindCoordinator | 10 | 0-6 | a group's or transactional id's coordinator: the broker asked (no group ever joins here) |
| DescribeGroups | 15 | 0-6 | every group is empty: Dead (v0-5) or GROUP_ID_NOT_FOUND (v6), with authorized operations |
| CreateTopics | 19 | 2-7 | authorization, TOPIC_ALREADY_EXISTS, validate_only; a new topic is created empty (partitions and replication factor or each partition's replicas; -1: the brokers' defaults; placed round robin over the live brokers) |
| SaslHandshake, SaslAuthenticate | 17, 36 | 0-1, 0-2 | SASL/PLAIN (``engine.sim.kafka_front``) |

Authorization (a scenario's ``security`` section, ``engine.sim.security``): every handler
checks what Kafka's checks (KafkaApis, ControllerApis, ConfigHelper, AuthHelper, read from
Kafka's source): Metadata and DescribeTopicPartitions DESCRIBE each topic (a topic named and
not authorized is TOPIC_AUTHORIZATION_FAILED, left out of an all-topics answer); DescribeConfigs
DESCRIBE_CONFIGS, (Incremental)AlterConfigs ALTER_CONFIGS on the topic, or on the cluster for a
broker; AlterPartitionReassignments and ElectLeaders ALTER on the cluster;
ListPartitionReassignments and DescribeLogDirs DESCRIBE on the cluster; FindCoordinator and
DescribeGroups DESCRIBE on the group; CreateTopics CREATE on the cluster or the topic.
Authorized operations (KIP-430) are the authorizer's; without a security section every
operation is allowed.

Error codes and messages are Kafka's (read from its controller and broker source).

A broker answers Metadata, DescribeTopicPartitions, DescribeCluster and DescribeConfigs from its
metadata cache (``metadata_state``), which trails the controller by the broker's ``lag`` fault;
ListPartitionReassignments and every change are the controller's, as in KRaft (a broker forwards them).
So a client that reads the reassignments in progress and the replicas from a lagging broker gets a
torn look, as on a real cluster.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Callable

from kafka.protocol.admin import (
    AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, ElectLeadersRequest,
    ElectLeadersResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse, DescribeGroupsRequest, DescribeGroupsResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from engine.core.outcomes import Refused
from engine.core.partition import TopicPartition
from engine.sim import kafka_configs as C
from engine.sim.controller import placement as controller_placement
from engine.sim.model import SimState
from engine.sim.security import CLUSTER_NAME, OPERATION_CODES, SUPPORTED_OPERATIONS

log = logging.getLogger("kreassign.sim.kafka")

ERRORS = {
    "NONE": 0, "UNKNOWN_SERVER_ERROR": -1, "UNKNOWN_TOPIC_OR_PARTITION": 3, "LEADER_NOT_AVAILABLE": 5,
    "UNSUPPORTED_VERSION": 35, "INVALID_REPLICATION_FACTOR": 38, "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40, "INVALID_REQUEST": 42, "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83, "ELECTION_NOT_NEEDED": 84, "NO_REASSIGNMENT_IN_PROGRESS": 85,
    "UNKNOWN_TOPIC_ID": 100, "UNSUPPORTED_ENDPOINT_TYPE": 115,
    "TOPIC_AUTHORIZATION_FAILED": 29, "GROUP_AUTHORIZATION_FAILED": 30, "CLUSTER_AUTHORIZATION_FAILED": 31,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53, "UNSUPPORTED_SASL_MECHANISM": 33, "SASL_AUTHENTICATION_FAILED": 58,
    "TOPIC_ALREADY_EXISTS": 36, "POLICY_VIOLATION": 44, "INVALID_PARTITIONS": 37, "GROUP_ID_NOT_FOUND": 69, "INVALID_TOPIC_EXCEPTION": 17,
}
# Errors.message() of the authorization errors: what Kafka sends when it gives no other message
DENIED_MESSAGES = {
    "TOPIC_AUTHORIZATION_FAILED": "Topic authorization failed.",
    "GROUP_AUTHORIZATION_FAILED": "Group authorization failed.",
    "CLUSTER_AUTHORIZATION_FAILED": "Cluster authorization failed.",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "Transactional Id authorization failed.",
}
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key_type
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # ConfigResource.Type
PREFERRED, UNCLEAN = 0, 1  # ElectionType
BROKERS_ENDPOINT = 1  # DescribeCluster endpoint_type
NO_AUTHORIZED_OPERATIONS = -(2**31)  # "not requested" in Kafka's responses
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's default of max.request.partition.size.limit (ServerConfigs)
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def _legal_topic(name: str) -> bool:
    """Kafka's Topic.validate: legal characters, at most 249 of them, not "." or ".."."""
    return bool(_LEGAL_TOPIC.match(name)) and name not in (".", "..")


class Api:
    """The handlers, sharing what a broker would remember between requests."""

    def __init__(self, sim, addresses: Callable[[], dict[int, tuple[str, int]]]):
        self.sim = sim  # engine.sim.server.SimServer: its cluster, lock and record of alters
        self.addresses = addresses  # broker id -> (host, port) it is reachable at
        self.cluster_id = "kreassign-sim-" + uuid.uuid5(uuid.NAMESPACE_URL, sim.scenario.name).hex[:8]
        self.topic_overrides: dict[str, dict[str, str]] = {}  # topic configs the simulation keeps but ignores
        self.broker_overrides: dict[str, dict[str, str]] = {}  # broker id ("" = cluster default) -> configs
        self.min_insync_defaulted: set[str] = set()  # topics whose min.insync.replicas override was deleted
        self.max_request_partition_size_limit = MAX_REQUEST_PARTITION_SIZE_LIMIT  # a static broker config

    # -- what every handler reads ---------------------------------------------------------

    @property
    def state(self) -> SimState:
        self.sim.cluster.observe([])  # catch up with the clock (and the scenario's faults)
        return self.sim.cluster.state

    def topic_id(self, topic: str) -> uuid.UUID:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"{self.cluster_id}/{topic}")

    def live(self, state: SimState) -> list[int]:
        return sorted(b.id for b in state.brokers.values() if b.alive)

    def controller_id(self, state: SimState, node: int) -> int:
        """KRaft brokers answer a random live broker as the controller (``getRandomAliveBrokerId``) and
        forward controller requests to the active controller: here, the broker asked (one of them, and
        one the client already reaches), or the lowest live one if it is not live in that view."""
        live = self.live(state)
        return node if node in live else (live[0] if live else -1)

    def metadata_state(self, node: int) -> SimState:
        """What broker ``node`` answers from its metadata cache (Metadata, DescribeTopicPartitions,
        DescribeCluster, DescribeConfigs): the cluster as that broker last applied it, which trails the
        controller by the broker's ``lag`` fault (``engine.sim.cluster``); the cluster now otherwise."""
        self.sim.cluster.observe([])  # catch up with the clock (and the scenario's faults)
        return self.sim.cluster.metadata_view(node)

    def partition_fields(self, state: SimState, tp: TopicPartition) -> dict:
        p = state.partitions[tp]
        leader = p.leader if p.leader is not None and state.alive(p.leader) else None
        return dict(
            error_code=ERRORS["LEADER_NOT_AVAILABLE"] if leader is None else 0,
            partition_index=tp.partition, leader_id=-1 if leader is None else leader,
            leader_epoch=p.leader_epoch,  # KRaft's (engine.sim.controller)
            replica_nodes=list(p.replicas), isr_nodes=sorted(p.isr),
            offline_replicas=[b for b in p.replicas if not state.alive(b)],
        )

    def topic_partitions(self, state: SimState, topic: str) -> list[TopicPartition]:
        info = state.topics[topic]
        return [TopicPartition(topic, i) for i in range(info.partitions) if TopicPartition(topic, i) in state.partitions]

    # -- authorization (AuthHelper) -----------------------------------------------------------

    def allowed(self, session, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> bool:
        security = self.sim.security
        if security is None:
            return True
        ok = security.authorizer.authorize(session.principal, operation, resource_type, name, session.host)
        if not ok:
            log.info("%s is denied %s on %s %s", session.principal, operation, resource_type.lower(), name)
        return ok

    def operations(self, session, resource_type: str, name: str = CLUSTER_NAME) -> set[int]:
        """KIP-430's authorized operations (AuthHelper.authorizedOperations)."""
        security = self.sim.security
        if security is None:
            return {OPERATION_CODES[op] for op in SUPPORTED_OPERATIONS[resource_type]}
        return security.authorizer.authorized_operations(session.principal, resource_type, name, session.host)

    def describable(self, session, topics) -> set[str]:
        """The topics the session may DESCRIBE; no denial logged (an all-topics listing filters quietly)."""
        security = self.sim.security
        if security is None:
            return set(topics)
        return {t for t in topics
                if security.authorizer.authorize(session.principal, "DESCRIBE", "TOPIC", t, session.host)}

    def cluster_denied(self, session, operation: str, api: str) -> str | None:
        """None if allowed, else the message of Kafka's ClusterAuthorizationException."""
        if self.allowed(session, operation, "CLUSTER"):
            return None
        return f"Request {api} from {session.principal} is not authorized."

    # -- ApiVersions ------------------------------------------------------------------------

    def api_versions(self, node: int, request, version: int, session=None):
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(SUPPORTED.items())]
        return ApiVersionsResponse(version=version, error_code=0, api_keys=keys, throttle_time_ms=0)

    # -- Metadata, DescribeCluster, DescribeTopicPartitions -------------------------------

    def metadata(self, node: int, request, version: int, session):
        state = self.metadata_state(node)
        addresses = self.addresses()
        brokers = [MetadataResponse.MetadataResponseBroker(
            node_id=b, host=addresses[b][0], port=addresses[b][1], rack=state.brokers[b].rack)
            for b in self.live(state)]
        wanted = request.topics
        by_id = {self.topic_id(t): t for t in state.topics}
        topics = []
        all_topics = wanted is None or (version == 0 and not wanted)
        if all_topics:
            visible = self.describable(session, state.topics)
            names = [(t, None) for t in sorted(state.topics) if t in visible]
        else:
            names = []
            for t in wanted:
                name = t.name
                if name is None and version >= 10:
                    name = by_id.get(t.topic_id)
                    if name is None:
                        topics.append(MetadataResponse.MetadataResponseTopic(
                            error_code=ERRORS["UNKNOWN_TOPIC_ID"], name=None, topic_id=t.topic_id, partitions=[]))
                        continue
                names.append((name, None))
        for name, _ in names:
            if not all_topics and not self.allowed(session, "DESCRIBE", "TOPIC", name):
                # do not disclose whether it exists (KafkaApis.handleTopicMetadataRequest)
                topics.append(MetadataResponse.MetadataResponseTopic(
                    error_code=ERRORS["TOPIC_AUTHORIZATION_FAILED"], name=name, topic_id=uuid.UUID(int=0),
                    partitions=[]))
                continue
            if name not in state.topics:
                topics.append(MetadataResponse.MetadataResponseTopic(
                    error_code=ERRORS["UNKNOWN_TOPIC_OR_PARTITION"], name=name, topic_id=None, partitions=[]))
                continue
            parts = [MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                **self.partition_fields(state, tp)) for tp in self.topic_partitions(state, name)]
            topic_ops = (self.operations(session, "TOPIC", name)
                         if version >= 8 and request.include_topic_authorized_operations else None)
            topics.append(MetadataResponse.MetadataResponseTopic(
                error_code=0, name=name, topic_id=self.topic_id(name), is_internal=False, partitions=parts,
                authorized_operations=topic_ops))
        cluster_ops = None
        if 8 <= version <= 10 and request.include_cluster_authorized_operations:
            cluster_ops = self.operations(session, "CLUSTER") if self.allowed(session, "DESCRIBE", "CLUSTER") else set()
        return MetadataResponse(version=version, throttle_time_ms=0, brokers=brokers, cluster_id=self.cluster_id,
                                controller_id=self.controller_id(state, node), topics=topics,
                                authorized_operations=cluster_ops, error_code=0)

    def describe_cluster(self, node: int, request, version: int, session):
        state = self.metadata_state(node)
        if version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
            return DescribeClusterResponse(
                version=version, error_code=ERRORS["UNSUPPORTED_ENDPOINT_TYPE"],
                error_message="The target broker only supports the BROKER endpoint type.",
                endpoint_type=request.endpoint_type, cluster_id=self.cluster_id, controller_id=-1, brokers=[])
        addresses = self.addresses()
        fenced = version >= 2 and request.include_fenced_brokers
        brokers = [DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.id, host=addresses[b.id][0], port=addresses[b.id][1], rack=b.rack, is_fenced=not b.alive)
            for b in sorted(state.brokers.values()) if b.alive or fenced]
        return DescribeClusterResponse(
            version=version, throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS_ENDPOINT,
            cluster_id=self.cluster_id, controller_id=self.controller_id(state, node), brokers=brokers,
            authorized_operations=self._cluster_operations(session, request.include_cluster_authorized_operations))

    def _cluster_operations(self, session, requested: bool):
        """AuthHelper.computeDescribeClusterResponse: all allowed operations if DESCRIBE is, else none."""
        if not requested:
            return None
        return self.operations(session, "CLUSTER") if self.allowed(session, "DESCRIBE", "CLUSTER") else set()

    def describe_topic_partitions(self, node: int, request, version: int, session):
        """Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse:
        the topics named (all when none are) from the cursor's topic on, in name order, at most
        max(min(``max.request.partition.size.limit``, ``response_partition_limit``), 1) partitions. A topic
        that fills what is left of the limit before its end sets the cursor to its next partition; once the
        limit is used up the next topic (known or not) gets the cursor (topic, 0) and the later ones are left
        out. An unknown topic named before that is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
        illegal name); a cursor whose topic is not among those named, or whose partition is negative, is
        INVALID_REQUEST for every topic named. Topics named and not authorized for DESCRIBE come last, as
        TOPIC_AUTHORIZATION_FAILED (outside the limit); an all-topics request leaves them out. Partitions carry
        no error code (a partition without a leader has leader -1 and error 0, unlike Metadata)."""
        state = self.metadata_state(node)
        R = DescribeTopicPartitionsResponse
        cursor = request.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        fetch_all = not request.topics
        if fetch_all:
            names = {t for t in state.topics if t >= cursor_topic}
        else:
            names = {t.name for t in request.topics if t.name >= cursor_topic}
            if cursor is not None and cursor.topic_name not in names:
                return self._describe_topic_partitions_invalid(
                    request, version, "DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
                    f"{cursor.topic_name}")
        if cursor is not None and cursor.partition_index < 0:
            return self._describe_topic_partitions_invalid(
                request, version, f"DescribeTopicPartitionsRequest cursor partition must be valid: Cursor(topicName="
                f"'{cursor.topic_name}', partitionIndex={cursor.partition_index})")
        names = sorted(names)
        denied = []
        if fetch_all:
            visible = self.describable(session, names)
            names = [n for n in names if n in visible]
        else:
            denied = [n for n in names if not self.allowed(session, "DESCRIBE", "TOPIC", n)]
            names = [n for n in names if n not in denied]
        remaining = max(min(self.max_request_partition_size_limit, request.response_partition_limit), 1)
        topics, next_cursor = [], None
        for name in names:
            if remaining == 0:
                # the limit is used up: the cursor points at the next topic, known or not (Kafka's comment:
                # "if a partition is pointed in the NextTopicPartition, it does not mean this topic exists")
                next_cursor = R.Cursor(topic_name=name, partition_index=0)
                break
            if name not in state.topics:
                if not fetch_all:
                    code = "UNKNOWN_TOPIC_OR_PARTITION" if _legal_topic(name) else "INVALID_TOPIC_EXCEPTION"
                    topics.append(R.DescribeTopicPartitionsResponseTopic(
                        error_code=ERRORS[code], name=name, topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            start = cursor.partition_index if name == cursor_topic else 0
            every = self.topic_partitions(state, name)
            upper = min(len(every), start + remaining)
            parts = []
            for tp in every[start:upper]:
                f = self.partition_fields(state, tp)
                f["error_code"] = 0
                parts.append(R.DescribeTopicPartitionsResponseTopic.DescribeTopicPartitionsResponsePartition(
                    **f, eligible_leader_replicas=[], last_known_elr=[]))
            topics.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=0, name=name, topic_id=self.topic_id(name), is_internal=False, partitions=parts,
                topic_authorized_operations=_bits(self.operations(session, "TOPIC", name))))
            if upper < len(every):
                next_cursor = R.Cursor(topic_name=name, partition_index=upper)
                break
            remaining -= len(parts)
        topics += [R.DescribeTopicPartitionsResponseTopic(
            error_code=ERRORS["TOPIC_AUTHORIZATION_FAILED"], name=n, topic_id=uuid.UUID(int=0), is_internal=False,
            partitions=[]) for n in denied]
        return R(version=version, throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

    def _describe_topic_partitions_invalid(self, request, version: int, message: str):
        """DescribeTopicPartitionsRequest.getErrorResponse(InvalidRequestException): every topic named, as
        named, INVALID_REQUEST and no partitions (the message reaches only the broker's log)."""
        R = DescribeTopicPartitionsResponse
        log.info("DescribeTopicPartitions: INVALID_REQUEST: %s", message)
        return R(version=version, throttle_time_ms=0, next_cursor=None, topics=[
            R.DescribeTopicPartitionsResponseTopic(error_code=ERRORS["INVALID_REQUEST"], name=t.name,
                                                   topic_id=uuid.UUID(int=0), is_internal=False, partitions=[])
            for t in request.topics or []])

    # -- configs ------------------------------------------------------------------------------

    def topic_configs(self, state: SimState, topic: str) -> dict[str, tuple[str, bool]]:
        """name -> (value, is an override of the topic) for every topic config."""
        t = state.throttles
        overrides = dict(self.topic_overrides.get(topic, {}))
        for name, lists in ((C.LEADER_REPLICAS, t.leader), (C.FOLLOWER_REPLICAS, t.follower)):
            entries = lists.get(topic)
            if entries:
                overrides[name] = C.throttled_value(entries)
        if topic not in self.min_insync_defaulted:
            overrides[C.MIN_INSYNC] = str(state.topics[topic].min_insync_replicas)
        out = {}
        for name, d in C.TOPIC_CONFIGS.items():
            if name in overrides:
                out[name] = (overrides[name], True)
            else:
                out[name] = (self.broker_default(d.synonym) if d.synonym else d.default, False)
        return out

    def log_dirs_rates(self) -> dict[int, int]:
        """Broker -> its ``replica.alter.log.dirs.io.max.bytes.per.second`` where set (its own, else the cluster
        default), as DescribeConfigs gives it: kept and read back, it moves nothing in the simulation."""
        out = {}
        for broker in sorted(self.state.brokers):
            value = self.broker_overrides.get(str(broker), {}).get(C.LOG_DIRS_RATE) or self.broker_default(C.LOG_DIRS_RATE)
            if value is not None and int(value.strip()) < C.LONG_MAX:
                out[broker] = int(value.strip())
        return out

    def broker_default(self, name: str) -> str | None:
        """A broker config's value at cluster level: a dynamic default if set, else Kafka's default."""
        return self.broker_overrides.get("", {}).get(name, C.BROKER_CONFIGS[name].default
                                                     if name in C.BROKER_CONFIGS else None)

    def broker_configs(self, state: SimState, broker: int) -> dict[str, tuple[str | None, int]]:
        """name -> (value, source) for every config of one broker."""
        statics = {"broker.id": str(broker), "node.id": str(broker), "broker.rack": state.brokers[broker].rack,
                   "log.dirs": log_dir(broker)}
        if self.max_request_partition_size_limit != MAX_REQUEST_PARTITION_SIZE_LIMIT:
            statics[C.MAX_REQUEST_PARTITIONS] = str(self.max_request_partition_size_limit)
        dynamic = dict(self.broker_overrides.get(str(broker), {}))
        t = state.throttles
        for name, rates in ((C.LEADER_RATE, t.leader_rate), (C.FOLLOWER_RATE, t.follower_rate)):
            if broker in rates:
                dynamic[name] = str(int(rates[broker]))
        defaults = self.broker_overrides.get("", {})
        out = {}
        for name in sorted(set(C.BROKER_CONFIGS) | set(dynamic)):
            if name in dynamic:
                out[name] = (dynamic[name], C.DYNAMIC_BROKER_CONFIG)
            elif name in defaults:
                out[name] = (defaults[name], C.DYNAMIC_DEFAULT_BROKER_CONFIG)
            elif name in statics:
                out[name] = (statics[name], C.STATIC_BROKER_CONFIG)
            else:
                out[name] = (C.BROKER_CONFIGS[name].default, C.DEFAULT_CONFIG)
        return out

    def describe_configs(self, node: int, request, version: int, session):
        state = self.metadata_state(node)
        R = DescribeConfigsResponse
        results = []
        for res in request.resources:
            keys = res.configuration_keys
            entries, error = [], None
            try:
                denied = self._config_denied(session, "DESCRIBE_CONFIGS", res.resource_type, res.resource_name)
                if denied:
                    raise C.ConfigError(denied, DENIED_MESSAGES[denied])
                if res.resource_type == TOPIC:
                    if res.resource_name not in state.topics:
                        raise C.ConfigError("UNKNOWN_TOPIC_OR_PARTITION", None)
                    for name, (value, override) in self.topic_configs(state, res.resource_name).items():
                        if keys and name not in keys:
                            continue
                        d = C.TOPIC_CONFIGS[name]
                        synonyms = []
                        if override:
                            synonyms.append(R.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym(
                                name=name, value=value, source=C.TOPIC_CONFIG))
                        if d.synonym:
                            synonyms.extend(self._broker_synonyms(d.synonym))
                        entries.append(self._entry(name, value, synonyms[0].source if synonyms else C.DEFAULT_CONFIG,
                                                   False, synonyms, d, request, version))
                elif res.resource_type == BROKER:
                    if res.resource_name == "":
                        for name, value in sorted(self.broker_overrides.get("", {}).items()):
                            if keys and name not in keys:
                                continue
                            synonyms = self._broker_synonyms(name)
                            entries.append(self._entry(name, value, C.DYNAMIC_DEFAULT_BROKER_CONFIG, False, synonyms,
                                                       C.BROKER_CONFIGS.get(name), request, version))
                    else:
                        self._own_broker(node, res.resource_name, describe=True)
                        for name, (value, source) in self.broker_configs(state, node).items():
                            if keys and name not in keys:
                                continue
                            d = C.BROKER_CONFIGS.get(name)
                            synonyms = [R.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym(
                                name=name, value=value, source=source)]
                            if source == C.DYNAMIC_BROKER_CONFIG:
                                synonyms.extend(s for s in self._broker_synonyms(name) if s.source != source)
                            read_only = d is not None and not d.dynamic
                            entries.append(self._entry(name, value, source, read_only, synonyms, d, request, version))
                elif res.resource_type == BROKER_LOGGER:
                    raise C.ConfigError("INVALID_REQUEST", "broker loggers are not part of the simulated cluster")
                else:
                    raise C.ConfigError("INVALID_REQUEST", f"Unsupported resource type: {res.resource_type}")
            except C.ConfigError as e:
                error = e
                entries = []
            results.append(R.DescribeConfigsResult(
                error_code=ERRORS[error.code] if error else 0, error_message=error.message if error else None,
                resource_type=res.resource_type, resource_name=res.resource_name, configs=entries))
            if error:
                log.info("DescribeConfigs %s %r on broker %d: %s %s", res.resource_type, res.resource_name, node,
                         error.code, error.message)
        return R(version=version, throttle_time_ms=0, results=results)

    def _broker_synonyms(self, name: str) -> list:
        S = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym
        out = []
        defaults = self.broker_overrides.get("", {})
        if name in defaults:
            out.append(S(name=name, value=defaults[name], source=C.DYNAMIC_DEFAULT_BROKER_CONFIG))
        d = C.BROKER_CONFIGS.get(name)
        if d is not None and d.default is not None:
            out.append(S(name=name, value=d.default, source=C.DEFAULT_CONFIG))
        return out

    def _entry(self, name, value, source, read_only, synonyms, d, request, version):
        E = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
        return E(name=name, value=value, read_only=read_only, config_source=source, is_default=source == C.DEFAULT_CONFIG,
                 is_sensitive=False, synonyms=synonyms if request.include_synonyms else [],
                 config_type=C.TYPE_IDS.get(d.type, 0) if d else 0,
                 documentation=(d.doc if d else None) if request.include_documentation else None)

    def _config_denied(self, session, operation: str, resource_type: int, name: str) -> str | None:
        """ConfigHelper / ControllerApis.authorizeAlterResource: TOPIC on the topic, BROKER and
        BROKER_LOGGER on the cluster. The error code name when denied."""
        if resource_type == TOPIC:
            return None if self.allowed(session, operation, "TOPIC", name) else "TOPIC_AUTHORIZATION_FAILED"
        if resource_type in (BROKER, BROKER_LOGGER):
            return None if self.allowed(session, operation, "CLUSTER") else "CLUSTER_AUTHORIZATION_FAILED"
        return None

    def _own_broker(self, node: int, name: str, describe: bool = False) -> None:
        """A BROKER resource must name the broker that received the request (ConfigHelper, ConfigAdminManager)."""
        try:
            broker = int(name)
        except ValueError:
            raise C.ConfigError("INVALID_REQUEST", f"Node id must be an integer, but it is: {name}") from None
        if broker != node:
            expected = f"{node} or empty string" if describe else f"{node}"
            raise C.ConfigError("INVALID_REQUEST", f"Unexpected broker id, expected {expected}, but received {name}")

    def _alter_configs(self, node: int, resources, validate_only: bool, change,
                       session) -> list[tuple[object, C.ConfigError | None]]:
        state = self.state
        seen: dict[tuple[int, str], int] = {}
        for res in resources:
            key = (res.resource_type, res.resource_name)
            seen[key] = seen.get(key, 0) + 1
        out = []
        for res in resources:
            error = None
            try:
                denied = self._config_denied(session, "ALTER_CONFIGS", res.resource_type, res.resource_name)
                if denied:
                    raise C.ConfigError(denied, DENIED_MESSAGES[denied])
                if seen[(res.resource_type, res.resource_name)] > 1:
                    raise C.ConfigError("INVALID_REQUEST", "Each resource must appear at most once.")
                if res.resource_type == TOPIC:
                    topic = res.resource_name
                    if topic == "":
                        raise C.ConfigError("INVALID_REQUEST", "Default topic resources are not allowed.")
                    if topic not in state.topics:
                        raise C.ConfigError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic {topic} does not exist.")
                    current = {n: v for n, (v, override) in self.topic_configs(state, topic).items() if override}
                    new = change(current, res, C.TOPIC_CONFIGS, "topic")
                    if not validate_only:
                        self._set_topic(topic, current, new)
                elif res.resource_type == BROKER:
                    name = res.resource_name
                    if name != "":
                        self._own_broker(node, name)
                        current = {n: v for n, (v, src) in self.broker_configs(state, node).items()
                                   if src == C.DYNAMIC_BROKER_CONFIG}
                    else:
                        current = dict(self.broker_overrides.get("", {}))
                    new = change(current, res, C.BROKER_CONFIGS, "broker")
                    if name == "" and any(n in (C.LEADER_RATE, C.FOLLOWER_RATE) for n in set(new) | set(current)
                                          if new.get(n) != current.get(n)):
                        raise C.ConfigError("INVALID_CONFIG", "the simulated cluster throttles per broker only: set "
                                            "leader/follower.replication.throttled.rate on each broker")
                    if not validate_only:
                        self._set_broker(name, current, new)
                else:
                    raise C.ConfigError("INVALID_REQUEST", f"Unknown resource type {res.resource_type}")
            except C.ConfigError as e:
                error = e
                log.info("alter configs %s %r on broker %d refused: %s %s", res.resource_type, res.resource_name,
                         node, e.code, e.message)
            out.append((res, error))
        return out

    def _set_topic(self, topic: str, current: dict, new: dict) -> None:
        cluster = self.sim.cluster
        for name, side in ((C.LEADER_REPLICAS, "leader"), (C.FOLLOWER_REPLICAS, "follower")):
            if new.get(name) != current.get(name):
                cluster.set_throttled_replicas(topic, side, C.throttled_entries(new.get(name)))
        if new.get(C.MIN_INSYNC) != current.get(C.MIN_INSYNC):
            if C.MIN_INSYNC in new:
                self.min_insync_defaulted.discard(topic)
                cluster.set_min_insync(topic, int(new[C.MIN_INSYNC]))
            else:
                self.min_insync_defaulted.add(topic)
                cluster.set_min_insync(topic, int(self.broker_default(C.MIN_INSYNC)))
        kept = {n: v for n, v in new.items() if n not in (C.LEADER_REPLICAS, C.FOLLOWER_REPLICAS, C.MIN_INSYNC)}
        self.topic_overrides[topic] = kept
        if new.get(C.UNCLEAN) != current.get(C.UNCLEAN):  # the controller reverts a cancel uncleanly where true
            cluster.set_unclean(topic, self.unclean(topic))

    def unclean(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable in force: its override, else the cluster default."""
        value = self.topic_overrides.get(topic, {}).get(C.UNCLEAN) or self.broker_default(C.UNCLEAN) or "false"
        return value.strip().lower() == "true"

    def _set_broker(self, name: str, current: dict, new: dict) -> None:
        if name != "":
            broker = int(name)
            for config, side in ((C.LEADER_RATE, "leader"), (C.FOLLOWER_RATE, "follower")):
                if new.get(config) != current.get(config):
                    value = new.get(config)
                    self.sim.cluster.set_throttle_rate(broker, side, None if value is None else int(value.strip()))
        self.broker_overrides[name] = {n: v for n, v in new.items() if n not in (C.LEADER_RATE, C.FOLLOWER_RATE)
                                       or name == ""}

    def incremental_alter_configs(self, node: int, request, version: int, session):
        def change(current, res, defs, kind):
            return C.incremental(current, [(c.name, c.config_operation, c.value) for c in res.configs], defs, kind)

        R = IncrementalAlterConfigsResponse
        done = self._alter_configs(node, request.resources, request.validate_only, change, session)
        return R(version=version, throttle_time_ms=0, responses=[R.AlterConfigsResourceResponse(
            error_code=ERRORS[e.code] if e else 0, error_message=e.message if e else None,
            resource_type=res.resource_type, resource_name=res.resource_name) for res, e in done])

    def alter_configs(self, node: int, request, version: int, session):
        def change(current, res, defs, kind):
            return C.replace(current, [(c.name, c.value) for c in res.configs], defs, kind)

        R = AlterConfigsResponse
        done = self._alter_configs(node, request.resources, request.validate_only, change, session)
        return R(version=version, throttle_time_ms=0, responses=[R.AlterConfigsResourceResponse(
            error_code=ERRORS[e.code] if e else 0, error_message=e.message if e else None,
            resource_type=res.resource_type, resource_name=res.resource_name) for res, e in done])

    # -- reassignments and elections (the simulated KRaft controller) ----------------------------

    def alter_partition_reassignments(self, node: int, request, version: int, session):
        R = AlterPartitionReassignmentsResponse
        state = self.state
        allow_rf_change = request.allow_replication_factor_change if version >= 1 else True
        denied = self.cluster_denied(session, "ALTER", "AlterPartitionReassignments")
        if denied:  # AlterPartitionReassignmentsRequest.getErrorResponse: every partition gets the error too
            code = ERRORS["CLUSTER_AUTHORIZATION_FAILED"]
            return R(version=version, throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                     error_code=code, error_message=denied, responses=[R.ReassignableTopicResponse(
                         name=t.name, partitions=[R.ReassignableTopicResponse.ReassignablePartitionResponse(
                             partition_index=p.partition_index, error_code=code, error_message=denied)
                             for p in t.partitions]) for t in request.topics])
        topics = []
        for t in request.topics:
            results = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code, message = self._alter_one(state, tp, p.replicas, allow_rf_change)
                state = self.sim.cluster.state
                results.append(R.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=ERRORS[code], error_message=message))
                if code != "NONE":
                    log.info("AlterPartitionReassignments %s -> %s refused: %s %s", tp, p.replicas, code, message)
            topics.append(R.ReassignableTopicResponse(name=t.name, partitions=results))
        return R(version=version, throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                 error_code=0, error_message=None, responses=topics)

    def _alter_one(self, state: SimState, tp: TopicPartition, replicas, allow_rf_change: bool) -> tuple[str, str | None]:
        if tp.topic not in state.topics:
            return "UNKNOWN_TOPIC_OR_PARTITION", f"Unable to find a topic named {tp.topic}."
        p = state.partitions.get(tp)
        if p is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", f"Unable to find partition {tp.topic}:{tp.partition}."
        if replicas is None:
            if not p.reassigning:
                return "NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress."
            result = self.sim.cluster.cancel_reassignments([tp])[tp]
        else:
            target = tuple(replicas)
            current_rf = len(p.replicas) - len(p.removing)
            if not allow_rf_change and target and len(target) != current_rf:
                return ("INVALID_REPLICATION_FACTOR", f"The replication factor is changed from {current_rf} to "
                        f"{len(target)} but allowReplicationFactorChange is false")
            result = self.sim.cluster.alter_reassignments({tp: target})[tp]
            self.sim.record_alters({tp: target})
        if isinstance(result, Refused):
            return result.code, result.message
        return "NONE", None

    def list_partition_reassignments(self, node: int, request, version: int, session):
        R = ListPartitionReassignmentsResponse
        state = self.state
        denied = self.cluster_denied(session, "DESCRIBE", "ListPartitionReassignments")
        if denied:
            return R(version=version, throttle_time_ms=0, error_code=ERRORS["CLUSTER_AUTHORIZATION_FAILED"],
                     error_message=denied, topics=[R.OngoingTopicReassignment(name=t.name, partitions=[
                         R.OngoingTopicReassignment.OngoingPartitionReassignment(
                             partition_index=i, replicas=[], adding_replicas=[], removing_replicas=[])
                         for i in t.partition_indexes]) for t in request.topics or []])
        if request.topics is None:
            wanted = sorted(tp for tp, p in state.partitions.items() if p.reassigning)
        else:
            wanted = [TopicPartition(t.name, i) for t in request.topics for i in t.partition_indexes]
        by_topic: dict[str, list] = {}
        for tp in wanted:
            p = state.partitions.get(tp)
            if p is None or not p.reassigning:
                continue
            by_topic.setdefault(tp.topic, []).append(R.OngoingTopicReassignment.OngoingPartitionReassignment(
                partition_index=tp.partition, replicas=list(p.replicas), adding_replicas=list(p.adding),
                removing_replicas=list(p.removing)))
        return R(version=version, throttle_time_ms=0, error_code=0, error_message=None, topics=[
            R.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])

    def elect_leaders(self, node: int, request, version: int, session):
        R = ElectLeadersResponse
        election = request.election_type if version >= 1 else PREFERRED
        denied = self.cluster_denied(session, "ALTER", "ElectLeaders")
        if denied:  # ElectLeadersRequest.getErrorResponse
            code = ERRORS["CLUSTER_AUTHORIZATION_FAILED"]
            return R(version=version, throttle_time_ms=0, error_code=code, replica_election_results=[
                R.ReplicaElectionResult(topic=t.topic, partition_result=[R.ReplicaElectionResult.PartitionResult(
                    partition_id=i, error_code=code, error_message=denied) for i in t.partitions])
                for t in request.topic_partitions or []])
        if election not in (PREFERRED, UNCLEAN):
            return R(version=version, throttle_time_ms=0, error_code=ERRORS["INVALID_REQUEST"],
                     replica_election_results=[])
        state = self.state
        everything = request.topic_partitions is None
        if everything:
            asked = [(t, [tp.partition for tp in self.topic_partitions(state, t)]) for t in sorted(state.topics)]
        else:
            asked = [(t.topic, list(t.partitions)) for t in request.topic_partitions]
        results = []
        for topic, partitions in asked:
            out = []
            for i in partitions:
                code, message = self._elect_one(TopicPartition(topic, i), election)
                if everything and code == "ELECTION_NOT_NEEDED":
                    continue  # Kafka leaves these out when asked for every partition
                out.append(R.ReplicaElectionResult.PartitionResult(
                    partition_id=i, error_code=ERRORS[code], error_message=message))
            results.append(R.ReplicaElectionResult(topic=topic, partition_result=out))
        return R(version=version, throttle_time_ms=0, error_code=0, replica_election_results=results)

    def _elect_one(self, tp: TopicPartition, election: int) -> tuple[str, str | None]:
        state = self.sim.cluster.state
        if tp.topic not in state.topics:
            return "UNKNOWN_TOPIC_OR_PARTITION", f"No such topic as {tp.topic}"
        p = state.partitions.get(tp)
        if p is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", f"No such partition as {tp.topic}-{tp.partition}"
        if election == PREFERRED and p.leader == p.replicas[0] or election == UNCLEAN and p.leader is not None:
            return "ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."
        if election == PREFERRED:
            result = self.sim.cluster.elect_preferred_leaders([tp])[tp]
        else:
            result = self.sim.cluster.elect_unclean_leaders([tp])[tp]
        if isinstance(result, Refused):
            return result.code, result.message
        return "NONE", None

    # -- DescribeLogDirs ---------------------------------------------------------------------------

    def describe_log_dirs(self, node: int, request, version: int, session):
        """The receiving broker's one log directory: every replica it hosts (asked for), sized as
        the partition less the replica's lag while it is out of the ISR."""
        R = DescribeLogDirsResponse
        state = self.state
        if not self.allowed(session, "DESCRIBE", "CLUSTER"):
            return R(version=version, throttle_time_ms=0, error_code=ERRORS["CLUSTER_AUTHORIZATION_FAILED"],
                     results=[])
        hosted = sorted(state.hosted.get(node, {}).keys()) if node in state.hosted else []
        if request.topics is not None:
            wanted = {(t.topic, i) for t in request.topics for i in t.partitions}
            hosted = [tp for tp in hosted if (tp.topic, tp.partition) in wanted]
        by_topic: dict[str, list] = {}
        for tp in hosted:
            p = state.partitions[tp]
            lag = state.lags.get((tp, node))
            size = p.size - (lag.at(state.time) if lag is not None else 0.0)
            by_topic.setdefault(tp.topic, []).append(R.DescribeLogDirsResult.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=tp.partition, partition_size=max(0, int(size)), offset_lag=0, is_future_key=False))
        result = R.DescribeLogDirsResult(
            error_code=0, log_dir=log_dir(node), total_bytes=-1, usable_bytes=-1, is_cordoned=False,
            topics=[R.DescribeLogDirsResult.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        return R(version=version, throttle_time_ms=0, error_code=0, results=[result])


    # -- groups and topic creation: authorization and validation only ---------------------------

    def find_coordinator(self, node: int, request, version: int, session):
        """KafkaApis.getCoordinator: DESCRIBE on the group (or transactional id), then the coordinator:
        the broker asked (the simulated cluster keeps no group state)."""
        R = FindCoordinatorResponse
        addresses = self.addresses()
        keys = list(request.coordinator_keys or []) if version >= 4 else [request.key]

        def one(key):
            if request.key_type == GROUP_KEY and not self.allowed(session, "DESCRIBE", "GROUP", key):
                return "GROUP_AUTHORIZATION_FAILED", -1, "", -1
            if request.key_type == TRANSACTION_KEY and not self.allowed(session, "DESCRIBE", "TRANSACTIONAL_ID", key):
                return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1, "", -1
            if request.key_type not in (GROUP_KEY, TRANSACTION_KEY):
                return "INVALID_REQUEST", -1, "", -1
            host, port = addresses[node]
            return "NONE", node, host, port

        if version >= 4:
            coordinators = []
            for key in keys:
                code, node_id, host, port = one(key)
                coordinators.append(R.Coordinator(key=key, node_id=node_id, host=host, port=port,
                                                  error_code=ERRORS[code],
                                                  error_message=DENIED_MESSAGES.get(code)))
            return R(version=version, throttle_time_ms=0, coordinators=coordinators)
        code, node_id, host, port = one(keys[0])
        return R(version=version, throttle_time_ms=0, error_code=ERRORS[code],
                 error_message=DENIED_MESSAGES.get(code), node_id=node_id, host=host, port=port)

    def describe_groups(self, node: int, request, version: int, session):
        """KafkaApis.handleDescribeGroupsRequest: DESCRIBE on each group; the simulated cluster has no
        members, so every group it may describe is unknown to it: Dead before v6, GROUP_ID_NOT_FOUND from v6
        (KIP-1043); authorized operations (v3+) for those answered without an error."""
        R = DescribeGroupsResponse
        groups = []
        for g in request.groups:
            if not self.allowed(session, "DESCRIBE", "GROUP", g):
                groups.append(R.DescribedGroup(error_code=ERRORS["GROUP_AUTHORIZATION_FAILED"], group_id=g,
                                               group_state="", protocol_type="", protocol_data="", members=[],
                                               error_message=DENIED_MESSAGES["GROUP_AUTHORIZATION_FAILED"]))
            elif version >= 6:
                groups.append(R.DescribedGroup(error_code=ERRORS["GROUP_ID_NOT_FOUND"], group_id=g,
                                               error_message=f"Group {g} not found.", group_state="Dead",
                                               protocol_type="", protocol_data="", members=[]))
            else:
                ops = self.operations(session, "GROUP", g) if version >= 3 and request.include_authorized_operations \
                    else None
                groups.append(R.DescribedGroup(error_code=0, group_id=g, group_state="Dead", protocol_type="",
                                               protocol_data="", members=[], authorized_operations=ops))
        return R(version=version, throttle_time_ms=0, groups=groups)

    def create_topics(self, node: int, request, version: int, session):
        """ControllerApis.createTopics: CREATE on the cluster or on each topic (TOPIC_AUTHORIZATION_FAILED),
        then TOPIC_ALREADY_EXISTS; validate_only succeeds for a new name; a real creation makes an empty
        topic (``_create``): the partition count (-1: ``num.partitions``) and the replication factor
        (-1: ``default.replication.factor``), or the replicas of each partition, placed round robin over
        the live brokers; ``min.insync.replicas`` from its configs, the others kept and read back."""
        R = CreateTopicsResponse
        state = self.state
        cluster_create = self.allowed(session, "CREATE", "CLUSTER")
        results = []
        for t in request.topics:
            name = t.name
            extra = {}
            if version >= 5:
                extra = dict(num_partitions=-1, replication_factor=-1, configs=[], topic_config_error_code=0)
            if not (cluster_create or self.allowed(session, "CREATE", "TOPIC", name)):
                code, message = "TOPIC_AUTHORIZATION_FAILED", "Authorization failed."
            elif name in state.topics:
                code, message = "TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists."
            elif request.validate_only:
                code, message = "NONE", None
                if version >= 5:
                    extra.update(num_partitions=t.num_partitions, replication_factor=t.replication_factor)
            else:
                code, message = self._create(t)
                state = self.sim.cluster.state
            if version >= 7 and code == "NONE":
                extra["topic_id"] = self.topic_id(name)
            results.append(R.CreatableTopicResult(name=name, error_code=ERRORS[code], error_message=message, **extra))
        return R(version=version, throttle_time_ms=0, topics=results)


    def _create(self, t) -> tuple[str, str | None]:
        configs = {c.name: c.value for c in t.configs or []}
        if t.assignments:
            assignment = [tuple(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)]
            if [a.partition_index for a in sorted(t.assignments, key=lambda a: a.partition_index)] != \
                    list(range(len(assignment))):
                return "INVALID_REPLICA_ASSIGNMENT", "Partitions must be numbered 0 to N-1."
            if any(not r or len(set(r)) != len(r) or any(b not in self.state.brokers for b in r) for r in assignment):
                return "INVALID_REPLICA_ASSIGNMENT", "Replica assignment names an unknown broker or a broker twice."
        else:
            partitions = t.num_partitions if t.num_partitions != -1 else int(self.broker_default("num.partitions") or 1)
            factor = (t.replication_factor if t.replication_factor != -1
                      else int(self.broker_default("default.replication.factor") or 1))
            if partitions < 1:
                return "INVALID_PARTITIONS", "Number of partitions must be larger than 0."
            assignment = controller_placement(self.state, partitions, factor)
            if assignment is None:
                return "INVALID_REPLICATION_FACTOR", (f"Unable to replicate the partition {factor} time(s): The "
                                                      f"target replication factor of {factor} cannot be reached "
                                                      f"because only {len(self.live(self.state))} broker(s) are "
                                                      f"registered.")
        min_insync = int(configs.pop(C.MIN_INSYNC, None) or self.broker_default(C.MIN_INSYNC) or 1)
        self.sim.cluster.create_topic(t.name, assignment, min_insync)
        if configs:
            self.topic_overrides[t.name] = {k: v for k, v in configs.items() if v is not None}
        if self.unclean(t.name):
            self.sim.cluster.set_unclean(t.name, True)
        log.info("CreateTopics %s: %d partitions, replicas %s", t.name, len(assignment), assignment)
        return "NONE", None


def _bits(operations: set[int]) -> int:
    """An authorized-operations bit field as the int32 the schema carries (Utils.to32BitField)."""
    value = 0
    for op in operations:
        value |= 1 << op
    return value - (1 << 32) if value >= 1 << 31 else value


def log_dir(broker: int) -> str:
    return f"/var/lib/kreassign-sim/broker-{broker}"


# API key -> (request class, handler name); the versions advertised are the schemas' (Kafka 4.x).
APIS = {
    18: (ApiVersionsRequest, "api_versions"),
    3: (MetadataRequest, "metadata"),
    60: (DescribeClusterRequest, "describe_cluster"),
    75: (DescribeTopicPartitionsRequest, "describe_topic_partitions"),
    32: (DescribeConfigsRequest, "describe_configs"),
    44: (IncrementalAlterConfigsRequest, "incremental_alter_configs"),
    33: (AlterConfigsRequest, "alter_configs"),
    45: (AlterPartitionReassignmentsRequest, "alter_partition_reassignments"),
    46: (ListPartitionReassignmentsRequest, "list_partition_reassignments"),
    43: (ElectLeadersRequest, "elect_leaders"),
    35: (DescribeLogDirsRequest, "describe_log_dirs"),
    10: (FindCoordinatorRequest, "find_coordinator"),
    15: (DescribeGroupsRequest, "describe_groups"),
    19: (CreateTopicsRequest, "create_topics"),
    17: (SaslHandshakeRequest, None),  # the front answers these two (engine.sim.kafka_front)
    36: (SaslAuthenticateRequest, None),
}
SUPPORTED = {key: tuple(cls._valid_versions) for key, (cls, _name) in APIS.items()}
API_NAMES = {key: cls.__name__.removesuffix("Request") for key, (cls, _name) in APIS.items()}
"""API key -> Kafka's name of the API (the front's request counts)."""
