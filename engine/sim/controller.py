"""Kafka's controller, as the simulated cluster applies it (KRaft, Kafka 3.3+).

Every function is pure: ``(state, ...) -> state`` or ``(state, result)``.

* Reassignment (AlterPartitionReassignments, KRaft's
  ``changePartitionReassignment``): with CR the replicas now (RS while a
  reassignment is in progress) and TRS the target, RR = CR - TRS and AR =
  TRS - CR (each ascending), RS = TRS + RR (Phase U). New replicas start
  copying the whole log (Phase A). When the ISR minus RR holds all of RS minus
  RR, the reassignment completes (Phase B): RS = TRS, RR leave the ISR, and a
  leader is elected from TRS if the old one left. A target equal to RS changes
  nothing; an empty AR or RR keeps the previous one, as KRaft's builder does.
* Cancel (a null target; KRaft's ``PartitionReassignmentRevert``): RS minus AR
  (in RS order, which need not be the order before the reassignment), ISR
  minus AR; if that leaves no replica in sync, refused with
  INVALID_REPLICA_ASSIGNMENT where the topic's unclean leader election is off
  (the default), and where it is on (``unclean.leader.election.enable``,
  ``cancelPartitionReassignment``) reverted uncleanly: the first replica left
  becomes the ISR alone, and leads if alive (else the first live replica, as
  an unclean election): what the new replicas had that it lacks is lost.
  Nothing in progress: a no-op.
* Leader election: the leader stays while it is alive and in the ISR and RS;
  otherwise the first replica of RS that is alive and in sync leads, or none.
  Preferred election (on request only) makes the first replica lead if it is
  alive and in sync, else PREFERRED_LEADER_NOT_AVAILABLE.
* A broker going down leaves every ISR (the last in-sync replica stays listed,
  without leader, as KRaft does) and its copies stall; coming back it leads
  the partitions it was the last in-sync replica of and catches up the rest.
* Leader epoch (KRaft's ``PartitionChangeBuilder``): it is bumped when the
  leader changes or the replica set loses a member (Phase B, a cancel's
  revert), not when replicas are only added or the ISR changes. On a bump
  every follower restarts its fetcher at the new epoch
  (``ReplicaManager.applyLocalFollowersDelta``), which its broker does only
  once it has applied every earlier metadata change. A follower that does so
  no later than its leader's broker fetches at an epoch the leader does not
  know yet: refused UNKNOWN_LEADER_EPOCH, its fetcher leaves the partition out
  for replica.fetch.backoff.ms (``model.refused_epoch_stall``), unless its fetcher
  may not ask for it at all (throttled on a saturated follower quota: it waits
  for a turn, below); one that does so later has its old-epoch fetches refused
  (FENCED_LEADER_EPOCH) until it has.
  Either way, while it is in the ISR the leader cannot complete acks=all
  writes (``SimState.fetch``, ``engine.sim.physics``).
* A broker applies metadata changes one at a time, in order; creating the log
  of a new replica takes ``SimState.creation_time`` (``meta_free``, ``ready``).
  The replicas one request adds start fetching together, once the last of
  their logs exists (``one_delta``).
* Throttles are broker and topic configs (KIP-73); ``engine.sim.physics``
  applies them.
"""

from __future__ import annotations

from typing import Iterable

import immutables

from engine.core.outcomes import OK, Ok, Refused, Result
from engine.core.partition import Replicas, TopicPartition
from engine.sim.model import (
    REPLICA_FETCH_WAIT_MAX, FetchState, Lag, SimBroker, SimPartition, SimState, Stats, Throttles,
    listed_brokers, refused_epoch_stall,
)
from engine.sim.scenario import Scenario
from engine.core.throttles import ThrottleSet


def initial(scenario: Scenario) -> SimState:
    brokers = immutables.Map({
        b.id: SimBroker(b.id, b.rack, float(b.network_in), float(b.network_out), b.alive) for b in scenario.brokers
    })
    state = SimState(0.0, brokers, immutables.Map(scenario.topics), immutables.Map(),
                     creation_time=scenario.replica_creation_time, fetch_backoff=scenario.replica_fetch_backoff,
                     quota_loss=scenario.follower_quota_loss)
    alive = {b.id for b in scenario.brokers if b.alive}
    for tp in sorted(scenario.partitions):
        spec = scenario.partitions[tp]
        isr = frozenset(b for b in spec.replicas if b in alive) or frozenset(spec.replicas[:1])
        p = SimPartition(spec.replicas, isr, None, spec.size, float(spec.produce_rate))
        state = put(state, tp, p._replace(leader=elect(p, state)))
    return state


