"""The balancer (KAFKA-5319): constraints always hold, balance whenever feasible, minimal moves."""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.balancer import (
    BalanceError, balance_leaders, balance_replicas, change_bound, cluster_state, leader_imbalance, propose,
    rack_spread_kept, target_range,
)
from engine.core.balancer.racks import distinct_racks
from engine.core.partition import TopicPartition


def tp(i, topic="t"):
    return TopicPartition(topic, i)


def counts(assignment, brokers):
    c = Counter(b for r in assignment.values() for b in r)
    return {b: c.get(b, 0) for b in brokers}


def preferred(assignment, brokers):
    c = Counter(r[0] for r in assignment.values())
    return {b: c.get(b, 0) for b in brokers}


# --- examples -------------------------------------------------------------------------------------


def test_kafka_5319_example_leader_balance_moves_no_data():
    # every partition written "in ascending order": broker 1 leads all three
    asg = {tp(0): (1, 2, 3), tp(1): (1, 2, 3), tp(2): (1, 2, 3)}
    out = balance_leaders(asg)
    assert sorted(r[0] for r in out.values()) == [1, 2, 3]
    assert all(set(out[t]) == set(asg[t]) for t in asg)


def test_leader_cannot_move_to_a_broker_without_a_replica():
    asg = {tp(0): (1, 2), tp(1): (1, 2), tp(2): (1, 2), tp(3): (3, 4)}
    out = balance_leaders(asg, brokers=[1, 2, 3, 4])
    lead = preferred(out, [1, 2, 3, 4])
    # brokers 1 and 2 share three partitions, 3 and 4 one: the best is 2+1 and 1+0
    assert sorted([lead[1], lead[2]]) == [1, 2] and sorted([lead[3], lead[4]]) == [0, 1]
    assert all(set(out[t]) == set(asg[t]) for t in asg)


def test_leader_balance_uses_chains_of_swaps():
    # 1 leads two partitions; only a chain 1 -> 2 -> 3 can hand one to broker 3
    asg = {tp(0): (1, 2), tp(1): (1, 4), tp(2): (2, 3), tp(3): (4, 1)}
    out = balance_leaders(asg, brokers=[1, 2, 3, 4])
    assert preferred(out, [1, 2, 3, 4]) == {1: 1, 2: 1, 3: 1, 4: 1}


def test_add_broker_fills_it_and_moves_exactly_the_bound():
    asg = {tp(i): ((i % 3), (i + 1) % 3) for i in range(12)}  # 24 replicas on brokers 0-2
    p = propose("add-brokers", asg, {}, [0, 1, 2], add=[3], threshold=0.0)
    after = {**asg, **p.proposed}
    assert counts(after, range(4)) == {0: 6, 1: 6, 2: 6, 3: 6}
    assert p.replicas_moved == p.lower_bound == 6
    assert all(len(set(r)) == len(r) for r in after.values())


def test_remove_brokers_drains_them_completely():
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    asg = {tp(i): (i % 4, (i + 1) % 4) for i in range(16)}
    p = propose("remove-brokers", asg, racks, range(4), remove=[3])
    after = {**asg, **p.proposed}
    assert counts(after, range(4))[3] == 0
    assert p.replicas_moved == p.lower_bound >= 8
    assert rack_spread_kept(asg, after, racks) or any("rack spread" in n for n in p.notes)


def test_balanced_cluster_yields_an_empty_proposal():
    asg = {tp(i): (i % 4, (i + 1) % 4, (i + 2) % 4) for i in range(8)}
    for mode in ("replica-balance", "leader-balance", "cluster-balance"):
        p = propose(mode, asg, {}, range(4))
        assert p.proposed == {} and p.replicas_moved == 0 and p.lower_bound == 0


def test_rack_spread_never_drops_and_improves_when_it_can():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c"}
    # partition 0 sits on rack a twice; broker 4 (rack c) is empty
    asg = {tp(0): (0, 1), tp(1): (2, 3), tp(2): (0, 2)}
    p = propose("replica-balance", asg, racks, range(5), threshold=0.0)
    after = {**asg, **p.proposed}
    assert rack_spread_kept(asg, after, racks)
    assert distinct_racks(after[tp(0)], racks) == 2 or distinct_racks(after[tp(1)], racks) == 2


