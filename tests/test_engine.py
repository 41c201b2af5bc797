"""The running engine (Faust workers) against the embedded broker (the event log) and a sim-cluster
process reached over the Kafka protocol through the engine's real Kafka adapter (``--cluster kafka://``):
SIGKILLs at seeded random points, failover between two workers, a broker outage, fuzzed and
unsigned commands, and replay of the events topic against the live tables."""

from __future__ import annotations

import json
import random
import urllib.request
from collections import defaultdict

import pytest
from confluent_kafka import Producer

from engine.core import events as ev
from engine.views import tables as views
from engine.kafka.broker_profile import profile
from engine.core.cancellation import skip_reason
from engine.log.codec import codec_for
from engine.core.commands import PartitionTarget
from engine.log.envelope import CommandEnvelope, command_key, new_id, now
from engine.log.eventlog import Publisher
from engine.core.partition import TopicPartition
from engine.cluster.remote import RemoteCluster
from engine.log.replay import fold_log, replay
from engine.kafka.client_config import ClientConfig
from engine.sim import scenario as S
from engine.log.signing import SigningKey
from engine.views.summary import summarize
from tests.engine_harness import EventTail, SimCluster, Worker, get_json, read_dead_letters, wait_for

EMBEDDED = profile("embedded")


def scenario_doc(partitions, brokers=4, size="60 MB", seed=11, **extra):
    return {
        "name": "engine-test", "seed": seed, "brokers": {"count": brokers},
        "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3, "min_insync_replicas": 2,
                    "size": size, "produce_rate": "10 kB/s"}],
        "reassignment": {"kind": "decommission", "brokers": [brokers]}, "throttle": "20 MB/s", **extra,
    }


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.cleanup()


def publisher(broker, topics, **kw) -> Publisher:
    return Publisher(broker.bootstrap, prefix=topics.events[: -len("events")], profile=EMBEDDED, **kw)


def check_run(tail, sim, request_id, targets):
    """Exactly the target, no step content twice, alters only of planned steps and in step order,
    no throttle left, never under min.insync.replicas."""
    payloads = tail.payloads()
    done = [e for e in payloads if isinstance(e, ev.RequestCompleted) and e.request_id == request_id]
    assert done and done[-1].completed == len(targets), done
    content, order = {}, defaultdict(list)
    for e in payloads:
        if isinstance(e, ev.StepPlanned):
            key = (e.request_id, e.tp, e.number)
            assert content.setdefault(key, e.step) == e.step, f"step {key} planned twice with different content"
            order[e.tp].append(e.step.tr)
    seen = defaultdict(list)
    for a in sim.alters():
        tp, tr = TopicPartition(a["topic"], a["partition"]), tuple(a["replicas"])
        if not seen[tp] or seen[tp][-1] != tr:
            seen[tp].append(tr)
    for tp, trs in seen.items():
        assert trs == order[tp], (tp, trs, order[tp])
    snapshot = {(p["topic"], p["partition"]): p for p in _snapshot(sim)}
    for t in targets:
        p = snapshot[(t.topic, t.partition)]
        assert tuple(p["replicas"]) == t.replicas and not p.get("adding") and not p.get("removing"), p
    state = sim.state()
    assert state["throttles"] == {"leader": {}, "follower": {}, "leader_rate": {}, "follower_rate": {}, "log_dirs_rate": {}}, state
    assert state["under_min_isr_ever"] == [] and state["min_isr_headroom"] >= 0, state
    return payloads


def _tp(text: str) -> TopicPartition:
    topic, n = text.rsplit("-", 1)
    return TopicPartition(topic, int(n))


def _snapshot(sim):
    return get_json(sim.url + "/v1/snapshot")["partitions"]