# --- keeping the indexes exact -------------------------------------------------------------


def traffic(p: SimPartition, brokers: immutables.Map) -> list[tuple[int, float, float]]:
    """(broker, bytes/s in, bytes/s out) of the partition's in-sync traffic: produce into the
    leader, and the leader feeding every in-sync follower."""
    leader = p.leader
    if leader is None or not brokers[leader].alive or not p.produce_rate:
        return []
    followers = [b for b in p.isr if b != leader and brokers[b].alive]
    out = [(leader, p.produce_rate, p.produce_rate * len(followers))]
    out.extend((f, p.produce_rate, 0.0) for f in followers)
    return out


def in_sync_count(p: SimPartition, brokers: immutables.Map) -> int:
    return sum(1 for b in p.isr if brokers[b].alive)


def put(state: SimState, tp: TopicPartition, new: SimPartition, behind: float = 0.0) -> SimState:
    """Store a partition and keep every index and the ISR statistics exact.

    A replica that newly falls out of the ISR starts ``behind`` bytes behind,
    a replica newly added by a reassignment ``size`` bytes behind.
    """
    old = state.partitions.get(tp)
    if old is not None:
        new = new._replace(leader_epoch=old.leader_epoch + (1 if epoch_bumped(old, new) else 0))
    lags = state.lags
    was_out = old.out_of_sync() if old else set()
    now_out = new.out_of_sync()
    if was_out != now_out:
        old_replicas = set(old.replicas) if old else set()
        for b in was_out - now_out:
            lags = lags.delete((tp, b))
        producing = new.produce_rate if new.leader is not None and state.alive(new.leader) else 0.0
        for b in now_out - was_out:
            if old is not None and b not in old_replicas:  # a new replica copies the retained log, its size
                lags = lags.set((tp, b), Lag(float(new.size), state.time))
            else:  # fell out of the ISR: behind by what is produced until it copies
                lags = lags.set((tp, b), Lag(behind, state.time, producing))
    hosted = state.hosted
    before = set(old.replicas) if old else set()
    after = set(new.replicas)
    for b in before - after:
        hosted = hosted.set(b, hosted[b].delete(tp))
    for b in after - before:
        hosted = hosted.set(b, hosted.get(b, immutables.Map()).set(tp, True))
    isr_in, isr_out = state.isr_in, state.isr_out
    if old is None or (old.isr, old.leader) != (new.isr, new.leader):
        changes: dict[int, list[float]] = {}
        for sign, part in ((-1, old), (1, new)):
            if part is not None:
                for b, i, o in traffic(part, state.brokers):
                    c = changes.setdefault(b, [0.0, 0.0])
                    c[0] += sign * i
                    c[1] += sign * o
        for b, (i, o) in changes.items():
            if i:
                isr_in = isr_in.set(b, isr_in.get(b, 0.0) + i)
            if o:
                isr_out = isr_out.set(b, isr_out.get(b, 0.0) + o)
    state = state._replace(
        partitions=state.partitions.set(tp, new), lags=lags, hosted=hosted,
        isr_in=isr_in, isr_out=isr_out, dirty=True,
    )
    if old is None or old.isr != new.isr:
        state = _record_isr(state, tp, new)
    if old is not None:
        before = _pulling(state, tp, old)
        state = _metadata(state, tp, old, new)
        state = _repull(state, before, _pulling(state, tp, new))
    else:
        state = _repull(state, (), _pulling(state, tp, new))
    if old is None or old.leader != new.leader:
        s = state.stats
        state = state._replace(stats=s._replace(leader_log=((state.time, tp, new.leader), s.leader_log)))
    if old is not None and old.reassigning and not new.reassigning:
        s = state.stats
        state = state._replace(stats=s._replace(done_log=((state.time, tp), s.done_log)))
    if old is None or (len(old.isr), len(old.replicas)) != (len(new.isr), len(new.replicas)):
        was = old is not None and len(old.isr) < len(old.replicas)
        now = len(new.isr) < len(new.replicas)
        if was != now:
            s = state.stats
            count = s.under_replicated + (1 if now else -1)
            state = state._replace(stats=s._replace(
                under_replicated=count, peak_under_replicated=max(s.peak_under_replicated, count)))
    return update_blocked(state, tp)


