"""Time in the simulated cluster: ``advance(state, dt) -> state``.

The model (docs/simulator.md has the reasoning):

* Every broker's network carries its in-sync traffic first: produce into the
  partitions it leads, and replication to or from in-sync followers (in-sync
  replicas are never throttled, KIP-73). What is left is shared by the copies:
  replicas out of the ISR fetching from their leader.
* A copy passes the receiving broker's free inbound capacity and the sending
  broker's free outbound capacity; if its replica is listed in the topic's
  ``follower.replication.throttled.replicas`` and the receiving broker has a
  ``follower.replication.throttled.rate``, that rate too (shared by all the
  broker's throttled copies); likewise ``leader.*`` on the sending side. An
  unlisted replica, or a broker without a rate, is not throttled.
* Copies share each constraint max-min fairly (``engine.sim.bandwidth``).
* A copy's lag shrinks at its fetch rate minus the partition's produce rate;
  at zero the replica joins the ISR (``controller.join_isr``), which may
  complete the reassignment (Phase B). A replica whose broker or leader is
  down copies nothing; while its partition has a leader it falls further
  behind by the produce rate.
* A broker whose network cannot carry its in-sync traffic (a slow broker)
  lets its followers fall behind; after replica.lag.time.max.ms (30 s) they
  leave the ISR and must catch up like any copy.

Between two events every rate is constant, so ``advance`` jumps from event to
event (a replica catching up, a follower timing out); a quiet interval costs
nothing. Not modelled: the ~10 s x rate burst a real quota window lets
through early, and the per-source-broker fetchers that make real moves finish
in waves (a receiving broker here shares fairly between all its copies).
"""

from __future__ import annotations

import immutables

from engine.partition import TopicPartition
from engine.sim import controller
from engine.sim.bandwidth import max_min_fair
from engine.sim.model import JOIN_EPSILON, REPLICA_LAG_TIME_MAX, Lag, SimState

INF = float("inf")


def advance(state: SimState, dt: float) -> SimState:
    """The state ``dt`` seconds later."""
    end = state.time + dt
    while True:
        if state.dirty:
            state = allocate(state)
        t = min(state.next_event, end)
        state = _elapse(state, t)
        if state.next_event <= t:
            state = _fire(state)
            continue
        if t >= end:
            return state


def _elapse(state: SimState, t: float) -> SimState:
    if t <= state.time:
        return state
    stats = state.stats._replace(bytes_copied=state.stats.bytes_copied + state.copy_rate * (t - state.time))
    return state._replace(time=t, stats=stats)


def flowing(state: SimState, tp: TopicPartition, broker: int) -> int | None:
    """The leader a replica out of the ISR copies from, or None if it cannot copy now."""
    p = state.partitions[tp]
    leader = p.leader
    if leader is None or leader == broker or not state.brokers[leader].alive or not state.brokers[broker].alive:
        return None
    return leader


