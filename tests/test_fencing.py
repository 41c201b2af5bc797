"""A fenced decider (engine/runtime/worker.py's KafkaEventLog, engine/runtime/decider.py) against the embedded
broker, whose transactions fence as Kafka's do (a newer InitProducerId makes the older producer's
AddPartitionsToTxn and Produce fail with PRODUCER_FENCED): a deposed decider neither appends nor
acts; a new one waits out its predecessor's lease; snapshots written by the engine fold to what the
whole log folds to. The process-level test pauses a real decider with SIGSTOP."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KTP

from engine.core import events as ev
from engine.log import snapshot as SN
from engine.kafka.broker_profile import profile
from engine.kafka.client_config import ClientConfig
from engine.log.codec import codec_for
from engine.core.commands import Pause
from engine.runtime.decider import Decider, Deposed
from engine.log.envelope import EventEnvelope
from engine.log.eventlog import WRITER_HEADER
from engine.log.replay import START, extend, replay
from engine.log.snapshot_store import latest, resume
from engine.runtime.worker import KafkaEventLog, Settings
from tests.engine_harness import EventTail, SimCluster, Worker, get_json, wait_for
from tests.test_engine import procs, publisher, scenario_doc  # noqa: F401 - procs is a fixture
from engine.sim import scenario as S

EMBEDDED = profile("embedded")


class Recording:
    """A cluster that records every call (none may come from a deposed decider)."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append(name)
            from engine.core.outcomes import Unavailable

            return Unavailable("not a real cluster")
        return call


def settings(broker, prefix, worker, lease=1.0) -> Settings:
    return Settings(config=ClientConfig().with_bootstrap(broker.bootstrap), cluster=Recording(), prefix=prefix,
                    profile=EMBEDDED, timeout=10.0, worker_id=worker, lease=lease)


