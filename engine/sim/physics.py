"""Time in the simulated cluster: ``advance(state, dt) -> state``.

The model (docs/simulator.md has the reasoning and Kafka's sources):

* Every broker's network carries its in-sync traffic first: produce into the
  partitions it leads, and replication to or from in-sync followers (in-sync
  replicas are never refused by a quota, KIP-73). What is left is shared by
  the copies: replicas out of the ISR fetching from their leader.
* A copy passes the receiving broker's free inbound capacity and the sending
  broker's free outbound capacity; if its replica is listed in the topic's
  ``follower.replication.throttled.replicas`` and the receiving broker has a
  ``follower.replication.throttled.rate``, that broker's follower quota too;
  likewise ``leader.*`` on the sending side. A quota is a token bucket
  (``model.Quota``): while it has tokens it refuses nothing and its copies
  run at network speed (the early burst); empty, it lets its rate through.
* A receiving broker runs one fetcher per source broker; each turn at a
  quota is one fetch response of at most ``replica.fetch.max.bytes`` per
  partition and ``replica.fetch.response.max.bytes`` in all. Copies share a
  quota by those turns: equally while a fetcher carries at most 10 of them,
  less each when it carries more (``engine.sim.bandwidth``, weighted). A
  fetcher that also fetches in-sync partitions from that leader asks again
  each time its fetch returns and so takes a used-up quota before fetchers
  that back off replica.fetch.backoff.ms after each refusal (strict priority,
  ``BACKING_OFF_SHARE``). Everything else is shared max-min fairly.
* A copy's lag shrinks at its rate minus the partition's produce rate; at zero
  the replica joins the ISR (``controller.join_isr``), which may complete the
  reassignment (Phase B). A replica whose broker or leader is down, or whose
  log its broker has not created yet (``SimState.ready``), copies nothing;
  while its partition has a leader it falls further behind by the produce rate.
* After a leader epoch bump an in-sync follower is fenced until its broker has
  applied the change, then, if it is listed and its broker has a follower
  rate, fresh: its fetcher does not know it is in sync, so it needs a turn at
  the follower quota (``FetchState``). Its turn comes at once if the quota is
  not used up by copies (after the quota's debt from the last turns); with its
  own fetcher's next turn if that fetcher copies through the quota; never,
  while other fetchers' copies use the quota up and its fetcher has nothing
  else to fetch through it (a fetcher that has only that to ask for waits out
  replica.fetch.backoff.ms or replica.fetch.wait.max.ms between requests; one
  that copies asks again as soon as its response is in and takes every turn).
  While a follower in the ISR does not fetch, the leader cannot complete
  acks=all writes; after replica.lag.time.max.ms it drops it from the ISR.
* A broker whose network cannot carry its in-sync traffic (a slow broker)
  lets its followers fall behind; after replica.lag.time.max.ms (30 s) they
  leave the ISR and must catch up like any copy.

Between two events every rate is constant, so ``advance`` jumps from event to
event (a replica catching up or created, a quota running dry, a follower's
turn, a follower timing out); a quiet interval costs nothing.
"""

from __future__ import annotations

import math

import immutables

from engine.core.partition import TopicPartition
from engine.sim import controller
from engine.sim.bandwidth import max_min_fair
from engine.sim.model import (
    JOIN_EPSILON, QUOTA_WINDOW, QUOTA_WINDOW_SIZE, REPLICA_FETCH_MAX_BYTES, REPLICA_FETCH_RESPONSE_MAX_BYTES,
    REPLICA_LAG_TIME_MAX, FetchState, Lag, Quota, SimState,
)

INF = float("inf")
PARTITIONS_PER_RESPONSE = REPLICA_FETCH_RESPONSE_MAX_BYTES / REPLICA_FETCH_MAX_BYTES  # 10
# A fetcher refused by a follower quota that has nothing else to fetch from that leader waits out
# replica.fetch.backoff.ms (AbstractFetcherThread.maybeFetch); one that also fetches in-sync partitions
# from it asks again each time its fetch returns, with their new data (well under a second). Whenever the
# quota opens, the second asks first: Kafka's rule fetch by fetch gives it the quota as long as it copies
# (``python -m benchmarks.quota``: 4.5 s against 8.3 s for two equal copies). The first's copies weigh this
# much beside the second's: strict priority, in the fluid form.
BACKING_OFF_SHARE = 1e-3
def follower_rate(state: SimState, broker: int) -> float:
    """What ``broker``'s follower quota lets through once used up (``SimState.quota_loss``)."""
    return float(state.throttles.follower_rate[broker]) / (1 + state.quota_loss)