def test_a_rack_s_last_broker_is_pinned_and_the_others_are_balanced_among_themselves():
    # racks a: 1, 4; b: 2, 5; c: 3. Every partition spans the three racks, so broker 3 holds
    # one replica of each and none may leave rack c; 1 and 2 hold more than 4 and 5.
    racks = {1: "a", 4: "a", 2: "b", 5: "b", 3: "c"}
    asg = {tp(i): ((1, 2, 3) if i % 3 else (4, 5, 3)) for i in range(12)}  # 1, 2: 8 each; 4, 5: 4 each
    p = propose("replica-balance", asg, racks, [1, 2, 3, 4, 5], threshold=0.0)
    after = counts({**asg, **p.proposed}, [1, 2, 3, 4, 5])
    assert p.pinned == (3,) and after[3] == 12 and "brokers 3 (12) stay outside the range" in p.notes[0]
    assert p.balanced and p.target == (6, 6) and after == {1: 6, 2: 6, 3: 12, 4: 6, 5: 6}
    assert p.replicas_moved == p.lower_bound == 4
    assert rack_spread_kept(asg, {**asg, **p.proposed}, racks)
    again = propose("replica-balance", {**asg, **p.proposed}, racks, [1, 2, 3, 4, 5], threshold=0.0)
    assert again.proposed == {} and again.pinned == (3,) and again.balanced


def test_disable_rack_aware_allows_what_racks_forbid():
    racks = {0: "a", 1: "b", 2: "a"}
    asg = {tp(0): (0, 1), tp(1): (1, 0), tp(2): (0, 1)}  # broker 2 empty; moving 1->2 loses rack b
    aware = balance_replicas(asg, racks, [0, 1, 2], threshold=0.0)
    blind = balance_replicas(asg, racks, [0, 1, 2], threshold=0.0, rack_aware=False)
    assert rack_spread_kept(asg, aware.assignment, racks)
    assert blind.balanced


def test_generate_moves_topics_onto_the_broker_list_only():
    asg = {**{tp(i, "a"): (0, 1) for i in range(4)}, **{tp(i, "b"): (0, 1) for i in range(4)}}
    p = propose("generate", asg, {}, range(4), topics=["a"], broker_list=[2, 3])
    assert set(p.proposed) == {tp(i, "a") for i in range(4)}
    assert all(set(r) == {2, 3} for r in p.proposed.values())
    with pytest.raises(BalanceError, match="unknown topics"):
        propose("generate", asg, {}, range(4), topics=["zzz"], broker_list=[2])


def test_fewer_bytes_moved_among_equal_moves():
    asg = {tp(0): (0,), tp(1): (0,), tp(2): (0,), tp(3): (1,)}
    sizes = {tp(0): 900, tp(1): 10, tp(2): 500, tp(3): 1}
    p = propose("replica-balance", asg, {}, [0, 1], sizes, threshold=0.0)
    assert p.proposed == {tp(1): (1,)} and p.bytes_moved == 10


def test_cluster_state_figures():
    racks = {0: "a", 1: "a", 2: "b"}
    asg = {tp(0): (0, 1), tp(1): (0, 2), tp(2): (0, 1)}
    st_ = cluster_state(asg, racks, leaders={tp(0): 1, tp(1): 0, tp(2): 0}, sizes={tp(0): 10, tp(1): 20, tp(2): 30})
    rows = {r.name: r for r in st_.brokers}
    assert (rows["0"].replicas, rows["0"].leaders, rows["0"].preferred_leaders, rows["0"].bytes) == (3, 2, 3, 60)
    assert {r.name: r.replicas for r in st_.racks} == {"a": 5, "b": 1}
    assert st_.imbalance["replicas"] == pytest.approx(50.0)  # broker 0: 3 vs average 2


def test_target_range_always_contains_the_average():
    for total, n, t in [(10, 4, 0.0), (7, 3, 0.1), (100, 7, 0.1), (3, 5, 0.5)]:
        lo, hi = target_range(total, n, t)
        assert lo <= total / n <= hi


