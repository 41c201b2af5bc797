"""The decider (engine/runtime/decider.py) in process: the simulated cluster on a virtual clock, the
events log in memory, and crashes at seeded random points (a BaseException out of the cluster or
the log, as a SIGKILL would cut the loop), each followed by a new decider recovering from the log.

These are the hand-written stories; the fault simulator (engine/whatif/fuzz, tests/test_fuzz.py)
draws crashes at the same points (before, halfway through and after an append, before and after a
cluster call) together with every other fault from a seed."""

import random

import pytest

from engine.core import events as ev
from engine.core.adaptive import AdaptiveThrottle
from engine.core.commands import Cancel, ChangeLimits, ChangeThrottle, Pause, PartitionTarget, Resume, Submit
from engine.runtime.decider import Decider, MemoryLog, Retry
from engine.runtime.executor import recovery_actions
from engine.core.actions import RemoveThrottles
from engine.core.outcomes import Refused, Unavailable
from engine.core.partition import TopicPartition
from engine.log.replay import fold_log
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster
from engine.core.state import COMPLETED, EMPTY, READY
from engine.core.throttles import ThrottleSet, ThrottledReplica
from engine.views import tables as views
from engine.whatif.fuzz.world import Crash  # the process dies here (shared with the fault simulator)


class Recorder:
    """The simulated cluster, recording every alter, and dying when told to."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster
        self.alters: list[tuple[TopicPartition, tuple]] = []
        self.calls = 0
        self.die_at: int | None = None
        self.down = False
        self.kill_on: str | None = None  # the name of a method at which the process dies

    def _call(self):
        self.calls += 1
        if self.die_at is not None and self.calls >= self.die_at:
            self.die_at = None
            raise Crash()

    def observe(self, partitions=None):
        if self.down:
            return Unavailable("down")
        self._call()
        return self.cluster.observe(partitions)

    def snapshot(self):
        return self.cluster.snapshot()

    def alter_reassignments(self, targets):
        if self.down:
            return {tp: Unavailable("down") for tp in targets}
        self._call()
        result = self.cluster.alter_reassignments(targets)
        self.alters.extend(targets.items())
        return result

    def __getattr__(self, name):
        attr = getattr(self.cluster, name)
        if not callable(attr) or self.down is False:
            def call(*a, **k):
                if name == self.kill_on:
                    raise Crash()
                self._call()
                return attr(*a, **k)
            return call
        return lambda *a, **k: Unavailable("down")


class DyingLog(MemoryLog):
    def __init__(self):
        super().__init__()
        self.die_at: int | None = None
        self.appends = 0

    def append(self, events):
        self.appends += 1
        if self.die_at is not None and self.appends >= self.die_at:
            self.die_at = None
            events = list(events)
            cut = len(events) // 2
            super().append(events[:cut])  # a batch cut short
            raise Crash()
        return super().append(events)


def decommission(partitions=40, seed=3, **extra):
    return S.from_document({
        "seed": seed, "brokers": {"count": 6, "racks": ["a", "b", "c"]},
        "topics": [{"name": "t", "partitions": partitions, "replication_factor": 3, "min_insync_replicas": 2,
                    "size": "200 MB", "produce_rate": "100 kB/s"}],
        "reassignment": {"kind": "decommission", "brokers": [2]}, "throttle": "20 MB/s", **extra,
    })


def run_with_kills(sc, kills, seed, limits=None, max_rounds=5000):
    rng = random.Random(seed)
    cluster = Recorder(SimulatedCluster.from_scenario(sc))
    log = DyingLog()
    persisted = None  # what the worker's table holds: the last executed marker written after an input
    d = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d.recover(persisted)
    inputs = ([ChangeLimits(limits)] if limits else []) + [Submit("r1", tuple(sc.targets))]
    survived = 0
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        if survived < kills and cluster.die_at is None and log.die_at is None and rng.random() < 0.5:
            if rng.random() < 0.5:
                cluster.die_at = cluster.calls + rng.randint(1, 3)
            else:
                log.die_at = log.appends + rng.randint(1, 3)
        try:
            if inputs:
                d.decide(inputs[0])
                inputs.pop(0)
            else:
                d.tick()
            persisted = d.executed
        except Crash:
            survived += 1
            cluster.die_at = log.die_at = None
            d = Decider(log, cluster, clock=lambda: cluster.cluster.time)
            d.recover(persisted)
            continue
        r = d.state.requests.get("r1")
        if r is not None and r.status == COMPLETED and not inputs:
            break
        cluster.cluster.advance(1.0)
    return d, cluster, log, survived


def check_log(log, cluster, target):
    payloads = [e.payload for e in log.records]
    content = {}
    for e in payloads:
        if isinstance(e, ev.StepPlanned):
            key = (e.request_id, e.tp, e.number)
            assert content.setdefault(key, e.step) == e.step, f"step {key} planned twice with different content"
    # every alter the cluster received is a planned step, and per partition they go forward only
    planned_order: dict = {}
    for e in payloads:
        if isinstance(e, ev.StepPlanned):
            planned_order.setdefault(e.tp, []).append(e.step.tr)
    seen: dict = {}
    for tp, tr in cluster.alters:
        seq = seen.setdefault(tp, [])
        if not seq or seq[-1] != tr:
            seq.append(tr)
    for tp, seq in seen.items():
        assert seq == planned_order[tp], (tp, seq, planned_order[tp])
    s = cluster.cluster.state
    for tp, replicas in target.items():
        assert s.partitions[tp].replicas == replicas and not s.partitions[tp].reassigning, tp
    assert s.throttles.is_empty(), s.throttles
    assert not s.stats.under_min_partitions


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_crashes_at_random_points_converge_exactly_to_the_target(seed):
    sc = decommission(seed=seed)
    d, cluster, log, survived = run_with_kills(sc, kills=25, seed=seed, limits={"max_partitions_in_flight": 2})
    assert survived >= 20
    assert d.state.requests["r1"].status == COMPLETED
    assert d.state.requests["r1"].count(COMPLETED) == len(sc.targets)
    check_log(log, cluster, sc.target_assignment())
    replayed = fold_log(log.read())[0]
    assert views.rows(replayed) == views.rows(d.state)


def test_recovery_removes_throttles_logged_removed_but_not_carried_out():
    entry = ThrottledReplica("t", 0, 3)
    removed = ThrottleSet(frozenset({entry}), frozenset(), frozenset({3}), frozenset())
    todo = recovery_actions([removed], EMPTY)
    assert todo == [RemoveThrottles(removed)]
    kept = EMPTY._replace(throttles=ThrottleSet(frozenset({entry}), frozenset(), frozenset({3}), frozenset(), 10))
    assert not any(isinstance(a, RemoveThrottles) for a in recovery_actions([removed], kept))


def started(partitions):
    """A decider recovered from an empty log, on a decommission scenario's simulated cluster."""
    sc = decommission(partitions=partitions)
    cluster = Recorder(SimulatedCluster.from_scenario(sc))
    log = MemoryLog()
    d = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d.recover(None)
    return sc, cluster, log, d


