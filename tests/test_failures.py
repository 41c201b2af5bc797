"""What the core does when the cluster refuses, drops, reverts or forgets: each case is one story on
the unforgiving fake cluster, driven through the real executor, on a clock where timing matters."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import events as ev
from engine.core import retry
from engine.core.decide import METADATA_SETTLE
from engine.core.commands import (ChangeLimits, ChangeThrottle, ObservationFailed, PartitionTarget, Submit, ThrottlesObserved,
                                  Tick)
from engine.core.partition import TopicPartition
from engine.core.state import COMPLETED, IN_FLIGHT, WAITING, fold
from engine.views.summary import problems, summarize
from engine.core.throttles import ThrottleSet, needed
from tests.fake_cluster import Driver, FakeCluster


def tp(i):
    return TopicPartition("t", i)


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def setup(n=4, targets=None, min_isr=1, steps="incremental"):
    c = FakeCluster({tp(i): tuple((i + k) % 4 for k in range(3)) for i in range(n)}, range(8), min_isr)
    d = Driver(c)
    d.now = 1000.0
    targets = targets or {tp(i): (5, 6, 7) for i in range(n)}
    d.feed(Submit("r", tuple(PartitionTarget(t.topic, t.partition, r) for t, r in targets.items()), steps=steps))
    return c, d


def advance(d, seconds):
    d.now += seconds


def run(d, c, rounds=200, step=1.0, choose=None):
    for _ in range(rounds):
        d.tick()
        busy = c.in_progress()
        for t in (choose(busy) if choose else busy):
            c.finish(t)
        d.observe()
        advance(d, step)
        if d.state.requests["r"].status == COMPLETED:
            return
    raise AssertionError("the request did not complete")


def check(d):
    for _ in range(20):  # a failed throttle change is retried after its backoff, after the request is done
        if d.state.throttle_failed.is_empty():
            break
        advance(d, retry.MAX_BACKOFF)
        d.tick()
    s = d.state
    assert fold(d.events) == s
    want = needed(((t, f.step) for t, f in s.steps.items()), s.throttle_rate)
    assert s.throttles == want and s.throttle_failed.is_empty()
    assert d.cluster.throttles["leader"] == set(want.leader) and d.cluster.throttles["follower"] == set(want.follower)


# --- a step in flight is reconciled with what the cluster reports --------------------------------------


def test_a_step_kafka_finished_completes_although_a_new_replica_left_the_isr_since():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    d.tick()
    c.finish(tp(0), lose=(4,))  # done, then 4 fell out of the ISR before the watcher looked
    d.observe()
    # TR with a new replica out of the ISR may also be a lagging broker's RS after a cancel (seed 5527):
    # a look METADATA_SETTLE later that still shows it confirms the end
    assert not of_type(d.events, ev.StepCompleted)
    advance(d, METADATA_SETTLE)
    d.observe()
    assert of_type(d.events, ev.StepCompleted) and not d.state.steps
    run(d, c)
    assert c.assignment()[tp(0)] == (0, 1, 4)


def test_a_reassignment_dropped_outside_kreassign_is_planned_again_and_completes():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    d.tick()
    c.drop(tp(0))  # another tool cancelled it
    d.observe()
    assert not of_type(d.events, ev.StepFailed)  # within the grace period the brokers may just lag
    advance(d, 10)
    d.observe()
    failed = of_type(d.events, ev.StepFailed)
    assert failed and "reverted outside kreassign" in failed[0].reason
    run(d, c)
    assert c.assignment()[tp(0)] == (0, 1, 4)
    check(d)


def test_an_alter_that_never_took_effect_is_retried_with_backoff_and_said():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    c.unavailable("alter", times=3)
    d.tick()
    failed = of_type(d.events, ev.ActionFailed)
    assert [(f.action, f.code, f.attempt, f.retry_at) for f in failed] == [("start_step", "UNAVAILABLE", 1, 1001.0)]
    assert problems(d.state)[0]["kind"] == "step" and "connection refused" in problems(d.state)[0]["message"]
    d.tick()  # not due yet: nothing is asked again
    assert len(c.alters) == 1
    advance(d, 1)
    d.tick()
    assert of_type(d.events, ev.ActionRetried)[0].attempt == 2 and len(c.alters) == 2
    assert of_type(d.events, ev.ActionFailed)[-1].retry_at == pytest.approx(1001.0 + retry.backoff(2), abs=0.01)
    run(d, c)
    assert [f.attempt for f in of_type(d.events, ev.ActionFailed)] == [1, 2, 3]
    assert c.assignment()[tp(0)] == (0, 1, 4) and not problems(d.state)
    check(d)


def test_an_answer_lost_after_the_alter_took_effect_is_seen_as_started():
    c, d = setup(1, {tp(0): (0, 1, 4)})

    class Lost(Exception):
        pass

    real = c._alter

    def took_effect_but_unanswered(t, tr):
        real(t, tr)
        from engine.core.outcomes import Unavailable

        return Unavailable("timed out waiting for the answer")

    c._alter = took_effect_but_unanswered
    d.tick()
    assert of_type(d.events, ev.ActionFailed)
    d.observe()  # the watcher sees the reassignment in progress: it did start
    assert d.state.steps[tp(0)].started and not d.state.steps[tp(0)].retry
    c._alter = real
    run(d, c)
    assert len([a for a in c.alters if a[1] is not None]) == 1  # never altered twice


def test_one_partition_refused_forever_never_holds_up_the_others_and_says_why():
    c, d = setup(4)
    c.refuse("alter", "TOPIC_AUTHORIZATION_FAILED", "Not authorized to access topics: [t]", times=10_000, tp=tp(2))
    for _ in range(100):
        d.tick()
        for t in c.in_progress():
            c.finish(t)
        d.observe()
        advance(d, 1)
    done = {t for t, p in d.state.partitions.items() if p.status == COMPLETED}
    assert done == {tp(0), tp(1), tp(3)}
    assert d.state.partitions[tp(2)].status == WAITING
    reason = d.state.waiting[tp(2)]
    assert "TOPIC_AUTHORIZATION_FAILED" in reason
    # backoff: far fewer attempts than ticks
    refused = [a for a in c.alters if a[0] == tp(2)]
    assert 3 <= len(refused) <= 12
    assert summarize(d.state)["waiting"] == {reason: 1}


# --- elections -----------------------------------------------------------------------------------------


def test_a_refused_election_is_retried_then_given_up_and_the_partition_goes_on():
    c, d = setup(1, {tp(0): (5, 6, 7)}, steps="kip-435")  # the new preferred leader is elected on its own
    c.elections = "refuse"
    run(d, c)
    failed = [f for f in of_type(d.events, ev.ActionFailed) if f.action == "elect_leader"]
    assert failed and failed[-1].final and "goes on without it" in failed[-1].message
    assert failed[0].code == "PREFERRED_LEADER_NOT_AVAILABLE"
    assert len([f for f in failed if f.tp == tp(0)]) >= retry.ELECTION_ATTEMPTS
    assert c.assignment()[tp(0)] == (5, 6, 7)


def test_a_lost_election_is_noticed_on_the_clock_and_asked_again():
    c, d = setup(1, {tp(0): (5, 6, 7)}, steps="kip-435")  # the new preferred leader is elected on its own
    c.elections = "lose"  # Ok, but nothing happens
    d.tick()
    c.finish(tp(0))
    d.observe()
    assert tp(0) in d.state.elections
    advance(d, retry.ELECTION_GRACE + 0.1)
    c.elections = "elect"
    d.tick()
    lost = of_type(d.events, ev.ActionFailed)
    assert lost[-1].code == "ELECTION_LOST"
    advance(d, retry.backoff(1))
    d.tick()
    assert of_type(d.events, ev.ActionRetried)[-1].action == "elect_leader"
    d.observe()
    assert tp(0) not in d.state.elections and c.parts[tp(0)].leader == 5


def test_election_not_needed_is_success():
    from engine.cluster.kafka import result_of_code
    from engine.core.outcomes import Ok

    assert isinstance(result_of_code(84, "ELECTION_NOT_NEEDED", "", False), Ok)


# --- throttles -------------------------------------------------------------------------------------------


def test_a_refused_throttle_is_not_in_force_its_step_waits_and_both_are_retried():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    c.refuse("apply", "TOPIC_AUTHORIZATION_FAILED", "not authorized", times=4)
    d.tick()
    failed = of_type(d.events, ev.ActionFailed)
    assert {f.action for f in failed} == {"apply_throttles", "start_step"}
    assert not d.state.steps[tp(0)].started and not c.in_progress()  # never started unthrottled
    assert not (d.state.throttles.follower & d.state.throttle_failed.follower)
    assert any(p["kind"] == "throttles" for p in problems(d.state))
    run(d, c)
    assert of_type(d.events, ev.ActionSucceeded)
    assert c.assignment()[tp(0)] == (0, 1, 4) and not problems(d.state)
    check(d)


def test_a_failed_throttle_removal_stays_in_force_and_is_retried():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    d.tick()
    c.refuse("remove", "_TRANSPORT", "down", times=2)
    c.finish(tp(0))
    d.observe()
    assert d.cluster.throttles["follower"]  # not removed yet
    assert not d.state.throttles.is_empty()  # and the state knows it
    run(d, c)
    check(d)


def test_throttles_removed_outside_kreassign_are_set_again_and_leftovers_removed():
    c, d = setup(2, {tp(0): (0, 1, 4), tp(1): (1, 2, 5)})
    d.tick()
    assert d.cluster.throttles["follower"]
    # kafka-reassign-partitions.sh --verify removed every throttle; and one of ours leaked earlier
    leaked = {e for e in d.cluster.throttles["leader"]}
    c.throttles = {"leader": set(), "follower": set(), "brokers_l": set(), "brokers_f": set()}
    d.feed(ThrottlesObserved(c.throttle_set(), frozenset({"t"}), frozenset(range(8)), d.now))
    # a broker's configs may lag the controller: a first read-back only records the difference
    assert not of_type(d.events, ev.ThrottlesDrifted) and of_type(d.events, ev.ThrottlesDiffered)
    assert c.throttles["follower"] == set()
    advance(d, METADATA_SETTLE)
    d.feed(ThrottlesObserved(c.throttle_set(), frozenset({"t"}), frozenset(range(8)), d.now))
    drifted = of_type(d.events, ev.ThrottlesDrifted)[-1]
    assert drifted.missing.follower and not drifted.unexpected.follower
    assert c.throttles["follower"] == set(d.state.throttles.follower) and leaked <= c.throttles["leader"]
    run(d, c)
    check(d)


def test_no_broker_rate_is_sent_to_a_broker_that_is_down():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    d.tick()
    c.brokers[4] = c.brokers[4]._replace(alive=False)  # the destination dies mid-step
    d.observe()
    sent = len(c.throttle_calls)
    d.feed(ChangeThrottle(7_000_000))  # every broker's rate is to be set again
    new = [t for _op, t in c.throttle_calls[sent:]]
    assert new and all(4 not in t.leader_brokers | t.follower_brokers for t in new)
    sent = len(c.throttle_calls)
    c.brokers[4] = c.brokers[4]._replace(alive=True)
    d.observe()
    back = [t for op, t in c.throttle_calls[sent:] if op == "apply" and 4 in t.follower_brokers]
    assert back and back[0].rate == 7_560_000  # its rate is set again, at the rate in force now (+ 8 %)
    run(d, c)
    check(d)


# --- the cluster unreachable ----------------------------------------------------------------------------


def test_an_unreachable_cluster_is_recorded_once_and_cleared():
    c, d = setup(1)
    d.feed(ObservationFailed("connection refused", d.now))
    d.feed(ObservationFailed("connection refused", d.now))
    assert [e.reason for e in of_type(d.events, ev.ClusterUnreachable)] == ["connection refused"]
    assert problems(d.state)[0]["kind"] == "cluster"
    d.observe()
    assert of_type(d.events, ev.ClusterUnreachable)[-1].reason is None and not problems(d.state)


# --- properties -------------------------------------------------------------------------------------------

failure = st.sampled_from(["alter-unavailable", "alter-refused", "cancel-unavailable", "apply-refused",
                           "remove-refused", "elect-refused", "drop", "lose-isr", "unreachable"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(failure, st.integers(0, 5), st.integers(1, 3)), max_size=8), st.randoms())
def test_any_mix_of_refusals_drops_and_outages_still_converges_exactly(faults, rnd):
    c, d = setup(6)
    for rounds in range(400):
        if faults and rnd.random() < 0.3:
            kind, i, times = faults.pop(0)
            t = tp(i)
            if kind == "alter-unavailable":
                c.unavailable("alter", times, t)
            elif kind == "alter-refused":
                c.refuse("alter", "REASSIGNMENT_IN_PROGRESS", "", times, t)
            elif kind == "cancel-unavailable":
                c.unavailable("cancel", times, t)
            elif kind in ("apply-refused", "remove-refused"):
                c.refuse(kind.split("-")[0], "TOPIC_AUTHORIZATION_FAILED", "", times)
            elif kind == "elect-refused":
                c.refuse("elect", "PREFERRED_LEADER_NOT_AVAILABLE", "", times, t)
            elif kind == "drop" and t in c.targets:
                c.drop(t)
            elif kind == "unreachable":
                d.feed(ObservationFailed("down", d.now))
        d.tick()
        for t in c.in_progress():
            if rnd.random() < 0.5:
                c.finish(t, lose=(c.targets[t][-1],) if rnd.random() < 0.2 else ())
        d.observe()
        advance(d, rnd.choice([0.5, 1.0, 5.0]))
        if d.state.requests["r"].status == COMPLETED and not faults:
            break
    assert d.state.requests["r"].status == COMPLETED, summarize(d.state)
    assert all(c.assignment()[tp(i)] == (5, 6, 7) for i in range(6))
    check(d)
    assert all(p.status == COMPLETED for p in d.state.partitions.values())
    assert not any(f.status == IN_FLIGHT for f in d.state.partitions.values())


def test_a_step_not_started_is_given_up_when_its_target_broker_goes_down():
    c, d = setup(1, {tp(0): (0, 1, 4)})
    c.unavailable("alter", times=2)
    d.tick()
    assert not d.state.steps[tp(0)].started
    c.brokers[4] = c.brokers[4]._replace(alive=False)
    d.observe()
    advance(d, 5)
    sent = len(c.throttle_calls)
    d.tick()
    failed = of_type(d.events, ev.StepFailed)
    assert failed and "went down" in failed[-1].reason
    assert not d.state.steps and d.state.partitions[tp(0)].status == WAITING
    assert all(4 not in t.leader_brokers | t.follower_brokers for _op, t in c.throttle_calls[sent:])
    c.brokers[4] = c.brokers[4]._replace(alive=True)
    d.observe()
    run(d, c)
    check(d)


def test_a_failed_throttle_change_no_longer_wanted_is_undone_so_nothing_is_left_behind():
    c, d = setup(1, {tp(0): (0, 1, 4)})

    real = c.apply_throttles

    def applied_but_unanswered(t):  # the change happens, the answer is lost
        real(t)
        from engine.core.outcomes import Unavailable

        return Unavailable("timed out")

    c.apply_throttles = applied_but_unanswered
    d.tick()
    c.apply_throttles = real
    assert not d.state.steps[tp(0)].started and d.cluster.throttles["follower"]  # on the cluster anyway
    from engine.core.commands import Cancel

    d.feed(Cancel("r"))
    run_until_quiet = 0
    while d.state.requests["r"].status != COMPLETED or not d.state.throttle_failed.is_empty():
        advance(d, retry.MAX_BACKOFF)
        d.tick()
        run_until_quiet += 1
        assert run_until_quiet < 20
    assert not d.cluster.throttles["follower"] and not d.cluster.throttles["leader"]
    assert not d.cluster.throttles["brokers_f"] and not d.cluster.throttles["brokers_l"]
    assert not problems(d.state)


def test_a_tick_never_judges_a_step_on_an_observation_older_than_the_step():
    # a cancel right after the step started, then a tick before any new look at the partition:
    # the last observation still shows the replicas from before the step, which must not read as "aborted"
    c, d = setup(1, {tp(0): (3, 1, 2)})
    from engine.core.commands import Cancel, Tick

    d.feed(Tick(d.now))  # the step starts; no look at the cluster since
    assert d.state.steps[tp(0)].started
    d.feed(Cancel("r", rollback=True))
    d.feed(Tick(d.now))
    assert not of_type(d.events, ev.StepAborted)
    d.observe()  # now the cluster is seen: reverted by KRaft to RS - AR, in RS order
    aborted = of_type(d.events, ev.StepAborted)
    assert aborted and aborted[0].replicas == c.assignment()[tp(0)]
    run(d, c)
    assert c.assignment()[tp(0)] == (0, 1, 2)  # exactly the original replicas, order included


def test_a_throttle_whose_change_failed_is_no_drift_when_read_back():
    """N1 of the fault simulator: an apply whose answer was lost may have happened (here it did), and a
    refused one left things as they were: the entry's state is unknown until its retry settles it. A
    read-back that shows it set is no change by another tool (no ``ThrottlesDrifted``): the retry removes
    it once no step needs it."""
    c, d = setup(1, {tp(0): (0, 1, 4)})
    real = c.apply_throttles

    def applied_but_unanswered(t):  # the change happens, the answer is lost
        real(t)
        from engine.core.outcomes import Unavailable

        return Unavailable("timed out")

    c.apply_throttles = applied_but_unanswered
    d.tick()
    c.apply_throttles = real
    assert not d.state.steps[tp(0)].started and c.throttles["follower"]  # set on the cluster anyway
    assert d.state.throttle_failed.follower and not d.state.throttles.follower
    c.refuse("remove", "POLICY_VIOLATION", "refused", times=50)  # nothing changes for a while
    c.refuse("apply", "POLICY_VIOLATION", "refused", times=50)
    from engine.core.commands import Cancel

    d.feed(Cancel("r"))  # no step needs the entries any more
    for _ in range(3):
        d.observe()
        d.feed(ThrottlesObserved(c.throttle_set(), frozenset({"t"}), frozenset(range(8)), d.now))
        advance(d, METADATA_SETTLE)
    assert not of_type(d.events, ev.ThrottlesDrifted), of_type(d.events, ev.ThrottlesDrifted)
    c.failures.clear()  # the cluster takes changes again: the retry settles it
    for _ in range(10):
        advance(d, retry.MAX_BACKOFF)
        d.tick()
    assert not c.throttles["follower"] and not c.throttles["leader"]
    assert not of_type(d.events, ev.ThrottlesDrifted)
    assert d.state.requests["r"].status == COMPLETED and not problems(d.state)


def test_a_failed_change_of_a_dead_brokers_rate_holds_no_step():
    """Seeds 1090, 4731, 9178 of the fault simulator (issue 27's defect 1, its second way): a rate whose
    removal failed while its broker was alive is retried only on that broker, so never while it is
    dead; a step replacing that broker needs its leader-side entry but not its rate (``in_force``), so
    the failure must not hold it, or the replacement waits for ever."""
    c = FakeCluster({tp(0): (0, 1, 2), tp(1): (2, 4, 5)}, range(8))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r1", (PartitionTarget("t", 0, (0, 1, 3)),)))
    d.tick()
    assert d.state.steps[tp(0)].started and 2 in d.state.throttles.leader_brokers
    c.refuse("remove", "POLICY_VIOLATION", "refused", times=100)
    c.finish(tp(0))
    d.observe()
    d.tick()
    assert 2 in d.state.throttle_failed.leader_brokers  # its removal failed: still set, retried later
    c.brokers[2] = c.brokers[2]._replace(alive=False)  # then broker 2 dies
    c.parts[tp(1)] = c.parts[tp(1)]._replace(isr=frozenset({4, 5}), leader=4)
    d.observe()
    c.failures.clear()  # the cluster takes changes again
    d.feed(Submit("r2", (PartitionTarget("t", 1, (6, 4, 5)),)))  # replace dead broker 2
    for _ in range(20):
        advance(d, retry.MAX_BACKOFF)
        d.tick()
        for t in c.in_progress():
            c.finish(t)
        d.observe()
        if d.state.requests["r2"].status == COMPLETED:
            break
    assert c.assignment()[tp(1)] == (6, 4, 5), (d.state.waiting, d.state.partitions[tp(1)])
    assert d.state.requests["r2"].status == COMPLETED


def test_a_retried_alter_is_re_checked_against_the_caps_with_the_leader_as_last_observed():
    """Seed 532 of the fault simulator: three alters go unanswered; a leader moves, so broker 2 now
    leads all three partitions; retried as planned, the three would copy out of broker 2 against a cap
    of two. A retry is re-checked like a first alter: one step waits (still counted while its lost alter
    may land: ALTER_MAY_LAND), is given up and planned again, and starts once broker 2 has room."""
    from engine.core.decide import ALTER_MAY_LAND

    c = FakeCluster({tp(0): (2, 0, 1), tp(1): (4, 2, 1), tp(2): (2, 5, 1)}, range(8))
    d = Driver(c)
    d.now = 1000.0
    # broker 2 leads two of the three moves, twice broker 4's one: a dominant source, whose copies the rule
    # starts into one broker at a time (docs/algorithm.md, section 2); this is about the caps a retry meets
    d.feed(ChangeLimits({"pin_dominant_source": 0}))
    d.feed(Submit("r", (PartitionTarget("t", 0, (2, 0, 6)), PartitionTarget("t", 1, (4, 2, 7)),
                        PartitionTarget("t", 2, (2, 5, 3)))))
    c.unavailable("alter", times=3)
    d.tick()
    assert len(d.state.steps) == 3 and not c.in_progress()
    c.parts[tp(1)] = c.parts[tp(1)]._replace(leader=2)  # broker 2 now leads all three
    d.observe()

    def out_of_2():
        return [t for t in c.in_progress() if c.parts[t].leader == 2 and c.parts[t].adding]

    given_up = None
    for _ in range(40):
        advance(d, 1.0)
        d.tick()
        assert len(out_of_2()) <= 2, c.in_progress()
        failed = of_type(d.events, ev.StepFailed)
        if failed and given_up is None:
            given_up = d.now
            assert "exceed the limit on outgoing moves of broker 2" in failed[0].reason, failed
        d.observe()
    assert given_up is not None and given_up - 1000.0 >= ALTER_MAY_LAND
    run(d, c)
    assert c.assignment() == {tp(0): (2, 0, 6), tp(1): (4, 2, 7), tp(2): (2, 5, 3)}
    check(d)


def test_an_unanswered_alter_stays_counted_while_it_may_land_though_its_new_replicas_broker_died():
    """Seed 2401 of the fault simulator: an alter went unanswered (it was to land 3 s later), the broker
    its step copies to died 0.3 s after, and the next tick gave the step up at once, as not started. The
    alter then landed: a reassignment no cap counted, and later a step started past the cap on replica
    additions. A step whose alter went unanswered stays counted ``ALTER_MAY_LAND`` seconds whatever the
    reason to give it up (docs/algorithm.md, section 6)."""
    from engine.core.decide import ALTER_MAY_LAND

    c = FakeCluster({tp(0): (0, 1, 2), tp(1): (3, 4, 5)}, range(8))
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.feed(Submit("r", (PartitionTarget("t", 0, (0, 1, 6)), PartitionTarget("t", 1, (3, 4, 7)))))
    c.unavailable("alter", times=1)
    d.tick()
    [first] = list(d.state.steps)
    assert not d.state.steps[first].started and not c.in_progress()
    new = d.state.steps[first].step.nr[0]
    c.brokers[new] = c.brokers[new]._replace(alive=False)  # the broker the step copies to dies
    d.observe()
    given_up = None
    for _ in range(10):
        advance(d, 1.0)
        d.tick()
        if of_type(d.events, ev.StepFailed) and given_up is None:
            given_up = d.now
        assert len(d.state.steps) <= 1, dict(d.state.steps)  # the other one waits while the alter may land
        d.observe()
    assert given_up is not None and given_up - 1000.0 >= ALTER_MAY_LAND, given_up


def test_a_clock_set_back_after_a_smaller_one_keeps_an_unanswered_alters_time_to_land():
    """Seed 86 of the fault simulator: the clock stepped back 12.3 s (less than CLOCK_SET_BACK: no re-base,
    the newest time the log knows stays ahead of the clock), an alter went unanswered, then the clock
    stepped back 4629.7 s. Re-based from the newest time the log knew, every timer set since lost the 12.3 s:
    the step was given up 2 s after its alter went unanswered, not ALTER_MAY_LAND, and the alter could still
    land, uncounted. The re-base starts from the clock's latest reading the log knows: each timer keeps the
    time it had left (docs/algorithm.md, *Timers and the clock*)."""
    from engine.core.decide import ALTER_MAY_LAND

    c = FakeCluster({tp(0): (0, 1, 2), tp(1): (3, 4, 5)}, range(8))
    d = Driver(c)
    d.now = 1000.0
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    d.feed(Submit("r", (PartitionTarget("t", 0, (0, 1, 6)), PartitionTarget("t", 1, (3, 4, 7)))))
    d.tick()  # one step starts: the log knows the time 1000
    [first] = list(d.state.steps)
    assert d.state.steps[first].started
    d.now -= 12.3  # a small step back: no re-base
    d.feed(ChangeLimits({"max_partitions_in_flight": 2}))
    c.unavailable("alter", times=1)
    d.tick()
    [second] = [t for t in d.state.steps if t != first]
    assert not d.state.steps[second].started and d.state.clock > d.now + 12.0  # the log's newest is ahead
    unanswered = d.now
    new = d.state.steps[second].step.nr[0]
    c.brokers[new] = c.brokers[new]._replace(alive=False)  # a reason to give the step up, once it cannot land
    d.observe()
    advance(d, 1.0)
    own = d.now - unanswered  # seconds since the alter, in the clock that stamped it
    d.now -= 4629.7
    d.feed(Tick(d.now))
    assert of_type(d.events, ev.ClockSetBack)
    # what the log knew of each partition, whatever clock stamped it, predates the new clock: a look counts
    assert d.state.known_at and all(at < d.now for at in d.state.known_at.values()), dict(d.state.known_at)
    d.observe()
    given_up = None
    for _ in range(10):
        advance(d, 1.0)
        own += 1.0
        d.tick()
        if of_type(d.events, ev.StepFailed) and given_up is None:
            given_up = own
        d.observe()
    assert given_up is not None and given_up >= ALTER_MAY_LAND, given_up  # 2.0 when re-based from the newest
    assert fold(d.events) == d.state


def test_a_dead_brokers_rate_is_not_read_as_missing_and_is_removed_when_it_is_back():
    """Seed 11532 of the fault simulator: a broker died with its rate set; a read-back cannot read a dead
    broker's configs (the rate is a config of the broker itself), and taken as missing the log forgot
    the rate, which was then left on the broker once it came back. It stays in force while the broker
    is dead and is removed when it is back."""
    c, d = setup(1, {tp(0): (0, 1, 4)})  # (0, 1, 2) -> (0, 1, 4): broker 4 receives, throttled
    d.tick()
    assert 4 in d.state.throttles.follower_brokers
    c.brokers[4] = c.brokers[4]._replace(alive=False)
    d.observe()
    unread = c.throttle_set()._replace(follower_brokers=c.throttle_set().follower_brokers - {4})
    for _ in range(3):
        d.feed(ThrottlesObserved(unread, frozenset({"t"}), frozenset(range(8)), d.now))
        advance(d, METADATA_SETTLE)
    assert not of_type(d.events, ev.ThrottlesDrifted), of_type(d.events, ev.ThrottlesDrifted)
    assert 4 in d.state.throttles.follower_brokers
    c.brokers[4] = c.brokers[4]._replace(alive=True)
    run(d, c)
    check(d)
    assert 4 not in c.throttles["brokers_f"]


def test_a_throttle_difference_is_judged_on_time_that_passed_across_a_clock_set_back():
    """Seed 17471 of the fault simulator: a read-back lagging the broker showed throttles just applied as
    missing; the clock was set back 116 s; the next read-back, 1 s later, confirmed the difference at once
    (the time it was first seen was not re-based with the other timers), and kreassign reported a change
    nobody made. The first sighting is re-based like every timer; a difference that stays is still
    corrected METADATA_SETTLE later."""
    c, d = setup(1, {tp(0): (0, 1, 4)})
    d.tick()
    removed = c.throttle_set()
    c.throttles = {"leader": set(), "follower": set(), "brokers_l": set(), "brokers_f": set()}  # really gone
    empty = ThrottleSet()
    d.feed(ThrottlesObserved(empty, frozenset({"t"}), frozenset(range(8)), d.now))
    assert of_type(d.events, ev.ThrottlesDiffered) and not of_type(d.events, ev.ThrottlesDrifted)
    d.now -= 116.0  # the clock is set back
    d.observe()
    assert of_type(d.events, ev.ClockSetBack)
    advance(d, 1.0)
    d.feed(ThrottlesObserved(empty, frozenset({"t"}), frozenset(range(8)), d.now))
    assert not of_type(d.events, ev.ThrottlesDrifted)  # 1 s, not 117
    advance(d, METADATA_SETTLE)
    d.feed(ThrottlesObserved(empty, frozenset({"t"}), frozenset(range(8)), d.now))
    drifted = of_type(d.events, ev.ThrottlesDrifted)
    assert drifted and drifted[0].missing.follower == removed.follower
