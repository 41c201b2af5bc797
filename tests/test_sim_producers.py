"""What producers feel of a move, on the simulated cluster's virtual clock.

Each rule (docs/simulator.md, "What producers feel") has a test that can fail:
the leader epoch bump, the follower quota applied to a follower in the ISR
whose fetcher does not know it is in sync, the quota window's early burst,
one fetcher per source broker, the broker's metadata queue, and the acks=all
probe producer's head-of-line blocking.
"""

import pytest

from engine.core.partition import TopicPartition
from engine.sim.cluster import SimulatedCluster
from engine.sim.model import linked
from engine.sim.probe import probe, union_length
from engine.core.throttles import ThrottledReplica, ThrottleSet
from tests.sim_helpers import scenario

MB = 1_000_000
MiB = 1 << 20
T = [TopicPartition("t", i) for i in range(30)]


def cluster(parts, **kw):
    return SimulatedCluster.from_scenario(scenario(parts, **kw))


def follower_throttle(entries, rate):
    """Follower-side KIP-73 entries (partition index, broker) and that rate on their brokers."""
    replicas = frozenset(ThrottledReplica("t", p, b) for p, b in entries)
    return ThrottleSet(frozenset(), replicas, frozenset(), frozenset(b for _p, b in entries), rate)


def leader_throttle(entries, rate):
    replicas = frozenset(ThrottledReplica("t", p, b) for p, b in entries)
    return ThrottleSet(replicas, frozenset(), frozenset(b for _p, b in entries), frozenset(), rate)


def run_until(c, end, step=0.05):
    """Advance to ``end``; returns {partition: time its reassignment completed}."""
    done = {}
    while c.time < end - 1e-9:
        c.advance(min(step, end - c.time))
        for tp, p in c.state.partitions.items():
            if tp not in done and not p.reassigning:
                done[tp] = c.time
    return done


def blocked(c):
    """Closed and open intervals during which a partition could not complete acks=all writes."""
    s = c.state.stats
    out = {}
    for tp, a, b in linked(s.blocked_log):
        out.setdefault(tp, []).append((a, b))
    for tp, since in s.blocked.items():
        out.setdefault(tp, []).append((since, None))
    return out


# --- the follower quota and the leader epoch ---------------------------------------------------


def two_sources(t1_size=200 * MB, same_leader=False):
    """Broker 3 receives T0 (10 MB) and T1 (``t1_size``) under a 10 MB/s follower throttle; T0 leaves
    broker 2 and T1 leaves broker 1 (each loses a replica: Phase B bumps the leader epoch). T0 is led by
    broker 1; T1 by broker 2, or by broker 1 too (``same_leader``: one fetcher carries both)."""
    t1 = ((1, 2), t1_size, 0) if same_leader else ((2, 1), t1_size, 0)
    c = cluster([((1, 2), 10 * MB, 0), t1])
    c.apply_throttles(follower_throttle([(0, 3), (1, 3)], 10 * MB))
    c.alter_reassignments({T[0]: (1, 3), T[1]: (1, 3) if same_leader else (2, 3)})
    return c


def test_a_throttled_follower_in_the_isr_after_completion_stalls_acks_all_while_other_copies_saturate_its_broker():
    c = two_sources()
    # The follower quota just started recording: 10 MB pass at once (both copies at 50 MB/s until it runs
    # dry after 0.11 s), then 10 MB/s shared: T0 completes at 1.0 s. Phase B drops broker 2: new leader
    # epoch; broker 3's fetcher restarts T0 not knowing it is in sync, and broker 3's quota is used up by
    # T1, fetched by another fetcher (from broker 2): T0's fetcher may not fetch it.
    done = run_until(c, 10)
    assert done[T[0]] == pytest.approx(1.0, abs=0.06)
    assert c.state.partitions[T[0]].isr == {1, 3}
    assert T[0] in c.state.stats.blocked  # the leader cannot complete acks=all writes
    assert c.state.stats.throttled_joins == 1
    done.update(run_until(c, 25))
    # T1 completes at 20 s; the quota then pays the turn it just granted (1 MiB at 10 MB/s) and T0's
    # fetcher, which asked at 1 s and then every replica.fetch.backoff.ms, gets in at 21 s.
    assert done[T[1]] == pytest.approx(20.0, abs=0.06)
    (start, end), = blocked(c)[T[0]]
    assert start == pytest.approx(1.0, abs=0.01) and end == pytest.approx(21.0, abs=0.01)
    (start, end), = blocked(c)[T[1]]  # T1's own follower waits for the same turn
    assert start == pytest.approx(20.0, abs=0.01) and end == pytest.approx(21.0, abs=0.01)