def test_a_crash_between_logging_and_removing_a_throttle_leaks_nothing():
    sc, cluster, log, d = started(6)
    d.decide(Submit("r1", tuple(sc.targets)))
    cluster.kill_on = "remove_throttles"  # the process dies when it is about to remove a throttle
    marker = d.executed
    while True:
        marker = d.executed
        cluster.cluster.advance(2.0)
        try:
            d.tick()
        except Crash:
            break
    assert isinstance(log.records[-1].payload, ev.ThrottlesRemoved) or any(
        isinstance(e.payload, ev.ThrottlesRemoved) for e in log.records[-5:])
    assert not cluster.cluster.state.throttles.is_empty()  # the removal was logged, not carried out
    cluster.kill_on = None
    d2 = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d2.recover(marker)
    in_force = d2.state.throttles
    t = cluster.cluster.state.throttles
    on_cluster = {(topic, p, b) for topic, e in t.follower.items() for p, b in e}
    assert on_cluster == {(r.topic, r.partition, r.broker) for r in in_force.follower}


def test_a_refused_reassertion_after_a_restart_forgets_no_throttle_that_is_set():
    """N1 of the fault simulator (seeds 93, 967): a recovering decider set again every throttle in force
    and, when throttle changes were refused, recorded them all as not in force, though they were set
    long before the restart (a refused change changes nothing): the steps needing them were held, and
    the read-back later called them left over. Only what the log applied after the last event known
    carried out is set again; the rest stays in force."""
    sc, cluster, log, d = started(6)
    d.decide(Submit("r1", tuple(sc.targets)))
    d.tick()
    assert d.state.steps and not d.state.throttles.is_empty()
    marker, in_force = d.executed, d.state.throttles
    changes = []

    def refused(throttles):
        changes.append(throttles)
        return Refused("POLICY_VIOLATION", "config changes are refused")

    cluster.apply_throttles = refused
    d2 = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d2.recover(marker)
    assert changes == []  # every throttle in force was applied before the marker: nothing to set again
    assert d2.state.throttles == in_force and d2.state.throttle_failed.is_empty()
    assert not [e for e in log.records if isinstance(e.payload, ev.ActionFailed)]
    # without a marker (unknown), everything in force is set again, and a refusal says so
    d3 = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d3.recover("no-such-event")
    assert changes and not d3.state.throttle_failed.is_empty()


