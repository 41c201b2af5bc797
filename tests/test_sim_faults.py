"""The simulated cluster's faults of issue 27: a broker whose metadata lags the controller (``lag``)
and a broker that stops answering (``hang``, ``resume``), in process and through the Kafka front."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.admin import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

from engine.core.partition import TopicPartition
from engine.sim import scenario as S
from engine.sim.cluster import BROKER_SESSION_TIMEOUT, SimulatedCluster
from tests.sim_helpers import kafka_front
from tests.engine_harness import wait_for

DOC = {
    "name": "faults", "seed": 1, "brokers": {"count": 4},
    "topics": [{"name": "t", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2, "size": "1 MB"}],
}
TP = TopicPartition("t", 0)


def moved(state) -> tuple:
    """A target for t-0 that swaps one replica for the broker it does not have."""
    replicas = state.partitions[TP].replicas
    spare = next(b for b in sorted(state.brokers) if b not in replicas)
    return replicas[:-1] + (spare,)


# --- in process ------------------------------------------------------------------------------


def test_a_lagging_broker_answers_from_the_cluster_as_it_was_and_catches_up():
    c = SimulatedCluster.from_scenario(S.from_document(DOC))
    before = c.state.partitions[TP].replicas
    c.inject(1, "lag", seconds=2.0)
    target = moved(c.state)
    c.alter_reassignments({TP: target})
    while c.state.partitions[TP].reassigning:
        c.advance(0.1)
    c.advance(0.5)  # the copy of 1 MB is done and the reassignment completed well within the lag
    assert c.state.partitions[TP].replicas == target and not c.state.partitions[TP].reassigning
    assert c.metadata_view(1).partitions[TP].replicas == before  # broker 1 has not applied it yet
    assert c.metadata_view(2).partitions[TP].replicas == target  # the others have
    looks = [c.observe([TP]).partitions[TP] for _ in range(4)]  # in process: each look from the next live broker
    assert [p.replicas for p in looks] == [before, target, target, target]
    assert not any(p.reassignment_in_progress for p in looks)  # what is in progress is the controller's
    c.advance(2.0)
    assert c.metadata_view(1).partitions[TP].replicas == target
    c.inject(1, "lag", seconds=0)
    assert c.metadata_view(1) is c.state


def test_the_sim_keeps_kraft_leader_epochs():
    c = SimulatedCluster.from_scenario(S.from_document(DOC))
    p = c.state.partitions[TP]
    epoch = p.leader_epoch
    c.alter_reassignments({TP: p.replicas + (next(b for b in sorted(c.state.brokers) if b not in p.replicas),)})
    assert c.state.partitions[TP].leader_epoch == epoch  # replicas only added: no bump
    c.advance(2.0)
    c.alter_reassignments({TP: p.replicas})  # drops the replica again: a bump
    c.advance(1.0)
    assert c.state.partitions[TP].replicas == p.replicas and c.state.partitions[TP].leader_epoch == epoch + 1


def test_a_hung_broker_is_fenced_after_the_session_timeout_and_registers_again_when_it_resumes():
    c = SimulatedCluster.from_scenario(S.from_document(DOC))
    c.inject(3, "hang")
    assert c.is_hung(3) and c.state.alive(3)
    c.advance(BROKER_SESSION_TIMEOUT - 0.5)
    assert c.state.alive(3)
    c.advance(1.0)
    assert not c.state.alive(3) and c.is_hung(3)  # fenced: out of every ISR, no longer leads
    assert all(3 not in p.isr or p.isr == {3} for p in c.state.partitions.values())
    c.inject(3, "resume")
    assert c.state.alive(3) and not c.is_hung(3)


# --- through the Kafka front ---------------------------------------------------------------------


@pytest.fixture
def front():
    with kafka_front(DOC, speed=1) as kafka:
        yield kafka


def send(sock, request, version, correlation=7):
    request.with_header(correlation_id=correlation, client_id="faults-test")
    sock.sendall(request.encode(header=True, framed=True))


def receive(sock, response_cls, version):
    def read(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", read(4))
    return response_cls.decode(read(size), version=version, header=True)


def metadata(front, broker):
    with socket.create_connection(("127.0.0.1", front.ports[broker]), timeout=10) as s:
        send(s, MetadataRequest(version=12, topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                                allow_auto_topic_creation=False), 12)
        answer = receive(s, MetadataResponse, 12)
    (topic,) = answer.topics
    p = next(p for p in topic.partitions if p.partition_index == 0)
    return tuple(p.replica_nodes), p.leader_epoch


def in_progress(front, broker):
    with socket.create_connection(("127.0.0.1", front.ports[broker]), timeout=10) as s:
        send(s, ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=None), 0)
        answer = receive(s, ListPartitionReassignmentsResponse, 0)
    return [(t.name, p.partition_index) for t in answer.topics for p in t.partitions]


def test_the_front_answers_metadata_from_the_broker_asked_and_reassignments_from_the_controller(front):
    sim = front.sim
    with sim.lock:
        before = sim.cluster.state.partitions[TP].replicas
        sim.cluster.inject(2, "lag", seconds=3.0)
        target = moved(sim.cluster.state)
        sim.cluster.alter_reassignments({TP: target})
    wait_for(lambda: metadata(front, 1)[0] == target and not in_progress(front, 1), 10,
             "the controller to complete the move")
    replicas, _epoch = metadata(front, 2)
    assert replicas != target and set(replicas) >= set(before)  # broker 2 still shows RS, or the replicas before
    assert in_progress(front, 2) == []  # the torn look: nothing in progress, and the old replicas
    wait_for(lambda: metadata(front, 2)[0] == target, 10, "broker 2 to catch up")
    assert metadata(front, 2)[1] == metadata(front, 1)[1]  # the same leader epoch, once caught up


def test_a_hung_broker_keeps_its_connections_reads_requests_and_answers_none_until_it_resumes(front):
    sim = front.sim
    with socket.create_connection(("127.0.0.1", front.ports[3]), timeout=10) as s:
        with sim.lock:
            sim.cluster.inject(3, "hang")
        send(s, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False), 12, correlation=1)
        s.settimeout(1.0)
        with pytest.raises(socket.timeout):
            s.recv(4)  # no answer, and the connection is not closed (recv would return b"")
        with socket.create_connection(("127.0.0.1", front.ports[3]), timeout=1.0) as other:  # accepted
            send(other, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False), 12)
            with pytest.raises(socket.timeout):
                other.recv(4)
        assert metadata(front, 1)[0]  # the other brokers answer
        with sim.lock:
            sim.cluster.inject(3, "resume")
        s.settimeout(10)
        answer = receive(s, MetadataResponse, 12)  # the request read meanwhile is answered
        assert answer.header.correlation_id == 1 and {b.node_id for b in answer.brokers} == {1, 2, 3, 4}


def test_a_hung_broker_is_fenced_on_the_clock_yet_keeps_its_listener(front):
    sim = front.sim
    with sim.lock:
        sim.cluster.inject(3, "hang")
    wait_for(lambda: 3 not in {b.node_id for b in _brokers(front, 1)}, BROKER_SESSION_TIMEOUT + 10,
             "the controller to fence broker 3")
    time.sleep(0.3)  # the front follows liveness every 0.1 s: a fenced broker that hangs keeps listening
    with socket.create_connection(("127.0.0.1", front.ports[3]), timeout=1.0) as s:
        send(s, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False), 12)
        with pytest.raises(socket.timeout):
            s.recv(4)
    with sim.lock:
        sim.cluster.inject(3, "resume")
    wait_for(lambda: 3 in {b.node_id for b in _brokers(front, 1)}, 10, "broker 3 to register again")


def _brokers(front, broker):
    with socket.create_connection(("127.0.0.1", front.ports[broker]), timeout=10) as s:
        send(s, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False), 12)
        return receive(s, MetadataResponse, 12).brokers