def advance(state: SimState, dt: float) -> SimState:
    """The state ``dt`` seconds later."""
    end = state.time + dt
    while True:
        if state.dirty:
            state = allocate(state)
        elif state.turns_dirty:
            state = turns(state)
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
    if state.ready.get((tp, broker), -INF) > state.time:
        return None
    return leader


def _quotas(quotas: immutables.Map, rates: immutables.Map, recording: set[int], t: float,
            leader_side: bool, loss: float = 0.0) -> dict[int, Quota]:
    """Every rated broker's quota brought to ``t`` (tokens, and for follower quotas whether it records)."""
    out = {}
    for b, rate in rates.items():
        rate = float(rate)
        q = quotas.get(b)
        if leader_side:  # a leader quota records every follower fetch: its window is always full
            out[b] = Quota(q.at(t, rate), t) if q is not None else Quota(rate * QUOTA_WINDOW, t)
            continue
        if q is None or (q.idle_since is not None and t - q.idle_since >= QUOTA_WINDOW):
            # no sample kept: a quota that starts recording measures over one sample window
            q = Quota(rate * QUOTA_WINDOW_SIZE, t, started=t) if b in recording else None
            if q is not None:
                out[b] = q
            continue
        tokens = q.at(t, rate, rate / (1 + loss))
        if b in recording:
            out[b] = Quota(tokens, t, started=q.started)
        else:
            out[b] = Quota(tokens, t, started=q.started, idle_since=q.idle_since if q.idle_since is not None else t)
    return out