def test_impossible_requests_are_refused_clearly():
    with pytest.raises(BalanceError, match="replication factor 3 is larger than the 2 eligible brokers"):
        propose("remove-brokers", {tp(0): (0, 1, 2)}, {}, range(3), remove=[2])
    with pytest.raises(BalanceError, match=r"brokers \[9\] are not in the cluster"):
        propose("remove-brokers", {tp(0): (0, 1)}, {}, range(3), remove=[9])
    # Kafka's --generate refuses unknown brokers too: every replica would land on broker 99
    with pytest.raises(BalanceError, match=r"brokers \[99\] of the broker list are not in the cluster"):
        propose("generate", {tp(0): (0, 1)}, {}, range(3), topics=["t"], broker_list=[1, 2, 99])


def test_leader_balance_of_partitions_whose_size_is_unknown():
    p = propose("leader-balance", {tp(0, "t0"): (0, 1), tp(0, "t1"): (0, 1)}, {}, [0, 1])
    assert p.leaders_moved == 1 and p.replicas_moved == 0 and p.bytes_moved == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), min_size=2, max_size=3, unique=True), min_size=1, max_size=25))
def test_a_broker_that_is_down_is_never_made_a_preferred_leader(replica_lists):
    asg = {tp(i): tuple(r) for i, r in enumerate(replica_lists)}
    p = propose("leader-balance", asg, {}, range(5), down=[2])
    assert not [t for t, r in p.proposed.items() if r[0] == 2]
    led_before = sum(1 for r in asg.values() if r[0] == 2)
    led_after = sum(1 for r in {**asg, **p.proposed}.values() if r[0] == 2)
    assert led_after <= led_before


def changed_leaders(before, after):
    return sum(1 for t, r in before.items() if after[t][0] != r[0])


def test_adding_a_broker_keeps_the_old_preferred_leaders_where_balance_allows():
    # the small cluster: 24 x 16 MiB, RF 3, on brokers 1-3 led 8 each; broker 4 joins. Every replica
    # moved is of the same size, so moving a follower's instead of a leader's costs nothing: 6 preferred
    # leaders change (broker 4 must lead 6), not 18 (the old choice moved the leader's replica each time)
    asg = {tp(i): (1 + i % 3, 1 + (i + 1) % 3, 1 + (i + 2) % 3) for i in range(24)}
    sizes = {t: 16 << 20 for t in asg}
    p = propose("add-brokers", asg, {}, [1, 2, 3], sizes, threshold=0.0, add=[4])
    after = {**asg, **p.proposed}
    assert p.replicas_moved == p.lower_bound == 18 and p.bytes_moved == 18 * (16 << 20)
    assert counts(after, [1, 2, 3, 4]) == {1: 18, 2: 18, 3: 18, 4: 18}
    assert preferred(after, [1, 2, 3, 4]) == {1: 6, 2: 6, 3: 6, 4: 6}
    assert p.leaders_moved == changed_leaders(asg, after) == change_bound(after, asg) == 6


def test_leader_balance_hands_over_a_partition_whose_leader_changes_anyway():
    # draining broker 0 gives t-1's leadership to broker 1 (it changes anyway); leader balance then
    # hands that one on to broker 2, not t-0, which broker 1 has led all along
    asg = {tp(0): (1, 2), tp(1): (0, 2)}
    p = propose("remove-brokers", asg, {}, [0, 1, 2], remove=[0])
    after = {**asg, **p.proposed}
    assert preferred(after, [1, 2]) == {1: 1, 2: 1}
    assert after[tp(0)] == (1, 2) and p.leaders_moved == 1


def test_leader_balance_gives_first_to_a_broker_below_the_range():
    # 10 partitions on 4 brokers: each leads 2 or 3. Broker 0 leads 4, broker 2 one: one hand-over
    # from 0 to 2 balances both (giving to broker 1 first, which may take one, needs a second)
    asg = {tp(0): (0, 1), tp(1): (0, 1), tp(2): (0, 2), tp(3): (0, 1), tp(4): (1, 3), tp(5): (1, 3),
           tp(6): (2, 3), tp(7): (3, 1), tp(8): (3, 1), tp(9): (3, 1)}
    out = balance_leaders(asg, range(4))
    assert preferred(out, range(4)) == {0: 3, 1: 2, 2: 2, 3: 3}
    assert changed_leaders(asg, out) == 1