def test_the_look_a_submit_takes_is_stamped_with_the_clock():
    """Seed 3773 of the fault simulator: the look a submit takes at partitions nobody watches had no time,
    and a look without a time is judged without the guards against a lagging broker's metadata (it
    confirms at once): a completed step's RS, read from a lagging broker, became the new request's
    original replicas and its first step copied a dropped replica back. It is stamped like a tick's."""
    sc, cluster, log, d = started(4)
    d.decide(Submit("r1", tuple(sc.targets)))
    looks = [e.payload for e in log.records if isinstance(e.payload, ev.PartitionObserved)]
    assert looks and all(x.at == cluster.cluster.time for x in looks), looks[:2]


def test_commands_change_nothing_but_what_they_say_and_a_bad_one_is_rejected():
    sc, cluster, _log, d = started(4)
    d.decide(Pause())
    d.decide(Submit("r1", tuple(sc.targets)))
    d.tick()
    assert not d.state.steps  # paused: nothing starts
    out = d.decide(Submit("r1", (PartitionTarget("t", 0, (9, 8, 7)),)))
    assert [type(e.payload) for e in out] == [ev.CommandRejected]
    d.decide(Resume())
    d.tick()
    assert d.state.steps
    d.decide(ChangeThrottle(None))
    assert d.state.throttles.is_empty() and cluster.cluster.state.throttles.is_empty()


def test_a_submit_waits_for_its_partitions_to_be_observed():
    sc, cluster, _log, d = started(4)
    cluster.down = True
    with pytest.raises(Retry, match="cannot observe"):
        d.decide(Submit("r1", tuple(sc.targets)))
    assert "r1" not in d.state.requests


def test_cancel_during_a_broker_outage_follows_the_core():
    sc, cluster, _log, d = started(8)
    d.decide(Submit("r1", tuple(sc.targets)))
    d.tick()
    assert d.state.steps
    cluster.cluster.inject(4, "down")
    cluster.cluster.advance(1.0)
    d.tick()
    out = d.decide(Cancel("r1"))
    kinds = {type(e.payload) for e in out}
    assert ev.CancelRequested in kinds and (ev.PartitionCancelled in kinds or ev.CancelSkipped in kinds)


def adaptive_scenario(network, throttle):
    return S.from_document({
        "seed": 5, "brokers": {"count": 6, "racks": ["a", "b", "c"], "network_in": network, "network_out": network},
        "topics": [{"name": "t", "partitions": 40, "replication_factor": 3, "size": "500 MB", "produce_rate": "10 kB/s"}],
        "reassignment": {"kind": "decommission", "brokers": [2]}, "throttle": throttle,
    })


def run_adaptive(sc, bounds):
    cluster = SimulatedCluster.from_scenario(sc)
    log = MemoryLog()
    d = Decider(log, cluster, clock=lambda: cluster.time, adaptive=bounds)
    d.recover(None)
    d.decide(ChangeThrottle(sc.throttle))
    d.decide(Submit("r1", tuple(sc.targets)))
    for _ in range(20000):
        d.tick()
        if d.state.requests["r1"].status == COMPLETED:
            break
        cluster.advance(1.0)
    assert d.state.requests["r1"].status == COMPLETED
    return [e.payload for e in log.records if isinstance(e.payload, ev.ThrottleRateChanged)][1:]