def test_an_unlisted_follower_stalls_only_for_its_refused_fetch_at_the_new_epoch():
    # T0 completes at 0.2 s (10 MB, sharing broker 3's 100 MB/s with T1): Phase B drops broker 2, a new
    # leader epoch. Every broker applies it at once (no queue): follower 3 fetches at the new epoch no
    # later than its leader knows it, is refused UNKNOWN_LEADER_EPOCH and leaves T0 out of its fetches for
    # replica.fetch.backoff.ms, then takes it up with its next request, half a replica.fetch.wait.max.ms
    # later on average. Unlisted, it then fetches at once: 1.25 s, not until T1's copy is done.
    c = cluster([((1, 2), 10 * MB, 0), ((2, 1), 200 * MB, 0)])
    c.apply_throttles(follower_throttle([(1, 3)], 10 * MB))  # only T1 is throttled
    c.alter_reassignments({T[0]: (1, 3), T[1]: (2, 3)})
    done = run_until(c, 25, step=0.01)
    assert done[T[0]] == pytest.approx(0.2, abs=0.011)
    (start, end), = blocked(c)[T[0]]
    assert start == pytest.approx(0.2, abs=1e-6) and end - start == pytest.approx(1.0 + 0.5 / 2)


def test_an_operator_shortens_the_stall_with_replica_fetch_backoff_ms():
    c = cluster([((1, 2), 10 * MB, 0)], replica_fetch_backoff="100ms")
    c.alter_reassignments({T[0]: (1, 3)})
    run_until(c, 5, step=0.01)
    (start, end), = blocked(c)[T[0]]
    assert end - start == pytest.approx(0.1 + 0.5 / 2)


def test_a_follower_whose_broker_applies_the_epoch_change_after_its_leader_is_only_fenced_meanwhile():
    # Broker 3 is still creating the log of T1 (1 s) when T0 completes at 0.2 s (2 moves from broker 2
    # into it, created first): its T0 follower applies the change after leader 1 has. Its old-epoch fetch
    # is refused FENCED_LEADER_EPOCH, it drops T0 until its broker applies the change, then fetches at once.
    c = cluster([((1, 2), 20 * MB, 0), ((1, 2), 0, 0)], replica_creation_time="1s")
    c.alter_reassignments({T[0]: (1, 3)})
    c.advance(0.5)
    c.alter_reassignments({T[1]: (1, 2, 3)})  # broker 3 creates its log from 1.0 s (T0's first) to 2.0 s
    done = run_until(c, 5, step=0.01)
    assert done[T[0]] == pytest.approx(1.2, abs=0.011)  # its log ready at 1.0 s, 20 MB at 100 MB/s
    (start, end), = blocked(c)[T[0]]
    assert start == pytest.approx(1.2, abs=1e-6) and end == pytest.approx(2.0, abs=1e-6)


def test_removing_the_throttle_entry_ends_the_stall_at_the_fetchers_next_request():
    c = two_sources()
    run_until(c, 2.5)
    assert T[0] in c.state.stats.blocked
    c.remove_throttles(follower_throttle([(0, 3)], 10 * MB)._replace(follower_brokers=frozenset()))
    run_until(c, 5)
    (start, end), = blocked(c)[T[0]]
    assert start == pytest.approx(1.0, abs=0.01) and end == pytest.approx(3.0, abs=0.01)  # it asks every 1 s


def test_releasing_the_follower_throttle_before_the_replica_joins_the_isr_avoids_the_stall():
    c = two_sources()
    run_until(c, 0.9)  # T0 has 0.5 MB left
    c.remove_throttles(follower_throttle([(0, 3)], 10 * MB)._replace(follower_brokers=frozenset()))
    done = run_until(c, 25)
    assert done[T[0]] < 1.0  # unthrottled, its last bytes come at network speed
    # its follower is refused at the new epoch (1.25 s), then fetched at once: it does not wait for a
    # turn at the quota T1 uses up until 20 s
    (start, end), = blocked(c)[T[0]]
    assert end - start == pytest.approx(1.25)
    assert c.state.stats.throttled_joins == 1  # T1's alone: it joined listed, its own copy using the quota up


