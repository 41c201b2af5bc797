"""A test double of the ``engine.cluster`` interface that lets core tests choose what Kafka does.

It is driven through the real executor (``engine.runtime.executor.run``), like the engine, and it is as
unforgiving as Kafka's controller (KRaft) where the core must cope:

* a step goes in progress with RS = TRS + RR (RR = CR - TRS in broker id order, as KRaft's
  ``PartitionReassignmentReplicas`` builds it), and finishes only when the test says
  so (``finish``), possibly with some of TR already out of the ISR again (``finish(lose=...)``);
* a second, different alter of a partition in progress is merged into it, as KRaft's
  ``changePartitionReassignment`` does: from RS as it stands, RR = RS - TRS and AR = TRS - RS,
  RS = TRS + RR, and an empty AR or RR keeps the previous one (``PartitionChangeBuilder`` starts from
  the partition's own); it completes at once if the ISR allows (Phase B); the same target changes
  nothing;
* a cancel reverts to RS - AR with ISR - AR, and is refused (INVALID_REPLICA_ASSIGNMENT) when that
  ISR is empty, as KRaft's ``PartitionReassignmentRevert`` is, unless the topic's unclean leader
  election is enabled (``unclean``): then the first replica left is the ISR alone and leads;
* the test can make the next calls of an action refused (``refuse``) or unanswered
  (``unavailable``), drop a reassignment in progress (``drop``: cancelled by another tool), and
  refuse or lose preferred-leader elections (``elections``);
* with ``epochs``, every partition carries a leader epoch moved as KRaft's ``PartitionChangeBuilder``
  moves it: from 0, one more at every leader change and whenever a replica leaves the replica set (a
  completion that drops RR, a cancel's revert that drops AR); adding replicas or an ISR change keeps it.
  With ``topic_ids`` (topic -> id) each topic reports its Kafka topic id.

It has no rates or clock: the simulated cluster of ``engine.sim`` is the product's model; this
only lets core tests choose the order in which things happen.
"""

from __future__ import annotations

from collections import defaultdict

from engine.core.outcomes import OK, Ok, Refused, Result, Unavailable
from engine.core.commands import Observation, Tick
from engine.core.decide import handle, watched
from engine.runtime.executor import Executor, actions
from engine.core.partition import Broker, PartitionState, TopicInfo, TopicPartition, in_sync
from engine.core.state import EMPTY, State
from engine.core.throttles import RateRead, ThrottleSet


class KRaftEpochs(dict):
    """Partition states whose ``leader_epoch`` every assignment moves as KRaft does (PartitionChangeBuilder's
    ``tryElection`` and ``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``; Kafka 3.6+ metadata, where an
    ISR shrink no longer bumps it)."""

    def __setitem__(self, tp, p: PartitionState) -> None:
        old = self.get(tp)
        epoch = 0
        if old is not None:
            epoch = old.leader_epoch + (p.leader != old.leader or not set(old.replicas) <= set(p.replicas))
        super().__setitem__(tp, p._replace(leader_epoch=epoch))


