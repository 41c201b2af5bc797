"""A test double for the executor/watcher contract of ``engine.decide``.

It carries out the log's actions the way Kafka's controller does (a step goes
in progress with RS = TR + CR, finishes when the test says so, a cancel reverts
it to its CR) and reports what a watcher would see. It has no rates or clock:
the simulated cluster of ``engine.sim`` is the product's model; this only lets
core tests choose the order in which steps finish.
"""

from __future__ import annotations

from engine import events as ev
from engine.commands import Observation, StepStartReport, Tick
from engine.decide import handle, watched
from engine.partition import Broker, PartitionState, TopicInfo, TopicPartition, in_sync
from engine.state import EMPTY, State


class FakeCluster:
    def __init__(self, assignment: dict[TopicPartition, tuple[int, ...]], brokers, min_isr: int = 1, racks=None):
        self.brokers = {b: Broker(b, (racks or {}).get(b), True) for b in brokers}
        self.parts: dict[TopicPartition, PartitionState] = {tp: in_sync(r) for tp, r in assignment.items()}
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}  # reassignments in progress
        self.origins: dict[TopicPartition, tuple[int, ...]] = {}
        self.min_isr = min_isr
        self.min_isr_seen = {tp: len(p.isr) for tp, p in self.parts.items()}
        self.throttles = {"leader": set(), "follower": set(), "brokers_l": set(), "brokers_f": set()}
        self.altered: dict[tuple, tuple[int, ...]] = {}  # (request, tp, number) -> TR

    # -- what a watcher sees ------------------------------------------------------
    def observation(self, tps=None) -> Observation:
        topics: dict[str, int] = {}
        for tp in self.parts:
            topics[tp.topic] = max(topics.get(tp.topic, 0), tp.partition + 1)
        return Observation(
            brokers=tuple(self.brokers.values()),
            topics={t: TopicInfo(n, self.min_isr) for t, n in topics.items()},
            partitions={tp: p for tp, p in self.parts.items() if tps is None or tp in tps},
        )

    # -- the executor ----------------------------------------------------------------
    def execute(self, events) -> list[StepStartReport]:
        reports = []
        for e in events:
            if isinstance(e, ev.StepPlanned):
                key = (e.request_id, e.tp, e.number)
                assert self.altered.get(key, e.step.tr) == e.step.tr, "same step number, different content"
                self.altered[key] = e.step.tr
                self._alter(e.tp, e.step.tr)
                reports.append(StepStartReport(e.request_id, e.tp, e.number))
            elif isinstance(e, ev.PartitionCancelled) and e.aborting is not None:
                self._cancel(e.tp)
            elif isinstance(e, ev.ThrottlesApplied):
                t = e.throttles
                self.throttles["leader"] |= t.leader
                self.throttles["follower"] |= t.follower
                self.throttles["brokers_l"] |= t.leader_brokers
                self.throttles["brokers_f"] |= t.follower_brokers
            elif isinstance(e, ev.ThrottlesRemoved):
                t = e.throttles
                self.throttles["leader"] -= t.leader
                self.throttles["follower"] -= t.follower
                self.throttles["brokers_l"] -= t.leader_brokers
                self.throttles["brokers_f"] -= t.follower_brokers
            elif isinstance(e, ev.StepCompleted) and e.elect_leader:
                p = self.parts[e.tp]
                if p.replicas[0] in p.isr:
                    self.parts[e.tp] = p._replace(leader=p.replicas[0])
        return reports

    def _alter(self, tp, tr) -> None:
        p = self.parts[tp]
        if tp in self.targets:
            return
        cr = p.replicas
        if set(tr) <= set(p.isr) and set(tr) <= set(cr):
            self.parts[tp] = self._finished(p, tr)  # nothing to copy: Kafka completes at once
            return
        adding = tuple(b for b in tr if b not in cr)
        removing = tuple(b for b in cr if b not in tr)
        self.origins[tp] = cr
        self.targets[tp] = tuple(tr)
        self.parts[tp] = p._replace(replicas=tuple(tr) + removing, adding=adding, removing=removing)

    def _finished(self, p: PartitionState, tr) -> PartitionState:
        isr = frozenset(b for b in tr if self.brokers[b].alive)
        leader = p.leader if p.leader in tr else next((b for b in tr if b in isr), None)
        return PartitionState(tuple(tr), isr, leader, p.size_bytes)

    def _cancel(self, tp) -> None:
        if tp not in self.targets:
            return
        p = self.parts[tp]
        self.origins.pop(tp)
        del self.targets[tp]
        reverted = tuple(b for b in p.replicas if b not in p.adding)  # KRaft: RS - AR, in RS order
        isr = frozenset(b for b in p.isr if b in reverted)
        leader = p.leader if p.leader in reverted else next(iter(sorted(isr)), None)
        self.parts[tp] = PartitionState(reverted, isr, leader, p.size_bytes)

    def in_progress(self) -> list[TopicPartition]:
        return sorted(self.targets)

    def finish(self, tp) -> None:
        """The new replicas of ``tp`` caught up: Kafka completes the reassignment."""
        tr = self.targets.pop(tp)
        del self.origins[tp]
        self.parts[tp] = self._finished(self.parts[tp], tr)
        self.min_isr_seen[tp] = min(self.min_isr_seen[tp], len(self.parts[tp].isr))

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {tp: p.replicas for tp, p in self.parts.items()}


class Driver:
    """Feeds inputs to ``handle`` and the cluster the way the engine's loop does."""

    def __init__(self, cluster: FakeCluster, state: State = EMPTY):
        self.cluster = cluster
        self.state = state
        self.events: list = []
        self.observe()

    def feed(self, inp) -> list:
        self.state, evs = handle(self.state, inp)
        self.events.extend(evs)
        reports = self.cluster.execute(evs)
        for r in reports:
            self.state, more = handle(self.state, r)
            self.events.extend(more)
        return evs

    def observe(self) -> None:
        """What the engine's watcher does: poll only the partitions ``watched`` names."""
        self.feed(self.cluster.observation(watched(self.state) if self.state.partitions else None))

    def tick(self) -> list:
        evs = self.feed(Tick())
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
