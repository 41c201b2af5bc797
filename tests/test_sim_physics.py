"""The simulated cluster's physics and controller: each rule has a test that can fail."""

import pytest

from engine.core.partition import TopicPartition
from engine.sim.cluster import SimulatedCluster
from engine.core.throttles import ThrottledReplica, ThrottleSet
from tests.sim_helpers import scenario

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
MB = 1_000_000


def cluster(parts, **kw):
    return SimulatedCluster.from_scenario(scenario(parts, **kw))


def finish_time(c, tp, step=0.5, limit=10_000):
    while c.state.partitions[tp].reassigning:
        c.advance(step)
        assert c.time < limit, "never finished"
    return c.time


def throttle(tp, cr, nr, rate, leader=True, follower=True):
    return ThrottleSet(
        frozenset(ThrottledReplica(tp.topic, tp.partition, b) for b in cr) if leader else frozenset(),
        frozenset(ThrottledReplica(tp.topic, tp.partition, b) for b in nr) if follower else frozenset(),
        frozenset(cr) if leader else frozenset(), frozenset(nr) if follower else frozenset(), rate)


def test_a_copy_runs_at_the_network_rate_and_completes_phase_b():
    c = cluster([((1, 2), 1000 * MB, 0)])
    assert c.alter_reassignments({T0: (3, 2)})[T0].note == ""
    p = c.state.partitions[T0]
    assert p.replicas == (3, 2, 1) and p.adding == (3,) and p.removing == (1,) and p.leader == 1  # Phase U/A
    t = finish_time(c, T0, step=0.1)
    assert t == pytest.approx(10.0, abs=0.11)  # 1000 MB at 100 MB/s
    p = c.state.partitions[T0]
    assert p.replicas == (3, 2) and p.isr == {2, 3} and p.leader == 3  # the old leader left: first of TRS in sync


def test_follower_throttle_limits_only_throttled_replicas():
    c = cluster([((1,), 500 * MB, 0), ((2,), 500 * MB, 0)])
    c.apply_throttles(throttle(T0, (1,), (3,), 10 * MB, leader=False))
    c.alter_reassignments({T0: (3,), T1: (4,)})
    t1 = finish_time(c, T1, step=0.1)
    assert t1 == pytest.approx(5.0, abs=0.11)  # unthrottled: 100 MB/s
    # throttled: 10 MB/s, after the 10 MB (one sample window) a follower quota that just started
    # recording lets through at once
    assert finish_time(c, T0, step=0.1) == pytest.approx(49.0, abs=0.11)


def test_a_listed_replica_without_a_broker_rate_is_not_throttled():
    c = cluster([((1,), 500 * MB, 0)])
    t = throttle(T0, (1,), (3,), 10 * MB)
    c.apply_throttles(t._replace(follower_brokers=frozenset(), leader_brokers=frozenset()))
    c.alter_reassignments({T0: (3,)})
    assert finish_time(c, T0, step=0.1) == pytest.approx(5.0, abs=0.11)


def test_leader_throttle_is_shared_by_the_copies_a_broker_serves():
    c = cluster([((1,), 200 * MB, 0), ((1,), 200 * MB, 0)])
    for tp in (T0, T1):
        c.apply_throttles(throttle(tp, (1,), (), 20 * MB, follower=False))
    c.alter_reassignments({T0: (2,), T1: (3,)})
    # A leader quota has recorded every follower fetch for its whole window (11 s): 220 MB pass first,
    # at broker 1's 100 MB/s shared by both (2.75 s: 275 MB), then 20 MB/s shared by the two copies
    t = finish_time(c, T0, step=0.05)
    assert t == pytest.approx(2.75 + 125 / 20, abs=0.06)
    assert finish_time(c, T1, step=0.05) == pytest.approx(t, abs=0.06)


