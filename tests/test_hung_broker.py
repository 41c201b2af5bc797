"""Issue 27, defect 9: one broker stops answering (SIGSTOP) and the engine must neither stop nor stay
silent. The running engine (a Faust worker, its event log on the embedded broker) against the simulated
cluster's Kafka front through the real Kafka adapter (``--cluster kafka://``); the engine's clients
bootstrap from the very broker that hangs, as the decider's clients did from broker 3 on the real
cluster. The hung broker accepts connections and reads requests and answers none
(``engine.sim.kafka_front``); the controller fences it 9 s later (KRaft's session timeout).

Checked: the broker reaches /status (``brokers_unresponsive`` and an attention entry naming it and the
steps that need it) within a bound, /metrics has it, a move that does not need it completes while it
hangs, and after it resumes the request completes exactly."""

from __future__ import annotations

import time
import urllib.request

import pytest

from engine.cluster.remote import RemoteCluster
from engine.core import events as ev
from engine.core.commands import PartitionTarget
from engine.kafka.broker_profile import profile
from engine.log.eventlog import Publisher
from tests.engine_harness import EventTail, SimCluster, Worker, get_json, wait_for

EMBEDDED = profile("embedded")
HUNG = 3
BROKER_DEADLINE = 1.0
POLL = 0.2
NAMED_WITHIN = 8.0  # s: the broker deadline, a probe interval and a few polls, with room for a loaded machine
NEED = [0, 1]  # partitions that move to the hung broker
FREE = [2, 3, 4, 5]  # partitions that never touch it
DOC = {
    "name": "hung-broker", "seed": 3,
    "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4, 5)],
    "topics": [{"name": "t", "min_insync_replicas": 2, "assignment": (
        [{"replicas": [1, 2, 4], "size": "40 MB"} for _ in NEED]
        + [{"replicas": [2, 1, 4], "size": "20 MB"} for _ in FREE])}],
}
TARGETS = tuple([PartitionTarget("t", p, (1, 2, HUNG)) for p in NEED] + [PartitionTarget("t", p, (2, 1, 5)) for p in FREE])


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.cleanup()


def test_a_hung_broker_is_named_within_a_bound_and_moves_that_do_not_need_it_complete(broker, topics, tmp_path,
                                                                                        procs):
    sim = SimCluster(DOC, speed=1, tmp_path=tmp_path)
    procs.append(sim)
    bootstrap = sim.kafka[len("kafka://"):].split(",")
    only_hung = f"kafka://{bootstrap[HUNG - 1]}"  # the addresses are in broker id order
    prefix = topics.events[: -len("events")]
    worker = Worker(broker, prefix, only_hung, poll=POLL,
                    extra=("--broker-deadline", str(BROKER_DEADLINE), "--call-deadline", "1"))
    procs.append(worker)
    worker.wait_active()
    tail = EventTail(broker, topics.events)
    with Publisher(broker.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
        p.change_throttle(8_000_000)  # copies of seconds: some are queued when the broker hangs
        p.submit(TARGETS, request_id="r")
        wait_for(lambda: {e.tp.partition for e in tail.payloads(ev.StepStarted)} & set(NEED), 60,
                 "a step into the broker that will hang to start")
        RemoteCluster(sim.url).inject(HUNG, "hang")
        hung_at = time.monotonic()
        status = wait_for(lambda: (s := worker.active()) and any(u["broker"] == HUNG for u in s["brokers_unresponsive"])
                          and s, NAMED_WITHIN + 30, f"broker {HUNG} in /status")
        named_after = time.monotonic() - hung_at
        print(f"broker {HUNG} named in /status {named_after:.2f} s after it hung; calls left waiting: "
              f"{status['cluster_calls_waiting']}; blocked: {status['blocked']}; attention: {status['attention'][0]}")
        assert named_after <= NAMED_WITHIN, named_after
        entry = next(a for a in status["attention"] if a["kind"] == "broker")
        assert entry["title"].startswith(f"broker {HUNG} does not answer") and entry["severity"] == "error"
        assert any("in flight need" in line and "cannot finish" in line for line in entry["lines"]), entry
        with urllib.request.urlopen(worker.web + "/metrics") as answer:
            assert f'kreassign_broker_unresponsive_seconds{{broker="{HUNG}"}}' in answer.read().decode()
        assert f"broker {HUNG} has not answered" in worker.output()  # the engine's log names it too
        # every move that does not need the hung broker completes while it hangs (fenced 9 s in), and none
        # that needs it does
        wait_for(lambda: {e.tp.partition for e in tail.payloads(ev.PartitionCompleted)} >= set(FREE), 90,
                 f"the moves that do not need broker {HUNG}")
        print(f"every move that does not need broker {HUNG} completed {time.monotonic() - hung_at:.2f} s after it hung")
        assert not {e.tp.partition for e in tail.payloads(ev.PartitionCompleted)} & set(NEED)
        unreachable = [e.reason for e in tail.payloads(ev.ClusterUnreachable)]
        print(f"ClusterUnreachable while it hung: {unreachable}")
        assert len(unreachable) <= 4, unreachable  # said when it changes, not at every tick
        RemoteCluster(sim.url).inject(HUNG, "resume")
    wait_for(lambda: any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()) or worker._check(), 120,
             "the request to complete once the broker answers again")
    empty = {"leader": {}, "follower": {}, "leader_rate": {}, "follower_rate": {}, "log_dirs_rate": {}}
    wait_for(lambda: sim.state()["throttles"] == empty, 60, "no throttle left (a removal sent to a broker that did "
             "not answer is retried)")
    replicas = {(p["topic"], p["partition"]): tuple(p["replicas"]) for p in get_json(sim.url + "/v1/snapshot")["partitions"]}
    assert all(replicas[(t.topic, t.partition)] == t.replicas for t in TARGETS), replicas
    assert not [e for e in tail.payloads(ev.StepFailed) if "outside kreassign" in e.reason]
    assert sim.state()["under_min_isr_ever"] == []
    tail.close()
    assert worker.stop() == 0
