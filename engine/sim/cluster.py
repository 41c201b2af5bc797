"""``SimulatedCluster``: the simulated cluster behind the ``engine.cluster`` interface.

In process, time is virtual: ``advance(dt)`` moves it (``kreassign simulate``,
unit tests). Given a ``clock`` (a function returning simulated seconds),
every call first catches up with it: that is how ``kreassign sim-cluster``
runs it on the wall clock, scaled.

Answers are what Kafka's admin API would give, already mapped to results:
cancelling nothing and electing a leader that already leads are ``Ok``.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping, Sequence

from engine.core.outcomes import Result
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import Observation
from engine.core.partition import Broker, Replicas, TopicInfo, TopicPartition
from engine.sim import controller, physics
from engine.sim.model import SimState
from engine.sim.scenario import FAULT_ACTIONS, Fault, Scenario
from engine.core.throttles import ThrottleSet


def fault(state: SimState, broker: int, action: str, factor: float = 1.0) -> SimState:
    if broker not in state.brokers:
        raise ValueError(f"unknown broker {broker}")
    if action == "down":
        return controller.broker_down(state, broker)
    if action == "up":
        return controller.broker_up(state, broker)
    if action == "slow":
        if not 0 < factor <= 1:
            raise ValueError(f"slow factor must be in (0, 1], got {factor}")
        return controller.set_slow(state, broker, factor)
    raise ValueError(f"unknown fault {action!r}: expected one of {', '.join(FAULT_ACTIONS)}")


class SimulatedCluster:
    def __init__(self, state: SimState, clock: Callable[[], float] | None = None, faults: Sequence[Fault] = ()):
        self.state = state
        self._clock = clock
        self._faults = sorted(faults, key=lambda f: f.at)  # injected when simulated time reaches them

    @classmethod
    def from_scenario(cls, scenario: Scenario, clock: Callable[[], float] | None = None) -> "SimulatedCluster":
        return cls(controller.initial(scenario), clock, scenario.faults)

    # -- time and faults ------------------------------------------------------------------

    @property
    def time(self) -> float:
        return self.state.time

    def advance(self, dt: float) -> None:
        self.advance_to(self.state.time + dt)

    def advance_to(self, t: float) -> None:
        while self._faults and self._faults[0].at <= t:
            f = self._faults.pop(0)
            if f.at > self.state.time:
                self.state = physics.advance(self.state, f.at - self.state.time)
            self.state = fault(self.state, f.broker, f.action, f.factor)
        if t > self.state.time:
            self.state = physics.advance(self.state, t - self.state.time)

    def _sync(self) -> None:
        if self._clock is not None:
            self.advance_to(self._clock())

    def inject(self, broker: int, action: str, factor: float = 1.0) -> None:
        """A fault now: ``down``, ``up`` or ``slow`` (``factor`` of its network left)."""
        self._sync()
        self.state = fault(self.state, broker, action, factor)

    # -- observe --------------------------------------------------------------------------------

    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation:
        self._sync()
        s = self.state
        brokers = tuple(Broker(b.id, b.rack, b.alive) for b in sorted(s.brokers.values()))
        if partitions is None:
            tps = list(s.partitions.keys())
            topics: dict[str, TopicInfo | None] = dict(s.topics.items())
        else:
            tps = [tp for tp in partitions if tp in s.partitions]
            topics = {tp.topic: s.topics.get(tp.topic) for tp in partitions}
        return Observation(
            brokers=brokers, topics=topics,
            partitions={tp: s.partitions[tp].view()._replace(size_bytes=None) for tp in tps},
        )

    def sizes(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self._sync()
        return {tp: int(self.state.partitions[tp].size) for tp in partitions if tp in self.state.partitions}

    def catch_up(self, steps) -> dict[TopicPartition, int]:
        """What the adding replicas of each partition still miss (its largest lag among them)."""
        self._sync()
        s = self.state
        out: dict[TopicPartition, int] = {}
        for tp, (_leader, nr) in steps.items():
            lags = [s.lags[(tp, b)].at(s.time) for b in nr if (tp, b) in s.lags]
            out[tp] = int(max(lags, default=0.0))
        return out

    def snapshot(self) -> ClusterSnapshot:
        self._sync()
        s = self.state
        return ClusterSnapshot(
            tuple(Broker(b.id, b.rack, b.alive) for b in sorted(s.brokers.values())),
            dict(s.topics.items()),
            {tp: p.view() for tp, p in s.partitions.items()},
        )

    # -- act ---------------------------------------------------------------------------------------

    def _each(self, op, items) -> dict[TopicPartition, Result]:
        self._sync()
        out = {}
        for tp, *args in items:
            self.state, out[tp] = op(self.state, tp, *args)
        return out

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas]) -> dict[TopicPartition, Result]:
        self._sync()
        before = self.state
        out = self._each(controller.alter, targets.items())
        self.state = controller.one_delta(self.state, before)
        return out

    def cancel_reassignments(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._each(controller.cancel, [(tp,) for tp in partitions])

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._each(controller.elect_preferred, [(tp,) for tp in partitions])

    def apply_throttles(self, throttles: ThrottleSet) -> Result:
        self._sync()
        self.state = controller.apply_throttles(self.state, throttles)
        return controller.OK

    def remove_throttles(self, throttles: ThrottleSet) -> Result:
        self._sync()
        self.state = controller.remove_throttles(self.state, throttles)
        return controller.OK

    def elect_unclean_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._each(controller.elect_unclean, [(tp,) for tp in partitions])

    def set_throttled_replicas(self, topic: str, side: str, entries: frozenset) -> None:
        self._sync()
        self.state = controller.set_throttled_replicas(self.state, topic, side, entries)

    def set_throttle_rate(self, broker: int, side: str, rate: int | None) -> None:
        self._sync()
        self.state = controller.set_throttle_rate(self.state, broker, side, rate)

    def set_min_insync(self, topic: str, value: int) -> None:
        self._sync()
        self.state = controller.set_min_insync(self.state, topic, value)

    def throttles(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleSet:
        self._sync()
        return self.state.throttles.as_set(set(topics), set(brokers))

    def close(self) -> None:
        pass