def test_a_fetcher_that_still_copies_takes_its_stalled_follower_along_at_its_next_turn():
    c = two_sources(same_leader=True)
    done = run_until(c, 5)
    assert done[T[0]] == pytest.approx(1.0, abs=0.06)
    (start, end), = blocked(c)[T[0]]  # refused at 1 s, its fetcher asks again 1 s later and gets a turn
    assert start == pytest.approx(1.0, abs=0.01) and end == pytest.approx(2.0, abs=0.01)


def test_the_epoch_is_bumped_only_when_the_replica_set_loses_a_member_or_the_leader_changes():
    # T0 only gains broker 3 (no bump: broker 3 joins the ISR knowing it is in sync); T1 swaps 2 for 3.
    c = cluster([((1, 2), 10 * MB, 0), ((1, 2), 10 * MB, 0), ((2, 1), 200 * MB, 0)])
    c.apply_throttles(follower_throttle([(0, 3), (1, 3), (2, 3)], 10 * MB))
    c.alter_reassignments({T[0]: (1, 2, 3), T[1]: (1, 3), T[2]: (2, 3)})
    run_until(c, 8)
    assert not c.state.partitions[T[0]].reassigning and not c.state.partitions[T[1]].reassigning
    assert T[0] not in blocked(c) and T[1] in blocked(c)
    c2 = cluster([((3, 1, 2), 0, 0)])
    c2.apply_throttles(follower_throttle([(0, 1)], 10 * MB))
    c2.alter_reassignments({T[0]: (1, 2, 3)})  # a reorder: same set, same leader, no bump
    run_until(c2, 1)
    assert T[0] not in blocked(c2)
    c2.elect_preferred_leaders([T[0]])  # leader 3 -> 1: a bump; followers 2 and 3 are refused at first
    c2.apply_throttles(follower_throttle([(0, 2)], 10 * MB))
    c2.elect_preferred_leaders([T[0]])  # no change: no bump (the stall is not extended)
    run_until(c2, 3)
    (start, end), = blocked(c2)[T[0]]
    assert start == pytest.approx(1.0) and end == pytest.approx(2.25)


def test_a_follower_that_fetches_nothing_for_replica_lag_time_max_leaves_the_isr_and_writes_resume():
    c = two_sources(t1_size=400 * MB)  # T1 saturates broker 3 until 40 s: T0 would wait until 41 s
    run_until(c, 35)
    (start, end), = blocked(c)[T[0]]
    assert start == pytest.approx(1.0, abs=0.01) and end == pytest.approx(31.0, abs=0.01)
    assert 3 in c.state.partitions[T[0]].isr  # it caught up again at once (nothing was produced)
    assert c.state.stats.throttled_joins == 2


# --- the quota window's early burst ----------------------------------------------------------------


def copied_by(c, t):
    c.advance(t - c.time)
    return c.state.stats.bytes_copied


def test_a_leader_quota_lets_its_whole_window_through_early():
    c = cluster([((1,), 400 * MB, 0)])
    c.apply_throttles(leader_throttle([(0, 1)], 4 * MB))
    c.alter_reassignments({T[0]: (2,)})
    # It records every follower fetch, so it has 11 s of samples: 44 MB pass at 100 MB/s (dry after
    # 44 / 96 s), the rest at 4 MB/s: 89 s where bytes / rate is 100 s.
    assert copied_by(c, 44 / 96) == pytest.approx(44 / 96 * 100 * MB, rel=1e-6)
    assert c.state.stats.bytes_copied >= 10 * 4 * MB  # at least 10 s x rate early
    assert copied_by(c, 10) == pytest.approx((44 / 96 * 100 + (10 - 44 / 96) * 4) * MB, rel=1e-6)
    assert run_until(c, 95)[T[0]] == pytest.approx(44 / 96 + (400 - 44 / 96 * 100) / 4, abs=0.06)


def test_a_follower_quota_that_starts_recording_lets_one_sample_window_through():
    c = cluster([((1,), 400 * MB, 0)])
    c.apply_throttles(follower_throttle([(0, 2)], 4 * MB))
    c.alter_reassignments({T[0]: (2,)})
    assert copied_by(c, 4 / 96) == pytest.approx(4 / 96 * 100 * MB, rel=1e-6)
    assert copied_by(c, 10) == pytest.approx((4 / 96 * 100 + (10 - 4 / 96) * 4) * MB, rel=1e-6)