class FakeCluster:
    def __init__(self, assignment: dict[TopicPartition, tuple[int, ...]], brokers, min_isr: int = 1, racks=None,
                 epochs: bool = False, topic_ids: dict[str, str] | None = None):
        self.brokers = {b: Broker(b, (racks or {}).get(b), True) for b in brokers}
        self.parts: dict[TopicPartition, PartitionState] = KRaftEpochs() if epochs else {}
        for tp, r in assignment.items():
            self.parts[tp] = in_sync(r)
        self.topic_ids = dict(topic_ids or {})
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}  # reassignments in progress
        self.min_isr = min_isr
        self.min_isr_seen = {tp: len(p.isr) for tp, p in self.parts.items()}
        self.throttles = {"leader": set(), "follower": set(), "brokers_l": set(), "brokers_f": set()}
        # (side, broker) -> the rate set there (bytes/s), side "l" or "f": what a read-back reads (a broker
        # a test names in brokers_l / brokers_f by hand without a value is read as present, value unknown)
        self.rates: dict[tuple[str, int], int] = {}
        self.alters: list[tuple[TopicPartition, tuple[int, ...] | None]] = []  # every alter/cancel received
        self.throttle_calls: list[tuple[str, ThrottleSet]] = []
        self.remaining: dict[TopicPartition, int] = {}  # what catch_up answers
        self.failures: dict[tuple, list[Result]] = defaultdict(list)  # (action, tp or None) -> answers to give next
        self.elections = "elect"  # or "refuse" (PREFERRED_LEADER_NOT_AVAILABLE) or "lose" (Ok, nothing happens)
        self.unclean: set[str] = set()  # topics with unclean.leader.election.enable=true

    # -- what the test makes Kafka do -------------------------------------------------
    def refuse(self, action: str, code: str, message: str = "", times: int = 1, tp=None) -> None:
        """The next ``times`` calls of ``action`` (alter, cancel, elect, apply, remove), for partition ``tp``
        only if given, are refused."""
        self.failures[(action, tp)] += [Refused(code, message)] * times

    def unavailable(self, action: str, times: int = 1, tp=None) -> None:
        self.failures[(action, tp)] += [Unavailable("connection refused")] * times

    def _failure(self, action: str, tp=None) -> Result | None:
        queue = self.failures.get((action, tp)) if tp is not None else None
        if not queue:
            queue = self.failures.get((action, None))
        return queue.pop(0) if queue else None

    def in_progress(self) -> list[TopicPartition]:
        return sorted(self.targets)

    def finish(self, tp, lose=()) -> None:
        """The new replicas of ``tp`` caught up: Kafka completes the reassignment (Phase B): RS less RR.
        ``lose``: replicas that fall out of the ISR again right after (before any watcher looks)."""
        del self.targets[tp]
        p = self.parts[tp]
        tr = tuple(b for b in p.replicas if b not in p.removing)
        p = self._finished(p, tr)
        if lose:
            isr = frozenset(p.isr - set(lose))
            p = p._replace(isr=isr, leader=p.leader if p.leader in isr else next(b for b in tr if b in isr))
        self.parts[tp] = p
        self.min_isr_seen[tp] = min(self.min_isr_seen[tp], len(p.isr))

    def drop(self, tp) -> None:
        """The reassignment vanishes (another tool cancelled it): the partition is back where it was."""
        self._revert(tp)

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {tp: p.replicas for tp, p in self.parts.items()}

    # -- the Cluster interface ------------------------------------------------------------
    def observation(self, tps=None) -> Observation:
        topics: dict[str, int] = {}
        for tp in self.parts:
            topics[tp.topic] = max(topics.get(tp.topic, 0), tp.partition + 1)
        return Observation(
            brokers=tuple(self.brokers.values()),
            topics={t: TopicInfo(n, self.min_isr, self.topic_ids.get(t), t in self.unclean)
                    for t, n in topics.items()},
            partitions={tp: p for tp, p in self.parts.items() if tps is None or tp in tps},
        )

    def observe(self, partitions=None) -> Observation:
        return self.observation(None if partitions is None else set(partitions))

    def alter_reassignments(self, targets) -> dict[TopicPartition, Result]:
        out = {}
        for tp, tr in targets.items():
            self.alters.append((tp, tuple(tr)))
            out[tp] = self._failure("alter", tp) or self._alter(tp, tuple(tr))
        return out

    def cancel_reassignments(self, partitions) -> dict[TopicPartition, Result]:
        out = {}
        for tp in partitions:
            self.alters.append((tp, None))
            out[tp] = self._failure("cancel", tp) or self._cancel(tp)
        return out

    def elect_preferred_leaders(self, partitions) -> dict[TopicPartition, Result]:
        out = {}
        for tp in partitions:
            failure = self._failure("elect", tp)
            if failure is not None:
                out[tp] = failure
                continue
            p = self.parts[tp]
            preferred = p.replicas[0]
            if p.leader == preferred:
                out[tp] = Ok("election not needed")
            elif self.elections == "refuse" or preferred not in p.isr:
                out[tp] = Refused("PREFERRED_LEADER_NOT_AVAILABLE", f"broker {preferred} cannot lead")
            else:
                if self.elections == "elect":
                    self.parts[tp] = p._replace(leader=preferred)
                out[tp] = OK
        return out

    def apply_throttles(self, t: ThrottleSet) -> Result:
        self.throttle_calls.append(("apply", t))
        failure = self._failure("apply")
        if failure is not None:
            return failure
        self.throttles["leader"] |= t.leader
        self.throttles["follower"] |= t.follower
        self.throttles["brokers_l"] |= t.leader_brokers
        self.throttles["brokers_f"] |= t.follower_brokers
        if t.rate is not None:
            self.rates.update({("l", b): t.rate for b in t.leader_brokers})
            self.rates.update({("f", b): t.rate for b in t.follower_brokers})
        return OK

    def remove_throttles(self, t: ThrottleSet) -> Result:
        self.throttle_calls.append(("remove", t))
        failure = self._failure("remove")
        if failure is not None:
            return failure
        self.throttles["leader"] -= t.leader
        self.throttles["follower"] -= t.follower
        self.throttles["brokers_l"] -= t.leader_brokers
        self.throttles["brokers_f"] -= t.follower_brokers
        for b in t.leader_brokers:
            self.rates.pop(("l", b), None)
        for b in t.follower_brokers:
            self.rates.pop(("f", b), None)
        return OK

    def throttle_set(self) -> ThrottleSet:
        """What a read-back reads: the entries, the brokers with a rate, and the values of those set through
        ``apply_throttles`` or ``set_rate`` (``ThrottleSet.rates``)."""
        t = self.throttles
        lead, follow = t["brokers_l"], t["brokers_f"]
        known = sorted({b for side, b in self.rates if b in (lead if side == "l" else follow)})
        rates = tuple(RateRead(b, self.rates.get(("l", b)) if b in lead else None,
                               self.rates.get(("f", b)) if b in follow else None) for b in known)
        return ThrottleSet(frozenset(t["leader"]), frozenset(t["follower"]), frozenset(lead), frozenset(follow),
                           1, rates)

    def set_rate(self, side: str, broker: int, rate: int | None) -> None:
        """Another tool sets (or deletes: ``None``) a broker's ``leader`` / ``follower`` replication rate."""
        key, names = ("l", "brokers_l") if side == "leader" else ("f", "brokers_f")
        if rate is None:
            self.rates.pop((key, broker), None)
            self.throttles[names].discard(broker)
        else:
            self.rates[(key, broker)] = rate
            self.throttles[names].add(broker)

    def throttles_of(self, topics, brokers) -> ThrottleSet:
        return self.throttle_set()

    def catch_up(self, steps):
        """What the test says each copy still misses (``remaining``); 0 for the others."""
        return {tp: self.remaining.get(tp, 0) for tp in steps}

    def sizes(self, partitions):
        return {tp: self.parts[tp].size_bytes for tp in partitions if self.parts[tp].size_bytes is not None}

    def close(self) -> None:
        pass

    # -- KRaft's semantics ------------------------------------------------------------------
    def _alter(self, tp, tr) -> Result:
        p = self.parts.get(tp)
        if p is None:
            return Refused("UNKNOWN_TOPIC_OR_PARTITION", str(tp))
        if any(not self.brokers.get(b) for b in tr) or len(set(tr)) != len(tr):
            return Refused("INVALID_REPLICA_ASSIGNMENT", f"bad target {list(tr)}")
        if self.targets.get(tp) == tr:
            return OK
        # KRaft (PartitionReassignmentReplicas, from the partition's replicas as they stand: RS while a
        # reassignment is in progress): RR = RS - TRS and AR = TRS - RS in broker id order, RS = TRS + RR;
        # an empty AR or RR keeps the one in progress (PartitionChangeBuilder starts from the partition's)
        cr = p.replicas
        removing = tuple(sorted(b for b in cr if b not in tr))
        adding = tuple(sorted(b for b in tr if b not in cr))
        replicas = tr + removing
        adding, removing = adding or p.adding, removing or p.removing
        if not adding and not removing:  # no reassignment: a new order at most
            self.parts[tp] = p._replace(replicas=tr)
            return OK
        # Phase B at once if the ISR allows it (maybeCompleteReassignment): nothing is left to copy
        kept = tuple(b for b in replicas if b not in removing)
        if kept and set(kept) <= p.isr - set(removing):
            self.targets.pop(tp, None)
            self.parts[tp] = self._finished(p, kept)
            return OK
        self.targets[tp] = tr
        self.parts[tp] = p._replace(replicas=replicas, adding=adding, removing=removing)
        return OK

    def _finished(self, p: PartitionState, tr) -> PartitionState:
        isr = frozenset(b for b in tr if self.brokers[b].alive)
        leader = p.leader if p.leader in tr else next((b for b in tr if b in isr), None)
        return PartitionState(tuple(tr), isr, leader, p.size_bytes)

    def _cancel(self, tp) -> Result:
        if tp not in self.targets:
            return Ok("no reassignment in progress")
        p = self.parts[tp]
        if not (p.isr - set(p.adding)):
            if tp.topic not in self.unclean:
                return Refused("INVALID_REPLICA_ASSIGNMENT", f"unable to revert {tp}: no replica would be in sync")
            self._revert(tp)  # unclean: the first replica left is the ISR alone (what it lacks is lost)
            q = self.parts[tp]
            self.parts[tp] = q._replace(isr=frozenset(q.replicas[:1]), leader=q.replicas[0])
            return OK
        self._revert(tp)
        return OK

    def _revert(self, tp) -> None:
        p = self.parts[tp]
        del self.targets[tp]
        reverted = tuple(b for b in p.replicas if b not in p.adding)  # KRaft: RS - AR, in RS order
        isr = frozenset(b for b in p.isr if b in reverted)
        leader = p.leader if p.leader in reverted else next(iter(sorted(isr)), None)
        self.parts[tp] = PartitionState(reverted, isr, leader, p.size_bytes)