def allocate(state: SimState) -> SimState:
    """Share the network among the copies; set every lag's drift, the quotas' flows, the followers'
    turns and the next event."""
    t = state.time
    brokers, th, partitions, ready = state.brokers, state.throttles, state.partitions, state.ready
    fq = _quotas(state.follower_quota, th.follower_rate, th.follower_listed, t, False, state.quota_loss)
    lq = _quotas(state.leader_quota, th.leader_rate, set(), t, True)
    f_dry = {b for b, q in fq.items() if q.tokens <= 1e-6 * float(th.follower_rate[b])}
    l_dry = {b for b, q in lq.items() if q.tokens <= 1e-6 * float(th.leader_rate[b])}
    follower_lists, leader_lists = th.follower, th.leader

    members: dict[tuple, list] = {}  # class -> keys of its copies
    stalled: list[tuple] = []  # (key, drift) of replicas out of the ISR that cannot copy now
    alive = {b: broker.alive for b, broker in brokers.items()}
    cache = _listing_cache(th)
    waiting_until = INF  # the first log still being created that will be ready
    for key in state.lags.keys():
        r = ready.get(key)
        if r is not None and r > t:  # its broker has not created its log yet (its lag drifts by produce)
            if r < waiting_until:
                waiting_until = r
            continue
        tp, b = key
        p = partitions[tp]
        leader = p.leader
        if leader is None or leader == b or not alive[leader] or not alive[b]:
            stalled.append((key, p.produce_rate if leader is not None and alive[leader] else 0.0))
            continue
        listed = cache.get((tp, b, leader))
        if listed is None:
            listed = cache[(tp, b, leader)] = (_in_list(follower_lists, tp, b), _in_list(leader_lists, tp, leader))
        cls = (b, leader, listed[0] and b in fq, listed[1] and leader in lq)
        m = members.get(cls)
        if m is None:
            members[cls] = [key]
        else:
            m.append(key)
    fetcher_size: dict[tuple, int] = {}  # (receiver, leader) -> copies through the receiver's follower quota
    for (b, leader, f_thr, _l), keys in members.items():
        if f_thr:
            fetcher_size[(b, leader)] = fetcher_size.get((b, leader), 0) + len(keys)

    classes = list(members)
    capacity: dict[tuple, float] = {}
    constraints = []
    for cls in classes:
        b, leader, f_thr, l_thr = cls
        keys = [("in", b), ("out", leader)]
        capacity[("in", b)] = brokers[b].capacity_in - state.isr_in.get(b, 0.0)
        capacity[("out", leader)] = brokers[leader].capacity_out - state.isr_out.get(leader, 0.0)
        weight = 1.0
        if f_thr:
            weight = min(1.0, PARTITIONS_PER_RESPONSE / fetcher_size[(b, leader)])
            if b in f_dry:
                keys.append(("fq", b))
                capacity[("fq", b)] = follower_rate(state, b)
                if not state.pulls.get((b, leader)):  # refused, it backs off: the quota goes to those that re-ask
                    weight *= BACKING_OFF_SHARE
        if l_thr and leader in l_dry:
            keys.append(("lq", leader))
            capacity[("lq", leader)] = float(th.leader_rate[leader])
        constraints.append((len(members[cls]), keys, weight))
    shares = max_min_fair(constraints, capacity)

    copy_rate = 0.0
    in_count: dict[int, int] = {}
    out_count: dict[int, int] = {}
    thr_in: dict[int, float] = {}
    thr_out: dict[int, float] = {}
    copy_in: dict[int, float] = {}
    copy_out: dict[int, float] = {}
    next_event = INF
    join_at, joining = INF, []  # the first copies to catch up, and when
    with state.lags.mutate() as lags:
        for cls, rate in zip(classes, shares):
            b, leader, f_thr, l_thr = cls
            keys = members[cls]
            n = len(keys)
            total = rate * n
            copy_rate += total
            in_count[b] = in_count.get(b, 0) + n
            out_count[leader] = out_count.get(leader, 0) + n
            copy_in[b] = copy_in.get(b, 0.0) + total
            copy_out[leader] = copy_out.get(leader, 0.0) + total
            if f_thr:
                thr_in[b] = thr_in.get(b, 0.0) + total
            if l_thr:
                thr_out[leader] = thr_out.get(leader, 0.0) + total
            for key in keys:
                d = partitions[key[0]].produce_rate - rate
                lag = lags[key]
                if lag.drift != d:
                    lag = Lag(lag.at(t), t, d)
                    lags[key] = lag
                if d < 0:
                    at = lag.since + lag.bytes / -d  # when it catches up (constant while its rate is)
                    if at <= join_at * (1 + 1e-12):
                        if at < join_at * (1 - 1e-12):
                            join_at, joining = at, [key]
                        else:
                            joining.append(key)
                elif lag.at(t) <= JOIN_EPSILON:
                    if t < join_at:
                        join_at, joining = t, [key]
                    else:
                        joining.append(key)
        for key, d in stalled:
            lag = lags[key]
            if lag.drift != d:
                lags[key] = Lag(lag.at(t), t, d)
        new_lags = lags.finish()
    next_event = min(next_event, waiting_until)
    next_event = min(next_event, max(join_at, t))

    # quotas: record the flows; a quota with tokens that lets more than its rate through runs dry
    follower_quota = {}
    for b, q in fq.items():
        flow = thr_in.get(b, 0.0)
        rate = follower_rate(state, b)
        follower_quota[b] = q if q.flow == flow else q._replace(flow=flow)
        if flow > rate * (1 + 1e-9) and q.tokens > 0:
            next_event = min(next_event, t + q.tokens / (flow - rate))
    leader_quota = {}
    for b, q in lq.items():
        flow = thr_out.get(b, 0.0)
        rate = float(th.leader_rate[b])
        leader_quota[b] = q if q.flow == flow else q._replace(flow=flow)
        if flow > rate * (1 + 1e-9) and q.tokens > 0:
            next_event = min(next_event, t + q.tokens / (flow - rate))
    # keep what is known of quotas no longer rated (their samples live on)
    for b, q in state.follower_quota.items():
        if b not in follower_quota and (q.idle_since is None or t - q.idle_since < QUOTA_WINDOW):
            idle = q.idle_since if q.idle_since is not None else t
            follower_quota[b] = q._replace(tokens=0.0, since=t, flow=0.0, idle_since=idle)

    # which follower quotas copies use up, and how long one round of turns at each takes: every fetcher
    # that copies through it takes a response of up to replica.fetch.max.bytes per partition, at most
    # replica.fetch.response.max.bytes
    saturated = frozenset(b for b in f_dry if thr_in.get(b, 0.0) >= follower_rate(state, b) * (1 - 1e-9))
    rounds: dict[int, float] = {}
    for cls, keys in members.items():
        b, leader, f_thr, _l = cls
        if f_thr and b in saturated:
            chunk = rounds.get((b, leader), 0.0)
            for k in keys:  # up to a full response
                if chunk >= REPLICA_FETCH_RESPONSE_MAX_BYTES:
                    break
                chunk += min(REPLICA_FETCH_MAX_BYTES, partitions[k[0]].size)
            rounds[(b, leader)] = chunk
    round_seconds: dict[int, float] = {}
    for (b, _leader), chunk in rounds.items():
        round_seconds[b] = round_seconds.get(b, 0.0) + (
            min(REPLICA_FETCH_RESPONSE_MAX_BYTES, chunk) / follower_rate(state, b))
    busy = state.busy_until
    for b in state.saturated - saturated:  # it keeps refusing until the turns it just granted are paid
        busy = busy.set(b, t + state.rounds.get(b, 0.0))

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
    state = state._replace(
        lags=new_lags, behind_since=behind, copy_next=next_event, copy_rate=copy_rate, stats=stats, dirty=False,
        joining=tuple(joining) if join_at <= next_event else (),
        follower_quota=immutables.Map(follower_quota), leader_quota=immutables.Map(leader_quota),
        saturated=saturated, rounds=immutables.Map(round_seconds), busy_until=busy,
        fetchers=frozenset(fetcher_size),
    )
    return turns(state)