def check_replay_equals_live(broker, topics, worker):
    prefix = topics.events[: -len("events")]
    replayed = replay(ClientConfig().with_bootstrap(broker.bootstrap), prefix=prefix, profile=EMBEDDED).state
    live = wait_for(worker.active, 30, "the live status")
    tables = wait_for(lambda: get_json(worker.web + "/tables"), 10, "the live tables")
    expected = {name: views.present(rows) for name, rows in views.rows(replayed).items()}
    assert {name: tables[name] for name in views.TABLES} == json.loads(json.dumps(expected))
    summary = json.loads(json.dumps(summarize(replayed)))
    assert {k: live[k] for k in summary} == summary



def completed(tail, worker, timeout: float, sim=None) -> None:
    """Wait for the request's end; if it does not come, say what the engine was waiting for (its status, the
    end of its log, and the cluster's side of its steps in flight), not only that it timed out."""
    try:
        wait_for(lambda: any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()) or worker._check(),
                 timeout, "the request to complete")
    except AssertionError as e:
        status = worker.status() or {}
        cluster = ""
        if sim is not None:  # the simulated cluster as it stands, kept beside the test's scenario
            from tests.engine_harness import get_json
            path = sim.scenario_path.with_name("cluster-at-timeout.json")
            path.write_text(json.dumps(get_json(sim.url + "/v1/snapshot"), indent=1))
            cluster = str(path)
        names = {f["partition"] for f in status.get("in_flight", [])}
        seen = [f"{x.tp}: {x.state} at {x.at}" for x in tail.payloads(ev.PartitionObserved)
                if f"{x.tp.topic}-{x.tp.partition}" in names][-12:]
        raise AssertionError(f"{e}\nstatus: {json.dumps(status, default=str)[:8000]}\n"
                             f"the cluster: {cluster}\nthe log's last looks at the steps in flight:\n"
                             + "\n".join(seen) + "\n"
                             f"engine log (last 8000 characters):\n{worker.output()[-8000:]}") from None


def test_sigkill_at_random_points_during_a_500_partition_reassignment(broker, topics, tmp_path, procs):
    doc = scenario_doc(670, size="300 MB")  # every restart lets the copies in flight finish: P = 20 makes 25+
    sc = S.from_document(doc)
    targets = tuple(sc.targets)
    assert len(targets) >= 500
    sim = SimCluster(doc, speed=50, tmp_path=tmp_path)
    procs.append(sim)
    cluster = sim.kafka
    prefix = topics.events[: -len("events")]
    worker = Worker(broker, prefix, cluster)
    procs.append(worker)
    worker.wait_active()
    with publisher(broker, topics) as p:
        p.change_limits({"max_partitions_in_flight": 20, "max_incoming_moves_per_broker": 20,
                         "max_outgoing_moves_per_broker": 20})
        p.submit(targets, request_id="r1")
    tail = EventTail(broker, topics.events)
    rng = random.Random(20260101)
    thresholds = sorted(rng.sample(range(10, len(targets) - 60), 20))  # kills at points of the run's progress
    mid_run = 0
    for threshold in thresholds:
        wait_for(lambda: len(tail.payloads(ev.PartitionCompleted)) >= threshold or worker._check(), 120,
                 f"{threshold} partitions completed")
        if not any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()):
            mid_run += 1
        worker.kill()
        worker = Worker(broker, prefix, cluster)
        procs.append(worker)
        worker.wait_active()
    completed(tail, worker, 180, sim)
    assert mid_run >= 20, f"only {mid_run} kills before the request completed"
    payloads = check_run(tail, sim, "r1", targets)
    in_flight, most = set(), 0  # the limit changed before the submit holds throughout, across every restart
    for e in payloads:
        if isinstance(e, ev.StepPlanned):
            in_flight.add(e.tp)
            most = max(most, len(in_flight))
        elif isinstance(e, (ev.StepCompleted, ev.StepAborted, ev.StepFailed)):
            in_flight.discard(e.tp)
    assert 1 < most <= 20
    check_replay_equals_live(broker, topics, worker)
    tail.close()
    assert worker.stop() == 0


