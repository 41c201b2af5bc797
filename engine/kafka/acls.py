"""The Kafka ACLs kreassign needs, per principal, with the reason for each: the one list.

Derived from every request each command and the engine sends and the check Kafka's
authorizer makes for it (KafkaApis, ControllerApis, ConfigHelper and AuthHelper in
Kafka's source; Kafka's "Operations and Resources on Protocols" table):

=====================================  ===========================================================
request                                Kafka checks
=====================================  ===========================================================
Metadata, ListOffsets                  DESCRIBE on each topic named (unauthorized topics are left
                                       out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when named)
DescribeTopicPartitions                DESCRIBE on each topic
Produce                                WRITE on the topic
InitProducerId (idempotent producer)   IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
InitProducerId (transactional)         WRITE on the transactional id
FindCoordinator (transaction)          DESCRIBE on the transactional id
AddPartitionsToTxn, EndTxn             WRITE on the transactional id (and WRITE on each topic added)
Fetch                                  READ on the topic
FindCoordinator (group)                DESCRIBE on the group
JoinGroup, SyncGroup, Heartbeat,       READ on the group
LeaveGroup
OffsetCommit                           READ on the group and on each topic
OffsetFetch                            DESCRIBE on the group and on each topic
DescribeGroups                         DESCRIBE on the group
CreateTopics                           CREATE on the cluster or on the topic
DescribeConfigs                        DESCRIBE_CONFIGS on the topic; on the cluster for a broker
IncrementalAlterConfigs                ALTER_CONFIGS on the topic; on the cluster for a broker
AlterPartitionReassignments            ALTER on the cluster
ListPartitionReassignments             DESCRIBE on the cluster
ElectLeaders                           ALTER on the cluster
DescribeLogDirs                        DESCRIBE on the cluster
DescribeCluster                        nothing
=====================================  ===========================================================

Kafka's authorizers (StandardAuthorizer in KRaft, AclAuthorizer before it) let an
ALLOW of Read, Write, Delete or Alter imply Describe, and of AlterConfigs imply
DescribeConfigs: the lists below are minimal under that rule and say where a
request's Describe or DescribeConfigs is implied. With an authorizer that implies
nothing, add Describe (and DescribeConfigs) where the reason says "implied".

Who reads the events topic does it with librdkafka, which asks for the coordinator
of its consumer's ``group.id`` (FindCoordinator) even though the reader is only
assigned partitions and never joins or commits: confluent-kafka requires a group
id, so readers use ``<prefix>reader`` (``engine.kafka.topics.reader_group``), and need
DESCRIBE on that group and nothing else on it.

``kreassign acls`` prints these as kafka-acls.sh commands; docs/engine.md holds
the table; the engine checks its own part when it starts (``engine.kafka.preflight``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from engine.kafka.access import THE_CLUSTER, TRANSACTIONAL_ID, Need, Resource, grant, group, topic
from engine.kafka.topics import Topics, decider_transactional_id, engine_group, reader_group

ENGINE, OPERATOR, ANALYST, ADMIN = "engine", "operator", "analyst", "admin"
ROLES = (ENGINE, OPERATOR, ANALYST, ADMIN)


@dataclass(frozen=True)
class TopicScope:
    """The topics the engine may reassign (and operators verify): named topics, a prefix, or all."""

    names: tuple[str, ...] = ()
    prefix: str | None = None
    everything: bool = False

    def resources(self) -> list[Resource]:
        if self.everything:
            return [topic("*")]
        if self.prefix is not None:
            return [topic(self.prefix, prefixed=True)]
        return [topic(n) for n in sorted(set(self.names))]

    def __str__(self) -> str:
        if self.everything:
            return "every topic"
        if self.prefix is not None:
            return f"topics prefixed {self.prefix}"
        return ", ".join(sorted(set(self.names)))


def engine_needs(prefix: str, scope: TopicScope) -> list[Need]:
    t = Topics.named(prefix)
    needs = [
        Need(("Read",), topic(t.commands),
             "the router consumes the commands (Fetch, OffsetCommit: Read; Metadata, ListOffsets, OffsetFetch: "
             "Describe, implied)"),
        Need(("Read", "Write"), topic(t.decisions),
             "the router forwards each command and the timer sends ticks (Produce: Write); the decider consumes "
             "them (Fetch, OffsetCommit: Read)"),
        Need(("Read", "Write"), topic(t.events),
             "the decider appends every event (Produce, and AddPartitionsToTxn for this topic: Write) and folds "
             "the log when it takes over (Fetch: Read; ListOffsets: Describe, implied)"),
        Need(("Write",), Resource(TRANSACTIONAL_ID, decider_transactional_id(prefix)),
             "the decider appends each batch of events in one transaction under this id; claiming it fences a "
             "previous decider (InitProducerId, AddPartitionsToTxn, EndTxn: Write; FindCoordinator: Describe, "
             "implied)"),
        Need(("Read", "Write"), topic(t.snapshots),
             "the decider writes a snapshot of the state every so often (Produce: Write) and a starting worker "
             "reads the latest to recover fast (Fetch: Read; ListOffsets: Describe, implied)"),
        Need(("Write",), topic(t.dead_letters),
             "messages that are not commands are set aside there with the reason (Produce)"),
        Need(("Create", "Read", "Write"), topic(f"{engine_group(prefix)}-", prefixed=True),
             "Faust's executor-table changelog and leader-assignor topic: created on the first start (CreateTopics), "
             "written, and read back to rebuild the executor table"),
        Need(("Read",), group(engine_group(prefix)),
             "the workers' consumer group, which elects the one decider (JoinGroup, SyncGroup, Heartbeat, "
             "OffsetCommit: Read; FindCoordinator, OffsetFetch: Describe, implied)"),
        Need(("Describe",), group(reader_group(prefix)),
             "the reader of the events topic asks for its group's coordinator (FindCoordinator); it never "
             "joins or commits"),
        Need(("Alter", "AlterConfigs"), THE_CLUSTER,
             "AlterPartitionReassignments and ElectLeaders (Alter); the brokers' leader/follower."
             "replication.throttled.rate (IncrementalAlterConfigs on brokers: AlterConfigs); "
             "ListPartitionReassignments, and DescribeLogDirs for sizes and copy progress (Describe, implied by "
             "Alter); the brokers' "
             "rates read back (DescribeConfigs on brokers, implied by AlterConfigs)"),
    ]
    for r in scope.resources():
        needs.append(Need(
            ("Describe", "AlterConfigs"), r,
            "the topics it reassigns: replicas and ISR (Metadata, DescribeTopicPartitions: Describe), "
            "leader/follower.replication.throttled.replicas (IncrementalAlterConfigs: AlterConfigs), "
            "min.insync.replicas and the throttles read back (DescribeConfigs, implied by AlterConfigs)"))
    return needs


def operator_needs(prefix: str, scope: TopicScope) -> list[Need]:
    t = Topics.named(prefix)
    needs = [
        Need(("Write",), topic(t.commands),
             "execute, cancel, limits, throttle, pause, resume and balance --execute publish commands (Produce: "
             "Write, which also allows the idempotent producer's InitProducerId; Metadata: Describe, implied)"),
        Need(("Read",), topic(t.events),
             "status, replay, list and verify --request read the log (Fetch: Read; Metadata, ListOffsets: "
             "Describe, implied)"),
        Need(("Read",), topic(t.dead_letters), "dead-letters lists the messages set aside"),
        Need(("Read",), topic(t.snapshots),
             "status and replay start from the latest snapshot, then read the events after it (Fetch: Read)"),
        Need(("Describe",), group(reader_group(prefix)),
             "kreassign's readers ask for their group's coordinator (FindCoordinator); they never join or commit"),
        Need(("Describe", "DescribeConfigs"), THE_CLUSTER,
             "verify and list: ListPartitionReassignments (Describe), the brokers' throttle rates (DescribeConfigs); "
             "balance: DescribeLogDirs for sizes (Describe)"),
    ]
    for r in scope.resources():
        needs.append(Need(("Describe", "DescribeConfigs"), r,
                          "verify and balance read the topics' replicas (Describe), min.insync.replicas and "
                          "throttles (DescribeConfigs)"))
    return needs


def analyst_needs(prefix: str) -> list[Need]:
    t = Topics.named(prefix)
    return [
        Need(("Read",), topic(t.events),
             "analytics run, replay and status read the log (Fetch: Read; Metadata, ListOffsets: Describe, implied)"),
        Need(("Read",), topic(t.snapshots),
             "status and replay start from the latest snapshot, then read the events after it (Fetch: Read)"),
        Need(("Describe",), group(reader_group(prefix)),
             "kreassign's readers ask for their group's coordinator (FindCoordinator); they never join or commit"),
    ]


def admin_needs(prefix: str) -> list[Need]:
    return [Need(("Create", "Describe"), topic(prefix, prefixed=True),
                 "kreassign topics create, once (CreateTopics: Create; Metadata: Describe, to check the layout)")]


def needs_of(role: str, prefix: str, scope: TopicScope) -> list[Need]:
    if role == ENGINE:
        return engine_needs(prefix, scope)
    if role == OPERATOR:
        return operator_needs(prefix, scope)
    if role == ANALYST:
        return analyst_needs(prefix)
    if role == ADMIN:
        return admin_needs(prefix)
    raise ValueError(f"unknown role {role!r}")


@dataclass(frozen=True)
class Binding:
    role: str
    principal: str
    need: Need

    def command(self, bootstrap: str | None = None) -> str:
        return grant(self.principal, self.need, bootstrap)


def bindings(principals: dict[str, Sequence[str]], prefix: str, scope: TopicScope) -> list[Binding]:
    """Every grant, for each role's principals (role -> principals), in role order."""
    out = []
    for role in ROLES:
        for principal in principals.get(role, ()):
            out += [Binding(role, principal, n) for n in needs_of(role, prefix, scope)]
    return out


def render(items: Iterable[Binding], bootstrap: str | None = None) -> str:
    """kafka-acls.sh commands, each under a comment saying why."""
    lines: list[str] = []
    role = None
    for b in items:
        if b.role != role:
            role = b.role
            if lines:
                lines.append("")
            lines.append(f"# {role}: {b.principal}")
        lines.append(f"# {b.need.resource}: {b.need.why}")
        lines.append(b.command(bootstrap))
    return "\n".join(lines)


def table(items: Iterable[Binding]) -> list[tuple[str, str, str, str]]:
    """(principal, resource, operations, why) rows, as docs/engine.md shows them."""
    return [(b.principal, _resource_cell(b.need.resource), ", ".join(b.need.operations), b.need.why) for b in items]


def _resource_cell(r: Resource) -> str:
    if r.kind == "cluster":
        return "cluster"
    return f"{r.kind}s prefixed `{r.name}`" if r.prefixed else f"{r.kind} `{r.name}`"
