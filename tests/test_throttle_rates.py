"""KIP-73 rates another tool changes on a broker kreassign throttles: the throttle read-back compares each
broker's ``leader`` / ``follower.replication.throttled.rate`` with the rate kreassign has in force (the
throttle plus ``throttle_margin_pct``), not only whether one is set. A rate at another value is a
difference like a missing one: recorded (``ThrottlesDiffered``), confirmed by a read-back
``METADATA_SETTLE`` later, then set again (``ThrottlesDrifted``), saying "rate X read, Y in force".

The core on the fake cluster (whose read-back reports each broker's values, as the adapters do), the
decider's cadence (the confirming read-back comes ``METADATA_SETTLE`` after the first, not
``verify_interval``), and the real Kafka adapter against the simulated cluster's Kafka front, where
another client changes a broker's rate mid-move (time driven by hand: the cluster's clock stands still)."""

from __future__ import annotations

import pytest

from engine.core import events as ev
from engine.core.commands import ChangeLimits, ChangeThrottle, PartitionTarget, Submit, ThrottlesObserved
from engine.core.decide import METADATA_SETTLE, handle, kept_rates, rate_in_kafka
from engine.core.partition import TopicPartition
from engine.core.state import COMPLETED, fold
from engine.core.throttles import RateRead, ThrottleSet, rate_value, read_back
from engine.views.attention import attention
from engine.views.summary import describe
from tests.fake_cluster import Driver, FakeCluster

TP = TopicPartition("t", 0)
RATE = 10_000_000
OTHER = 500_000_000  # what another tool set (kafka-configs.sh --alter, or the reassign tool's --throttle)
TOPICS, BROKERS = frozenset({"t"}), frozenset(range(6))


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def started():
    """One step in flight copying (0, 1, 2) -> (0, 1, 4): broker 4 receives (follower rate), 0, 1 and 2
    serve (leader rates)."""
    c = FakeCluster({TP: (0, 1, 2)}, range(6))
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeThrottle(RATE))
    d.feed(Submit("r", (PartitionTarget("t", 0, (0, 1, 4)),)))
    d.tick()
    assert d.state.steps[TP].started
    force = d.state.throttles
    assert force.follower_brokers == {4} and 2 in force.leader_brokers
    assert c.rates[("f", 4)] == c.rates[("l", 2)] == rate_in_kafka(d.state) == force.rate
    return c, d


def read_back_now(d):
    d.feed(ThrottlesObserved(d.cluster.throttle_set(), TOPICS, BROKERS, d.now))


def test_a_rate_another_tool_changed_is_set_again_once_a_later_read_back_confirms_it():
    c, d = started()
    ours = rate_in_kafka(d.state)
    c.set_rate("leader", 2, OTHER)
    d.now += 1
    read_back_now(d)
    assert not of_type(d.events, ev.ThrottlesDrifted)  # a broker's configs may lag: recorded only
    differed = of_type(d.events, ev.ThrottlesDiffered)[-1]
    assert differed.missing.leader_brokers == {2} and not differed.missing.follower_brokers
    assert differed.missing.rate == ours and RateRead(2, OTHER, None) in differed.missing.rates
    assert c.rates[("l", 2)] == OTHER  # nothing changed yet
    d.now += METADATA_SETTLE - 1
    read_back_now(d)
    assert not of_type(d.events, ev.ThrottlesDrifted)  # too soon after the first
    d.now += 1
    read_back_now(d)
    drifted = of_type(d.events, ev.ThrottlesDrifted)
    assert len(drifted) == 1 and drifted[0].missing.leader_brokers == {2}
    assert c.rates[("l", 2)] == ours  # set again, at kreassign's rate
    line = describe(drifted[0])
    assert f"broker 2: leader.replication.throttled.rate {OTHER} read, {ours} in force" in line, line
    assert d.state.throttles_differed is None and d.state.throttles.rate == ours
    assert fold(d.events) == d.state
    d.now += METADATA_SETTLE
    read_back_now(d)  # as the log says now: nothing more
    assert len(of_type(d.events, ev.ThrottlesDrifted)) == 1 and d.state.throttles_differed is None