_CACHE: list = [None, {}]  # the throttles last classified, and (tp, receiver, leader) -> (follower, leader) listed


def _listing_cache(th) -> dict:
    """Whether a copy is listed in the follower / leader lists, remembered while the throttles are the same."""
    if _CACHE[0] is not th:
        _CACHE[0], _CACHE[1] = th, {}
    return _CACHE[1]


def _in_list(lists: immutables.Map, tp: TopicPartition, broker: int) -> bool:
    entries = lists.get(tp.topic)
    return bool(entries) and ((tp.partition, broker) in entries or "*" in entries)


def turns(state: SimState) -> SimState:
    """When each fresh follower gets its turn at its broker's follower quota; the next event (the copies'
    from the last allocation, or a follower's)."""
    t = state.time
    th = state.throttles
    next_event = INF
    with state.fetch.mutate() as fetch:
        for key, fs in state.fetch.items():
            tp, b = key
            if fs.kind == "fresh":
                # its fetcher asked when it became fresh and, refused, asks again every fs.retry seconds;
                # an ask passes once the quota is not used up by other fetchers' copies and has paid the
                # turns it granted last (busy_until); a fetcher with copies of its own takes turns in
                # rotation with the others
                until = fs.until
                if not th.follower_throttled(tp, b):
                    until = min(until, _next_ask(fs, t))  # no longer listed (or no rate)
                elif b not in state.saturated:
                    until = min(until, _next_ask(fs, max(t, state.busy_until.get(b, fs.asked))))
                elif (b, state.partitions[tp].leader) in state.fetchers:
                    # the turn that completed it was its fetcher's: the next comes after one round
                    until = min(until, _next_ask(fs, max(t, fs.asked + state.rounds.get(b, 0.0))))
                if until != fs.until:
                    fetch[key] = fs._replace(until=until)
                next_event = min(next_event, until)
            else:
                next_event = min(next_event, fs.until)
            next_event = min(next_event, fs.since + REPLICA_LAG_TIME_MAX)
        new_fetch = fetch.finish()
    return state._replace(fetch=new_fetch, next_event=min(next_event, state.copy_next), turns_dirty=False)


def _next_ask(fs: FetchState, not_before: float) -> float:
    """The first time at or after ``not_before`` that a fresh follower's fetcher asks the quota."""
    if not_before <= fs.asked:
        return fs.asked
    return fs.asked + fs.retry * math.ceil((not_before - fs.asked) / fs.retry - 1e-9)


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
    """Carry out every event due now: replicas that caught up join the ISR; fenced followers whose
    broker applied the epoch change fetch (or wait for a turn at the follower quota); fresh followers
    whose turn came fetch; followers that fetched nothing for replica.lag.time.max.ms, and followers of
    a broker that could not carry its in-sync traffic that long, leave the ISR."""
    t = state.time
    due = []
    tolerance = 1e-9 * max(1.0, t)
    copies_due = state.copy_next <= t + tolerance
    for key in (state.joining if copies_due else ()):
        lag = state.lags.get(key)
        if lag is None:
            continue
        caught_up = lag.at(t) <= JOIN_EPSILON or (
            lag.drift < 0 and lag.since + lag.bytes / -lag.drift <= t + tolerance)
        if caught_up and flowing(state, *key) is not None:
            due.append(key)
    for tp, b in sorted(due):
        if (tp, b) in state.lags:  # a join before it may have completed the reassignment
            state = controller.join_isr(state, tp, b)
    for key, fs in sorted(state.fetch.items()):
        if state.fetch.get(key) != fs:
            continue
        tp, b = key
        if fs.until <= t + tolerance:
            if fs.kind in ("fenced", "refused") and state.throttles.follower_throttled(tp, b):
                state = controller.set_fetch(state, key, controller.fresh(state, tp, b, fs.since,
                                                                          state.partitions[tp].leader))
            else:
                state = controller.set_fetch(state, key, None)
        elif fs.since + REPLICA_LAG_TIME_MAX <= t + tolerance:
            p = state.partitions[tp]
            shrunk = controller.leave_isr(state, tp, b, p.produce_rate * (t - fs.since))
            # (a leader never drops its last in-sync follower below itself: nothing to wait for then)
            state = shrunk if shrunk is not state else controller.set_fetch(state, key, None)
    for b, since in sorted(state.behind_since.items()):
        if since + REPLICA_LAG_TIME_MAX <= t + tolerance:
            state = _shrink(state, b)
    if copies_due:
        state = state._replace(dirty=True)  # a copy's event (the quotas' and created copies' too) was due
    return state._replace(turns_dirty=True)


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