def test_adaptive_throttle_raises_the_rate_when_the_throttle_is_what_limits_copies():
    changes = run_adaptive(adaptive_scenario("200 MB/s", "5 MB/s"), AdaptiveThrottle(2_000_000, 40_000_000))
    assert changes and all(c.reason.startswith("adaptive") for c in changes)
    assert changes[0].rate > 5_000_000
    assert max(c.rate for c in changes) <= 40_000_000


def test_adaptive_throttle_lowers_the_rate_when_copies_get_far_less_than_it():
    changes = run_adaptive(adaptive_scenario("10 MB/s", "80 MB/s"), AdaptiveThrottle(3_000_000, 100_000_000))
    assert changes and changes[0].rate < 80_000_000 and "lowered" in changes[0].reason
    assert min(c.rate for c in changes) >= 3_000_000


def test_a_submit_records_the_sizes_of_its_partitions_once():
    sc, cluster, _log, d = started(4)
    d.decide(Submit("r1", tuple(sc.targets)))
    for t in sc.targets:
        assert d.state.observed[t.tp].size_bytes == sc.partitions[t.tp].size
    d.tick()  # later observations carry no size: the recorded one stays
    assert all(d.state.observed[t.tp].size_bytes == sc.partitions[t.tp].size for t in sc.targets)


def test_sizes_follow_the_latest_measure_in_the_log_and_forget_finished_partitions():
    """Progress in bytes: a size the decider asked for earlier must not hide a newer one the log
    recorded, and a finished partition's size is dropped (the dict would grow with every request)."""
    sc, cluster, _log, d = started(4)
    d.decide(Submit("r1", tuple(sc.targets)))
    tps = sorted(tp for tp, e in d.state.partitions.items())
    tp, done = tps[0], tps[1]
    measured = d.state.observed[tp].size_bytes
    assert measured is not None and d.sizes[tp] == measured
    grown = d.state.observed[tp]._replace(size_bytes=measured + 12_345)
    finished = d.state.partitions[done]._replace(status=COMPLETED)
    d.state = d.state._replace(observed=d.state.observed.set(tp, grown),
                               partitions=d.state.partitions.set(done, finished))
    d._refresh_sizes()
    assert d.sizes[tp] == measured + 12_345
    assert done not in d.sizes


# --- caps against the cluster's leaders, reservations (issue 27, defects 4 and 5) --------------------


def explicit(assignment, targets, brokers=8, size="200 MB", throttle="20 MB/s", limits=None):
    """A scenario of explicit partitions (topic t) and targets, on ``brokers`` brokers."""
    return S.from_document({
        "seed": 1, "brokers": [{"id": b} for b in range(brokers)],
        "topics": [{"name": "t", "assignment": [
            {"partition": p, "replicas": list(r), "size": size, "produce_rate": 0} for p, r in assignment.items()]}],
        "reassignment": {"kind": "explicit", "targets": [
            {"topic": "t", "partition": p, "replicas": list(r)} for p, r in targets.items()]},
        "throttle": throttle, **({"limits": limits} if limits else {}),
    })


def copies_out(cluster: SimulatedCluster) -> dict[int, int]:
    """Copies each broker serves now, counted on the cluster: a new replica out of the ISR fetches from
    its partition's leader."""
    out: dict[int, int] = {}
    for p in cluster.state.partitions.values():
        if p.leader is not None:
            n = sum(1 for b in p.adding if b not in p.isr)
            if n:
                out[p.leader] = out.get(p.leader, 0) + n
    return out


def drive(sc, rounds, events=None, limits=None):
    """A decider on ``sc``'s simulated cluster, one tick a second for ``rounds`` seconds; ``events``:
    second -> what to do then (``fn(cluster, decider)``). Returns the decider, the cluster and the most
    copies any one broker served at once."""
    cluster = SimulatedCluster.from_scenario(sc)
    d = Decider(MemoryLog(), cluster, clock=lambda: cluster.time)
    d.recover(None)
    d.decide(ChangeLimits(limits or dict(sc.limits)))
    d.decide(ChangeThrottle(sc.throttle))
    d.decide(Submit("r1", tuple(sc.targets)))
    most = {}
    for t in range(rounds):
        for fn in (events or {}).get(t, ()):
            fn(cluster, d)
        d.tick()
        for b, n in copies_out(cluster).items():
            most[b] = max(most.get(b, 0), n)
        cluster.advance(1.0)
    return d, cluster, most