def test_a_follower_rate_lowered_by_another_tool_is_set_again_too():
    c, d = started()
    ours = rate_in_kafka(d.state)
    c.set_rate("follower", 4, 1_000)  # a throttle far below kreassign's would stall the copy
    read_back_now(d)
    d.now += METADATA_SETTLE
    read_back_now(d)
    drifted = of_type(d.events, ev.ThrottlesDrifted)
    assert len(drifted) == 1 and drifted[0].missing.follower_brokers == {4}
    assert c.rates[("f", 4)] == ours


def test_a_rate_read_back_at_the_rate_in_force_again_is_no_drift():
    """A read-back that lagged (or a change undone meanwhile): what the confirming read-back shows as in
    force is forgotten, nothing is set."""
    c, d = started()
    ours = rate_in_kafka(d.state)
    c.set_rate("leader", 2, OTHER)
    read_back_now(d)
    assert d.state.throttles_differed is not None
    c.set_rate("leader", 2, ours)
    d.now += METADATA_SETTLE
    applied = len(c.throttle_calls)
    read_back_now(d)
    assert not of_type(d.events, ev.ThrottlesDrifted) and d.state.throttles_differed is None
    assert len(c.throttle_calls) == applied


def test_a_rate_on_a_broker_kreassign_does_not_throttle_is_left_alone():
    c, d = started()
    c.set_rate("leader", 5, OTHER)  # another tool's throttle elsewhere
    read_back_now(d)
    d.now += METADATA_SETTLE
    read_back_now(d)
    assert not of_type(d.events, ev.ThrottlesDiffered) and not of_type(d.events, ev.ThrottlesDrifted)
    assert c.rates[("l", 5)] == OTHER


def test_a_read_back_that_gives_no_values_is_judged_on_presence_alone():
    c, d = started()
    bare = c.throttle_set()._replace(rates=())
    d.feed(ThrottlesObserved(bare, TOPICS, BROKERS, d.now))
    d.now += METADATA_SETTLE
    d.feed(ThrottlesObserved(bare, TOPICS, BROKERS, d.now))
    assert not of_type(d.events, ev.ThrottlesDiffered)


def test_kreassigns_own_rate_change_read_back_late_is_judged_afresh():
    """The operator changes the throttle: kreassign sets the new rate on every broker, which clears a
    difference recorded of those rates; a read-back still showing the old one (lag) is recorded anew, and
    one showing the new rate clears it."""
    c, d = started()
    c.set_rate("leader", 2, OTHER)
    read_back_now(d)
    assert d.state.throttles_differed is not None
    old = c.throttle_set()
    d.feed(ChangeThrottle(2 * RATE))
    new = rate_in_kafka(d.state)
    assert c.rates[("l", 2)] == new and d.state.throttles_differed is None  # the re-apply changed the piece
    d.now += 1
    d.feed(ThrottlesObserved(old, TOPICS, BROKERS, d.now))  # a broker that has not applied it yet
    assert not of_type(d.events, ev.ThrottlesDrifted)
    d.now += METADATA_SETTLE
    read_back_now(d)
    assert not of_type(d.events, ev.ThrottlesDrifted) and d.state.throttles_differed is None
    assert fold(d.events) == d.state


def test_a_difference_waiting_is_in_the_attention_list_with_the_values_read():
    c, d = started()
    ours = rate_in_kafka(d.state)
    c.set_rate("leader", 2, OTHER)
    read_back_now(d)
    entry = [a for a in attention(d.state, now=d.now) if a["kind"] == "throttles_differ"]
    assert len(entry) == 1
    assert f"broker 2: leader.replication.throttled.rate {OTHER} read, {ours} in force" in entry[0]["lines"]
    assert entry[0]["retry_at"] is not None  # when it is judged
    d.now += METADATA_SETTLE
    read_back_now(d)
    assert not [a for a in attention(d.state, now=d.now) if a["kind"] == "throttles_differ"]


def test_the_request_completes_and_leaves_no_rate_after_a_drift():
    c, d = started()
    c.set_rate("leader", 2, OTHER)
    read_back_now(d)
    d.now += METADATA_SETTLE
    read_back_now(d)
    assert of_type(d.events, ev.ThrottlesDrifted)
    c.finish(TP)
    d.now += 1
    d.observe()
    d.tick()
    assert d.state.requests["r"].status == COMPLETED
    assert d.state.throttles.is_empty() and not c.throttles["brokers_l"] and not c.throttles["brokers_f"]
    assert fold(d.events) == d.state


