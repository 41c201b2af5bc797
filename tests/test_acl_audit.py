"""Every Kafka request kreassign sends to its own topics, audited against exactly the documented ACLs.

The embedded broker cannot enforce ACLs, and the simulated cluster's secured Kafka front
serves only the admin APIs (tests/test_security.py). So the event-log side is audited: a
recording proxy (tests/kafka_recorder.py) sits in front of the embedded broker, which
advertises the proxy as its own address, and sees every request of a whole session: an
engine worker (Faust: its group, changelogs and leader topic; its event log; a restart that
recovers from the log), an operator (execute, status, replay, verify --request, pause,
resume, dead-letters), an analyst (status, replay, the analytics job's streaming source),
and a message that is not a command (the engine dead-letters it). Each request is mapped to
the checks Kafka's broker makes for it (KafkaApis, from Kafka's source) and each check must be
allowed by Kafka's authorizer rules (engine.sim.security) for the principal of the client that
sent it, given exactly the ACLs ``kreassign acls`` prints: they suffice. And each of those
grants is used by some request of the session: none is there for nothing.

The cluster being reassigned is simulated in the engine's process here (``sim:``); its grants
(the cluster and the reassigned topics) are checked by tests/test_security.py.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient

from engine.kafka import acls as A
from engine.kafka.embedded import EmbeddedBroker, free_port
from engine.sim import scenario as S
from engine.sim.security import Authorizer, parse_acl_command
from engine.kafka.topics import create, engine_group, reader_group
from tests.engine_harness import KREASSIGN, Process, Worker, wait_for
from tests.kafka_recorder import ANY_TOPIC_WRITE, Recorder, checks
from tests.test_engine import scenario_doc

PREFIX = "audit."
ROLES = {"engine": A.ENGINE, "operator": A.OPERATOR, "analyst": A.ANALYST}
PRINCIPALS = {A.ENGINE: ["User:engine"], A.OPERATOR: ["User:operator"], A.ANALYST: ["User:analyst"]}


class Session:
    pass


def run(*argv, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(KREASSIGN + list(argv), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    port = free_port()
    recorder = Recorder(("127.0.0.1", port))
    broker = EmbeddedBroker(port=port, advertised=recorder.address).start()
    procs: list[Process] = []
    try:
        create({"bootstrap.servers": recorder.address, "client.id": "admin"}, PREFIX)
        props = {}
        for role in ROLES:
            path = tmp / f"{role}.properties"
            path.write_text(f"client.id={role}\n")
            props[role] = str(path)
        doc = scenario_doc(4, size="2 MB")
        scenario = tmp / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(doc))
        targets = tmp / "targets.json"
        targets.write_text(S.dump_targets(S.from_document(doc)))
        common = ["--bootstrap-server", recorder.address, "--broker-profile", "embedded", "--prefix", PREFIX]

        class Address:
            bootstrap = recorder.address

        def worker():
            w = Worker(Address, PREFIX, f"sim:{scenario}", extra=("--command-config", props["engine"]))
            procs.append(w)
            w.wait_active(90)
            return w

        w = worker()
        as_operator = [*common, "--command-config", props["operator"]]
        request = "audit-1"
        out = run("execute", "--reassignment-json-file", str(targets), "--request-id", request, *as_operator)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"accepted: request {request}:"), out.stdout  # the engine's verdict, read back
        wait_for(lambda: (s := w.active()) and any(r["id"] == request and r["status"] == "completed"
                                                   for r in s["requests"]), 120, "the request to complete")
        junk = Producer({"bootstrap.servers": recorder.address, "client.id": "admin"})
        junk.produce(PREFIX + "commands", b"not a command")
        assert junk.flush(10) == 0
        wait_for(lambda: (s := w.active()) and s.get("dead_letters") == 1, 60, "the junk dead-lettered")
        for argv in (["status"], ["replay"], ["dead-letters"], ["pause"], ["resume"],
                     ["verify", "--request", request, "--cluster", f"sim:{scenario}"]):
            out = run(*argv, *as_operator)
            assert out.returncode in (0, 1), (argv, out.stderr)
        w.stop()
        w = worker()  # a restart: recovery from the log, Faust's tables from their changelogs
        w.stop()
        as_analyst = [*common, "--command-config", props["analyst"]]
        for argv in (["status"], ["replay"]):
            out = run(*argv, *as_analyst)
            assert out.returncode == 0, (argv, out.stderr)
        from spark.kafka_source import EventLogReader, OffsetRange, audit_schema

        reader = EventLogReader(audit_schema(), {"topic": PREFIX + "events", "kafka.bootstrap.servers": recorder.address,
                                                 "kafka.group.id": reader_group(PREFIX), "kafka.client.id": "analyst"})
        ends = reader.end_offsets({})
        # the decider's transactions leave a commit marker after each append: fewer messages than offsets
        assert 0 < sum(1 for _ in reader._messages(OffsetRange(PREFIX + "events", 0, 0, ends["0"]))) < ends["0"]
        reader.stop()
        s = Session()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "admin"})
        names = sorted(admin.list_topics(timeout=10).topics)
        described = admin.describe_topics(TopicCollection(names))
        s.names_by_id = {str(_uuid(f.result(10).topic_id)): t for t, f in described.items()}
        s.seen = list(recorder.seen)
        s.undecoded = list(recorder.undecoded)
        s.topics = names
        yield s
    finally:
        for p in procs:
            p.cleanup()
        recorder.close()
        broker.stop()


def _uuid(u):
    """confluent-kafka's Uuid as the uuid.UUID kafka-python decodes a topic id to."""
    import uuid

    return uuid.UUID(int=((u.get_most_significant_bits() & (2**64 - 1)) << 64)
                     | (u.get_least_significant_bits() & (2**64 - 1)))