def test_an_exchange_that_would_leave_leaders_unbalanced_is_not_kept():
    # 4 partitions on 5 brokers: each leads at most 1. Replica balance moves t-1 (RF 1) from broker 1 to 4;
    # the exchange would keep t-1 on 1 and move t-2's follower on 1 instead, but then broker 2, leading
    # t-0 (RF 1) and t-3, could give t-3 only to 1, which leads t-1 already: without the exchange it can
    asg = {tp(0): (2,), tp(1): (1,), tp(2): (3, 0, 1), tp(3): (2, 1)}
    p = propose("cluster-balance", asg, {}, range(5), {t: 1 for t in asg}, threshold=0.0)
    after = {**asg, **p.proposed}
    assert max(preferred(after, range(5)).values()) == 1
    assert p.replicas_moved == 1 and p.bytes_moved == 1


def test_the_same_cluster_in_another_order_gets_the_same_proposal():
    asg = {tp(i): ((i * 7) % 5, (i * 3 + 1) % 5) for i in range(40) if (i * 7) % 5 != (i * 3 + 1) % 5}
    racks = {b: "ab"[b % 2] for b in range(6)}
    sizes = {t: 1 + t.partition % 4 for t in asg}
    forward = propose("add-brokers", asg, racks, range(5), sizes, add=[5])
    backward = propose("add-brokers", dict(reversed(list(asg.items()))), racks, range(5), sizes, add=[5])
    assert forward.proposed == backward.proposed and forward.leaders_moved == backward.leaders_moved


# --- properties --------------------------------------------------------------------------------------


@st.composite
def clusters(draw):
    n = draw(st.integers(3, 9))
    rack_names = draw(st.sampled_from([["a"], ["a", "b"], ["a", "b", "c"], None]))
    if rack_names is None:  # broker 0 alone in its rack, as after a decommission: it may be pinned
        racks = {b: "c" if b == 0 else "ab"[b % 2] for b in range(n)}
    else:
        racks = {b: rack_names[b % len(rack_names)] for b in range(n)}
    rf = draw(st.integers(1, min(3, n - 1)))
    parts = draw(st.integers(1, 30))
    asg = {tp(i): tuple(draw(st.permutations(range(n)))[:rf]) for i in range(parts)}
    sizes = {t: draw(st.integers(1, 1000)) for t in asg}
    return n, racks, asg, sizes


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([0.0, 0.1, 0.3]), st.booleans())
def test_replica_balance_respects_every_constraint_and_reaches_the_range_when_feasible(c, threshold, rack_aware):
    n, racks, asg, sizes = c
    p = propose("cluster-balance", asg, racks, range(n), sizes, threshold=threshold, rack_aware=rack_aware)
    after = {**asg, **p.proposed}
    for t, r in after.items():
        assert len(set(r)) == len(r) == len(asg[t])  # never two replicas on one broker, RF kept
    if rack_aware:
        assert rack_spread_kept(asg, after, racks)
    if p.balanced:  # the bound counts the moves needed to reach the range
        assert p.replicas_moved >= p.lower_bound
    else:
        assert p.notes
    lo, hi = p.target
    if not rack_aware:  # without rack constraints the range is always reachable
        assert p.balanced
    if p.balanced:
        assert all(lo <= v <= hi for b, v in counts(after, range(n)).items() if b not in p.pinned)
    if p.pinned:
        assert p.notes and all(not lo <= counts(after, range(n))[b] <= hi for b in p.pinned)
    again = propose("replica-balance", after, racks, range(n), sizes, threshold=threshold, rack_aware=rack_aware)
    assert again.replicas_moved == 0 or not p.balanced


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_leader_balance_moves_no_data_and_never_worsens_the_spread(c):
    n, racks, asg, sizes = c
    out = balance_leaders(asg, range(n))
    assert all(set(out[t]) == set(asg[t]) for t in asg)
    before, after = preferred(asg, range(n)), preferred(out, range(n))
    assert max(after.values()) <= max(before.values())
    assert min(after.values()) >= min(before.values())
    # with every partition on every broker, perfect balance is always reachable
    full = {t: tuple(range(n)) for t in asg}
    spread = preferred(balance_leaders(full), range(n))
    assert max(spread.values()) - min(spread.values()) <= 1


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(1, 2))
def test_removed_brokers_end_empty(c, k):
    n, racks, asg, sizes = c
    remove = list(range(n - k, n))
    rf = max(len(r) for r in asg.values())
    if rf > n - k:
        with pytest.raises(BalanceError):
            propose("remove-brokers", asg, racks, range(n), sizes, remove=remove)
        return
    p = propose("remove-brokers", asg, racks, range(n), sizes, remove=remove)
    after = {**asg, **p.proposed}
    assert all(b not in remove for r in after.values() for b in r)
    assert p.replicas_moved >= sum(1 for r in asg.values() for b in r if b in remove)