def all_records(broker, topic, isolation="read_uncommitted"):
    """Every record of the topic, committed or not (read_uncommitted): (writer header, envelope)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fencing-check", "enable.partition.eof": True,
                  "isolation.level": isolation, **EMBEDDED.consumer})
    c.assign([KTP(topic, 0, 0)])
    out = []
    try:
        while True:
            m = c.poll(5)
            assert m is not None, "no end of partition"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error().str()
                return out
            out.append((dict(m.headers() or []).get(WRITER_HEADER), codec_for(EventEnvelope).decode(m.value())))
    finally:
        c.close()


def test_a_deposed_decider_neither_appends_nor_acts(broker, topics):
    prefix = topics.events[: -len("events")]
    old = KafkaEventLog(settings(broker, prefix, "old"))
    d_old = Decider(old, old.s.cluster)
    d_old.recover(None)
    d_old.process(Pause())  # appended while it decided
    new = KafkaEventLog(settings(broker, prefix, "new"))  # another worker claims the decider's id
    calls_before = list(old.s.cluster.calls)
    with pytest.raises(Deposed, match="another decider took over"):
        d_old.decide(__import__("engine.core.commands", fromlist=["Resume"]).Resume())
    assert old.s.cluster.calls == calls_before  # nothing acted
    with pytest.raises(Deposed):
        old.renew()
    writers = [w for w, _e in all_records(broker, topics.events)]
    assert writers == [b"old"]  # the deposed decider's later append is nowhere, not even uncommitted
    d_new = Decider(new, new.s.cluster)
    d_new.recover(None)
    assert d_new.state.paused
    d_new.decide(__import__("engine.core.commands", fromlist=["Resume"]).Resume())
    assert [w for w, _e in all_records(broker, topics.events)] == [b"old", b"new"]
    old.close()
    new.close()


def test_a_decider_fenced_in_the_middle_of_an_append_is_deposed_at_once_not_after_the_delivery_timeout(broker, topics):
    """The old decider's transaction is under way (its first event delivered, its partition in the transaction)
    when another worker claims the transactional.id; its next Produce is refused (PRODUCER_FENCED). librdkafka
    makes that an abortable transaction error and holds the refused message's delivery report until
    message.timeout.ms (--timeout, 30 s): the append's own flush waited that long (30.0 s here), the decider
    thread with it, and Faust's rebalance behind the decider's input (tests below, SIGSTOP: the old worker stood
    down 30 s late). The commit flushes instead, and fails as soon as the refusal is in."""
    import dataclasses

    prefix = topics.events[: -len("events")]
    old = KafkaEventLog(dataclasses.replace(settings(broker, prefix, "old"), timeout=30.0))  # the default
    old.append([ev.Paused()])
    writer = old.writer._writer
    producer, claims = writer.producer, []

    class ClaimedMidway:  # the producer, but another worker claims between the append's two messages
        def __getattr__(self, name):
            return getattr(producer, name)

        def produce(self, *args, **kwargs):
            if kwargs.get("value") is not None and claims == [None]:
                assert producer.flush(10) == 0  # the first message is delivered: the partition is in the transaction
                claims.append(KafkaEventLog(settings(broker, prefix, "new")))
            elif not claims:
                claims.append(None)
            return producer.produce(*args, **kwargs)

    writer.producer = ClaimedMidway()
    started = time.monotonic()
    with pytest.raises(Deposed, match="another decider took over: .*newer producer"):
        old.append([ev.Resumed(), ev.Paused()])
    took = time.monotonic() - started
    writer.producer = producer
    assert len(claims) == 2, claims
    assert took < old.s.timeout / 6, f"the fenced append took {took:.1f} s"  # 30.0 s before the fix
    # the refused message is nowhere (the one delivered before the claim is in an uncommitted transaction)
    assert [type(e.payload).__name__ for _w, e in all_records(broker, topics.events)] == ["Paused", "Resumed"]
    started = time.monotonic()
    old.close()
    assert time.monotonic() - started < old.s.timeout / 6  # nothing left waiting for a delivery report
    claims[1].close()


def test_a_stalled_decider_renews_its_lease_before_acting_and_is_refused_once_replaced(broker, topics):
    prefix = topics.events[: -len("events")]
    old = KafkaEventLog(settings(broker, prefix, "old", lease=1.0))
    old.hold_until = 0
    old.writer.append([ev.Paused()])
    old.guard()  # within its lease: acts at once, no renewal
    committed = old.writer.committed_at
    old.writer._writer.committed_at = time.monotonic() - 5  # it stalled past its lease (a pause, SIGSTOP)
    old.guard()  # still the owner: the renewal commits, the lease starts again
    assert old.writer.committed_at > committed
    new = KafkaEventLog(settings(broker, prefix, "new", lease=1.0))
    old.writer._writer.committed_at = time.monotonic() - 5
    with pytest.raises(Deposed):
        old.guard()
    started = time.monotonic()
    new.guard()  # a new decider waits out its predecessor's lease before its first action
    assert time.monotonic() - new.hold_until >= -0.01 and time.monotonic() - started > 0.3
    old.close()
    new.close()


def test_a_snapshot_read_ahead_is_used_only_while_no_newer_one_came(broker, topics):
    from engine.core.commands import Resume

    prefix = topics.events[: -len("events")]
    config = ClientConfig().with_bootstrap(broker.bootstrap)
    a = KafkaEventLog(settings(broker, prefix, "a"))
    d_a = Decider(a, a.s.cluster)
    d_a.recover(None)
    d_a.process(Pause())
    first = a.write_snapshot(d_a.fold())
    ahead = latest(config, prefix=prefix, profile=EMBEDDED, timeout=10)  # what a standby read ahead
    assert ahead.assembled.snapshot.id == first["id"]
    # nothing newer since: the next decider starts from it, after one offsets request
    b = KafkaEventLog(settings(broker, prefix, "b"))
    b.warm = ahead
    d_b = Decider(b, b.s.cluster)
    d_b.recover(None)
    assert b.last_snapshot["read_ahead"] is True and b.last_snapshot["id"] == first["id"] and d_b.state.paused
    d_b.process(Resume())
    second = b.write_snapshot(d_b.fold())
    # a newer snapshot came after the read ahead: the next decider reads it and starts from it
    c = KafkaEventLog(settings(broker, prefix, "c"))
    c.warm = ahead
    d_c = Decider(c, c.s.cluster)
    d_c.recover(None)
    assert c.last_snapshot["read_ahead"] is False and c.last_snapshot["id"] == second["id"]
    assert not d_c.state.paused and d_c.events == d_b.events
    for log in (a, b, c):
        log.close()


def test_snapshots_written_by_the_engine_fold_to_the_whole_log(broker, topics, tmp_path, procs):
    doc = scenario_doc(60, size="100 MB")
    sc = S.from_document(doc)
    sim = SimCluster(doc, speed=40, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    w = Worker(broker, prefix, sim.kafka, extra=("--snapshot-every", "40"))
    procs.append(w)
    w.wait_active()
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as p:
        p.submit(tuple(sc.targets), request_id="r1")
    wait_for(lambda: tail.payloads(ev.RequestCompleted), 240, "the request to complete")
    assert w.stop() == 0  # a clean shutdown writes a last snapshot
    config = ClientConfig().with_bootstrap(broker.bootstrap)
    found = latest(config, prefix=prefix, profile=EMBEDDED, timeout=10)
    snap = found.assembled.snapshot
    assert snap is not None and not found.assembled.skipped and found.records >= 2
    _s, everything, _n = resume(config, None, prefix=prefix, profile=EMBEDDED, timeout=10)
    full = extend(START, everything)
    assert snap.fold.next_offset == full.next_offset  # the last snapshot covers everything it decided
    assert SN.canonical(snap.fold) == SN.canonical(full)
    from_snapshot = replay(config, prefix=prefix, profile=EMBEDDED, timeout=10)
    from_zero = replay(config, prefix=prefix, profile=EMBEDDED, timeout=10, from_start=True)
    assert from_snapshot.snapshot["id"] == snap.id and from_zero.snapshot is None
    assert SN.canonical(from_snapshot.state) == SN.canonical(from_zero.state)
    # a new worker starts from it and folds nothing
    w2 = Worker(broker, prefix, sim.kafka)
    procs.append(w2)
    status = w2.wait_active()
    assert status["recovery"]["from_snapshot"]["next_offset"] == snap.fold.next_offset
    assert status["recovery"]["events"] == 0
    assert status["recovery"]["snapshot"]["read_ahead"] is True  # read while it joined the group
    tail.close()


def test_sigstop_past_the_session_timeout_the_standby_takes_over_and_the_old_decider_appends_nothing(
        broker, topics, tmp_path, procs):
    doc = scenario_doc(80, size="400 MB")
    sc = S.from_document(doc)
    sim = SimCluster(doc, speed=5, tmp_path=tmp_path)
    procs.append(sim)
    prefix = topics.events[: -len("events")]
    a, b = (Worker(broker, prefix, sim.kafka, extra=("--log-level", "info")) for _ in range(2))
    procs.extend([a, b])
    active = wait_for(lambda: (a if a.active() else None) or (b if b.active() else None), 60, "one decider")
    standby = b if active is a else a
    wait_for(lambda: standby.status() is not None, 30, "the standby's web server")
    old_id, new_id = (get_json(w.web + "/status")["worker"].encode() for w in (active, standby))
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as p:
        p.submit(tuple(sc.targets), request_id="r1")
    wait_for(lambda: len(tail.payloads(ev.StepStarted)) >= 3, 60, "steps started")
    os.killpg(active.p.pid, signal.SIGSTOP)  # past the 2 s session timeout of the embedded profile
    stopped_at = time.monotonic()
    try:
        standby.wait_active(60)
        took_over = time.monotonic() - stopped_at
    finally:
        os.killpg(active.p.pid, signal.SIGCONT)
    # resumed, its timer and decider go on until Faust tells it it lost the partition: every append
    # and every action must be refused (fenced, or its lease expired and its renewal fenced)
    wait_for(lambda: (active.status() or {}).get("active") is False, 60, "the old decider to stand down")
    done = len(tail.payloads(ev.StepCompleted))

    def went_on():  # three more steps, or the whole request (the old decider may stand down only once the
        # new one has ended it: its fenced append waited ~30 s for librdkafka's delivery reports until the
        # commit flushed instead, test_a_decider_fenced_in_the_middle_of_an_append_is_deposed_at_once...)
        return len(tail.payloads(ev.StepCompleted)) >= done + 3 or tail.payloads(ev.RequestCompleted)
    try:
        wait_for(went_on, 120, "the new decider to go on")
    except AssertionError as e:  # say what each worker was doing (once: Faust's table recovery never ended)
        keys = ("decisions partition", "stops", "Recovery]: Done", "No event received", "claimed", "recovered:")
        raise AssertionError("\n".join([str(e)] + [
            f"{name} {w.status()}\n" + "\n".join(line[:240] for line in w.output().splitlines()
                                                   if any(k in line for k in keys))[-4000:]
            for name, w in (("old", active), ("new", standby))])) from None
    records = all_records(broker, topics.events)
    writers = [w for w, _e in records]
    assert new_id in writers
    first_new = writers.index(new_id)
    after = writers[first_new:]
    switches = [i for i in range(1, len(after)) if after[i] != after[i - 1]]
    old_log = active.output()
    if old_id in after:
        # Legitimate only as a later takeover: a rebalance after its resumption gave the old worker the
        # decisions partition again and it claimed the transactional id, fencing the new decider, which
        # then appends nothing more (one switch, never back); it was assigned the partition twice and did
        # not claim on its own.
        late = [(first_new + i, type(records[first_new + i][1].payload).__name__)
                for i, w in enumerate(after) if w == old_id]
        assert len(switches) == 1 and old_log.count("owns the decisions partition") >= 2 \
            and "claiming it again" not in old_log, (
            f"the old decider appended after the takeover (first new record {first_new}): {late[:20]}, "
            f"writer switches at {switches[:10]}\n"
            + "\n".join(line[:300] for line in old_log.splitlines()
                        if any(k in line for k in ("decisions partition", "stops deciding", "claiming it again"))))
    assert took_over < 30
    tail.close()


def test_a_deposed_worker_reclaims_only_when_no_other_decider_has_ticked_for_as_long():
    from types import SimpleNamespace

    from engine.runtime.worker import Engine

    w = SimpleNamespace(deposed="fenced", owns=True, deposed_at=100.0, foreign_tick_at=float("-inf"), reclaim_after=4.0)
    assert not Engine.may_reclaim(w, 103.0)  # too soon after it was deposed
    assert Engine.may_reclaim(w, 105.0)  # nobody else decides: the partition would go undecided
    w.foreign_tick_at = 103.5  # a successor's tick came in
    assert not Engine.may_reclaim(w, 105.0)
    assert not Engine.may_reclaim(w, 107.0)
    assert Engine.may_reclaim(w, 107.6)  # the successor went silent for reclaim_after
    assert not Engine.may_reclaim(SimpleNamespace(**{**vars(w), "owns": False}), 200.0)  # Faust moved it away
    assert not Engine.may_reclaim(SimpleNamespace(**{**vars(w), "deposed": None}), 200.0)  # it decides already


def test_a_worker_given_the_partition_that_faust_never_feeds_says_so_and_stops(monkeypatch):
    """Seen in the SIGSTOP test above (1 run in about 100): the resumed worker was given the decisions
    partition back, claimed, and Faust's recovery of the executor table's changelog then received no
    event for minutes, so Faust delivered the decider no input; the worker heartbeat on and held the
    partition, its /status said active, recovering, blocked null, and nobody decided. Now /status says
    why after FAUST_QUIET s, and after FAUST_GIVE_UP s without any move of Faust's recovery the worker
    stops (SIGTERM to itself) so that the group gives the partition to another worker."""
    import asyncio
    from types import MethodType, SimpleNamespace

    from engine.runtime import worker as W

    now = [100.0]
    kills = []
    monkeypatch.setattr(W, "time", SimpleNamespace(monotonic=lambda: now[0], time=time.time, sleep=time.sleep))
    monkeypatch.setattr(W, "os", SimpleNamespace(kill=lambda pid, sig: kills.append(sig), getpid=os.getpid))
    recovery = SimpleNamespace(active_offsets={"executor-changelog[0]": -1})

    def worker():
        w = SimpleNamespace(
            s=SimpleNamespace(worker_id="w", time_scale=1.0),
            app=SimpleNamespace(tables=SimpleNamespace(recovery=recovery)),
            role=None, generation=0, active=False, owns=False, deposed=None, claim=False, needs_recovery=True,
            decider=None, recovery_error=None, last_retry=None, assigned_at=None, delivered_at=float("-inf"),
            faust_mark=None, faust_moved_at=0.0, faust_said=0, gave_up=None,
            counters={"recoveries": 1, "recoveries_restarted": 0, "retries": 0})
        for name in ("on_assigned", "on_revoked", "say_role", "status", "faust_recovery_mark", "faust_stall",
                     "faust_blocked", "watch_faust", "give_up"):
            setattr(w, name, MethodType(getattr(W.Engine, name), w))
        return w

    w = worker()
    w.on_assigned(True)
    now[0] = 105.0
    w.watch_faust(now[0])
    assert asyncio.run(w.status())["blocked"] is None  # Faust may take a moment to get ready
    now[0] = 112.0
    w.watch_faust(now[0])
    status = asyncio.run(w.status())
    assert status["active"] and status["recovering"], status
    assert "Faust has delivered no input" in (status["blocked"] or ""), status
    recovery.active_offsets = {"executor-changelog[0]": 3}  # Faust's recovery reads: it is slow, not stuck
    now[0] = 115.0
    w.watch_faust(now[0])
    now[0] = 144.0
    w.watch_faust(now[0])
    assert not kills and w.active
    now[0] = 145.5  # 30.5 s since Faust's recovery last moved, 45.5 s since the assignment
    w.watch_faust(now[0])
    assert kills == [W.signal.SIGTERM] and not w.active and "Faust has delivered no input" in w.gave_up
    assert asyncio.run(w.status())["stopped"] == w.gave_up
    w.watch_faust(now[0] + 1)
    assert kills == [W.signal.SIGTERM]  # once

    fed = worker()  # Faust delivered an input after the assignment: the decider runs, nothing to say
    fed.on_assigned(True)
    fed.delivered_at = now[0] + 1  # what Engine.decide records for every input
    now[0] += 1000
    fed.watch_faust(now[0])
    assert fed.faust_stall(now[0]) is None and asyncio.run(fed.status())["blocked"] is None and len(kills) == 1
    standby = worker()  # a standby waits for nothing
    standby.on_assigned(False)
    assert standby.faust_stall(now[0]) is None


def run_a_worker(monkeypatch, at_recovery=None, first_tick=None, warm_future=None, at_claim=None):
    """A worker's ``run`` of one tick, with Faust's part played by the test: ``at_recovery[n](w,
    log, loop)`` runs (in the decider's thread) in the middle of the n-th ``Decider.recover``,
    ``first_tick(w)`` in the first tick, ``at_claim[n](w, loop)`` during the n-th claim.
    ``KafkaEventLog`` is a stand-in whose construction is a claim and whose ``close`` is final (a closed log refuses to be read, as a closed producer does);
    the worker's own methods (``claim_decider``, ``claim_early``, ``recover``, ``overtaken``) are
    the real ones. Returns the worker, the claims made, and the log each recovery read."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from types import MethodType, SimpleNamespace

    from engine.runtime import worker as W

    claims, recoveries, ticks = [], [], []
    monkeypatch.setattr(W, "RECOVERY_RETRY", 0.01)

    class Claim:  # KafkaEventLog's part here: each construction is a claim of the transactional id
        def __init__(self, s):
            claims.append(self)
            self.last_snapshot, self.unreadable, self.closed = None, [], False
            if len(claims) == 2 and warm_future is not None:
                warm_future.set_result(None)  # the read ahead ends while this claim is being made
            if len(claims) in (at_claim or {}):
                at_claim[len(claims)](w, loop)

        def close(self):
            self.closed = True

    class Recovering:
        def __init__(self, log, cluster, **kwargs):
            self.log, self.events, self.executed = log, 0, None

        def recover(self, executed):
            recoveries.append(self.log)
            if len(recoveries) > 5:
                w.active = False  # give up: the worker would retry on a closed log for ever
                raise RuntimeError("too many recoveries")
            if self.log.closed:
                raise RuntimeError("the producer is closed")
            if len(recoveries) in (at_recovery or {}):
                at_recovery[len(recoveries)](w, self.log, loop)
            return {"events": 0}

        def tick(self):
            ticks.append(self.log)
            if len(ticks) == 1 and first_tick is not None:
                first_tick(w)
            return []

    monkeypatch.setattr(W, "KafkaEventLog", Claim)
    monkeypatch.setattr(W, "Decider", Recovering)
    w = SimpleNamespace(
        s=SimpleNamespace(cluster=None, adaptive=None, verify_interval=10.0, poll_interval=1.0, fast_interval=0.1, request_budget=None,
                          worker_id="w", snapshot_every=0, time_scale=1.0),
        cluster=None, role=None, generation=0, claim=True, claimed_in=-1, event_log=None, active=True, owns=True, deposed=None,
        needs_recovery=True, decider=None, pool=ThreadPoolExecutor(max_workers=1), executor_table={},
        recovery_error=None, last_recovery=None, last_retry=None, snapshot_events=0,
        counters={"recoveries": 0, "recoveries_restarted": 0, "events": 0, "retries": 0},
        warm=None, warm_end=None, warm_future=warm_future, claim_lock=asyncio.Lock(), assigned_at=None,
        delivered_at=float("-inf"), faust_mark=None, faust_moved_at=0.0, faust_said=0, gave_up=None)
    for name in ("run", "recover", "claim_decider", "claim_early", "on_assigned", "say_role", "record", "depose",
                 "read_ahead_done", "overtaken", "given_up", "status", "faust_recovery_mark", "faust_stall",
                 "faust_blocked"):
        setattr(w, name, MethodType(getattr(W.Engine, name), w))

    async def main():
        nonlocal loop
        loop = asyncio.get_running_loop()
        await w.run(None, None)

    loop = None
    try:
        asyncio.run(main())
    finally:
        w.pool.shutdown()
    w.ticks = ticks
    return w, claims, recoveries


def assigned_again(w, log, loop, fenced=False):
    """Faust's assignment handler, run while the decider's thread is busy: the worker is given the
    decisions partition again, and its claim at the assignment (``claim_early``) starts."""
    import asyncio

    async def handler():
        w.on_assigned(True)
        asyncio.ensure_future(w.claim_early())

    asyncio.run_coroutine_threadsafe(handler(), loop).result()
    if fenced:
        raise Deposed("another decider took over: PRODUCER_FENCED")


def test_a_rebalance_during_a_recovery_makes_the_worker_claim_and_recover_again(monkeypatch):
    """Faust's assignment handler runs while a long recovery (a big log) is under way: the claim
    that recovery made may predate another worker's, so the worker must not start deciding on it."""
    w, claims, recoveries = run_a_worker(monkeypatch, at_recovery={1: assigned_again})
    assert len(claims) == 2, "the worker decided on a claim made before the rebalance"
    assert recoveries == claims and w.decider.log is claims[1] and w.counters["recoveries"] == 1
    assert not w.needs_recovery and w.generation == 1 and w.counters["recoveries_restarted"] == 1


def test_a_worker_fenced_between_two_rebalances_that_gave_it_the_partition_keeps_deciding(monkeypatch):
    """Between two rebalances the partition went to another worker for a moment, whose claim fenced
    the recovery under way; this worker owns it again now and must not stop deciding (deposed, it
    would wait two session timeouts before claiming again)."""
    w, claims, recoveries = run_a_worker(
        monkeypatch, at_recovery={1: lambda w, log, loop: assigned_again(w, log, loop, fenced=True)})
    assert w.active and w.deposed is None, f"the worker deposed itself: {w.deposed}"
    assert len(claims) == 2 and recoveries == claims and w.decider.log is claims[1]
    assert not w.needs_recovery and w.counters["recoveries_restarted"] == 1


def test_a_recovery_that_fails_while_a_rebalance_claims_anew_recovers_on_the_new_claim(monkeypatch):
    """The recovery fails (the log unreachable) while the claim made at a new assignment closes the
    log it was reading: the next attempt must read through the new claim, not retry the closed log."""
    def fail(w, log, loop):
        assigned_again(w, log, loop)
        raise RuntimeError("KafkaException: _TRANSPORT")

    w, claims, recoveries = run_a_worker(monkeypatch, at_recovery={1: fail})
    assert w.active and not w.needs_recovery, f"never recovered: {w.recovery_error}"
    assert len(claims) == 2 and recoveries == claims and w.decider.log is claims[1]
    assert w.recovery_error is None


def test_a_read_ahead_that_ends_during_a_new_claim_does_not_break_the_recovery(monkeypatch):
    """The recovery waits for the snapshot read ahead; meanwhile a rebalance gives the worker the
    partition again and its new claim is under way (no log at that moment): the recovery starts
    again on the new claim instead of failing on the log that is gone."""
    import asyncio
    from concurrent.futures import Future

    from engine.runtime import worker as W

    future = Future()  # the read ahead ends while the new claim is being made (the second claim ends it)
    original = W.Engine.read_ahead_done

    async def read_ahead_done(self):
        if self.generation == 0:  # the assignment comes while the recovery waits for the read ahead
            self.on_assigned(True)
            asyncio.ensure_future(self.claim_early())
        return await original(self)

    monkeypatch.setattr(W.Engine, "read_ahead_done", read_ahead_done)
    w, claims, recoveries = run_a_worker(monkeypatch, warm_future=future)
    assert w.active and not w.needs_recovery and w.deposed is None
    assert len(claims) == 2 and recoveries == [claims[1]] and w.decider.log is claims[1]


def test_a_decision_given_up_for_now_says_why_and_is_decided_after_a_new_claim(monkeypatch):
    """A lease that cannot be renewed in time (``Retry``): the worker claims and recovers again, and
    /status says why until then (``blocked``, ``retries``, ``last_retry``)."""
    import asyncio

    from engine.runtime.decider import Retry

    seen = []

    def slow_lease(w):
        raise Retry("the decider's lease could not be renewed in time: 3 commits each took longer than the "
                    "0.5 s lease")

    def status_while_recovering(w, log, loop):
        seen.append(asyncio.run_coroutine_threadsafe(w.status(), loop).result())

    w, claims, recoveries = run_a_worker(monkeypatch, first_tick=slow_lease, at_recovery={2: status_while_recovering})
    assert len(claims) == 2 and w.ticks == claims, "the decision was retried on the old claim"
    status = seen[0]
    assert status["recovering"] and "lease could not be renewed" in status["blocked"], status
    assert status["retries"] == 1 and "lease could not be renewed" in status["last_retry"]["reason"], status
    assert w.recovery_error is None, "a recovery that succeeded still shows as blocked"


def test_a_recovery_whose_actions_meet_an_expired_lease_counts_as_a_retry(monkeypatch):
    """The recovery re-asserts the actions in flight, each behind the lease: a ``Retry`` there is
    counted and shown like a decision's, and the next attempt claims anew."""
    from engine.runtime.decider import Retry

    def slow_lease(w, log, loop):
        raise Retry("the decider's lease could not be renewed in time")

    w, claims, recoveries = run_a_worker(monkeypatch, at_recovery={1: slow_lease, 2: slow_lease})
    assert w.counters["retries"] == 2 and "renewed in time" in w.last_retry["reason"]
    assert len(claims) == 3 and recoveries == claims and w.decider.log is claims[2]


def test_a_failed_recovery_claims_anew_before_the_next_attempt(monkeypatch):
    """A commit that timed out during the recovery may still complete in the background: the next
    attempt claims again (which settles it) before it reads the log."""
    def fail(w, log, loop):
        raise RuntimeError("KafkaException: _TIMED_OUT")

    w, claims, recoveries = run_a_worker(monkeypatch, at_recovery={1: fail})
    assert len(claims) == 2 and recoveries == claims and w.decider.log is claims[1]
    assert w.counters["recoveries_restarted"] == 0


def test_an_assignment_during_the_claim_is_followed_by_a_claim_of_its_own(monkeypatch):
    """Faust assigns the partition again while the claim is being made: that claim started before
    the assignment (another worker may have claimed in between), so the worker claims again."""
    def assigned(w, loop):
        loop.call_soon_threadsafe(w.on_assigned, True)

    w, claims, recoveries = run_a_worker(monkeypatch, at_claim={1: assigned})
    assert len(claims) == 2 and w.decider.log is claims[1], "decided on a claim made before the assignment"
    assert recoveries == [claims[1]]


def test_the_lease_counts_from_the_start_of_the_renewal_that_proved_it(monkeypatch):
    """A renewal whose commit took longer than the lease proves nothing about now: a successor may
    have claimed while it waited. The decider renews again, and gives up (Retry) rather than act."""
    from types import SimpleNamespace

    import engine.runtime.worker as W
    from engine.runtime.decider import Retry

    clock = [100.0]
    monkey_time = SimpleNamespace(monotonic=lambda: clock[0], sleep=lambda s: None, time=lambda: clock[0])

    def log_with(commit_seconds):
        elog = object.__new__(W.KafkaEventLog)
        elog.s = SimpleNamespace(lease=0.5)
        elog.hold_until = 0.0
        elog.writer = SimpleNamespace(committed_at=None)
        elog.renewals = 0

        def renew():  # a commit that starts now and takes commit_seconds
            elog.renewals += 1
            elog.writer.committed_at = clock[0]
            clock[0] += commit_seconds
        elog.renew = renew
        return elog

    monkeypatch.setattr(W, "time", monkey_time)
    fast = log_with(0.01)
    fast.guard()
    assert fast.renewals == 1
    fast.guard()  # within the lease: no renewal
    assert fast.renewals == 1
    slow = log_with(0.6)
    with pytest.raises(Retry, match="longer than the 0.5 s lease"):
        slow.guard()
    assert slow.renewals == W.RENEWALS


def test_a_standby_reads_the_snapshots_again_only_once_the_topic_grew(monkeypatch):
    """The read ahead remembers the topic's end even when it holds no usable snapshot yet (else a
    standby would read the whole topic every WARM_INTERVAL); only the first snapshot it reads is
    frozen out of the collector's reach (a standby's later reads would freeze other threads'
    garbage each time)."""
    from concurrent.futures import Future
    from types import MethodType, SimpleNamespace

    from engine.log import snapshot_store
    from engine.runtime import worker as W
    from engine.log.snapshot import Assembled

    calls = []
    ends = iter([7, 7, 9, 11])
    usable = {9: "snapshot at 9", 11: "snapshot at 11"}

    def latest(config, *, prefix, profile, timeout, unless_end=None, freeze=True):
        calls.append((unless_end, freeze))
        end = next(ends)
        if unless_end == end:
            return None
        skipped = () if end in usable else ("snapshot x: incomplete, 1 of 2 records",)
        return snapshot_store.Found(Assembled(usable.get(end), skipped), 1, 0.01, None, None, end)

    class Now:  # runs what it is given at once
        def submit(self, fn):
            fn()
            done = Future()
            done.set_result(None)
            return done

    monkeypatch.setattr(W.snapshot_store, "latest", latest)
    w = SimpleNamespace(s=SimpleNamespace(config=None, prefix="p.", profile=None, timeout=1.0), warm=None,
                        warm_end=None, warmed=False, warm_future=None, snapshot_pool=Now())
    w.warm_up = MethodType(W.Engine.warm_up, w)
    for _ in range(2):
        w.warm_up()
    assert calls == [(None, True), (7, True)] and w.warm_end == 7 and w.warm is None  # nothing read yet
    w.warm_up()
    assert calls[-1] == (7, True) and w.warm.assembled.snapshot == "snapshot at 9"  # the first one read: frozen
    w.warm_up()
    assert calls[-1] == (9, False) and w.warm.assembled.snapshot == "snapshot at 11" and w.warm_end == 11