def test_a_follower_quota_that_has_recorded_for_its_window_lets_it_all_through():
    c = cluster([((1,), 400 * MB, 0), ((1, 2), 0, 0)])
    c.apply_throttles(follower_throttle([(1, 2)], 4 * MB))  # a listed in-sync replica: broker 2 records
    c.advance(20)
    c.apply_throttles(follower_throttle([(0, 2)], 4 * MB))
    c.alter_reassignments({T[0]: (2,)})
    assert copied_by(c, 20 + 44 / 96) == pytest.approx(44 / 96 * 100 * MB, rel=1e-6)


# --- one fetcher per source broker -------------------------------------------------------------------


def test_a_receiving_broker_shares_its_quota_by_fetch_responses_so_moves_finish_in_waves_by_source():
    # Broker 5 receives 20 copies led by broker 1 and 2 led by broker 2. A response carries up to
    # replica.fetch.max.bytes (1 MiB) per partition and replica.fetch.response.max.bytes (10 MiB) in all,
    # and the quota grants responses in turn: broker 1's fetcher moves 10 partitions' worth per turn for
    # 20 partitions, broker 2's 2 for 2. Broker 2's moves finish first, then broker 1's, together.
    parts = [((1, 3), 10 * MB, 0)] * 20 + [((2, 4), 10 * MB, 0)] * 2
    c = cluster(parts, brokers=5, network="1000 MB/s")
    c.apply_throttles(follower_throttle([(i, 5) for i in range(22)], 10 * MB))
    c.alter_reassignments({T[i]: (1, 5) for i in range(20)} | {T[i]: (2, 5) for i in (20, 21)})
    done = run_until(c, 40, step=0.1)
    from_1 = [done[T[i]] for i in range(20)]
    from_2 = [done[T[i]] for i in (20, 21)]
    assert max(from_2) < min(from_1) - 5
    assert max(from_1) - min(from_1) < 0.2
    # weights 10/20 and 1 (12 in all): during the 10 MB burst (broker 5's 1000 MB/s, 10 MB / 990 MB/s)
    # a copy from broker 2 gets 1000/12 MB/s, then 10/12 MB/s
    burst = 10 / 990
    assert from_2[0] == pytest.approx(burst + (10 - burst * 1000 / 12) / (10 / 12), abs=0.11)
    # broker 2's followers are in the ISR, listed, and their fetcher has nothing else to fetch while
    # broker 1's copies use the quota up: acks=all waits until those are done
    for i in (20, 21):
        (start, end), = blocked(c)[T[i]]
        assert start == pytest.approx(from_2[0], abs=0.11) and end >= max(from_1) - 0.11


# --- the broker's metadata queue ---------------------------------------------------------------------


def test_a_broker_creates_new_replicas_one_at_a_time_and_an_epoch_change_waits_its_turn():
    parts = [((1, 2), 10 * MB, 0)] * 4 + [((3, 2), 0, 0)]
    c = cluster(parts, replica_creation_time="1s")
    c.alter_reassignments({T[i]: (1, 2, 3) for i in range(4)})
    c.alter_reassignments({T[4]: (2, 3)})  # a reorder: completes at once, leader 3 stays
    c.advance(0.5)
    c.elect_preferred_leaders([T[4]])  # leader 2: broker 3 follows at a new epoch once it applied it
    done = run_until(c, 6, step=0.01)
    # one request, one delta: broker 3 creates the four logs one after the other, then fetches them all
    # (ReplicaManager.applyLocalFollowersDelta), 10 MB each sharing its 100 MB/s: 0.4 s
    for i in range(4):
        assert done[T[i]] == pytest.approx(4 + 0.4, abs=0.02)
    (start, end), = blocked(c)[T[4]]
    assert start == pytest.approx(0.5, abs=1e-6) and end == pytest.approx(4.0, abs=1e-6)