def epoch_bumped(old: SimPartition, new: SimPartition) -> bool:
    """KRaft bumps the leader epoch when the leader changes or the replica set loses a member."""
    return old.leader != new.leader or not set(old.replicas) <= set(new.replicas)


def _metadata(state: SimState, tp: TopicPartition, old: SimPartition, new: SimPartition) -> SimState:
    """The brokers' side of a partition change: new replicas wait for their log to be created, and after
    an epoch bump every follower waits for its broker to apply it (fenced meanwhile), and one whose
    broker applies it no later than the leader's is refused at the new epoch and backs off."""
    t = state.time
    fetch, ready, free = state.fetch, state.ready, state.meta_free
    for b in old.replicas:  # replicas that left, or are no longer followers in the ISR
        key = (tp, b)
        if key in fetch and (b not in new.isr or b == new.leader):
            fetch = fetch.delete(key)
        if key in ready and (b not in new.replicas or b in new.isr):
            ready = ready.delete(key)
    for b in new.replicas:
        if b not in old.replicas:
            done = max(t, free.get(b, t)) + state.creation_time
            free = free.set(b, done)
            if done > t:
                ready = ready.set((tp, b), done)
    if epoch_bumped(old, new) and new.leader is not None:
        led = max(t, free.get(new.leader, t))  # when the leader's broker applies the change
        for b in new.replicas:
            if b == new.leader or not state.alive(b):
                continue
            applied = max(t, free.get(b, t))
            # its first fetch at the new epoch reaches a leader still at the old one, unless its fetcher may
            # not ask for it (listed, and copies use its broker's follower quota up: it waits for a turn)
            refused = applied <= led and not (state.throttles.follower_throttled(tp, b) and b in state.saturated)
            resume = applied + refused_epoch_stall(state.fetch_backoff) if refused else applied
            key = (tp, b)
            if b in new.isr:
                prior = fetch.get(key)
                since = prior.since if prior is not None else t
                if resume > t:
                    fetch = fetch.set(key, FetchState("refused" if refused else "fenced", since, resume))
                elif state.throttles.follower_throttled(tp, b):  # applied at once: throttled, lag unknown
                    own = (b, new.leader) in _pulling(state, tp, old)  # itself, counted until now
                    fetch = fetch.set(key, fresh(state, tp, b, since, new.leader, int(own)))
                elif prior is not None:
                    fetch = fetch.delete(key)
            elif resume > ready.get(key, t):
                ready = ready.set(key, resume)
    return state._replace(fetch=fetch, ready=ready, meta_free=free, dirty=True)


def one_delta(state: SimState, before: SimState) -> SimState:
    """The replicas that one request added (``before`` is the state before it) start fetching together.
    A request's changes are committed as one batch of records and each broker applies them as one delta
    (KRaft's ``MetadataLoader``): ``ReplicaManager.applyLocalFollowersDelta`` creates the log of every new
    local follower first, then adds the fetchers of them all. So each of them is ready when the last of
    those logs is created."""
    added = [key for key in state.ready.keys()
             if key not in before.ready and key[1] not in state.partitions[key[0]].isr]
    last: dict[int, float] = {}
    for (_tp, b), at in ((k, state.ready[k]) for k in added):
        last[b] = max(last.get(b, at), at)
    ready = state.ready
    for key in added:
        if ready[key] < last[key[1]]:
            ready = ready.set(key, last[key[1]])
    return state if ready is state.ready else state._replace(ready=ready, dirty=True)


def fresh(state: SimState, tp: TopicPartition, broker: int, since: float, leader: int, own: int = 0) -> FetchState:
    """A follower whose fetcher just restarted at a new epoch and is throttled: it asks the follower
    quota now and, refused, again when its other partitions' fetch from that leader returns (the leader
    holds it replica.fetch.wait.max.ms: the writes to that leader wait for this very follower), or after
    replica.fetch.backoff.ms if it fetches nothing else from that leader."""
    others = state.pulls.get((broker, leader), 0) - own
    retry = REPLICA_FETCH_WAIT_MAX if others > 0 else state.fetch_backoff
    return FetchState("fresh", since, float("inf"), state.time, retry)