def test_capacity_is_shared_among_concurrent_copies():
    c = cluster([((1,), 300 * MB, 0), ((2,), 300 * MB, 0)])
    c.alter_reassignments({T0: (3,), T1: (3,)})  # both into broker 3 (100 MB/s in)
    assert finish_time(c, T0, step=0.1) == pytest.approx(6.0, abs=0.11)
    c2 = cluster([((1,), 300 * MB, 0), ((2,), 300 * MB, 0)])
    c2.alter_reassignments({T0: (3,), T1: (4,)})  # separate receivers: full speed each
    assert finish_time(c2, T0, step=0.1) == pytest.approx(3.0, abs=0.11)


def test_produce_rate_slows_catch_up_and_in_sync_traffic_takes_its_share_first():
    # 10 MB/s produced: the copy nets 100 - 10 (leader feeds it) ... and broker 1 also
    # sends 10 MB/s to its in-sync follower 2: the copy gets 100 - 10 = 90 MB/s, nets 80.
    c = cluster([((1, 2), 800 * MB, 10 * MB)])
    c.alter_reassignments({T0: (1, 2, 3)})
    assert finish_time(c, T0, step=0.1) == pytest.approx(10.0, abs=0.11)
    assert c.state.partitions[T0].isr == {1, 2, 3}


def test_a_copy_slower_than_produce_never_joins():
    c = cluster([((1,), 100 * MB, 20 * MB)])
    c.apply_throttles(throttle(T0, (1,), (2,), 10 * MB))
    c.alter_reassignments({T0: (1, 2)})
    c.advance(3600)
    assert c.state.partitions[T0].isr == {1} and c.state.partitions[T0].reassigning


def test_broker_down_leaves_isr_stalls_moves_and_comes_back():
    c = cluster([((1, 2, 3), 1000 * MB, 1 * MB)], min_isr=2)
    c.alter_reassignments({T0: (4, 2, 3)})
    c.advance(2)
    c.inject(4, "down")
    lag_before = c.state.lags[(T0, 4)].at(c.time)
    c.advance(60)
    assert c.state.partitions[T0].reassigning  # stalled
    assert c.state.lags[(T0, 4)].at(c.time) == pytest.approx(lag_before + 60 * MB)  # falls behind by produce
    c.inject(2, "down")
    p = c.state.partitions[T0]
    assert p.isr == {1, 3} and p.leader == 1
    c.inject(1, "down")
    p = c.state.partitions[T0]
    assert p.isr == {3} and p.leader == 3
    assert c.state.stats.min_headroom == -1 and T0 in c.state.stats.under_min
    c.inject(3, "down")
    p = c.state.partitions[T0]
    assert p.isr == {3} and p.leader is None  # the last in-sync replica stays listed, no leader
    c.inject(3, "up")
    assert c.state.partitions[T0].leader == 3
    for b in (1, 2, 4):
        c.inject(b, "up")
    finish_time(c, T0)
    p = c.state.partitions[T0]
    assert p.replicas == (4, 2, 3) and p.isr == {2, 3, 4}
    assert c.state.stats.under_min_seconds == 0 or T0 not in c.state.stats.under_min


def test_a_slow_broker_slows_its_copies_and_loses_followers_it_cannot_feed():
    c = cluster([((1,), 500 * MB, 0)])
    c.inject(3, "slow", 0.1)
    c.alter_reassignments({T0: (3,)})
    assert finish_time(c, T0) == pytest.approx(50.0, abs=0.6)
    busy = cluster([((1, 2), 10 * MB, 20 * MB)], network="100 MB/s")
    busy.inject(2, "slow", 0.1)  # 10 MB/s left, 20 MB/s to follow
    busy.advance(29)
    assert busy.state.partitions[T0].isr == {1, 2}
    busy.advance(2)
    assert busy.state.partitions[T0].isr == {1}  # after replica.lag.time.max.ms