def allocate(state: SimState) -> SimState:
    """Share the network among the copies; set every lag's drift and the next event."""
    t = state.time
    brokers, th = state.brokers, state.throttles
    copies: list[tuple[tuple, tuple]] = []
    drift: dict[tuple, float] = {}
    counts: dict[tuple, int] = {}
    for key in state.lags.keys():
        tp, b = key
        p = state.partitions[tp]
        leader = flowing(state, tp, b)
        if leader is None:
            producing = p.leader is not None and brokers[p.leader].alive
            drift[key] = p.produce_rate if producing else 0.0
            continue
        cls = (b, leader, th.follower_throttled(tp, b), th.leader_throttled(tp, leader))
        copies.append((key, cls))
        counts[cls] = counts.get(cls, 0) + 1
    classes = list(counts)
    capacity: dict[tuple, float] = {}
    constraints = []
    for b, leader, f_thr, l_thr in classes:
        keys = [("in", b), ("out", leader)]
        capacity[("in", b)] = brokers[b].capacity_in - state.isr_in.get(b, 0.0)
        capacity[("out", leader)] = brokers[leader].capacity_out - state.isr_out.get(leader, 0.0)
        if f_thr:
            keys.append(("fthr", b))
            capacity[("fthr", b)] = float(th.follower_rate[b])
        if l_thr:
            keys.append(("lthr", leader))
            capacity[("lthr", leader)] = float(th.leader_rate[leader])
        constraints.append((counts[(b, leader, f_thr, l_thr)], keys))
    shares = dict(zip(classes, max_min_fair(constraints, capacity)))

    copy_rate = 0.0
    in_count: dict[int, int] = {}
    out_count: dict[int, int] = {}
    thr_in: dict[int, float] = {}
    thr_out: dict[int, float] = {}
    copy_in: dict[int, float] = {}
    copy_out: dict[int, float] = {}
    for key, cls in copies:
        tp, b = key
        rate = shares[cls]
        drift[key] = state.partitions[tp].produce_rate - rate
        copy_rate += rate
        _, leader, f_thr, l_thr = cls
        in_count[b] = in_count.get(b, 0) + 1
        out_count[leader] = out_count.get(leader, 0) + 1
        copy_in[b] = copy_in.get(b, 0.0) + rate
        copy_out[leader] = copy_out.get(leader, 0.0) + rate
        if f_thr:
            thr_in[b] = thr_in.get(b, 0.0) + rate
        if l_thr:
            thr_out[leader] = thr_out.get(leader, 0.0) + rate

    next_event = INF
    with state.lags.mutate() as lags:
        for key, d in drift.items():
            lag = lags[key]
            if lag.drift != d:
                lag = Lag(lag.at(t), t, d)
                lags[key] = lag
            behind = lag.at(t)
            if d < 0:
                next_event = min(next_event, t + behind / -d)
            elif behind <= JOIN_EPSILON and flowing(state, *key) is not None:
                next_event = t
        new_lags = lags.finish()

    behind = state.behind_since
    for b, broker in brokers.items():
        over = (state.isr_in.get(b, 0.0) > broker.capacity_in * (1 + 1e-9)
                or state.isr_out.get(b, 0.0) > broker.capacity_out * (1 + 1e-9))
        if over and b not in behind:
            behind = behind.set(b, t)
        elif not over and b in behind:
            behind = behind.delete(b)
    for since in behind.values():
        next_event = min(next_event, since + REPLICA_LAG_TIME_MAX)

    s = state.stats
    stats = s._replace(
        peak_copies_in=_peak(s.peak_copies_in, in_count),
        peak_copies_out=_peak(s.peak_copies_out, out_count),
        peak_throttled_in=_peak(s.peak_throttled_in, thr_in),
        peak_throttled_out=_peak(s.peak_throttled_out, thr_out),
        peak_traffic_in=_peak(s.peak_traffic_in, _sum(copy_in, state.isr_in)),
        peak_traffic_out=_peak(s.peak_traffic_out, _sum(copy_out, state.isr_out)),
    )
    return state._replace(
        lags=new_lags, behind_since=behind, next_event=next_event, copy_rate=copy_rate, stats=stats, dirty=False,
    )


def _peak(peaks: immutables.Map, now: dict) -> immutables.Map:
    for b, v in now.items():
        if v > peaks.get(b, 0):
            peaks = peaks.set(b, v)
    return peaks


def _sum(a: dict, b: immutables.Map) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def _fire(state: SimState) -> SimState:
    """Carry out every event due now: replicas that caught up join the ISR; followers of a
    broker that could not carry its in-sync traffic for too long leave it."""
    t = state.time
    due = []
    tolerance = 1e-9 * max(1.0, t)
    for key, lag in state.lags.items():
        caught_up = lag.at(t) <= JOIN_EPSILON or (
            lag.drift < 0 and lag.since + lag.bytes / -lag.drift <= t + tolerance)
        if caught_up and flowing(state, *key) is not None:
            due.append(key)
    for tp, b in sorted(due):
        if (tp, b) in state.lags:  # a join before it may have completed the reassignment
            state = controller.join_isr(state, tp, b)
    for b, since in sorted(state.behind_since.items()):
        if since + REPLICA_LAG_TIME_MAX <= t + tolerance:
            state = _shrink(state, b)
    return state._replace(dirty=True)


def _shrink(state: SimState, broker: int) -> SimState:
    """Followers that ``broker``'s network left behind for replica.lag.time.max.ms leave the ISR."""
    b = state.brokers[broker]
    over_in = state.isr_in.get(broker, 0.0) > b.capacity_in * (1 + 1e-9)
    over_out = state.isr_out.get(broker, 0.0) > b.capacity_out * (1 + 1e-9)
    ratio_in = b.capacity_in / state.isr_in[broker] if over_in else 1.0
    ratio_out = b.capacity_out / state.isr_out[broker] if over_out else 1.0
    for tp in sorted(state.hosted.get(broker, immutables.Map()).keys()):
        p = state.partitions[tp]
        behind = p.produce_rate * REPLICA_LAG_TIME_MAX
        if over_in and broker in p.isr and broker != p.leader:
            state = controller.leave_isr(state, tp, broker, behind * (1 - ratio_in))
        if over_out and p.leader == broker:
            for f in sorted(p.isr - {broker}):
                state = controller.leave_isr(state, tp, f, behind * (1 - ratio_out))
    return state._replace(behind_since=state.behind_since.delete(broker))