def _rate_kept_for_t1():
    """t-0 moves (0,1,2) -> (0,1,4), then t-1 (3,1,2) -> (3,1,0), one at a time: the driver, the cluster and
    t-1, before t-0's step completes."""
    other = TopicPartition("t", 1)
    c = FakeCluster({TP: (0, 1, 2), other: (3, 1, 2)}, range(6))
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeThrottle(RATE))
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.feed(Submit("r", (PartitionTarget("t", 0, (0, 1, 4)), PartitionTarget("t", 1, (3, 1, 0)))))
    d.tick()
    return c, d, other


def test_a_kept_rate_a_drift_found_missing_is_set_again_though_a_crash_cut_the_batch_after_the_drift():
    """A rate kept between steps (no step in flight needs it, a partition not ended names its broker) that
    another tool deleted: the confirming read-back's decision records the drift (which takes the rate out of
    what is in force) and sets it again (``ThrottlesApplied``). A crash that cuts the batch after the drift
    must not lose the rate: the next tick sets it again (docs/algorithm.md, section 7: a batch cut short
    heals on the next tick). The fault simulator's seed 11101: broker 1's follower rate, kept, never set
    again after a restart."""
    c, d, other = _rate_kept_for_t1()
    assert set(d.state.steps) == {TP}
    c.finish(TP)
    d.now += 1
    d.observe()
    d.tick()  # t-0 done; t-1 starts (3, 1, 2) -> (3, 1, 0): broker 0's leader rate is kept (t-1 names 0)
    assert set(d.state.steps) == {other} and 0 in kept_rates(d.state)[0]
    ours = rate_in_kafka(d.state)
    assert c.rates[("l", 0)] == ours
    c.set_rate("leader", 0, None)  # another tool deleted it
    d.now += 1
    read_back_now(d)
    d.now += METADATA_SETTLE
    state, events = handle(d.state, ThrottlesObserved(c.throttle_set(), TOPICS, BROKERS, d.now))
    drift = [i for i, e in enumerate(events) if isinstance(e, ev.ThrottlesDrifted)]
    assert drift and 0 in events[drift[0]].missing.leader_brokers
    assert any(0 in e.throttles.leader_brokers for e in of_type(events, ev.ThrottlesApplied))  # uncut: set again
    cut = events[:drift[0] + 1]  # the crash: the drift written, the change that sets the rate again lost
    d.state, d.events = fold(cut, d.state), d.events + cut
    assert c.rates.get(("l", 0)) is None
    d.now += 1
    d.tick()
    assert c.rates.get(("l", 0)) == ours and 0 in d.state.throttles.leader_brokers
    assert fold(d.events) == d.state


@pytest.mark.parametrize("failure", ["refused", "unavailable"])
def test_a_kept_rate_whose_setting_again_fails_is_set_again_at_the_retry_not_removed(failure):
    """A kept rate another tool deleted, whose setting again after the drift fails (IncrementalAlterConfigs
    refused, or unanswered): the failure takes it out of what is in force and ``ThrottlesApplied`` already
    took it out of ``throttles_lost``. It is still kept (a partition not ended names its broker): the retry
    at ``throttle_retry_at`` sets it again. It used to remove it as a stale failed piece, and the rate was
    forgotten while partitions still named the broker. Once nothing names it, it goes (no leak)."""
    c, d, other = _rate_kept_for_t1()
    c.finish(TP)
    d.now += 1
    d.observe()
    d.tick()  # t-1 in flight, (3, 1, 2) -> (3, 1, 0): broker 0's leader rate is kept (t-1 names 0)
    assert set(d.state.steps) == {other} and 0 in kept_rates(d.state)[0]
    ours = rate_in_kafka(d.state)
    c.set_rate("leader", 0, None)  # another tool deleted it
    d.now += 1
    read_back_now(d)
    d.now += METADATA_SETTLE
    if failure == "refused":
        c.refuse("apply", "POLICY_VIOLATION", "config changes are refused")
    else:
        c.unavailable("apply")
    read_back_now(d)
    assert of_type(d.events, ev.ThrottlesDrifted)
    failed = of_type(d.events, ev.ActionFailed)
    assert len(failed) == 1 and failed[0].throttles.leader_brokers == {0}
    assert 0 not in d.state.throttles.leader_brokers and 0 in d.state.throttle_failed.leader_brokers
    assert c.rates.get(("l", 0)) is None
    d.now = d.state.throttle_retry_at + 0.5
    d.tick()
    assert c.rates.get(("l", 0)) == ours and c.throttle_calls[-1][0] == "apply"
    assert 0 in d.state.throttles.leader_brokers and 0 in kept_rates(d.state)[0]
    assert d.state.throttle_failed.is_empty() and d.state.throttle_error is None
    c.finish(other)
    d.now += 1
    d.observe()
    d.tick()
    assert d.state.requests["r"].status == COMPLETED
    assert d.state.throttles.is_empty() and ("l", 0) not in c.rates and not c.throttles["brokers_l"]
    assert fold(d.events) == d.state