def blocked_now(state: SimState, tp: TopicPartition, p: SimPartition) -> bool:
    """Can the leader not complete an acks=all write now? No leader, fewer in-sync replicas than
    min.insync.replicas (NOT_ENOUGH_REPLICAS), or a follower in the ISR that does not fetch."""
    leader = p.leader
    if leader is None or not state.alive(leader):
        return True
    if in_sync_count(p, state.brokers) < state.min_insync(tp):
        return True
    return any((tp, b) in state.fetch for b in p.isr if b != leader)


def update_blocked(state: SimState, tp: TopicPartition) -> SimState:
    p = state.partitions[tp]
    now = blocked_now(state, tp, p)
    s = state.stats
    if now == (tp in s.blocked):
        return state
    if now:
        return state._replace(stats=s._replace(blocked=s.blocked.set(tp, state.time)))
    start = s.blocked[tp]
    log = s.blocked_log if start >= state.time else ((tp, start, state.time), s.blocked_log)
    return state._replace(stats=s._replace(blocked=s.blocked.delete(tp), blocked_log=log))


def set_fetch(state: SimState, key: tuple, fs: FetchState | None) -> SimState:
    """Change an in-sync follower's fetch state and what producers feel of it."""
    tp = key[0]
    p = state.partitions[tp]
    before = _pulling(state, tp, p)
    fetch = state.fetch.set(key, fs) if fs is not None else state.fetch.delete(key)
    state = state._replace(fetch=fetch, turns_dirty=True)
    return update_blocked(_repull(state, before, _pulling(state, tp, p)), tp)


def _pulling(state: SimState, tp: TopicPartition, p: SimPartition) -> tuple:
    """(follower, leader) of every in-sync follower of ``p`` that fetches normally."""
    leader = p.leader
    if leader is None:
        return ()
    return tuple((b, leader) for b in p.isr if b != leader and (tp, b) not in state.fetch)


def _repull(state: SimState, before: tuple, after: tuple) -> SimState:
    if before == after:
        return state
    pulls = state.pulls
    crossed = False  # a fetcher starts or stops fetching in-sync partitions: it asks a quota differently
    for key, d in [(k, -1) for k in before] + [(k, 1) for k in after]:
        was = pulls.get(key, 0)
        n = was + d
        crossed = crossed or (was == 0) != (n == 0)
        pulls = pulls.set(key, n) if n else pulls.delete(key)
    return state._replace(pulls=pulls, dirty=state.dirty or crossed)


def _record_isr(state: SimState, tp: TopicPartition, p: SimPartition) -> SimState:
    s = state.stats
    headroom = in_sync_count(p, state.brokers) - state.min_insync(tp)
    lowest = headroom if s.min_headroom is None else min(s.min_headroom, headroom)
    under, seconds, partitions = s.under_min, s.under_min_seconds, s.under_min_partitions
    if headroom < 0 and tp not in under:
        under = under.set(tp, state.time)
        partitions = partitions | {tp}
    elif headroom >= 0 and tp in under:
        seconds += state.time - under[tp]
        under = under.delete(tp)
    return state._replace(stats=s._replace(
        min_headroom=lowest, under_min=under, under_min_seconds=seconds, under_min_partitions=partitions,
    ))


def _retraffic(state: SimState, tps: Iterable[TopicPartition]) -> SimState:
    """Recompute every broker's in-sync traffic (after a broker changed) and the ISR statistics of ``tps``."""
    isr_in: dict[int, float] = {}
    isr_out: dict[int, float] = {}
    for p in state.partitions.values():
        for b, i, o in traffic(p, state.brokers):
            isr_in[b] = isr_in.get(b, 0.0) + i
            isr_out[b] = isr_out.get(b, 0.0) + o
    state = state._replace(isr_in=immutables.Map(isr_in), isr_out=immutables.Map(isr_out), dirty=True)
    for tp in tps:
        state = update_blocked(_record_isr(state, tp, state.partitions[tp]), tp)
    return state