def test_no_replica_is_ever_proposed_onto_a_broker_that_is_down():
    asg = {tp(i): (i % 3, (i + 1) % 3) for i in range(9)}  # broker 3 empty and down
    with pytest.raises(BalanceError, match=r"brokers \[3\] are down"):
        propose("replica-balance", asg, {}, range(4), down=[3])
    drained = propose("remove-brokers", {**asg, tp(9): (3, 0)}, {}, range(4), remove=[3], down=[3])
    assert all(3 not in r for r in drained.proposed.values())
    assert propose("leader-balance", asg, {}, range(4), down=[3]).replicas_moved == 0  # no data moves anyway


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from(["cluster-balance", "replica-balance", "add-brokers", "remove-brokers"]),
       st.sampled_from([0.0, 0.1, 0.3]), st.booleans(), st.booleans())
def test_keeping_preferred_leaders_never_copies_more_than_the_replica_choice_alone(c, mode, threshold, rack_aware,
                                                                                  equal):
    # the replica choice alone (balance_replicas, the greedy) against the proposal, which may exchange a
    # leader's replica for a follower's: the same count per broker, no more bytes nor replicas moved, no
    # partition on fewer racks, and leader balance as close to its range
    n, racks, asg, sizes = c
    if equal:  # many partitions of one size: where the exchanges can happen
        sizes = {t: 1 + sizes[t] % 2 for t in asg}
    kw = {"threshold": threshold, "rack_aware": rack_aware}
    brokers, eligible = range(n), list(range(n))
    if mode == "add-brokers":
        brokers, kw["add"] = range(n - 1), [n - 1]
    if mode == "remove-brokers":
        if max(len(r) for r in asg.values()) > n - 1:
            return
        kw["remove"], eligible = [n - 1], list(range(n - 1))
    p = propose(mode, asg, racks, brokers, sizes, **kw)
    greedy = balance_replicas(asg, racks, eligible, sizes, threshold, rack_aware).assignment
    after = {**asg, **p.proposed}

    def copied(target):
        return sum(sizes[t] * len(set(target[t]) - set(r)) for t, r in asg.items())

    assert p.bytes_moved == copied(after) <= copied(greedy)
    assert p.replicas_moved <= sum(len(set(greedy[t]) - set(r)) for t, r in asg.items())
    assert counts(after, range(n)) == counts(greedy, range(n))
    if rack_aware:
        assert all(distinct_racks(after[t], racks) >= distinct_racks(greedy[t], racks) for t in asg)
    if mode != "replica-balance":
        assert leader_imbalance(after, eligible) <= leader_imbalance(balance_leaders(greedy, eligible), eligible)
    assert p.leaders_moved >= change_bound(after, asg)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7), st.lists(st.integers(0, 6), min_size=1, max_size=40))
def test_with_every_partition_on_every_broker_leader_balance_changes_only_what_it_must(n, leaders):
    # any broker may lead any partition: every hand-over goes straight from a broker above the range to
    # one below it, so exactly the leaderships the brokers above must give change
    asg = {tp(i): tuple([b % n] + [x for x in range(n) if x != b % n]) for i, b in enumerate(leaders)}
    out = balance_leaders(asg, range(n))
    spread = preferred(out, range(n))
    assert max(spread.values()) - min(spread.values()) <= 1
    assert changed_leaders(asg, out) == change_bound(out, asg)
