"""The outgoing cap when a leader moves between looks the core cannot order (docs/algorithm.md, section 2,
*Caps count the cluster's leaders as last observed*).

The core sets aside a look taken at the very time of (or before) the newest thing it knows of a partition
(section 4): two looks stamped alike cannot be ordered by their stamps. A tick still started a partition
whose look it had set aside, from the older record: the fault simulator's seed 9363, where an operator's
request and a leader move came at the same instant. The request's look saw partition t1-5 led by broker 6,
the leader moved to 3, and the tick's look (stamped alike) saw 3 and was set aside; the tick started t1-5's
step charged to 6 and a 677 MB copy out of 3 beside it, over broker 3's outgoing cap. The same happens for
a clock set back less than ``CLOCK_SET_BACK``: every look is set aside until the clock passes what the
state knows.

Here the real decider runs against the simulated cluster on a virtual clock (frozen within an instant, so
a request's look and the tick's look are stamped alike), with leader moves, requests and clock steps back
drawn by hypothesis. The oracle is the cluster, not the engine: at every alter, each partition the alter
starts is charged to its leader as the engine's latest look at it showed (the cluster then), every other
reassignment in progress likewise; a broker a started partition is charged to must be within its cap.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.commands import ChangeLimits, ChangeThrottle, PartitionTarget, Submit
from engine.core.partition import TopicPartition
from engine.runtime.decider import Decider, MemoryLog
from engine.sim import controller
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster

BROKERS = 7


def scenario(assignment: dict[int, tuple]):
    return S.from_document({
        "seed": 1, "brokers": [{"id": b} for b in range(BROKERS)],
        # 100 MB at 20 MB/s: 5 s a copy, a whole move each (weight 8), so the cap counts copies
        "topics": [{"name": "t", "assignment": [
            {"partition": p, "replicas": list(r), "size": "100 MB", "produce_rate": 0}
            for p, r in assignment.items()]}],
        "reassignment": {"kind": "explicit", "targets": []},
        "throttle": "20 MB/s",
    })


class Watched:
    """The simulated cluster as the decider reaches it, remembering what each look showed and checking
    the outgoing cap at every alter, against the leaders the engine's latest look at each partition saw."""

    def __init__(self, cluster: SimulatedCluster, cap: int):
        self.cluster = cluster
        self.cap = cap
        self.seen: dict[TopicPartition, int | None] = {}  # leader as the engine's latest look saw it
        self.over: list[str] = []

    def observe(self, partitions=None):
        obs = self.cluster.observe(partitions)
        for tp, p in obs.partitions.items():
            self.seen[tp] = p.leader
        return obs

    def alter_reassignments(self, targets):
        before = {tp: self.cluster.state.partitions[tp] for tp in targets}
        out = self.cluster.alter_reassignments(targets)
        s = self.cluster.state
        started = [tp for tp in targets
                   if s.partitions[tp].reassigning and set(s.partitions[tp].adding) - set(before[tp].adding)]
        load: dict[int | None, list] = {}
        for tp, p in sorted(s.partitions.items()):
            if p.reassigning and p.adding:
                load.setdefault(self.seen.get(tp, p.leader), []).append(tp)
        for tp in started:
            b = self.seen.get(tp, s.partitions[tp].leader)
            if len(load[b]) > self.cap:
                self.over.append(f"t={s.time:g}: starting {tp} put {len(load[b])} copies out of broker {b} "
                                 f"(cap {self.cap}): {', '.join(map(str, load[b]))}")
        return out

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def move_leader(cluster: SimulatedCluster, p: int, pick: int) -> None:
    """Another broker of the partition's ISR leads it (a failover, a preferred-leader election by another
    tool): nothing the engine did or could prevent."""
    tp = TopicPartition("t", p)
    s = cluster.state
    q = s.partitions[tp]
    others = sorted(b for b in q.isr if b != q.leader and s.alive(b))
    if others:
        cluster.state = controller.put(s, tp, q._replace(leader=others[pick % len(others)]))


def replicas(draw, n=3):
    return tuple(draw(st.permutations(range(BROKERS)))[:n])