def test_a_step_queued_before_its_leader_moved_is_charged_to_the_leader_it_has_when_it_starts():
    # t-1 waits for broker 5 (incoming cap 1) while t-0 copies into it; meanwhile t-1's leader moves from
    # broker 1 to broker 0 (1 fails and returns). When t-0 is done, t-1 and t-2 may start: both copy out
    # of broker 0, whose outgoing cap is 1. Planned from the look taken when t-1 was queued, t-1 was
    # charged to broker 1 and broker 0 served two copies at once.
    sc = explicit({0: (0, 2, 3), 1: (1, 0, 4), 2: (0, 3, 4)}, {0: (0, 2, 5), 1: (1, 0, 5), 2: (0, 3, 6)})
    limits = {"max_outgoing_moves_per_broker": 1, "max_incoming_moves_per_broker": 1}
    t1 = TopicPartition("t", 1)
    seen = []
    d, cluster, most = drive(sc, 120, {
        2: [lambda c, _d: c.inject(1, "down")], 4: [lambda c, _d: c.inject(1, "up")],
        6: [lambda c, dec: seen.append((c.state.partitions[t1].leader, dec.state.partitions[t1].status))],
    }, limits)
    assert seen == [(0, READY)]  # queued while its leader moved to broker 0
    assert max(most.values()) == 1, most
    assert d.state.requests["r1"].status == COMPLETED


def test_a_step_whose_leader_fails_mid_copy_is_charged_to_the_new_leader():
    # t-0 copies out of broker 0 into 5; broker 0 fails: broker 1 leads t-0 and serves its copy (the step
    # cannot complete before 0 returns: 0 is in its target). A request then asks t-1 to copy out of
    # broker 1 (outgoing cap 1): it waits for t-0, instead of broker 1 serving two copies at once.
    sc = explicit({0: (0, 1, 2), 1: (1, 3, 4)}, {0: (0, 1, 5)})
    second = Submit("r2", (PartitionTarget("t", 1, (1, 3, 6)),))
    t0 = TopicPartition("t", 0)
    seen = []
    d, cluster, most = drive(sc, 150, {
        3: [lambda c, _d: c.inject(0, "down")],
        5: [lambda c, dec: seen.append((c.state.partitions[t0].leader, t0 in dec.state.steps)),
            lambda _c, dec: dec.decide(second)],
        40: [lambda c, _d: c.inject(0, "up")],
    }, {"max_outgoing_moves_per_broker": 1})
    assert seen == [(1, True)]  # mid-copy, led by broker 1
    assert max(most.values()) == 1, most
    assert d.state.requests["r1"].status == COMPLETED and d.state.requests["r2"].status == COMPLETED


def test_a_reservation_never_idles_a_source_its_step_cannot_use():
    # t-0 copies into broker 5 (incoming cap 1) and cannot complete: broker 3, in its target, fails. t-1,
    # the oldest step waiting, needs broker 5 as well; t-2 copies out of the same broker 0 into broker 6,
    # which is idle. t-1 must not hold broker 0's capacity it cannot use: t-2 goes on.
    sc = explicit({0: (1, 2, 3), 1: (0, 2, 4), 2: (0, 2, 4)}, {0: (1, 2, 3, 5), 1: (0, 2, 4, 5), 2: (0, 2, 4, 6)})
    d, cluster, _most = drive(sc, 60, {3: [lambda c, _d: c.inject(3, "down")]},
                              {"max_incoming_moves_per_broker": 1})
    assert cluster.state.partitions[TopicPartition("t", 0)].reassigning  # stuck: broker 3 is down
    assert d.state.partitions[TopicPartition("t", 2)].status == COMPLETED
    assert cluster.state.partitions[TopicPartition("t", 2)].replicas == (0, 2, 4, 6)


