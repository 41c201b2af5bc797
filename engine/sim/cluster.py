"""``SimulatedCluster``: the simulated cluster behind the ``engine.cluster`` interface.

In process, time is virtual: ``advance(dt)`` moves it (``kreassign simulate``,
unit tests). Given a ``clock`` (a function returning simulated seconds),
every call first catches up with it: that is how ``kreassign sim-cluster``
runs it on the wall clock, scaled.

Answers are what Kafka's admin API would give, already mapped to results:
cancelling nothing and electing a leader that already leads are ``Ok``.

Faults beyond the model's (``inject``, or a scenario's ``faults``):

* ``lag`` (``seconds``): the broker's metadata cache trails the controller by that
  much, as a Kafka broker's does (measured on Kafka 4.0: a step's whole RS with
  nothing in progress, 0.64 s after the controller had completed it). What the
  broker answers from its metadata (replicas, ISR, leader, leader epoch, topic
  and broker configs: ``metadata_view``) is the cluster as it was ``seconds``
  ago; what the controller answers (the reassignments in progress, every change)
  is the cluster now. In process, ``observe`` and ``throttles`` read their
  metadata from the live brokers in turn (id order, one broker per call), the way
  a client spreads its requests; the Kafka front answers each request from the
  metadata of the broker it was sent to. ``seconds`` 0 ends the lag.
* ``hang``: the broker stops answering (a SIGSTOP, a long pause): the Kafka front
  keeps accepting its connections and reading their requests and answers none;
  it neither fetches nor serves fetches (its copies stall); ``BROKER_SESSION_TIMEOUT`` later the controller fences it (it is down in the
  model: out of every ISR, no longer a leader, absent from Metadata), as KRaft
  fences a broker that stops heartbeating. ``resume`` ends it: the requests read
  meanwhile are answered, and a fenced broker registers again (it is up).
"""

from __future__ import annotations

import bisect
from typing import Callable, Collection, Mapping, Sequence

from engine.core.outcomes import Result
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import Observation
from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition
from engine.sim import controller, physics
from engine.sim.model import SimState
from engine.sim.scenario import FAULT_ACTIONS, Fault, Scenario
from engine.core.throttles import ThrottleConfigs, ThrottleSet