@st.composite
def stories(draw):
    parts = draw(st.integers(2, 4))
    assignment = {p: replicas(draw) for p in range(parts)}
    instants = []
    for _ in range(draw(st.integers(2, 8))):
        submit = draw(st.sets(st.integers(0, parts - 1), max_size=parts))
        targets = {p: replicas(draw) for p in sorted(submit)}
        instants.append({
            # what happens in one instant, in this order: leader moves, a request (it supersedes the earlier
            # ones on the partitions it names), leader moves between the request's look and the tick's, a
            # clock set back, the tick
            "before": draw(st.lists(st.tuples(st.integers(0, parts - 1), st.integers(0, 5)), max_size=2)),
            "submit": targets,
            "between": draw(st.lists(st.tuples(st.integers(0, parts - 1), st.integers(0, 5)), max_size=2)),
            "back": draw(st.sampled_from((0.0, 0.0, 0.0, 0.5, 3.0))),
        })
    return assignment, instants, draw(st.integers(1, 2))


def run(assignment, instants, cap) -> list[str]:
    sim = SimulatedCluster.from_scenario(scenario(assignment))
    cluster = Watched(sim, cap)
    offset = [0.0]
    d = Decider(MemoryLog(), cluster, clock=lambda: 1_700_000_000.0 + sim.time + offset[0])
    d.recover(None)
    d.decide(ChangeLimits({"max_outgoing_moves_per_broker": cap}))
    d.decide(ChangeThrottle(20_000_000))
    for t, x in enumerate(instants + [{}] * 12):  # then a quiet while: what was started goes on
        for p, pick in x.get("before", ()):
            move_leader(sim, p, pick)
        if x.get("submit"):
            d.decide(Submit(f"r{t}", tuple(PartitionTarget("t", p, r) for p, r in sorted(x["submit"].items()))))
        for p, pick in x.get("between", ()):
            move_leader(sim, p, pick)
        offset[0] -= x.get("back", 0.0)
        d.tick()
        sim.advance(1.0)
    return cluster.over


def test_the_seed_9363_instant_a_request_and_a_leader_move_at_once():
    # t-1 is led by 3 when the request looks; its leader moves to 0 before the tick's look, at the same
    # instant. Its step (3 -> 6) and t-0's (out of 0) may not both copy out of broker 0 (cap 1).
    over = run({0: (0, 1, 2), 1: (3, 0, 4)},
               [{"submit": {0: (0, 1, 5), 1: (6, 0, 4)}, "between": [(1, 0)]}], 1)
    assert over == []


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stories())
def test_no_copy_starts_out_of_a_broker_over_its_cap_as_the_engine_last_looked(story):
    assert run(*story) == []


def test_a_partition_a_look_cannot_confirm_says_why_it_waits_and_starts_at_the_next_look_that_counts():
    # The seed 9363 instant again, with the clock set back 3 s: every look for 3 s is set aside, and t-1
    # waited through them with no reason in its events, status or metrics (held silently, up to
    # CLOCK_SET_BACK). It waits now, saying which leaders the look and the log show.
    from engine.core.decide import LEADER_UNCONFIRMED
    from engine.views.attention import attention

    sim = SimulatedCluster.from_scenario(scenario({0: (0, 1, 2), 1: (3, 0, 4)}))
    offset = [0.0]
    d = Decider(MemoryLog(), sim, clock=lambda: 1_700_000_000.0 + sim.time + offset[0])
    d.recover(None)
    d.decide(ChangeLimits({"max_outgoing_moves_per_broker": 1}))
    d.decide(ChangeThrottle(20_000_000))
    d.decide(Submit("r", (PartitionTarget("t", 1, (6, 0, 4)),)))
    move_leader(sim, 1, 0)  # 3 -> 0 between the request's look and the tick's
    offset[0] -= 3.0
    tp = TopicPartition("t", 1)
    for _ in range(3):  # every look until the clock passes the request's own is set aside
        d.tick()
        assert not sim.state.partitions[tp].reassigning
        assert d.state.waiting[tp] == (
            f"{LEADER_UNCONFIRMED}: a look shows broker 0 leading where the log has broker 3, and it was taken "
            "no later than what the log knows of the partition (two looks at one instant, or a clock set back)")
        [entry] = [e for e in attention(d.state) if e["kind"] == "waiting"]
        assert LEADER_UNCONFIRMED in entry["title"], entry
        sim.advance(1.0)
    sim.advance(0.5)
    d.tick()  # a look that counts: it records leader 0 and the step starts from it
    assert tp not in d.state.waiting
    assert d.state.observed[tp].leader == 0
    assert sim.state.partitions[tp].reassigning