# --- leader election and Phase B -------------------------------------------------------------


def elect(p: SimPartition, state: SimState) -> int | None:
    """Keep a leader that is alive, in sync and a replica; else the first replica that is."""
    def ok(b: int | None) -> bool:
        return b is not None and b in p.isr and b in p.replicas and state.alive(b)

    if ok(p.leader):
        return p.leader
    return next((b for b in p.replicas if ok(b)), None)


def _settle(p: SimPartition, state: SimState) -> SimPartition:
    """Complete the reassignment if the ISR allows (Phase B), then elect a leader if needed."""
    if p.reassigning:
        removing = set(p.removing)
        isr = frozenset(b for b in p.isr if b not in removing)
        replicas = tuple(b for b in p.replicas if b not in removing)
        if isr and replicas and isr.issuperset(replicas):
            p = p._replace(replicas=replicas, isr=isr, adding=(), removing=())
    return p._replace(leader=elect(p, state))


# --- the admin API --------------------------------------------------------------------------------


def alter(state: SimState, tp: TopicPartition, target: Replicas) -> tuple[SimState, Result]:
    p = state.partitions.get(tp)
    if p is None:
        return state, Refused("UNKNOWN_TOPIC_OR_PARTITION", f"unknown partition {tp}")
    target = tuple(target)
    if not target:
        return state, Refused("INVALID_REPLICA_ASSIGNMENT", "empty replica list")
    if len(set(target)) != len(target):
        return state, Refused("INVALID_REPLICA_ASSIGNMENT", f"duplicate brokers in {list(target)}")
    unknown = [b for b in target if b not in state.brokers]
    if unknown:
        return state, Refused(
            "INVALID_REPLICA_ASSIGNMENT", f"broker {unknown[0]} is not registered",
        )
    current = p.replicas
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    merged = target + removing
    if merged == current and not adding and not removing:
        return state, OK
    new = p._replace(replicas=merged, adding=adding or p.adding, removing=removing or p.removing)
    settled = _settle(new, state)
    state = put(state, tp, settled)
    if not p.reassigning and new.reassigning and not settled.reassigning:  # completed at its alter (Phase B at once)
        s = state.stats
        state = state._replace(stats=s._replace(done_log=((state.time, tp), s.done_log)))
    return state, OK


def cancel(state: SimState, tp: TopicPartition) -> tuple[SimState, Result]:
    p = state.partitions.get(tp)
    if p is None:
        return state, Refused("UNKNOWN_TOPIC_OR_PARTITION", f"unknown partition {tp}")
    if not p.reassigning:
        return state, Ok("no reassignment in progress")
    adding = set(p.adding)
    isr = frozenset(b for b in p.isr if b not in adding)
    replicas = tuple(b for b in p.replicas if b not in adding)
    info = state.topics.get(tp.topic)
    unclean = info is not None and info.unclean_leader_election
    if not isr and not unclean:
        return state, Refused(
            "INVALID_REPLICA_ASSIGNMENT",
            f"unable to revert {tp}: it would require an unclean leader election",
        )
    if not isr:  # unclean: the first replica left is the ISR alone (what it lacks is lost)
        isr = frozenset(replicas[:1])
    new = p._replace(replicas=replicas, isr=isr, adding=(), removing=())
    leader = elect(new, state)
    if leader is None and unclean:  # the unclean election: the first live replica, in sync or not
        leader = next((b for b in replicas if state.alive(b)), None)
        new = new._replace(isr=frozenset({leader}) if leader is not None else isr)
    return put(state, tp, new._replace(leader=leader)), OK


def elect_preferred(state: SimState, tp: TopicPartition) -> tuple[SimState, Result]:
    p = state.partitions.get(tp)
    if p is None:
        return state, Refused("UNKNOWN_TOPIC_OR_PARTITION", f"unknown partition {tp}")
    preferred = p.replicas[0]
    if p.leader == preferred:
        return state, Ok("election not needed")
    if preferred not in p.isr or not state.alive(preferred):
        return state, Refused("PREFERRED_LEADER_NOT_AVAILABLE", f"broker {preferred} is not alive and in sync")
    return put(state, tp, p._replace(leader=preferred)), OK