def test_two_workers_one_killed_the_other_takes_over(broker, topics, tmp_path, procs):
    doc = scenario_doc(80, size="200 MB")
    sc = S.from_document(doc)
    sim = SimCluster(doc, speed=20, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    a, b = Worker(broker, prefix, sim.kafka), Worker(broker, prefix, sim.kafka)
    procs.extend([a, b])
    active = wait_for(lambda: (a if a.active() else None) or (b if b.active() else None), 60, "one decider")
    standby = b if active is a else a
    wait_for(lambda: standby.status() is not None, 30, "the standby's web server")
    assert standby.status()["active"] is False
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as p:
        p.submit(tuple(sc.targets), request_id="r2")
        wait_for(lambda: len(tail.payloads(ev.StepCompleted)) >= 5, 60, "five steps completed")
        active.kill()
        standby.wait_active(60)
        # pause: steps in flight finish, none starts; resume: it goes on to the end
        p.pause()
        wait_for(lambda: tail.payloads(ev.Paused), 30, "Paused")
        paused_at = len(tail.poll())
        wait_for(lambda: (standby.active() or {}).get("steps_in_flight") == 0, 60, "in-flight steps to finish")
        assert not any(isinstance(e.payload, ev.StepPlanned) for e in tail.events[paused_at:])
        p.change_throttle(30_000_000)
        p.resume()
    completed(tail, standby, 180, sim)
    rates = [e for e in tail.payloads(ev.ThrottleRateChanged) if e.reason == "operator"]
    assert [r.rate for r in rates] == [30_000_000]
    check_run(tail, sim, "r2", tuple(sc.targets))
    with urllib.request.urlopen(standby.web + "/metrics") as answer:
        metrics = answer.read().decode()
    assert "kreassign_decider_active 1.0" in metrics and "kreassign_partitions_remaining 0.0" in metrics
    tail.close()


def test_a_broker_dies_mid_step_steps_wait_and_a_cancel_follows_kip_236(broker, topics, tmp_path, procs):
    doc = scenario_doc(40, brokers=6, size="2 GB")
    sc = S.from_document(doc)
    sim = SimCluster(doc, speed=20, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    worker = Worker(broker, prefix, sim.kafka)
    procs.append(worker)
    worker.wait_active()
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as p:
        p.submit(tuple(sc.targets), request_id="r3")
        # a step the cluster has started (one not started when its broker dies fails and is planned again)
        copying = wait_for(lambda: [f for f in ((worker.active() or {}).get("in_flight") or [])
                                    if f["started"] and set(f["tr"]) - set(f["cr"])], 60, "steps copying")
        step = copying[0]
        dead = next(b for b in step["tr"] if b not in step["cr"])  # a broker this step copies to
        RemoteCluster(sim.url).inject(dead, "down")
        waiting = wait_for(lambda: [w for w in (worker.active() or {}).get("waiting_partitions", [])
                                    if str(dead) in w["reason"]], 60, f"partitions waiting for broker {dead}")
        assert all("offline" in w["reason"] or "broker" in w["reason"] for w in waiting)
        # steps that copy to the dead broker: they cannot complete before the cancel is decided (a step
        # elsewhere may complete meanwhile, and a cancel leaves a completed partition where it is)
        cancelled = sorted(_tp(s["partition"]) for s in worker.active()["in_flight"]
                           if dead in s["tr"] and dead not in s["cr"])[:5]
        assert cancelled
        before = len(tail.poll())
        p.cancel("r3", cancelled, rollback=True)
        wait_for(lambda: any(isinstance(e.payload, ev.CancelRequested) for e in tail.poll()[before:]), 30, "the cancel")
        RemoteCluster(sim.url).inject(dead, "up")
    completed(tail, worker, 240, sim)
    # every named partition was cancelled or skipped with the KIP-236 rule's reason, judged on what was observed
    records = list(enumerate(tail.events))
    cancel_at = next(i for i, e in records if isinstance(e.payload, ev.CancelRequested))
    state_then = fold_log(records[:cancel_at])[0]
    outcome: dict = {}
    for _i, e in records[cancel_at:]:
        if isinstance(e.payload, (ev.PartitionCancelled, ev.CancelSkipped)) and e.payload.request_id == "r3":
            outcome.setdefault(e.payload.tp, []).append(e.payload)
    for tp in cancelled:
        f = state_then.steps.get(tp)
        obs = state_then.observed[tp]
        rule = skip_reason(f.step.cr, obs.isr, f.step.nr, state_then.min_insync(tp.topic)) if f is not None else None
        first = outcome[tp][0]
        if rule is None:
            assert isinstance(first, ev.PartitionCancelled), (tp, outcome[tp])
        else:  # KRaft would refuse the revert: the step goes on and the cancel applies after it
            assert first == ev.CancelSkipped("r3", tp, f"cannot abort step {f.number}: {rule}")
            assert outcome[tp][1] == ev.PartitionCancelled("r3", tp, True, None)
    assert any(isinstance(o, ev.PartitionCancelled) and o.aborting for os in outcome.values() for o in os), outcome
    state = sim.state()
    assert state["throttles"] == {"leader": {}, "follower": {}, "leader_rate": {}, "follower_rate": {}, "log_dirs_rate": {}}
    assert state["under_min_isr_ever"] == []
    original = dict(sc.partitions)
    snapshot = {TopicPartition(p["topic"], p["partition"]): tuple(p["replicas"]) for p in _snapshot(sim)}
    for tp in cancelled:
        assert snapshot[tp] == original[tp].replicas  # rolled back, now or once the step it could not abort ended
    tail.close()


# --- bad input -------------------------------------------------------------------------------------------


def _bad_commands(rng: random.Random, n: int):
    """Commands that decode but the core must reject: (command, why)."""
    from engine.core import commands as c

    out = []
    for i in range(n):
        kind = rng.randrange(6)
        if kind == 0:
            out.append(c.Submit(f"bad-{i}", (PartitionTarget(f"no-such-topic-{i}", rng.randrange(100), (1, 2)),)))
        elif kind == 1:
            out.append(c.Submit(f"bad-{i}", (PartitionTarget("t", 0, tuple(rng.choice([(-1, 2), (1, 1), ()])))
                                              ,)))
        elif kind == 2:
            out.append(c.Cancel(f"unknown-{i}", None, rng.random() < 0.5))
        elif kind == 3:
            out.append(c.ChangeLimits({rng.choice(["max_partitions_in_flight", "nonsense.limit", "R"]):
                                       rng.choice([0, -5, -1])}))
        elif kind == 4:
            out.append(c.ChangeThrottle(rng.choice([0, -1, -10**9])))
        else:
            out.append(c.ChangeLimits({"keep_throttle_rates": rng.choice([2, 7])}))  # 0 or 1 only
    return out


def _corrupt(rng: random.Random, valid: bytes, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        kind = rng.randrange(4)
        if kind == 0:
            out.append(rng.randbytes(rng.randrange(0, 64)))
        elif kind == 1:
            out.append(valid[: rng.randrange(2, len(valid) - 1)])  # truncated
        elif kind == 2:
            b = bytearray(valid)
            b[rng.randrange(2, 10)] ^= 0xFF  # unknown fingerprint
            out.append(bytes(b))
        else:
            out.append(valid + rng.randbytes(rng.randrange(1, 8)))  # trailing bytes
    return out


def test_thousands_of_bad_commands_and_corrupt_messages_change_nothing(broker, topics, tmp_path, procs):
    from hypothesis import given, settings, strategies as st

    doc = scenario_doc(8)
    sim = SimCluster(doc, speed=20, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    worker = Worker(broker, prefix, sim.kafka)
    procs.append(worker)
    before = worker.wait_active()
    tail = EventTail(broker, topics.events)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    codec = codec_for(CommandEnvelope)
    totals = {"commands": 0, "corrupt": 0}

    @settings(max_examples=5, deadline=None, database=None)
    @given(seed=st.integers(0, 2**32 - 1))
    def batch(seed):
        rng = random.Random(seed)
        cmds = [type(c)(**{**{f: getattr(c, f) for f in c.__dataclass_fields__}, "command_id": new_id()})
                for c in _bad_commands(rng, 300)]
        ids = {c.command_id for c in cmds}
        valid = codec.encode(CommandEnvelope(new_id(), now(), "fuzz", cmds[0]))
        corrupt = _corrupt(rng, valid, 150)
        dead_before = len(read_dead_letters(broker, topics.dead_letters))
        for i, c in enumerate(cmds):
            producer.produce(topics.commands, key=command_key(c).encode(),
                             value=codec.encode(CommandEnvelope(c.command_id, now(), "fuzz", c)))
            if i < len(corrupt):
                producer.produce(topics.commands, key=b"fuzz", value=corrupt[i])
        assert producer.flush(30) == 0
        rejected = wait_for(lambda: (r := {e.command_id for e in tail.payloads(ev.CommandRejected)} & ids) == ids and r,
                            120, "every bad command rejected")
        assert rejected == ids
        wait_for(lambda: len(read_dead_letters(broker, topics.dead_letters)) >= dead_before + len(corrupt), 60,
                 "every corrupt message dead-lettered")
        letters = read_dead_letters(broker, topics.dead_letters)[dead_before:]
        assert len(letters) == len(corrupt) and all(l.reason for l in letters)
        totals["commands"] += len(cmds)
        totals["corrupt"] += len(corrupt)

    batch()
    assert totals["commands"] + totals["corrupt"] >= 2000
    assert worker.alive()
    after = worker.active()
    for key in ("requests", "partitions", "limits", "throttle_rate", "paused", "throttles"):
        assert after[key] == before[key], key
    kinds = {type(e).__name__ for e in tail.payloads()}
    # a flood of submits naming unknown topics makes the engine look them up; on a loaded machine its request
    # budget may pace those looks, and says so (LooksPaced, with the budget as its reason): nothing else
    assert kinds <= {"CommandRejected", "BrokersObserved", "TopicObserved", "PartitionObserved", "LooksPaced"}, kinds
    assert all(e.reason is None or "budget" in e.reason for e in tail.payloads(ev.LooksPaced))
    tail.close()


def test_signed_commands_only_when_the_engine_has_signing_keys(broker, topics, tmp_path, procs):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"ops": "s3cret", "ci": "other"}))
    doc = scenario_doc(8)
    sim = SimCluster(doc, speed=20, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    worker = Worker(broker, prefix, sim.kafka, extra=("--signing-keys", str(keys)))
    procs.append(worker)
    worker.wait_active()
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as unsigned:
        unsigned_id = unsigned.pause()
    with publisher(broker, topics, signing_key=SigningKey("ops", b"wrong")) as forged:
        forged_id = forged.pause()
    with publisher(broker, topics, signing_key=SigningKey("nobody", b"x")) as unknown:
        unknown_id = unknown.pause()
    with publisher(broker, topics, signing_key=SigningKey("ops", b"s3cret")) as signed:
        signed_id = signed.pause()
    wait_for(lambda: tail.payloads(ev.Paused), 60, "the signed pause")
    rejected = {e.command_id: e.reasons[0] for e in tail.payloads(ev.CommandRejected)}
    assert "unsigned" in rejected[unsigned_id]
    assert "bad signature" in rejected[forged_id]
    assert "unknown key" in rejected[unknown_id]
    assert [e.command_id for e in tail.payloads(ev.Paused)] == [signed_id]
    assert worker.active()["paused"] is True
    tail.close()