def test_replicas_added_by_separate_requests_start_fetching_as_their_own_log_is_created():
    c = cluster([((1, 2), 10 * MB, 0)] * 2, replica_creation_time="1s")
    c.alter_reassignments({T[0]: (1, 2, 3)})
    c.alter_reassignments({T[1]: (1, 2, 3)})
    done = run_until(c, 4, step=0.01)
    assert done[T[0]] == pytest.approx(1.1, abs=0.02) and done[T[1]] == pytest.approx(2.1, abs=0.02)


def test_the_default_replica_creation_time_is_the_calibrated_one():
    from engine.sim.model import DEFAULT_REPLICA_CREATION_TIME
    from engine.sim.scenario import from_document
    doc = {"brokers": {"count": 3}, "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}]}
    assert from_document(doc).replica_creation_time == DEFAULT_REPLICA_CREATION_TIME == 0.1


# --- the probe producer ----------------------------------------------------------------------------


A, B = TopicPartition("p", 0), TopicPartition("p", 1)


def test_a_blocked_partition_holds_up_every_later_message_on_its_leaders_connection():
    # 2 messages/s alternating A (0, 1, 2 s ...) and B (0.5, 1.5 ...), both led by broker 1. A cannot
    # complete writes in [1.2, 3.0): its message at 2.0 waits until 3.0, and so does B's at 2.5.
    r = probe([A, B], 2, 10, [(A, 1.2, 3.0)], [(0, A, 1), (0, B, 1)])
    assert r.messages == 20
    assert r.max == pytest.approx(1.0) and r.p50 == 0
    assert r.p99 == pytest.approx(0.9)  # 2 messages spread over (0, 1] s: 0.2 of them above 0.9 s
    assert r.blocked_seconds == pytest.approx(1.8)


def test_other_leaders_connections_are_not_held_up():
    r = probe([A, B], 2, 10, [(A, 1.2, 3.0)], [(0, A, 1), (0, B, 2)])
    assert r.p99 == pytest.approx(0.8)  # one message over (0, 1]: 0.2 of it above 0.8 s


def test_a_stall_between_two_messages_costs_nothing():
    r = probe([A, B], 2, 10, [(A, 1.2, 1.9)], [(0, A, 1), (0, B, 1)])
    assert r.max == 0 and r.p99 == 0 and r.blocked_seconds == pytest.approx(0.7)


def test_a_partition_without_leader_holds_up_only_its_own_messages():
    r = probe([A, B], 2, 10, [(A, 1.2, 4.2)], [(0, A, 1), (0, B, 1), (1.1, A, None)])
    assert r.max == pytest.approx(2.2)  # messages to A at 2, 3 and 4 s wait until 4.2 s
    assert r.p99 == pytest.approx(2.2 - 0.2 / 3 * 2, abs=1e-6)


def test_union_length():
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([]) == 0


def test_sim_cluster_state_names_the_partitions_that_cannot_complete_acks_all_writes():
    from engine.sim.server import SimServer
    sc = scenario([((1, 2), 10 * MB, 0), ((2, 1), 200 * MB, 0)])
    server = SimServer(sc, speed=0)  # a frozen wall clock: the test moves simulated time itself
    try:
        c = server.cluster
        c.apply_throttles(follower_throttle([(0, 3), (1, 3)], 10 * MB))
        c.alter_reassignments({T[0]: (1, 3), T[1]: (2, 3)})
        run_until(c, 5)
        state = server.handle("GET", "/v1/state", {})
        assert state["acks_all_blocked"] == ["t-0"] and state["isr_joins_throttled_and_saturated"] == 1
        assert state["under_replicated"] == 1  # t-1: RS 2, 1, 3 with 3 not yet in sync
    finally:
        server.httpd.server_close()


# --- how fetchers share a used-up follower quota ------------------------------------------------------


def test_a_fetcher_that_also_fetches_in_sync_partitions_takes_a_used_up_quota_first():
    # Broker 3 follows T2 (led by broker 1, in sync) and copies T0 from broker 1 and T1 from broker 2 under
    # a 10 MB/s follower quota. Refused, broker 3's fetcher from broker 2 backs off replica.fetch.backoff.ms;
    # its fetcher from broker 1 asks again with every return of T2's fetch: it gets the quota whenever it
    # opens (Kafka's rule fetch by fetch, benchmarks.quota), so T0 is copied first, then T1.
    c = cluster([((1, 2), 50 * MB, 0), ((2, 1), 50 * MB, 0), ((1, 3), 0, 1000)])
    c.apply_throttles(follower_throttle([(0, 3), (1, 3)], 10 * MB))
    c.alter_reassignments({T[0]: (1, 3), T[1]: (2, 3)})
    done = run_until(c, 20, step=0.01)
    burst = 10 / 90  # the quota's first sample window (10 MB) passes at broker 3's 100 MB/s, both copies at 50
    assert done[T[0]] == pytest.approx(burst + (50 - 50 * burst) / 10, abs=0.02)  # 4.56 s
    assert done[T[1]] == pytest.approx(burst + (100 - 100 * burst) / 10, abs=0.02)  # 9.0 s


def test_fetchers_that_all_back_off_share_a_used_up_quota():
    c = cluster([((1, 2), 50 * MB, 0), ((2, 1), 50 * MB, 0)])
    c.apply_throttles(follower_throttle([(0, 3), (1, 3)], 10 * MB))
    c.alter_reassignments({T[0]: (1, 3), T[1]: (2, 3)})
    done = run_until(c, 20, step=0.01)
    assert done[T[0]] == pytest.approx(done[T[1]], abs=0.011)
    assert done[T[0]] == pytest.approx(10 / 90 + (100 - 100 * 10 / 90) / 10, abs=0.02)  # 5 MB/s each after the burst


def test_a_used_up_follower_quota_loses_some_of_its_rate_to_fetchers_backing_off():
    c = cluster([((1,), 100 * MB, 0)], follower_quota_loss=0.08)
    c.apply_throttles(follower_throttle([(0, 2)], 10 * MB))
    c.alter_reassignments({T[0]: (2,)})
    # the first sample window (10 MB) at once, as Kafka's quota lets it; then 10 / 1.08 MB/s
    burst = 10 / 90
    assert run_until(c, 20, step=0.01)[T[0]] == pytest.approx(burst + (100 - 100 * burst) * 1.08 / 10, abs=0.02)


# --- what the engine's requests cost a broker ----------------------------------------------------------


def test_a_broker_falls_behind_while_it_gets_more_requests_than_it_absorbs_and_catches_up_after():
    from engine.sim.load import delay
    fast = [i / 20 for i in range(40)]  # 20 requests/s for 2 s to a broker that absorbs 10
    points = delay(fast, 10.0)
    # counted over the last second the rate passes 10/s at 0.5 s: it falls behind by (rate - 10) / 10 s
    # per s, 1 s per s at 20/s, and catches up as the rate falls back below 10/s and to 0 (1 s per s)
    assert points[0] == (pytest.approx(0.5, abs=0.03), 0)
    peak_at, peak = max(points, key=lambda p: p[1])
    assert peak == pytest.approx(0.25 + 1.0 + 0.25, abs=0.06) and peak_at == pytest.approx(2.45, abs=0.06)
    assert points[-1][1] == 0 and points[-1][0] == pytest.approx(2.95 + 1.25, abs=0.06)
    assert delay([i / 5 for i in range(20)], 10.0) == []  # 5 requests/s: absorbed
    assert delay(fast, None) == []  # requests cost nothing


def test_a_busy_broker_delays_the_writes_it_leads_and_the_later_ones_on_the_connection():
    from engine.sim.load import windows
    # A led by broker 1, B by broker 2; broker 1 falls 1 s behind from 1 s to 2 s and catches up by 3 s: a
    # write sent at t is answered at t + its delay, A's message at 2.0 s at 3.0 s
    busy = {1: windows([(1.0, 0.0), (2.0, 1.0), (3.0, 0.0)])}
    r = probe([A, B], 2, 10, [], [(0, A, 1), (0, B, 2)], busy)
    assert r.max == pytest.approx(1.0, abs=0.06)
    assert r.per_second[2] == pytest.approx(0.95, abs=0.06) and r.per_second[0] == 0 and r.per_second[5] == 0
    alone = probe([A, B], 2, 10, [], [(0, A, 2), (0, B, 2)], busy)  # broker 1 leads nothing
    assert alone.max == 0


def test_the_probe_reports_the_most_latency_of_each_second():
    r = probe([A, B], 2, 6, [(A, 1.2, 3.0)], [(0, A, 1), (0, B, 1)])
    # A's message at 2.0 s waits until 3.0 s, B's at 2.5 s behind it; nothing else waits
    assert r.per_second == pytest.approx((0, 0, 1.0, 0, 0, 0))