def test_the_answers_of_a_round_of_actions_are_appended_at_once():
    """Issue 26, item 3 (the step cycle): a tick that starts n steps appends their n answers
    (StepStarted) in one append, not one append per answer: each append is a transaction (three round
    trips) before the next look."""
    sc = S.from_document({
        "seed": 1, "brokers": {"count": 4},
        "topics": [{"name": "t", "partitions": 12, "replication_factor": 3, "brokers": [1, 2, 3],
                    "size": "1 MiB", "produce_rate": 0}],
        "reassignment": {"kind": "add-broker", "brokers": [4], "threshold_percentage": 0},
        "throttle": "50 MB/s",
    })
    cluster = SimulatedCluster.from_scenario(sc)
    log = DyingLog()
    d = Decider(log, cluster, clock=lambda: cluster.time)
    d.recover(None)
    d.decide(ChangeLimits({"max_new_replicas_per_broker": 4}))
    d.decide(Submit("r", tuple(sc.targets)))
    before = log.appends
    d.tick()
    started = [e.payload for e in log.records if isinstance(e.payload, ev.StepStarted)]
    assert len(started) == 4
    batches = log.appends - before
    # the tick's observation (if it changed anything), the tick's plans and throttles, the 4 answers
    assert batches <= 3, batches
    assert len({e.recorded_at for e in log.records if isinstance(e.payload, ev.StepStarted)}) == 1


def test_a_host_clock_stepped_forward_cuts_no_grace_period_short(monkeypatch):
    """The review's finding 10. The decider stamps the core's inputs with the host's wall clock at its
    start plus the monotonic clock's elapsed time (``SteadyClock``): the host's clock stepped forward an
    hour gives the same readings as before, so an election pending since a moment ago is not given up
    (ELECTION_GRACE, 5 s) at the next tick; it is once 5 s have really passed. (It read ``time.time``:
    the grace, METADATA_SETTLE and REVERT_GRACE all passed at once.)"""
    import time as time_module

    from engine.core import retry
    from engine.core.outcomes import OK
    from engine.runtime import decider as decider_module

    host = {"wall": 1_800_000_000.0, "mono": 500.0}
    monkeypatch.setattr(time_module, "time", lambda: host["wall"])
    monkeypatch.setattr(time_module, "monotonic", lambda: host["mono"])
    monkeypatch.setattr(decider_module, "STEADY", getattr(decider_module, "SteadyClock", lambda: None)(),
                        raising=False)  # this process's clock, first read below

    def passes(seconds):
        host["wall"] += seconds
        host["mono"] += seconds

    sim = SimulatedCluster.from_scenario(S.from_document({
        "brokers": [{"id": b} for b in range(1, 5)], "throttle": "none", "replica_creation_time": 0,
        "topics": [{"name": "t", "assignment": [{"partition": 0, "replicas": [1, 2, 3], "size": 1000,
                                                 "produce_rate": 0}]}]}))

    class ElectionsLost:
        """The simulated cluster, whose preferred-leader elections are accepted and never happen."""

        def __getattr__(self, name):
            return getattr(sim, name)

        def elect_preferred_leaders(self, partitions):
            return {tp: OK for tp in partitions}

    d = Decider(MemoryLog(), ElectionsLost())  # as the worker builds it: no clock given
    d.recover(None)
    assert d.clock() == 1_800_000_000.0
    d.decide(Submit("r", (PartitionTarget("t", 0, (4, 1, 2)),), steps="whole"))  # 1 leads on: 4 is elected
    for _ in range(10):
        passes(0.5)
        sim.advance(0.5)
        d.tick()
        if d.state.elections:
            break
    assert d.state.elections, [(type(e.payload).__name__, getattr(e.payload, "reason", "")) for e in d.recent]
    [since] = [el.since for el in d.state.elections.values()]
    assert since == host["wall"]
    host["wall"] += 3600.0  # NTP steps the host's clock an hour forward
    passes(1.0)
    sim.advance(1.0)
    d.tick()
    lost = [e.payload for e in d.recent if isinstance(e.payload, ev.ActionFailed) and e.payload.code == "ELECTION_LOST"]
    assert not lost and d.clock() == since + 1.0
    passes(retry.ELECTION_GRACE)
    sim.advance(retry.ELECTION_GRACE)
    d.tick()
    lost = [e.payload for e in d.recent if isinstance(e.payload, ev.ActionFailed) and e.payload.code == "ELECTION_LOST"]
    assert lost and lost[0].at == since + 1.0 + retry.ELECTION_GRACE