def test_a_look_set_aside_for_replicas_back_says_so_not_that_it_was_taken_too_early():
    # t-0's step 0,1,2 -> 3,2,1 has ended (recorded at 1000.002); a look one second later shows broker 0
    # back and leading with nothing in progress: a broker's metadata from before the end. It is set aside
    # until a look METADATA_SETTLE later confirms it (``_came_back``), and the ready partition waits. Its
    # reason said the look was "taken no later than what the log knows (two looks at one instant, or a
    # clock set back)", which it was not: status named a cause that had not happened.
    from engine.core.commands import Observation, Tick
    from engine.core.decide import LEADER_UNCONFIRMED, handle
    from engine.core.partition import PartitionState
    from tests.fake_cluster import Driver, FakeCluster

    tp = TopicPartition("t", 0)
    c = FakeCluster({tp: (0, 1, 2)}, range(6))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, (3, 4, 2)),)))
    d.tick()
    c.finish(tp)
    d.observe()
    assert d.state.partitions[tp].status == "ready" and d.state.observed[tp].leader == 3
    stale = PartitionState((3, 2, 1, 0), frozenset({0, 1, 2}), 0, None, (), ())
    obs = c.observation()
    now = d.state.known_at[tp] + 1.0
    s, evs = handle(d.state, Observation(obs.brokers, obs.topics, {tp: stale}, now))
    assert s.observed[tp].leader == 3  # set aside
    s, evs = handle(s, Tick(now, {tp: stale}))
    why = s.waiting[tp]
    assert why.startswith(f"{LEADER_UNCONFIRMED}: a look shows broker 0 leading where the log has broker 3"), why
    assert "no later than" not in why and "replica(s) [0] back" in why, why


def test_a_look_from_before_a_step_that_swapped_a_replica_is_not_taken_for_a_new_requests_target():
    # t-0's step 1,3 -> 1,2 has ended (recorded); a look a moment later, from a broker whose metadata lags,
    # shows 1,3 again with nothing in progress, and a request to move t-0 back to 1,3 comes with it. Taken
    # for the partition's replicas, the request completed at once without a step and t-0 stayed on 1,2
    # (the fault simulator's seed 86 with the dominant-source rule; main's code with its torn window 6.25 s
    # earlier). Set aside until a look METADATA_SETTLE after the record confirms it, the request plans its
    # step from 1,2.
    from engine.core.commands import Observation
    from engine.core.decide import handle
    from engine.core.partition import PartitionState
    from tests.fake_cluster import Driver, FakeCluster

    tp = TopicPartition("t", 0)
    c = FakeCluster({tp: (1, 3)}, range(4))
    d = Driver(c)
    d.now = 1000.0
    d.feed(Submit("r", (PartitionTarget("t", 0, (1, 2)),)))
    d.tick()
    c.finish(tp)
    d.observe()
    assert d.state.partitions[tp].status == "completed" and d.state.observed[tp].replicas == (1, 2)
    stale = PartitionState((1, 3), frozenset({1, 3}), 1, None, (), ())
    obs = c.observation()
    now = d.state.known_at[tp] + 0.5
    s, _evs = handle(d.state, Observation(obs.brokers, obs.topics, {tp: stale}, now))
    assert s.observed[tp].replicas == (1, 2)  # set aside
    s, _evs = handle(s, Submit("back", (PartitionTarget("t", 0, (1, 3)),)))
    assert s.partitions[tp].request_id == "back" and s.partitions[tp].status != "completed"
