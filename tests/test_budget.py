"""Issue 26, item 1: the request budget. The pure rule (``engine.core.budget.look_at``: given when the requests
went to each broker, the budget and the clock, when may the next look go), its properties, and the decider
holding it in process on the simulated cluster (virtual clock), every read and action counted by a wrapper
that charges each call to the brokers it would reach."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from engine.core import events as ev
from engine.core.budget import ANY, WINDOW, RequestsSent, busiest, charged, look_at
from engine.core.commands import ChangeThrottle, PartitionTarget, Submit
from engine.runtime.decider import Decider, MemoryLog
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster

FLOOR, CEILING = 0.1, 1.0


# --- the rule ------------------------------------------------------------------------------------


def test_a_look_goes_at_once_while_the_window_has_room():
    assert look_at({1: [9.5], 2: []}, 3, 10.0, cost=2) == 10.0
    assert look_at({}, 3, 10.0) == 10.0
    assert look_at({1: [9.9] * 50}, None, 10.0) == 10.0  # no budget


def test_a_look_waits_until_enough_of_the_oldest_requests_have_left_the_window():
    # broker 1: 9.2, 9.5, 9.7 and one for any broker at 9.4: 4 in (9, 10]; budget 4, a look of 2: two must go
    sent = {1: [9.2, 9.5, 9.7], 2: [9.6], ANY: [9.4]}
    assert charged(sent, 10.0) == {1: 4, 2: 2}
    assert busiest(sent, 10.0) == (1, 4)
    assert look_at(sent, 4, 10.0, cost=2) == 9.4 + WINDOW
    # a request that left the window (at or before now - WINDOW) counts no more
    assert look_at({1: [9.0, 9.0, 9.0]}, 1, 10.0) == 10.0


def test_requests_for_any_broker_count_at_every_broker():
    assert look_at({1: [], 2: [], ANY: [9.5, 9.6]}, 2, 10.0) == 10.5
    assert charged({ANY: [9.5]}, 10.0) == {ANY: 1}  # no broker known: the requests for any broker alone


def test_a_look_dearer_than_the_budget_waits_for_an_empty_window_not_for_ever():
    assert look_at({1: [9.3, 9.8]}, 2, 10.0, cost=5) == 9.8 + WINDOW
    assert look_at({1: []}, 2, 10.0, cost=5) == 10.0


times = st.lists(st.floats(min_value=-0.2, max_value=0.0, allow_nan=False).map(lambda x: 10.0 + x * 5), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.none(), st.integers(1, 4)), times, max_size=4),
       st.integers(1, 12), st.integers(0, 6))
def test_the_answer_is_the_first_moment_the_look_fits_and_never_later_than_the_window(sent, budget, cost):
    now = 10.0
    at = look_at(sent, budget, now, cost)
    assert now <= at <= now + WINDOW  # nothing waits longer than the window takes to free up

    def fits(t):
        counts = charged(sent, t)
        most = max(counts.values(), default=0)
        return most + cost <= budget or most == 0

    assert fits(at)
    if at > now:  # and not a moment sooner: just before it, one request more was still in the window
        assert not fits(math.nextafter(at, -math.inf))
    more = {**sent, 1: list(sent.get(1, [])) + [now]}  # one request more never lets the look go sooner
    assert look_at(more, budget, now, cost) >= at


# --- the decider in process ----------------------------------------------------------------------


class Charged:
    """The simulated cluster, charging every call to the brokers a Kafka adapter's requests would reach:
    a look (ListPartitionReassignments to the controller, broker 1; DescribeTopicPartitions to any), a
    catch-up (DescribeLogDirs to the leader and each new replica's broker), a throttle read-back
    (DescribeConfigs of the topics to any, one per broker), an alter (the controller), a throttle change
    (the topics to any, one per broker), an election (any). ``log``: (virtual time, broker, is a read)."""

    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster
        self.log: list[tuple[float, int | None, bool]] = []

    def _charge(self, brokers, read: bool) -> None:
        self.log.extend((self.cluster.time, b, read) for b in brokers)

    def requests_sent(self) -> RequestsSent:
        now = self.cluster.time
        totals = Counter(b for _t, b, _r in self.log)
        ages: dict = {}
        for t, b, _r in self.log:
            if t > now - WINDOW:
                ages.setdefault(b, []).append(now - t)
        return RequestsSent(dict(totals), ages)

    def observe(self, partitions=None):
        self._charge([1, ANY] if partitions else [ANY], True)
        return self.cluster.observe(partitions)

    def catch_up(self, steps):
        self._charge(sorted({b for leader, nr in steps.values() for b in ((leader,) if leader else ()) + tuple(nr)}),
                     "catch_up")
        return self.cluster.catch_up(steps)

    def throttles(self, topics, brokers):
        self._charge([ANY] + sorted(brokers), True)
        return self.cluster.throttles(topics, brokers)

    def alter_reassignments(self, targets):
        self._charge([1], False)
        return self.cluster.alter_reassignments(targets)

    def cancel_reassignments(self, partitions):
        self._charge([1], False)
        return self.cluster.cancel_reassignments(partitions)

    def apply_throttles(self, throttles):
        self._charge([ANY] + sorted(throttles.leader_brokers | throttles.follower_brokers), False)
        return self.cluster.apply_throttles(throttles)

    def remove_throttles(self, throttles):
        self._charge([ANY] + sorted(throttles.leader_brokers | throttles.follower_brokers), False)
        return self.cluster.remove_throttles(throttles)

    def elect_preferred_leaders(self, partitions):
        self._charge([ANY], False)
        return self.cluster.elect_preferred_leaders(partitions)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


class Probed(Charged):
    """``Charged``, and the broker watch probing every broker every ``every`` seconds: requests the budget
    counts and never holds."""

    def __init__(self, cluster: SimulatedCluster, every: float):
        super().__init__(cluster)
        self.every, self.probed = every, 0.0

    def requests_sent(self) -> RequestsSent:
        while self.probed + self.every <= self.cluster.time:
            self.probed += self.every
            self.log.extend((self.probed, b, False) for b in (1, 2, 3, 4))
        return super().requests_sent()


def submitted(budget, partitions=6, size="8 MB", cluster_of=Charged, decider=Decider):
    """(the decider, its cluster): ``partitions`` copies of ``size`` into broker 4 at 4 MB/s submitted, nothing
    ticked yet."""
    sc = S.from_document({
        "seed": 3,
        "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
        "topics": [{"name": "t", "min_insync_replicas": 2,
                    "assignment": [{"replicas": [1, 2, 3], "size": size} for _ in range(partitions)]}],
    })
    cluster = cluster_of(SimulatedCluster.from_scenario(sc))
    d = decider(MemoryLog(), cluster, clock=lambda: cluster.cluster.time, poll_interval=CEILING, floor=FLOOR,
                budget=budget)
    d.recover(None)
    d.decide(ChangeThrottle(4_000_000))
    d.decide(Submit("r", tuple(PartitionTarget("t", p, (1, 2, 4)) for p in range(partitions))))
    return d, cluster


def moving(budget, partitions=6, size="8 MB", cluster_of=Charged, decider=Decider, limit=120.0):
    """Six small copies into broker 4 at 4 MB/s, the decider driven as the worker drives it (its timer every
    FLOOR, a tick when one is due), until the request completes."""
    d, cluster = submitted(budget, partitions, size, cluster_of, decider)
    d.deferred_at = []  # when each deferral came (the tick's time)
    d.said = []  # (the tick's time, the LooksPaced it appended)
    d.shown = []  # (the tick's time, whether /status said paced after it)
    return d, cluster, drive(d, cluster, limit)


def drive(d, cluster, limit, until=lambda d: False):
    """Drive ``d`` (of ``moving``) as the worker does until its request completes, ``until(d)`` holds after a
    tick, or the clock reaches ``limit``: what /status said of the pacing at each tick it showed one."""
    paced = []
    while cluster.cluster.time < limit:
        due = d.due_in()
        if due is not None and due <= FLOOR / 2:
            before, at = d.deferred, cluster.cluster.time
            out = d.tick()
            d.deferred_at += [at] * (d.deferred - before)
            d.said += [(at, e.payload) for e in out if isinstance(e.payload, ev.LooksPaced)]
            st_ = d.budget_status(cluster.cluster.time)
            d.shown.append((at, st_["paced"] is not None))
            if st_["paced"]:
                paced.append(st_["paced"])
            if until(d):
                break
        if any(isinstance(e.payload, ev.RequestCompleted) for e in d.log.records[-5:]):
            break
        cluster.cluster.advance(FLOOR / 2)
    return paced


def windows(log, end, reads_only, catch_ups=True):
    """The most requests charged to one broker in any window (t - WINDOW, t], t at every request (a request
    WINDOW before t within the float error of the virtual clock's sums has left it); ``catch_ups``: counting
    the catch-up measures."""
    worst = 0
    for t, _b, _r in log:
        inside = [(b, r) for u, b, r in log if t - WINDOW + 1e-6 < u <= t and (r or not reads_only)
                  and (catch_ups or r != "catch_up")]
        anywhere = sum(1 for b, _r in inside if b is ANY)
        per = Counter(b for b, _r in inside if b is not ANY)
        worst = max(worst, max(per.values(), default=0) + anywhere)
    return worst


def test_the_decider_holds_its_reads_within_the_budget_and_the_move_completes():
    d, cluster, paced = moving(budget=4)
    logged = [type(e.payload).__name__ for e in d.log.records]
    assert "RequestCompleted" in logged, logged
    reads = windows(cluster.log, cluster.cluster.time, reads_only=True)
    print(f"budget 4: {d.deferred} looks deferred, the busiest window held {reads} reads, "
          f"{windows(cluster.log, cluster.cluster.time, False)} requests with the actions; "
          f"done at {cluster.cluster.time:.1f} s; read costs {dict(d.look_costs)}")
    assert d.deferred > 0 and paced
    # every read but a catch-up of a copy near its release (sent whatever the budget: held, it could end
    # throttled and stall acks=all writes) keeps within it
    assert windows(cluster.log, cluster.cluster.time, reads_only=True, catch_ups=False) <= 4
    assert reads <= 4 or d.urgent > 0
    assert paced[0]["line"] == "looks paced by the request budget: broker 1 at 4/s"
    # unpaced, the same move sends broker 1 more than that in some second
    free, free_cluster, none = moving(budget=None)
    assert free.deferred == 0 and not none
    assert windows(free_cluster.log, free_cluster.cluster.time, reads_only=True) > 4


def settle(d, cluster, seconds):
    """Drive the decider ``seconds`` more (as ``moving`` does) after its move, until its pacing is recorded ended."""
    end = cluster.cluster.time + seconds
    while cluster.cluster.time < end and d.state.looks_paced is not None:
        due = d.due_in()
        if due is not None and due <= FLOOR / 2:
            d.said += [(cluster.cluster.time, e.payload) for e in d.tick() if isinstance(e.payload, ev.LooksPaced)]
        cluster.cluster.advance(FLOOR / 2)


def metrics(d) -> dict[str, float]:
    """The pacing's gauges of /metrics, for a worker whose decider is ``d``."""
    import re
    from types import SimpleNamespace

    from engine.runtime.metrics import exposition

    engine = SimpleNamespace(counters=Counter(), active=True, decider=d, needs_recovery=False, recovery_error=None,
                             s=SimpleNamespace(request_budget=4))
    text = exposition(engine)[0].decode()
    return {name: float(v) for name, v in re.findall(r"^(kreassign_looks_paced\w*) (\S+)$", text, re.M)}


def pacings(deferred_at):
    """Runs of deferrals less than PACED_SHOWN apart (each one pacing), as (first, last) times."""
    from engine.runtime.decider import PACED_SHOWN

    runs = []
    for t in deferred_at:
        if runs and t - runs[-1][1] < PACED_SHOWN:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return runs


def test_a_pacing_is_recorded_once_when_it_starts_and_once_when_it_ends_and_status_shows_it_meanwhile():
    """The looks waiting for the budget is a wait like any other: its reason reaches the events (so
    ``kreassign status``, folded from the log, says it) within the tick that deferred the first look, and its
    end, with the looks it deferred, the longest wait and how long it lasted, PACED_SHOWN s after the last
    deferral, once each however many looks were deferred in between."""
    from engine.runtime.decider import PACED_SHOWN
    from engine.views.attention import attention
    from engine.views.summary import describe

    d, cluster, paced = moving(budget=4, limit=0.0)
    paced = drive(d, cluster, 120.0, until=lambda d: d.deferred > 3)  # mid-move, paced
    assert d.deferred > 3 and paced and d.state.steps
    first = d.said[0]
    assert first == (d.deferred_at[0], ev.LooksPaced("looks paced by the request budget: broker 1 at 4/s"))
    assert d.state.looks_paced == first[1].reason and len(d.said) == 1
    entry = [a for a in attention(d.state) if a["kind"] == "paced"]
    assert entry and entry[0]["title"] == d.state.looks_paced
    assert paced[-1]["deferred"] == d.deferred and 0 < paced[-1]["longest_wait_seconds"] <= WINDOW
    assert metrics(d) == {"kreassign_looks_paced": 1.0,
                          "kreassign_looks_paced_longest_wait_seconds": paced[-1]["longest_wait_seconds"]}
    cluster.cluster.advance(FLOOR / 2)
    paced += drive(d, cluster, 120.0)  # to the move's end (9.5 s): one pacing
    done = cluster.cluster.time  # the tick that completed the request (``drive`` stops there)
    assert paced[-1]["deferred"] == d.deferred and 0 < paced[-1]["longest_wait_seconds"] <= WINDOW
    settle(d, cluster, PACED_SHOWN + 2 * FLOOR)
    assert d.state.looks_paced is None and not [a for a in attention(d.state) if a["kind"] == "paced"]
    at, end = d.said[-1]
    assert len(d.said) == 2 and end.reason is None
    # ended by the tick that completed the move, not PACED_SHOWN later: with nothing left to look at, "a
    # step's end may be seen up to a second later" would only mislead (it was shown a minute after the move)
    assert at == done < d.deferred_at[-1] + PACED_SHOWN
    assert end.deferred == d.deferred and end.lasted == pytest.approx(d.deferred_at[-1] - d.deferred_at[0])
    assert 0 < end.longest_wait <= WINDOW
    assert describe(end).startswith(f"the engine's looks no longer wait for the request budget ({d.deferred} looks "
                                    f"deferred over ")
    assert d.budget_status(cluster.cluster.time)["paced"] is None
    assert metrics(d) == {"kreassign_looks_paced": 0.0, "kreassign_looks_paced_longest_wait_seconds": 0.0}
    free, _c, _p = moving(budget=None)
    assert not [e for e in free.log.records if isinstance(e.payload, ev.LooksPaced)]


@pytest.mark.parametrize("size, limit, most", [("64 MB", 120.0, 2), ("256 MB", 600.0, 4)])
def test_a_long_move_paced_now_and_then_shows_one_warning_not_one_per_deferral(size, limit, most):
    """A long move the budget paces now and then (at a step's end, at the throttle read-back every 10 s): the
    warning stays shown while deferrals recur within PACED_SHOWN (60 s) of each other, and ends once none came
    for that long. With the 5 s it was shown for after each deferral, it came and went every few seconds: 10
    LooksPaced events on the 64 MB move (93 s, 25 deferrals), 54 on the 256 MB one (382 s, 72 deferrals), the
    last pacing's end included; now 2 and 4."""
    from engine.runtime.decider import PACED_SHOWN

    d, cluster, _p = moving(budget=4, size=size, limit=limit)
    done = cluster.cluster.time  # the tick that completed the move: it ends a pacing still shown
    settle(d, cluster, PACED_SHOWN + 2 * FLOOR)
    runs = pacings(d.deferred_at)
    said = [p for _t, p in d.said]
    assert len(said) == 2 * len(runs) <= most, (said, d.deferred_at)
    assert [p.reason is None for p in said] == [False, True] * len(runs)  # a start and an end, in turn
    ends = [p for p in said if p.reason is None]
    assert sum(p.deferred for p in ends) == d.deferred
    assert [p.lasted for p in ends] == [pytest.approx(b - a) for a, b in runs]
    assert all(0 < p.longest_wait <= WINDOW for p in ends)
    # /status said paced at every tick from a pacing's first deferral to PACED_SHOWN after its last (or the
    # move's end): no flapping
    for a, b in runs:
        during = [shown for t, shown in d.shown if a <= t < min(b + PACED_SHOWN - FLOOR, done)]
        assert during and all(during), (a, b)
    assert [t for t, p in d.said if p.reason is None][-1] == min(runs[-1][1] + PACED_SHOWN, done)


@pytest.mark.parametrize("kind, seed, partitions, throttle, median, margin", [
    ("rack-migration", 352, 16, "50 MB/s", "100 MB", 8),
    ("rebalance", 2834, 14, "50 MB/s", "500 MB", 8),
    ("decommission", 8841, 20, "4 MB/s", "500 MB", 8),
])
def test_a_catch_up_near_its_release_is_not_held_by_the_budget(kind, seed, partitions, throttle, median, margin):
    """Moves drawn as tests/test_simulate.py draws them, the engine answering at once (a tick's reads in one
    instant) at a budget of 12: each had a copy join the ISR still throttled (an acks=all stall) while
    the budget held its last catch-up measure, 1 to 3 of them; a copy predicted to reach its release within
    the window is measured whatever the budget (``decide.releasing``). The rebalance: the tick after the first
    look was deferred from 0.1 to 1.0 s and woke for nothing meanwhile; copy t-4 (97 MB, the quota's
    first-second burst at network speed) joined at 0.969 s still throttled. A deferred tick now wakes at the
    release point of each copy predicted to reach it first (``decide.release_points``): t-4 measured at 0.9 s,
    3.5 MB left, released."""
    import dataclasses

    from engine.whatif.strategies import run
    from tests.test_simulate import generated

    sc = dataclasses.replace(generated(kind, seed=seed, partitions=partitions, throttle=throttle, median=median,
                                       request_time=0, limits={"throttle_margin_pct": margin}), request_budget=12.0)
    r = run(sc, "kreassign")
    assert r.finished and r.at_target
    assert r.stats.throttled_joins == 0


def test_no_read_waits_longer_than_the_window_when_requests_never_held_keep_it_full():
    """The broker watch probing every broker four times a second fills a budget of 3 on its own: a read
    deferred until the window has room would wait for ever (the review's finding: each new probe pushed
    it back). A read that has waited the window goes over the budget, said (``reads_over_budget``)."""
    d, cluster, paced = moving(3, cluster_of=lambda c: Probed(c, 0.25), limit=300.0)
    assert any(isinstance(e.payload, ev.RequestCompleted) for e in d.log.records), cluster.cluster.time
    assert d.overshoots > 0 and d.budget_status(cluster.cluster.time)["reads_over_budget"] == d.overshoots
    reads = sorted(t for t, _b, r in cluster.log if r)
    gaps = [b - a for a, b in zip(reads, reads[1:])]
    assert max(gaps) <= CEILING + WINDOW + FLOOR, max(gaps)  # a full look every ceiling, held a window at most


def test_a_look_at_what_a_completion_freed_stays_held_when_a_held_catch_up_goes_first():
    """A tick that saw a completion and could not afford the look at what it freed holds that look over
    (``held_more``); if the next tick sends a held catch-up first and then must wait for the look, the
    look is still held: it goes when the window has room, not at the next full look (the review's finding:
    the freed partitions waited up to --poll-interval)."""
    from engine.core.decide import starting

    captured = {}

    class Stopping(Decider):
        def tick(self):
            out = super().tick()
            if self.held_more and self.state.steps and "d" not in captured:
                captured["d"] = self
                raise StopIteration
            return out

    with pytest.raises(StopIteration):
        moving(3, partitions=40, size="1 MB", decider=Stopping)
    d = captured["d"]
    cluster, now = d.cluster, d.clock()
    freed = set(starting(d.state, now)) - set(d.state.steps)
    assert freed
    # one request 0.9 s ago: the held catch-up (1 request at broker 1) fits, the look after it (2) does not
    cluster.log[:] = [(now - 0.9, 1, True)]
    d.look_costs["catch_up"].clear()
    d.look_costs["catch_up"].append(1)
    d.look_costs["look"].clear()
    d.look_costs["look"].append(2)
    d.held_measure = [sorted(d.state.steps)[0]]
    # the held catch-up: one request, at broker 1, and nothing learnt (a catch-up that changes nothing)
    d.measure_catch_up = lambda now, tps: cluster._charge([1], "catch_up") or []
    looked = []
    observe = cluster.observe

    def watching(partitions=None):
        looked.append((cluster.cluster.time, bool(set(partitions or ()) & freed)))
        return observe(partitions)

    cluster.observe = watching
    d.tick()
    assert d.held_more, "the look at what the completion freed was dropped"
    full = d.full_at + CEILING
    while cluster.cluster.time < full - FLOOR:
        cluster.cluster.advance(FLOOR / 2)
        due = d.due_in()
        if due is not None and due <= FLOOR / 2:
            d.tick()
    assert any(freed_too for t, freed_too in looked if t < full - FLOOR), (looked, full)


class Unreachable(Charged):
    """``Charged``, whose looks fail (the cluster cannot be observed) once ``down`` is set."""

    down = False

    def observe(self, partitions=None):
        if self.down:
            from engine.core.outcomes import Unavailable
            return Unavailable("connection refused")
        return super().observe(partitions)


def test_a_pacing_that_ended_while_the_cluster_cannot_be_observed_is_recorded_as_ended():
    """A tick whose look fails returns early; it still records the end of a pacing, else ``kreassign status``
    (folded from the log) said 'paced' for as long as the cluster was down, though no look was deferred and
    /status said none was."""
    from engine.runtime.decider import PACED_SHOWN

    d, cluster = submitted(4, size="64 MB", cluster_of=Unreachable)

    def run_until(stop, limit):
        end = cluster.cluster.time + limit
        while not stop() and cluster.cluster.time < end:
            due = d.due_in()
            if due is not None and due <= FLOOR / 2:
                d.tick()
            cluster.cluster.advance(FLOOR / 2)

    run_until(lambda: d.state.looks_paced is not None, 60.0)
    assert d.state.looks_paced is not None
    cluster.down = True
    run_until(lambda: False, 3 * PACED_SHOWN)
    assert d.state.cluster_error is not None  # the looks fail all along
    assert d.budget_status(cluster.cluster.time)["paced"] is None
    assert d.state.looks_paced is None



def test_a_pacing_goes_on_when_the_look_after_a_held_read_is_deferred_a_moment_later():
    """A tick that sends a held catch-up first and then defers its look asks ``_pace`` at the clock after that
    read, which took a round trip; it then asked ``_say_paced`` at the tick's start, a moment before the
    deferral it had just counted, so the pacing read as over (a deferral 'in the future': a clock set back)
    and was recorded ended at once. The engine on the sim's Kafka front at --request-budget 3 said 'the
    engine's looks no longer wait for the request budget (15 looks deferred over 11 s ...)' less than a
    second after a deferral, then 'looks paced ...' again a second later, its figures from 0. The pacing
    goes on: nothing recorded, the deferral counted in it."""
    d, cluster = submitted(3, size="64 MB", cluster_of=Charged)
    while (d.state.looks_paced is None or not d.state.steps) and cluster.cluster.time < 60.0:
        due = d.due_in()
        if due is not None and due <= FLOOR / 2:
            d.tick()
        cluster.cluster.advance(FLOOR / 2)
    assert d.state.looks_paced is not None and d.state.steps
    cluster.cluster.advance(2 * WINDOW)  # the window empties; the pacing is still shown (PACED_SHOWN: 60 s)
    before = d.budget_status(d.clock())["paced"]
    assert before is not None
    # one request 0.9 s ago; a catch-up held over (1 request, which takes 5 ms) fits, the look after it (2) not
    cluster.log[:] = [(cluster.cluster.time - 0.9, 1, True)]
    d.look_costs["catch_up"].clear()
    d.look_costs["catch_up"].append(1)
    d.look_costs["look"].clear()
    d.look_costs["look"].append(2)
    d.held_measure = [sorted(d.state.steps)[0]]
    d.full_at = None  # a full look is due: the tick looks after its held catch-up

    def measured(now, tps):
        cluster._charge([1], "catch_up")
        cluster.cluster.advance(0.005)
        return []

    d.measure_catch_up = measured
    deferred = d.deferred
    out = d.tick()
    assert d.deferred == deferred + 1  # the look waits
    assert not [e.payload for e in out if isinstance(e.payload, ev.LooksPaced)]
    assert d.state.looks_paced == before["line"]
    after = d.budget_status(d.clock())["paced"]
    assert after is not None and after["deferred"] == before["deferred"] + 1
    assert after["since_seconds"] >= before["since_seconds"]


def test_the_engines_own_status_page_gives_the_pacings_figures_in_its_attention_entry():
    """``kreassign status`` folds the log, which has a pacing's figures only once it ends: its entry points to
    the engine's /status. The engine's own /status (and the status page that renders its attention) has them
    at hand: its entry gives the looks deferred, the longest wait and how long it stays shown, not a pointer
    to a JSON key of the very page the operator is reading."""
    d, cluster, _p = moving(budget=4, limit=0.0)
    drive(d, cluster, 120.0, until=lambda d: d.deferred > 3)  # mid-move (its end ends the pacing)
    doc = d.status()
    entry = [a for a in doc["attention"] if a["kind"] == "paced"]
    assert entry and entry[0]["title"] == d.state.looks_paced
    figures = doc["request_budget"]["paced"]
    assert figures["deferred"] == d.deferred
    last = entry[0]["lines"][-1]
    assert last.startswith(f"{d.deferred} looks deferred over the last {figures['since_seconds']:g} s, the longest "
                           f"wait {figures['longest_wait_seconds']:.2f} s"), last
    assert f"shown {figures['ends_in_seconds']:g} s more" in last
    assert "request_budget.paced" not in " ".join(entry[0]["lines"])


def test_the_status_reads_the_pacing_once_while_the_decider_may_end_it_meanwhile():
    """``/status`` and ``/metrics`` read the pacing from another thread than the decider's, which replaces it
    (and sets it to None when the pacing ends). ``budget_status`` read ``self.pacing`` up to three times (is
    it there, its last deferral, its figures): ended between two reads, a scrape raised TypeError. Here the
    attribute reads as the pacing at its first read and as ended afterwards, as if the decider ended it then."""
    from engine.core.budget import PACED_SHOWN

    class Racing(Decider):
        reads: list = []

        @property
        def pacing(self):
            return self.reads.pop(0) if self.reads else None

        @pacing.setter
        def pacing(self, value):
            pass

    d = Racing(MemoryLog(), None, clock=lambda: 100.0, budget=4)
    d.reads = [{"since": 98.0, "line": "looks paced by the request budget: broker 1 at 4/s", "last": 99.0,
                "deferral": {"broker": 1, "requests_in_the_second_before": 4, "read_cost": 2,
                             "look_deferred_seconds": 0.5}, "deferred": 3, "longest_wait": 0.5}]
    paced = d.budget_status(100.0)["paced"]
    assert paced is not None and paced["deferred"] == 3 and paced["ends_in_seconds"] == PACED_SHOWN - 1


def test_the_pacing_on_status_keeps_its_last_deferral_apart_from_its_first_and_from_now():
    """``request_budget.paced`` gave the first deferral's line (broker 1) beside the latest deferral's
    ``broker``, ``requests_last_second``, ``read_cost`` and ``look_in_seconds`` (broker 2's), at the top level,
    read as figures of now: 50 s after the last deferral it still said ``look_in_seconds 0.381`` and
    ``requests_last_second 3`` while ``request_budget.requests_last_second`` was 0. The last deferral's details
    are grouped under ``last_deferral``, as of that deferral; the status page's entry names its broker."""
    sc = S.from_document({
        "seed": 3,
        "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
        "topics": [{"name": "t", "min_insync_replicas": 2,
                    "assignment": [{"replicas": [1, 2, 3], "size": "1 MB"}]}],
    })
    cluster = Charged(SimulatedCluster.from_scenario(sc))
    d = Decider(MemoryLog(), cluster, clock=lambda: cluster.cluster.time, poll_interval=CEILING, floor=FLOOR,
                budget=3)
    d.recover(None)
    first = cluster.cluster.time
    cluster.log[:] = [(first - 0.5, 1, True)] * 3  # broker 1 used the budget: the look (1 request) waits
    assert d._pace(first, 1)
    d._say_paced(first)
    cluster.cluster.advance(10.0)
    second = cluster.cluster.time
    cluster.log.clear()
    assert not d._pace(second, 1)  # the look went meanwhile
    cluster.log[:] = [(second - 0.7, 2, True)] * 4  # then broker 2, over it: the look waits 0.3 s
    assert d._pace(second, 1)
    cluster.log.clear()
    cluster.cluster.advance(50.0)  # no request since: the window is empty, the pacing still shown
    st_ = d.budget_status(cluster.cluster.time)
    paced = st_["paced"]
    assert st_["requests_last_second"] == 0
    assert paced["line"] == d.state.looks_paced == "looks paced by the request budget: broker 1 at 3/s"
    assert paced["deferred"] == 2 and paced["since_seconds"] == 60.0 and paced["ends_in_seconds"] == 10.0
    assert paced["last_deferral"] == {"seconds_ago": 50.0, "broker": 2, "requests_in_the_second_before": 4,
                                      "read_cost": 1, "look_deferred_seconds": 0.3}
    assert not {"broker", "requests_last_second", "read_cost", "look_in_seconds"} & set(paced)
    [entry] = [a for a in d.status()["attention"] if a["kind"] == "paced"]
    assert entry["lines"][-1] == ("2 looks deferred over the last 60 s, the longest wait 0.50 s; the last 50 s ago "
                                  "(broker 2): shown 10 s more unless a read waits again")