BROKER_SESSION_TIMEOUT = 9.0
"""Seconds (simulated) after which the controller fences a broker that stopped answering (``hang``):
KRaft's ``broker.session.timeout.ms`` default."""
HUNG_NETWORK = 1e-9
"""The fraction of its network a hung broker keeps (``slow``): it neither fetches nor serves fetches."""


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
        self.metadata_lag: dict[int, float] = {}  # broker -> seconds its metadata trails the controller
        self.hung: dict[int, tuple[float, float]] = {}  # broker -> (simulated time it stopped answering, its slow factor)
        self._history: list[SimState] = []  # the states a lagging broker may still answer from, oldest first
        self._reads = 0  # metadata reads in process: the broker asked goes round the live ones
        self._state = state
        self._clock = clock
        self._faults = sorted(faults, key=lambda f: f.at)  # injected when simulated time reaches them

    @property
    def state(self) -> SimState:
        return self._state

    @state.setter
    def state(self, state: SimState) -> None:
        self._state = state
        if self.metadata_lag:
            self._remember(state)

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
            self._fault(f.broker, f.action, f.factor, f.seconds)
        if t > self.state.time:
            self.state = physics.advance(self.state, t - self.state.time)

    def _sync(self) -> None:
        if self._clock is not None:
            self.advance_to(self._clock())

    def inject(self, broker: int, action: str, factor: float = 1.0, seconds: float = 0.0) -> None:
        """A fault now: ``down``, ``up``, ``slow`` (``factor`` of its network left), ``lag`` (its metadata
        ``seconds`` behind the controller), ``hang`` or ``resume`` (the module doc)."""
        self._sync()
        self._fault(broker, action, factor, seconds)

    def _fault(self, broker: int, action: str, factor: float, seconds: float) -> None:
        if broker not in self.state.brokers:
            raise ValueError(f"unknown broker {broker}")
        if action == "lag":
            if not 0 <= seconds < float("inf"):
                raise ValueError(f"lag seconds must be >= 0, got {seconds}")
            if not self.metadata_lag:
                self._history = [self.state]  # the broker answers from the cluster as it is now, then trails it
            if seconds:
                self.metadata_lag[broker] = seconds
            else:
                self.metadata_lag.pop(broker, None)
            if not self.metadata_lag:
                self._history = []
        elif action == "hang":
            if broker not in self.hung:
                self.hung[broker] = (self.state.time, self.state.brokers[broker].slow)
                # a stopped process neither fetches nor serves fetches: its copies stall
                self.state = controller.set_slow(self.state, broker, HUNG_NETWORK)
                fence = Fault(self.state.time + BROKER_SESSION_TIMEOUT, broker, "fence")
                self._faults.insert(bisect.bisect_right([f.at for f in self._faults], fence.at), fence)
        elif action == "fence":  # the session timeout of a broker that stopped answering
            if broker in self.hung and self.state.alive(broker):
                self.state = controller.broker_down(self.state, broker)
        elif action == "resume":
            hung = self.hung.pop(broker, None)
            if hung is not None:
                self.state = controller.set_slow(self.state, broker, hung[1])
                if not self.state.alive(broker):
                    self.state = controller.broker_up(self.state, broker)  # it heartbeats again: unfenced
        else:
            if action in ("down", "up"):
                hung = self.hung.pop(broker, None)  # killed, or restarted: it answers (or refuses) again
                if hung is not None:
                    self.state = controller.set_slow(self.state, broker, hung[1])
            self.state = fault(self.state, broker, action, factor)

    def is_hung(self, broker: int) -> bool:
        return broker in self.hung

    # -- what a lagging broker answers ------------------------------------------------------------

    def _remember(self, state: SimState) -> None:
        """Keep ``state`` for the lagging brokers, and forget what none of them may still answer from
        (the newest state at or before the longest lag's horizon stays: it is what that broker answers)."""
        history = self._history
        history.append(state)
        horizon = state.time - max(self.metadata_lag.values())
        drop = 0
        while drop + 1 < len(history) and history[drop + 1].time <= horizon:
            drop += 1
        if drop:
            del history[:drop]

    def metadata_view(self, broker: int) -> SimState:
        """The cluster as ``broker``'s metadata cache holds it: as it was ``metadata_lag[broker]``
        seconds ago (the newest state at or before then), or now for a broker that does not lag."""
        lag = self.metadata_lag.get(broker, 0.0)
        if lag <= 0 or not self._history:
            return self.state
        horizon = self.state.time - lag
        times = [s.time for s in self._history]
        i = bisect.bisect_right(times, horizon)
        return self._history[max(0, i - 1)]

    def _metadata_source(self) -> SimState:
        """In process: the metadata of the next live broker in turn (the cluster now if none lags)."""
        if not self.metadata_lag:
            return self.state
        live = sorted(b.id for b in self.state.brokers.values() if b.alive)
        if not live:
            return self.state
        self._reads += 1
        return self.metadata_view(live[(self._reads - 1) % len(live)])

    # -- observe --------------------------------------------------------------------------------

    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation:
        """Brokers and topics as the controller knows them; each partition's replicas, ISR and leader
        from one broker's metadata (``_metadata_source``: it may lag), and what is in progress from the
        controller: a torn look when that broker lags (the module doc)."""
        self._sync()
        s = self.state
        m = self._metadata_source()
        brokers = tuple(Broker(b.id, b.rack, b.alive) for b in sorted(s.brokers.values()))
        if partitions is None:
            tps = list(s.partitions.keys())
            topics: dict[str, TopicInfo | None] = dict(s.topics.items())
        else:
            tps = [tp for tp in partitions if tp in s.partitions]
            topics = {tp.topic: s.topics.get(tp.topic) for tp in partitions}
        return Observation(brokers=brokers, topics=topics, partitions={tp: _look(m, s, tp) for tp in tps})

    def sizes(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self._sync()
        return {tp: int(self.state.partitions[tp].size) for tp in partitions if tp in self.state.partitions}

    def catch_up(self, steps) -> dict[TopicPartition, int]:
        """What the adding replicas of each partition still miss (its largest lag among them); with none
        given, its size (what a new replica would copy)."""
        self._sync()
        s = self.state
        out: dict[TopicPartition, int] = {}
        for tp, (_leader, nr) in steps.items():
            if not nr:
                if tp in s.partitions:
                    out[tp] = int(s.partitions[tp].size)
                continue
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

    def create_topic(self, topic: str, assignment: list, min_insync: int) -> None:
        self._sync()
        self.state = controller.create_topic(self.state, topic, assignment, min_insync)

    def set_min_insync(self, topic: str, value: int) -> None:
        self._sync()
        self.state = controller.set_min_insync(self.state, topic, value)

    def set_unclean(self, topic: str, enabled: bool) -> None:
        self._sync()
        self.state = controller.set_unclean(self.state, topic, enabled)

    def throttles(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleSet:
        """KIP-73 configuration as one broker's metadata holds it (it may lag: ``_metadata_source``)."""
        self._sync()
        return self._metadata_source().throttles.as_set(set(topics), set(brokers))

    def close(self) -> None:
        pass

    def wildcard_throttles(self, topics: Collection[str]) -> dict[str, frozenset[str]]:
        """Topic -> its sides ("leader", "follower") whose throttled-replicas list is the wildcard ``*``, as
        ``throttles`` reads them (it leaves a ``*`` out)."""
        self._sync()
        t = self._metadata_source().throttles
        out = {topic: frozenset(side for side, lists in (("leader", t.leader), ("follower", t.follower))
                                if "*" in lists.get(topic, ())) for topic in set(topics)}
        return {topic: sides for topic, sides in out.items() if sides}

    def throttle_configs(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleConfigs:
        """``throttles`` and ``wildcard_throttles``, from one broker's metadata. No ``LOG_DIRS_RATE``: the
        simulated cluster has no log directories to move replicas between (its Kafka front keeps one set through
        it, and ``/v1/state`` gives it)."""
        return ThrottleConfigs(self.throttles(topics, brokers), self.wildcard_throttles(topics), {})


def _look(metadata: SimState, now: SimState, tp: TopicPartition) -> PartitionState:
    """A partition as a client sees it: RS, ISR and leader from a broker's ``metadata`` (a partition it
    does not know yet: from the controller), AR and RR from the controller (``now``)."""
    current = now.partitions[tp]
    seen = metadata.partitions.get(tp, current)
    return PartitionState(seen.replicas, seen.isr, seen.leader, None, current.adding, current.removing)
