"""``SimulatedCluster``: the simulated cluster behind the ``engine.cluster`` interface.

In process, time is virtual: ``advance(dt)`` moves it (``kreassign simulate``,
unit tests). Given a ``clock`` (a function returning simulated seconds),
every call first catches up with it: that is how ``kreassign sim-cluster``
runs it on the wall clock, scaled.

Answers are what Kafka's admin API would give, already mapped to results:
cancelling nothing and electing a leader that already leads are ``Ok``.
"""

from __future__ import annotations

from typing import Callable, Collection, Mapping

from engine.cluster.result import Result
from engine.cluster.snapshot import ClusterSnapshot
from engine.commands import Observation
from engine.partition import Broker, Replicas, TopicInfo, TopicPartition
from engine.sim import controller, physics
from engine.sim.model import SimState
from engine.sim.scenario import Scenario
from engine.throttles import ThrottleSet


class SimulatedCluster:
    def __init__(self, state: SimState, clock: Callable[[], float] | None = None):
        self.state = state
        self._clock = clock

    @classmethod
    def from_scenario(cls, scenario: Scenario, clock: Callable[[], float] | None = None) -> "SimulatedCluster":
        return cls(controller.initial(scenario), clock)

    # -- time and faults ------------------------------------------------------------------

    @property
    def time(self) -> float:
        return self.state.time

    def advance(self, dt: float) -> None:
        self.state = physics.advance(self.state, dt)

    def advance_to(self, t: float) -> None:
        if t > self.state.time:
            self.advance(t - self.state.time)

    def _sync(self) -> None:
        if self._clock is not None:
            self.advance_to(self._clock())

    def broker_down(self, broker: int) -> None:
        self._sync()
        self.state = controller.broker_down(self.state, broker)

    def broker_up(self, broker: int) -> None:
        self._sync()
        self.state = controller.broker_up(self.state, broker)

    def slow_broker(self, broker: int, factor: float) -> None:
        self._sync()
        self.state = controller.set_slow(self.state, broker, factor)

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
        return self._each(controller.alter, targets.items())

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

    def close(self) -> None:
        pass