def test_a_rate_read_as_kafkas_default_is_not_set():
    """KIP-73: a rate no one set reads as Long.MAX_VALUE."""
    assert rate_value(str(2**63 - 1)) is None and rate_value("") is None and rate_value(None) is None
    assert rate_value("54000000") == 54_000_000
    t = read_back([], [], [RateRead(1, 5, None), RateRead(2, None, None), RateRead(3, None, 7)])
    assert t.leader_brokers == {1} and t.follower_brokers == {3} and t.rate == 7
    assert [r.broker for r in t.rates] == [1, 3]
    assert read_back([], [], []) == ThrottleSet()


# --- the decider's cadence ------------------------------------------------------------------------


def decider_on_sim(verify_interval=10.0):
    """A decider on the in-process simulated cluster, on a clock the test moves; the cluster's own clock
    stands still, so the move stays in flight."""
    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim.cluster import SimulatedCluster
    from tests.sim_helpers import scenario

    cluster = SimulatedCluster.from_scenario(scenario([((1, 2, 3), 500_000_000, 0)], brokers=4))
    clock = [1000.0]
    d = Decider(MemoryLog(), cluster, clock=lambda: clock[0], verify_interval=verify_interval, poll_interval=30.0)
    d.recover(None)
    d.decide(ChangeThrottle(RATE))
    d.decide(Submit("r", (PartitionTarget("t", 0, (1, 2, 4)),)))
    d.tick()
    assert d.state.steps[TP].started and 4 in d.state.throttles.follower_brokers
    return d, cluster, clock


def test_a_difference_seen_is_read_again_metadata_settle_later_not_a_verify_interval_later():
    d, cluster, clock = decider_on_sim()
    cluster.set_throttle_rate(4, "follower", None)  # another tool deleted the rate: the copy runs unthrottled
    clock[0] += 10.0  # the next read-back
    d.tick()
    assert d.state.throttles_differed is not None and d.state.throttles_differed.at == clock[0]
    seen = clock[0]
    assert abs(d.due_in() - METADATA_SETTLE) < 1e-3, d.due_in()  # not verify_interval (10 s)
    clock[0] += d.due_in()
    d.tick()
    assert d.state.throttles_differed is None
    assert cluster.state.throttles.follower_rate[4] == rate_in_kafka(d.state)  # restored
    assert clock[0] - seen < METADATA_SETTLE + 0.01



def test_with_no_difference_waiting_the_read_back_keeps_its_interval():
    d, cluster, clock = decider_on_sim()
    clock[0] += 10.0
    d.tick()
    assert d.state.throttles_differed is None and d.verified_at == clock[0]
    assert d.due_in() > METADATA_SETTLE  # nothing to confirm: the next read-back a verify_interval on


# --- the real Kafka adapter through the simulated cluster's Kafka front -----------------------------


def test_through_the_kafka_front_a_rate_another_client_changed_mid_move_is_restored():
    """kreassign moves t-0 from (1, 2, 3) to (1, 2, 4) through the real adapter (confluent-kafka and
    kafka-python against the Kafka front). Mid-move another client sets broker 1's
    leader.replication.throttled.rate to 500 MB/s (what ``kafka-configs.sh --alter --entity-type brokers
    --entity-name 1 --add-config leader.replication.throttled.rate=500000000`` sends). The next read-back
    records it, the one METADATA_SETTLE later confirms it and sets kreassign's rate again. The cluster's
    clock stands still (speed 0: the copy stays in flight); the decider's clock is moved by hand."""
    from confluent_kafka.admin import AdminClient

    from engine.cluster.kafka import KafkaCluster
    from engine.kafka.client_config import ClientConfig
    from tests.sim_helpers import kafka_front

    doc = {"seed": 3, "brokers": {"count": 4},
           "topics": [{"name": "t", "partitions": 1, "replication_factor": 3, "size": "500 MB"}], "throttle": "none"}
    with kafka_front(doc, 0) as front:
        cluster = KafkaCluster(ClientConfig({"bootstrap.servers": front.bootstrap}), timeout=10)
        try:
            _restored_through_the_front(front.sim, cluster, AdminClient({"bootstrap.servers": front.bootstrap}))
        finally:
            cluster.close()