def elect_unclean(state: SimState, tp: TopicPartition) -> tuple[SimState, Result]:
    """ElectLeaders UNCLEAN: only for a partition without a leader; the first live replica leads,
    in sync or not, and the ISR becomes that replica alone (what it lacks is lost, as in Kafka)."""
    p = state.partitions.get(tp)
    if p is None:
        return state, Refused("UNKNOWN_TOPIC_OR_PARTITION", f"unknown partition {tp}")
    if p.leader is not None:
        return state, Ok("election not needed")
    chosen = next((b for b in p.replicas if state.alive(b)), None)
    if chosen is None:
        return state, Refused("ELIGIBLE_LEADERS_NOT_AVAILABLE", f"no replica of {tp} is alive")
    return put(state, tp, p._replace(isr=frozenset({chosen}), leader=chosen)), OK


def join_isr(state: SimState, tp: TopicPartition, broker: int) -> SimState:
    """A replica caught up: the leader adds it to the ISR (AlterPartition), which may complete Phase B."""
    p = state.partitions[tp]
    if state.throttles.follower_throttled(tp, broker) and broker in state.saturated:
        s = state.stats
        state = state._replace(stats=s._replace(throttled_joins=s.throttled_joins + 1))
    return put(state, tp, _settle(p._replace(isr=p.isr | {broker}), state))


def leave_isr(state: SimState, tp: TopicPartition, broker: int, lag: float) -> SimState:
    """A follower fell behind for longer than replica.lag.time.max.ms (the leader shrinks the ISR)."""
    p = state.partitions[tp]
    if broker not in p.isr or broker == p.leader or len(p.isr) == 1:
        return state
    return put(state, tp, p._replace(isr=p.isr - {broker}), behind=lag)


# --- faults -----------------------------------------------------------------------------------------


def create_topic(state: SimState, topic: str, assignment: list[Replicas], min_insync: int) -> SimState:
    """A new topic (CreateTopics): each partition empty, its replicas in sync, the first live one leading."""
    from engine.core.partition import TopicInfo

    state = state._replace(topics=state.topics.set(topic, TopicInfo(len(assignment), min_insync)))
    for i, replicas in enumerate(assignment):
        p = SimPartition(tuple(replicas), frozenset(b for b in replicas if state.alive(b)), None, 0, 0.0)
        state = put(state, TopicPartition(topic, i), p._replace(leader=elect(p, state)))
    return state


def placement(state: SimState, partitions: int, replication_factor: int) -> list[Replicas] | None:
    """Replicas for a new topic's partitions, round robin over the live brokers in id order (None if
    there are fewer live brokers than the replication factor)."""
    live = sorted(b for b in state.brokers if state.alive(b))
    if replication_factor > len(live) or replication_factor < 1:
        return None
    return [tuple(live[(p + k) % len(live)] for k in range(replication_factor)) for p in range(partitions)]


def broker_down(state: SimState, broker: int) -> SimState:
    b = state.brokers[broker]
    if not b.alive:
        return state
    state = state._replace(brokers=state.brokers.set(broker, b._replace(alive=False)))
    tps = sorted(state.hosted.get(broker, immutables.Map()).keys())
    for tp in tps:
        p = state.partitions[tp]
        if broker in p.isr and len(p.isr) > 1:
            p = p._replace(isr=p.isr - {broker})
        state = put(state, tp, p._replace(leader=elect(p, state)))
    return _retraffic(state, tps)


def broker_up(state: SimState, broker: int) -> SimState:
    b = state.brokers[broker]
    if b.alive:
        return state
    state = state._replace(brokers=state.brokers.set(broker, b._replace(alive=True)))
    tps = sorted(state.hosted.get(broker, immutables.Map()).keys())
    for tp in tps:
        p = state.partitions[tp]
        state = put(state, tp, _settle(p, state))
    return _retraffic(state, tps)


def set_slow(state: SimState, broker: int, factor: float) -> SimState:
    b = state.brokers[broker]
    return state._replace(brokers=state.brokers.set(broker, b._replace(slow=factor)), dirty=True)


# --- throttles (KIP-73 configs) -------------------------------------------------------------------------