def test_cancel_reverts_like_kraft_and_cancelling_nothing_is_ok():
    c = cluster([((1, 2, 3), 1000 * MB, 0)])
    assert c.cancel_reassignments([T0])[T0].note == "no reassignment in progress"
    c.alter_reassignments({T0: (3, 2, 4)})
    assert c.state.partitions[T0].replicas == (3, 2, 4, 1)
    c.cancel_reassignments([T0])
    p = c.state.partitions[T0]
    # RS minus AR in RS order: KRaft's revert need not restore the original order
    assert p.replicas == (3, 2, 1) and not p.reassigning and (T0, 4) not in c.state.lags


def test_revert_that_needs_an_unclean_election_is_refused():
    c = cluster([((1,), 100 * MB, 0)])
    c.apply_throttles(throttle(T0, (1,), (3,), 1 * MB, leader=False))
    c.alter_reassignments({T0: (2, 3)})  # 2 catches up fast, 3 is throttled
    c.advance(5)
    assert c.state.partitions[T0].isr == {1, 2}
    c.inject(1, "down")
    assert c.state.partitions[T0].isr == {2}
    r = c.cancel_reassignments([T0])[T0]
    assert r.code == "INVALID_REPLICA_ASSIGNMENT" and "unclean" in r.message
    assert c.state.partitions[T0].reassigning


def test_alter_validation_and_idempotence():
    c = cluster([((1, 2), 1000 * MB, 0)])
    assert c.alter_reassignments({T0: (1, 1)})[T0].code == "INVALID_REPLICA_ASSIGNMENT"
    assert c.alter_reassignments({T0: (1, 9)})[T0].code == "INVALID_REPLICA_ASSIGNMENT"
    assert c.alter_reassignments({TopicPartition("t", 7): (1,)})[TopicPartition("t", 7)].code == \
        "UNKNOWN_TOPIC_OR_PARTITION"
    c.alter_reassignments({T0: (3, 2)})
    c.advance(1)
    before = c.state
    c.alter_reassignments({T0: (3, 2)})  # the same target again: nothing changes
    assert c.state.partitions == before.partitions and c.state.lags == before.lags


def test_preferred_election_only_on_request():
    c = cluster([((1, 2, 3), 0, 0)])
    c.alter_reassignments({T0: (3, 1, 2)})  # reorder: completes at once, leader stays
    assert c.state.partitions[T0].replicas == (3, 1, 2) and c.state.partitions[T0].leader == 1
    c.advance(600)
    assert c.state.partitions[T0].leader == 1
    assert c.elect_preferred_leaders([T0])[T0].note == ""
    assert c.state.partitions[T0].leader == 3
    assert c.elect_preferred_leaders([T0])[T0].note == "election not needed"
    c.inject(3, "down")
    c.alter_reassignments({T0: (3, 1, 2)})
    assert c.elect_preferred_leaders([T0])[T0].code == "PREFERRED_LEADER_NOT_AVAILABLE"


def test_throttle_delta_appends_and_subtracts_leaving_other_entries():
    c = cluster([((1, 2), 0, 0), ((2, 3), 0, 0)])
    mine = throttle(T0, (1, 2), (3,), 5 * MB)
    other = throttle(T1, (2, 3), (4,), 7 * MB)
    c.apply_throttles(other)
    c.apply_throttles(mine)
    c.apply_throttles(mine)  # idempotent
    c.remove_throttles(mine._replace(leader_brokers=frozenset(), follower_brokers=frozenset()))
    t = c.state.throttles
    assert t.leader["t"] == {(1, 2), (1, 3)} and t.follower["t"] == {(1, 4)}
    assert dict(t.follower_rate) == {4: 7 * MB, 3: 5 * MB}


def test_deterministic():
    def run():
        c = cluster([((1, 2), 700 * MB, MB), ((2, 3), 900 * MB, 2 * MB)], throttle="20 MB/s")
        c.alter_reassignments({T0: (3, 4), T1: (4, 1)})
        c.advance(1000)
        return c.state.partitions, c.state.stats
    assert run() == run()