def _restored_through_the_front(sim, cluster, admin):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from engine.runtime.decider import Decider, MemoryLog

    def broker_rate(b: int) -> str:
        resource = ConfigResource(ResourceType.BROKER, str(b))
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        return configs["leader.replication.throttled.rate"].value

    with sim.lock:
        start = tuple(sim.cluster.state.partitions[TP].replicas)
    target = start[:2] + tuple(b for b in (1, 2, 3, 4) if b not in start)[:1]
    clock = [1000.0]
    log = MemoryLog()
    d = Decider(log, cluster, clock=lambda: clock[0], verify_interval=10.0, poll_interval=30.0)
    d.recover(None)
    d.decide(ChangeThrottle(RATE))
    d.decide(Submit("r", (PartitionTarget("t", 0, target),)))
    d.tick()
    assert d.state.steps[TP].started
    ours = rate_in_kafka(d.state)
    origin = sorted(d.state.throttles.leader_brokers)[0]
    assert broker_rate(origin) == str(ours)

    entry = ConfigEntry("leader.replication.throttled.rate", str(OTHER), incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.BROKER, str(origin), incremental_configs=[entry])]).values():
        f.result(timeout=10)
    assert broker_rate(origin) == str(OTHER)

    clock[0] += 10.0  # the read-back's interval
    d.tick()
    differed = [e.payload for e in log.records if isinstance(e.payload, ev.ThrottlesDiffered)]
    assert differed and RateRead(origin, OTHER, None) in differed[-1].missing.rates, differed
    assert broker_rate(origin) == str(OTHER)  # recorded only: a broker's configs may lag
    wait = d.due_in()
    assert wait is not None and wait <= METADATA_SETTLE + 1e-3, wait  # confirmed METADATA_SETTLE later
    clock[0] += wait
    d.tick()
    drifted = [e.payload for e in log.records if isinstance(e.payload, ev.ThrottlesDrifted)]
    assert len(drifted) == 1 and drifted[0].missing.leader_brokers == {origin}
    assert f"{OTHER} read, {ours} in force" in describe(drifted[0])
    assert broker_rate(origin) == str(ours)  # restored through the front
    assert d.state.steps[TP].started and d.state.requests["r"].status != COMPLETED  # mid-move all along


def test_a_drift_reaches_metrics_and_the_status_pages_events_with_the_values_read():
    import re
    from collections import Counter
    from types import SimpleNamespace

    from engine.runtime.decider import _event_line
    from engine.runtime.metrics import exposition

    d, cluster, clock = decider_on_sim()
    ours = rate_in_kafka(d.state)
    cluster.set_throttle_rate(4, "follower", 1_000)  # another tool's rate, far below kreassign's
    clock[0] += 10.0
    d.tick()
    clock[0] += d.due_in()
    d.tick()
    assert cluster.state.throttles.follower_rate[4] == ours
    line = [_event_line(e) for e in d.recent if isinstance(e.payload, ev.ThrottlesDrifted)]
    assert len(line) == 1 and f"follower.replication.throttled.rate 1000 read, {ours} in force" in line[0]["detail"]
    engine = SimpleNamespace(counters=Counter(), active=True, decider=d, needs_recovery=False, recovery_error=None,
                             s=SimpleNamespace(request_budget=None))
    text = exposition(engine)[0].decode()
    samples = dict(re.findall(r'^kreassign_throttle_drifts_total\{kind="(\w+)"\} (\S+)$', text, re.M))
    assert samples == {"entry_missing": "0.0", "entry_left_over": "0.0", "rate_missing": "0.0",
                       "rate_changed": "1.0"}, samples