def documented():
    return A.bindings(PRINCIPALS, PREFIX, A.TopicScope(names=("t",)))


def authorizer() -> Authorizer:
    return Authorizer([a for b in documented() for a in parse_acl_command(b.command())])


def principal(client_id: str) -> str | None:
    if client_id.startswith("faust") or client_id == "engine":
        return "User:engine"
    return {"operator": "User:operator", "analyst": "User:analyst"}.get(client_id)


def test_every_request_decodes_and_comes_from_a_known_principal(session):
    assert session.undecoded == []
    assert {s.client_id for s in session.seen} - {"admin"} <= {"engine", "operator", "analyst"} | {
        s.client_id for s in session.seen if s.client_id.startswith("faust")}
    by_role = {}
    for s in session.seen:
        by_role.setdefault(principal(s.client_id), set()).add(s.api)
    # the audit saw the paths that matter: producing, fetching, the group protocol, topic creation
    assert {"Produce", "Fetch", "InitProducerId", "ListOffsets", "FindCoordinator", "JoinGroup", "SyncGroup",
            "Heartbeat", "OffsetCommit", "OffsetFetch", "CreateTopics", "AddPartitionsToTxn", "EndTxn"} <= by_role["User:engine"]
    assert {"Produce", "InitProducerId", "Fetch", "FindCoordinator"} <= by_role["User:operator"]
    assert {"Fetch", "FindCoordinator", "ListOffsets"} <= by_role["User:analyst"]


def test_the_documented_acls_allow_every_request(session):
    auth = authorizer()
    refused = []
    for s in session.seen:
        who = principal(s.client_id)
        if who is None:
            continue
        for op, rtype, name in checks(s, session.names_by_id):
            if (op, rtype, name) == ANY_TOPIC_WRITE:
                ok = any(a.allow and a.operation in ("WRITE", "ALL") and a.resource_type == "TOPIC"
                         and a.principal in (who, "User:*") for a in auth.acls)
            else:
                ok = auth.authorize(who, op, rtype, name)
            if not ok:
                refused.append(f"{who}: {s.api} v{s.version} needs {op} on {rtype.lower()} {name}")
    assert refused == [], "\n".join(sorted(set(refused)))


def test_every_documented_grant_on_kreassigns_own_resources_is_used(session):
    used = set()
    for s in session.seen:
        who = principal(s.client_id)
        if who is not None:
            used.update((who, op, rtype, name) for op, rtype, name in checks(s, session.names_by_id))
    unused = []
    for b in documented():
        r = b.need.resource
        if r.kind == "cluster" or r.name == "t":
            continue  # the reassigned cluster's grants: tests/test_security.py
        for op in b.need.operations:
            hits = [u for u in used if u[0] == b.principal and u[1] == op.upper() and u[2] == r.kind.upper().replace("-", "_")
                    and (u[3].startswith(r.name) if r.prefixed else u[3] == r.name)]
            if not hits:
                unused.append(f"{b.principal} {op} on {r}")
    assert unused == [], unused
    assert any(t.startswith(engine_group(PREFIX) + "-") for t in session.topics)  # Faust created its topics