LOOK_AFTER = 0.001
"""Seconds between the answers to a batch of actions and the look that follows them (``Driver.observe``)."""


class Driver:
    """Feeds inputs to ``handle`` and carries out their actions on the cluster through the real
    executor, the way the engine's loop does; every outcome goes back through ``handle``."""

    def __init__(self, cluster: FakeCluster, state: State = EMPTY):
        self.cluster = cluster
        self.state = state
        self.events: list = []
        self.now: float | None = None  # set it to drive retries on a clock; None: every retry is due
        self.executor = Executor(cluster, lambda: self.now)
        self.steps_altered: dict[tuple, tuple[int, ...]] = {}  # (request, tp, number) -> TR
        self.observe()

    def feed(self, inp) -> list:
        pending, first = [inp], None
        while pending:
            self.state, evs = handle(self.state, pending.pop(0))
            first = evs if first is None else first
            self.events.extend(evs)
            for a in actions(evs):
                if type(a).__name__ == "StartStep":
                    key = (a.request_id, a.tp, a.number)
                    assert self.steps_altered.setdefault(key, a.replicas) == a.replicas, "one step number, two targets"
            pending.extend(self.executor.execute_events(evs))
        return first

    def observe(self) -> None:
        """What the engine's watcher does: poll only the partitions ``watched`` names. On a clock, the
        look is taken after the answers to the actions before it, so it is stamped later (LOOK_AFTER
        seconds): a look stamped the time of an answer is set aside (it may predate the action)."""
        if self.now is not None:
            self.now += LOOK_AFTER
        obs = self.cluster.observation(watched(self.state) if self.state.partitions else None)
        self.feed(Observation(obs.brokers, obs.topics, obs.partitions, self.now))

    def tick(self) -> list:
        evs = self.feed(Tick(self.now))
        self.observe()
        return evs

    def quiet(self) -> bool:
        """Nothing in progress on the cluster and one more round changes nothing."""
        if self.cluster.in_progress():
            return False
        before = len(self.events)
        self.tick()
        return len(self.events) == before

    def run(self, choose=None, max_rounds: int = 10_000) -> int:
        """Tick, finish in-flight moves (``choose`` picks which), until quiet."""
        for rounds in range(max_rounds):
            self.tick()
            if self.quiet():
                return rounds
            busy = self.cluster.in_progress()
            for tp in (choose(busy) if choose else busy):
                self.cluster.finish(tp)
            self.observe()
        raise AssertionError("did not settle")