def test_a_difference_seen_after_the_logs_last_time_is_judged_soon_after_a_clock_set_back():
    """A read-back's difference is a time the log knows: a clock set back (or a standby whose clock lags
    taking over) re-bases it with the other timers to just before the new clock's first reading. Before,
    the fold kept the decision clock at the log's last other time (here 40 s earlier, the engine idle
    meanwhile), so the re-based difference stood 40 s in the future: a rate another client changed
    stayed as it set it about 45 s instead of ``METADATA_SETTLE`` (the fault simulator's seed 4413, a
    standby 442 s behind taking over: 45 s with kreassign's entries deleted)."""
    c, d = started()
    ours = rate_in_kafka(d.state)
    d.now += 40.0  # nothing to log meanwhile
    c.set_rate("leader", 2, OTHER)
    read_back_now(d)
    assert of_type(d.events, ev.ThrottlesDiffered)[-1].missing.leader_brokers == {2}
    d.now = d.now + 1.0 - 442.0  # a standby whose clock is 442 s behind takes over, 1 s later
    read_back_now(d)
    assert of_type(d.events, ev.ClockSetBack) and not of_type(d.events, ev.ThrottlesDrifted)
    d.now += METADATA_SETTLE
    read_back_now(d)
    drifted = of_type(d.events, ev.ThrottlesDrifted)
    assert len(drifted) == 1 and drifted[0].missing.leader_brokers == {2}
    assert c.rates[("l", 2)] == ours
    assert fold(d.events) == d.state



def test_a_read_back_taken_late_in_a_slow_tick_is_judged_from_when_it_was_taken():
    """The fault simulator's seed 9475: a standby took over (its first tick reads the throttles back)
    and that tick's calls were slow (6 s of the engine's clock; here its look). It saw a step done, the tick
    planned the next step and applied its throttles, and the read-back at the tick's end, taken right
    after, found them missing on a broker whose metadata lags: a lag. It was stamped with the tick's
    start, 6 s before it was taken, so the read-back of the very next tick, 0 s later, "confirmed" it
    (METADATA_SETTLE after the stamp) and kreassign set again throttles nobody had touched
    (``ThrottlesDrifted``: a false alarm, a config change for nothing). A read-back is stamped when it is
    taken: the one that judges it comes METADATA_SETTLE after that, when the broker has the throttles."""
    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim.cluster import SimulatedCluster
    from tests.sim_helpers import scenario

    class Slow(SimulatedCluster):
        """A look that takes ``slow`` seconds once armed (a connection that timed out)."""
        slow = 0.0

        def observe(self, partitions=None):
            self.advance(self.slow)
            self.slow = 0.0
            return super().observe(partitions)

    cluster = Slow.from_scenario(scenario([((1, 2, 3), 100_000_000, 0)], brokers=5))
    cluster.advance(1000.0)
    for b in cluster.state.brokers:
        cluster.inject(b, "lag", seconds=3.0)  # every broker's metadata 3 s behind the controller
    log = MemoryLog()
    d = Decider(log, cluster, clock=lambda: cluster.time, verify_interval=10.0)
    d.recover(None)
    d.decide(ChangeThrottle(RATE))
    d.decide(Submit("r", (PartitionTarget("t", 0, (1, 4, 5)),)))  # two steps: one replica at a time
    d.tick()
    assert d.state.steps[TP].number == 1 and d.state.steps[TP].started
    while cluster.time < 1004.0:  # step 1 copying
        cluster.advance(0.5)
        d.tick()
    assert cluster.state.partitions[TP].adding and d.state.steps[TP].number == 1
    while cluster.state.partitions[TP].adding:  # the engine stops; step 1 ends on the controller
        cluster.advance(0.5)
    standby = Decider(log, cluster, clock=lambda: cluster.time, verify_interval=10.0)
    standby.recover(d.executed)
    start = cluster.time
    cluster.slow = 6.0
    standby.tick()  # looks (6 s): step 1 done, step 2 planned, its throttles applied; read back: not there yet
    assert standby.state.steps[TP].number == 2
    differed = standby.state.throttles_differed
    assert differed is not None and not differed.missing.is_empty(), "the lag showed no difference"
    assert differed.at == start + 6.0  # when it was read, not when the tick began
    while cluster.time - start < 30.0:
        standby.tick()
        cluster.advance(0.5)
    payloads = [e.payload for e in log.records]
    assert not of_type(payloads, ev.ThrottlesDrifted), of_type(payloads, ev.ThrottlesDrifted)
    assert standby.state.throttles_differed is None  # read again METADATA_SETTLE later: it was the lag