def apply_throttles(state: SimState, delta: ThrottleSet) -> SimState:
    t = state.throttles
    leader, follower = t.leader, t.follower
    for topic, (lead, follow) in _entries(delta).items():
        if lead:
            leader = leader.set(topic, leader.get(topic, frozenset()) | lead)
        if follow:
            follower = follower.set(topic, follower.get(topic, frozenset()) | follow)
    leader_rate, follower_rate = t.leader_rate, t.follower_rate
    if delta.rate is not None:
        for b in delta.leader_brokers:
            leader_rate = leader_rate.set(b, delta.rate)
        for b in delta.follower_brokers:
            follower_rate = follower_rate.set(b, delta.rate)
    return state._replace(throttles=Throttles(
        leader, follower, leader_rate, follower_rate, listed_brokers(follower, follower_rate)), dirty=True)


def remove_throttles(state: SimState, delta: ThrottleSet) -> SimState:
    t = state.throttles
    leader, follower = t.leader, t.follower
    for topic, (lead, follow) in _entries(delta).items():
        if lead and topic in leader:
            leader = leader.set(topic, leader[topic] - lead)
        if follow and topic in follower:
            follower = follower.set(topic, follower[topic] - follow)
    leader_rate, follower_rate = t.leader_rate, t.follower_rate
    for b in delta.leader_brokers:
        if b in leader_rate:
            leader_rate = leader_rate.delete(b)
    for b in delta.follower_brokers:
        if b in follower_rate:
            follower_rate = follower_rate.delete(b)
    return state._replace(throttles=Throttles(
        leader, follower, leader_rate, follower_rate, listed_brokers(follower, follower_rate)), dirty=True)


def set_throttled_replicas(state: SimState, topic: str, side: str, entries: frozenset) -> SimState:
    """A topic's ``leader``/``follower`` ``.replication.throttled.replicas`` set to exactly ``entries``
    ((partition, broker) pairs, or ``"*"``): a SET, DELETE or AlterConfigs of the KIP-73 topic config."""
    t = state.throttles
    lists = getattr(t, side)
    lists = lists.set(topic, frozenset(entries)) if entries else (lists.delete(topic) if topic in lists else lists)
    return state._replace(throttles=_relisted(t._replace(**{side: lists})), dirty=True)


def set_throttle_rate(state: SimState, broker: int, side: str, rate: int | None) -> SimState:
    """A broker's ``leader``/``follower`` ``.replication.throttled.rate`` set (bytes/s) or deleted (None)."""
    t = state.throttles
    name = f"{side}_rate"
    rates = getattr(t, name)
    rates = rates.set(broker, rate) if rate is not None else (rates.delete(broker) if broker in rates else rates)
    return state._replace(throttles=_relisted(t._replace(**{name: rates})), dirty=True)


def _relisted(t: Throttles) -> Throttles:
    return t._replace(follower_listed=listed_brokers(t.follower, t.follower_rate))


def set_unclean(state: SimState, topic: str, enabled: bool) -> SimState:
    """The topic's unclean.leader.election.enable (a cancel that leaves no replica in sync reverts uncleanly)."""
    info = state.topics[topic]
    return state._replace(topics=state.topics.set(topic, info._replace(unclean_leader_election=enabled)))


def set_min_insync(state: SimState, topic: str, value: int) -> SimState:
    """The topic's min.insync.replicas (the ISR statistics count against it from now on)."""
    info = state.topics[topic]
    return state._replace(topics=state.topics.set(topic, info._replace(min_insync_replicas=value)))


def _entries(delta: ThrottleSet) -> dict[str, tuple[set, set]]:
    """topic -> (leader, follower) throttled replicas as (partition, broker)."""
    out: dict[str, tuple[set, set]] = {}
    for side, replicas in ((0, delta.leader), (1, delta.follower)):
        for r in replicas:
            out.setdefault(r.topic, (set(), set()))[side].add((r.partition, r.broker))
    return out


def close_stats(state: SimState) -> Stats:
    """The statistics with open under-min and blocked intervals closed now."""
    s = state.stats
    open_seconds = sum(state.time - since for since in s.under_min.values())
    log = s.blocked_log
    for tp, since in sorted(s.blocked.items()):
        if since < state.time:
            log = ((tp, since, state.time), log)
    return s._replace(under_min_seconds=s.under_min_seconds + open_seconds, blocked_log=log)
