"""Three ways to run a scenario's reassignment on the simulated cluster.

* ``kreassign``: the engine's decider (``engine.runtime.decider.Decider``) on the simulated cluster's
  clock: the Submit, then a tick whenever the worker's timer would hand it one (``tick_at``); what each
  tick looks at, measures and reads back is the decider's. The cluster is reached through today's
  Kafka adapter (``_Today``: every request charged to its broker, with its round trip), the log is a
  ``MemoryLog`` whose appends take their round trips. The calibration's twins (adapter
  ``as-measured``) run the loop of the engine of the records instead (``_kreassign``).
* ``all-at-once``: what ``kafka-reassign-partitions.sh --execute --throttle``
  does: throttle every moving replica (leader side: its current replicas,
  follower side: the new ones) and alter every partition to its final target
  at once. The tool itself never removes a throttle: that is ``--verify``,
  run here once the move is done and the cluster has settled.
* ``per-broker-cap``: Cruise Control's executor model: whole targets (one
  AlterPartitionReassignments to the final replicas), at most
  ``per_broker_cap`` moves in progress on any broker (a move occupies every
  broker of its old and new replica lists), throttles set for the moves in
  progress and cleared as each finishes.

Every strategy uses the scenario's throttle rate and faults, polls the
cluster every ``poll_interval`` and counts the makespan up to the poll that
sees everything done. The cluster then runs on until every partition can
complete acks=all writes again (at most ``SETTLE_LIMIT``), so that what a
producer felt of the move is counted whole (``engine.sim.probe``). Throttle
sets are the core's (``engine.core.throttles``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Mapping

from engine.core.budget import WINDOW as BUDGET_WINDOW, RequestsSent
from engine.core import events as ev
from engine.core.commands import (
    CatchUpObserved, ChangeLimits, ChangeThrottle, Submit, ThrottlesObserved, Tick,
)
from engine.core.decide import catch_up_due, copying, handle, near_done, timers_pending, watched
from engine.log.envelope import EventEnvelope, new_id
from engine.runtime.decider import Decider, MemoryLog, Retry
from engine.runtime.executor import Executor
from engine.core.partition import TopicPartition, runs
from engine.sim import controller
from engine.sim.cluster import SimulatedCluster
from engine.sim.load import RequestRates, delay, merge, rates, windows
from engine.sim.model import Stats, linked
from engine.sim.probe import ProbeResult, probe
from engine.sim.scenario import Scenario
from engine.core.state import COMPLETED, EMPTY
from engine.core.step import Step
from engine.core.throttles import DEFAULT_THROTTLE_RATE, EMPTY as NO_THROTTLES, ThrottleSet, after_apply, after_remove, needed, reconcile

STRATEGIES = ("kreassign", "all-at-once", "per-broker-cap")
REQUEST_ID = "simulate"
SETTLE_LIMIT = 600.0  # seconds the cluster may run on after the move for producers to recover
VERIFY_INTERVAL = 10.0  # the engine's read-back of the throttle configuration (Decider.verify_interval)


class SimulationError(RuntimeError):
    """The scenario could not be run (e.g. the core rejected its reassignment)."""


@dataclass(frozen=True)
class RunResult:
    strategy: str
    finished: bool
    makespan: float  # seconds to the poll that saw everything done (or when it gave up)
    stats: Stats
    moves: int  # AlterPartitionReassignments entries issued
    at_target: bool  # every partition ends exactly at its target replicas
    throttles_left: bool  # throttle configuration still set at the end
    events: int = 0  # kreassign: events logged
    probe: ProbeResult | None = None  # what an acks=all producer felt of the move
    throttles_after: int = 0  # throttled replica entries still listed when the strategy was done
    requests: Mapping[int, tuple[float, ...]] = dataclasses.field(default_factory=dict)  # kreassign: broker -> times
    apis: Mapping[int, Mapping[str, int]] = dataclasses.field(default_factory=dict)  # kreassign: broker -> API -> requests
    first_alter: float | None = None  # when the first AlterPartitionReassignments reached the cluster
    delays: Mapping[int, tuple[tuple[float, float], ...]] = dataclasses.field(default_factory=dict)
    # kreassign: broker -> what the engine's requests delayed its produce requests, (time, seconds) breakpoints
    cleared_by_verify: bool = False  # the Kafka tool's --verify removed those entries (``throttles_left`` is after)

    def done_times(self) -> dict[TopicPartition, float]:
        """When each partition's last reassignment completed on the cluster (Phase B, or at its alter when all
        of its target was in sync), by partition."""
        return {tp: t for t, tp in linked(self.stats.done_log)}

    def request_rates(self) -> list[RequestRates]:
        """The engine's requests per broker (kreassign), from its first request to the makespan."""
        start = min((ts[0] for ts in self.requests.values() if ts), default=0.0)
        return rates(self.requests, start, self.makespan)


class _Clock:
    """The simulated cluster of a run (faults are injected by it as time passes). The strategy starts
    ``launch_delay`` after the launch (time 0): the tool's start, the engine's command path."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.cluster = SimulatedCluster.from_scenario(scenario)
        if scenario.launch_delay:
            self.cluster.advance(scenario.launch_delay)

    def wait(self, dt: float) -> None:
        self.cluster.advance(dt)

    def result(self, strategy: str, finished: bool, moves: int, events: int = 0, verify: bool = False,
               engine: "_Engine | None" = None) -> RunResult:
        """The run's result: the makespan is now; then the cluster settles (and, with ``verify``, the
        Kafka tool's --verify removes every throttle it set)."""
        makespan = self.cluster.time
        left = self.cluster.state.throttles.as_set()
        entries = len(left.leader) + len(left.follower)
        settle_end = makespan + SETTLE_LIMIT
        while self.cluster.state.stats.blocked and self.cluster.time < settle_end:
            self.wait(min(self.scenario.poll_interval, settle_end - self.cluster.time))
        if verify and not left.is_empty():
            self.cluster.remove_throttles(left)
        s = self.cluster.state
        target = self.scenario.target_assignment()
        at_target = all(s.partitions[tp].replicas == r and not s.partitions[tp].reassigning for tp, r in target.items())
        stats = controller.close_stats(s)
        requests = merge((t, b) for t, b, _api in engine.requests) if engine is not None else {}
        apis: dict[int, dict[str, int]] = {}
        for _t, b, api in (engine.requests if engine is not None else ()):
            apis.setdefault(b, {})[api] = apis.setdefault(b, {}).get(api, 0) + 1
        delays = {b: delay(ts, self.scenario.broker_request_capacity) for b, ts in requests.items()}
        felt = probe(list(s.partitions.keys()), self.scenario.probe_rate, makespan,
                     linked(stats.blocked_log), linked(stats.leader_log),
                     {b: windows(points) for b, points in delays.items() if points})
        return RunResult(
            strategy, finished, makespan, stats, moves, at_target, not s.throttles.is_empty(), events,
            felt, entries, {b: tuple(ts) for b, ts in requests.items()}, apis,
            engine.first_alter if engine is not None else self.first_alter,
            {b: tuple(points) for b, points in delays.items() if points}, verify and not left.is_empty(),
        )

    first_alter: float | None = None


APPENDS = ("round", "input")
"""How the simulated engine appends its events: ``round`` as the engine does (every input of a round
decided, then one append: ``Decider.process``), ``input`` one append per input, as the engine did
before issue 26 (the calibration's records ran it; only with the adapter ``as-measured``: today's engine is
the decider, which appends once a round)."""


def run(scenario: Scenario, strategy: str, max_time: float | None = None, appends: str = "round",
        adapter: str = "today") -> RunResult:
    """Run ``strategy`` to completion (or until ``max_time`` simulated seconds). ``appends``, ``adapter``:
    kreassign's (``APPENDS``, ``ADAPTERS``)."""
    limit = max_time if max_time is not None else 30 * 86400.0
    if not scenario.targets:  # nothing to move: done before it starts
        return _Clock(scenario).result(strategy, True, 0)
    if strategy == "kreassign":
        if adapter not in ADAPTERS:
            raise ValueError(f"adapter: one of {', '.join(ADAPTERS)}, not {adapter!r}")
        if adapter == "today":
            if appends != "round":
                raise ValueError("appends: today's decider appends once a round (adapter 'as-measured' for 'input')")
            return _decider(scenario, limit)
        return _kreassign(scenario, limit, appends, adapter)
    return _RUNNERS[strategy](scenario, limit)


# --- kreassign: the engine's core loop, at the engine's cadence and with its round trips -----------------

APPEND_ROUND_TRIPS = 3
"""Round trips of one append to the events log: a transaction of its own (``EventWriter``:
AddPartitionsToTxn, Produce with acks=all, EndTxn)."""


ADAPTERS = ("today", "as-measured")
"""What the simulated engine's Kafka adapter sends (``_Engine``): ``today`` as ``engine/cluster/kafka.py``
sends it now (its caches, DescribeTopicPartitions of the partitions looked at, the broker watch's
probes), ``as-measured`` as the adapter of the calibration's records did (2026-11-26: four requests a
look, ``calibration.AS_MEASURED``)."""

# today's adapter, restated (engine.whatif may not import engine.cluster; tests/test_sim_requests.py
# holds them to the adapter's)
BROKERS_MAX_AGE = 10.0  # engine.cluster.kafka.BROKERS_MAX_AGE: DescribeCluster reused this long
BROKERS_MIN_AGE = 1.0  # ... and asked again sooner for a broker new or back in an ISR, at most once a second
MIN_ISR_MAX_AGE = 30.0  # engine.cluster.kafka.MIN_ISR_MAX_AGE: a topic's DescribeConfigs reused this long
SMALL_TOPIC = 64  # engine.cluster.kafka.SMALL_TOPIC: a topic this small is described whole
SLICES = 3  # engine.cluster.kafka.SLICES: DescribeTopicPartitions runs per larger topic and look
PAGE = 2000  # engine.cluster.kafka.PAGE: partitions per DescribeTopicPartitions request
PROBE_INTERVAL = 2.0
"""The broker watch (``engine.cluster.watch``) probes each live broker (ApiVersions) every
``busy_interval``, two ``--broker-deadline`` (1 s), while steps or elections are in flight; none while
idle. (Its urgent rounds, all brokers every half deadline while a call has waited a quarter deadline, do
not happen here: a round trip is ``request_time``.)"""


class _Chosen(int):
    """A broker the client library chose (librdkafka's admin broker, kafka-python's least loaded node): the
    request is charged to it, and today's adapter counts it for the request budget as ``ANY`` (it may land
    on any broker: ``engine.core.budget``)."""


class _Engine:
    """The simulated cluster as the engine's Kafka adapter reaches it: the adapter of the calibration's
    records (2026-11-26, ``ADAPTERS`` ``as-measured``); ``_Today`` is today's.

    Every call sends the requests the adapter sends, one round trip (``Scenario.request_time``) each,
    in the adapter's order (one after the other, or all before any answer where the adapter does so),
    while the cluster runs on; a call's reading is the cluster at its reading request, an action takes
    effect when its answer is in. Every request is counted at the broker it goes to, by its API as the
    broker sees it (``requests``; ``engine.sim.load`` charges them): a look is DescribeCluster (librdkafka
    sends it as a Metadata request), ListPartitionReassignments, Metadata and DescribeConfigs, every one
    to the lowest live broker, as is every request not addressed to a broker (a topic's config, an
    alter, a cancel, an election); a broker's config and DescribeLogDirs go to that broker."""

    def __init__(self, cluster: SimulatedCluster, rtt: float):
        self.cluster = cluster
        self.rtt = rtt
        self.requests: list[tuple[float, int, str]] = []  # (time, broker, API)
        self.first_alter: float | None = None

    def admin(self) -> int:
        """Where a request not addressed to a broker goes: the lowest live broker."""
        live = self.live()
        return min(live) if live else min(self.cluster.state.brokers.keys())

    controller = admin  # kafka-python's cached controller id (List/AlterPartitionReassignments)
    any_broker = admin  # librdkafka's broker for an admin request (DescribeCluster, topic configs, ElectLeaders)

    def live(self) -> list[int]:
        return sorted(b.id for b in self.cluster.state.brokers.values() if b.alive)

    def send(self, *requests: tuple[int, str], together: bool = False) -> None:
        """``requests``, (broker, API) each: one after the other, or ``together`` (all before any answer)."""
        if together:
            self.requests.extend((self.cluster.time, b, api) for b, api in requests)
            if requests:
                self.cluster.advance(self.rtt)
            return
        for b, api in requests:
            self.requests.append((self.cluster.time, b, api))
            self.cluster.advance(self.rtt)

    def append(self) -> None:
        """An append to the events log (its own topics: not counted at the cluster's brokers)."""
        self.cluster.advance(APPEND_ROUND_TRIPS * self.rtt)

    def probe(self, busy: bool) -> None:
        """The broker watch's probes up to now (today's adapter); ``busy``: steps or elections were in
        flight since the last call."""

    # -- what the adapter sends for each call of the Cluster interface -----------------------------

    def observe(self, partitions, read: Callable[[], bool] | None = None):
        """DescribeCluster, then for partitions ListPartitionReassignments (the reading), Metadata and the
        topics' DescribeConfigs. ``read`` says at the reading whether to read (False: the requests only,
        the cluster unchanged since it was last read); None is always."""
        tps = list(partitions)
        a = self.admin()
        self.send((a, "Metadata"))
        if tps:
            self.send((a, "ListPartitionReassignments"))
        obs = self.cluster.observe(tps) if read is None or read() else None
        if tps:
            self.send((a, "Metadata"), (a, "DescribeConfigs"))
        return obs

    def catch_up(self, steps):
        brokers = sorted({b for leader, nr in steps.values()
                          for b in ((leader,) if leader is not None else ()) + tuple(nr)})
        self.send(*((b, "DescribeLogDirs") for b in brokers))
        return self.cluster.catch_up(steps)

    def brokers(self) -> None:
        """``sizes``' look at the brokers: DescribeCluster."""
        self.send((self.any_broker(), "Metadata"))

    def sizes(self, partitions):
        self.brokers()
        self.send(*((b, "DescribeLogDirs") for b in self.live()))
        return self.cluster.sizes(partitions)

    def throttles(self, topics, brokers):
        self.send(*(([(self.any_broker(), "DescribeConfigs")] if topics else [])
                    + [(b, "DescribeConfigs") for b in sorted(brokers)]))
        return self.cluster.throttles(topics, brokers)

    def alter_reassignments(self, targets):
        self.send((self.controller(), "AlterPartitionReassignments"))
        if self.first_alter is None and targets:
            self.first_alter = self.cluster.time
        return self.cluster.alter_reassignments(targets)

    def cancel_reassignments(self, partitions):
        self.send((self.controller(), "AlterPartitionReassignments"))
        return self.cluster.cancel_reassignments(partitions)

    def elect_preferred_leaders(self, partitions):
        self.send((self.any_broker(), "ElectLeaders"))
        return self.cluster.elect_preferred_leaders(partitions)

    def _config_requests(self, delta: ThrottleSet, remove: bool) -> list[tuple[int, str]]:
        topics = [self.any_broker()] if delta.leader or delta.follower else []
        brokers = sorted(delta.leader_brokers | delta.follower_brokers) if remove or delta.rate is not None else []
        return [(b, "IncrementalAlterConfigs") for b in topics + brokers]

    def apply_throttles(self, throttles: ThrottleSet):
        self.send(*self._config_requests(throttles, False), together=True)
        return self.cluster.apply_throttles(throttles)

    def remove_throttles(self, throttles: ThrottleSet):
        self.send(*self._config_requests(throttles, True), together=True)
        return self.cluster.remove_throttles(throttles)


class _Today(_Engine):
    """Today's adapter (``engine/cluster/kafka.py``), as measured through the Kafka front
    (docs/simulator.md, "What the engine's looks cost"):

    * a look: DescribeCluster only if the last is ``BROKERS_MAX_AGE`` old (or, at most once a
      ``BROKERS_MIN_AGE``, when the look names a broker not known or finds one known dead in an ISR);
      for partitions, ListPartitionReassignments (the reading), DescribeTopicPartitions of the
      partitions looked at (``_slices``: small topics whole, several to a request; a larger topic in
      at most ``SLICES`` runs), Metadata of a topic whose partition count is not known yet (its first
      look), and one DescribeConfigs of the topics whose min.insync.replicas is ``MIN_ISR_MAX_AGE``
      old (a throttle read-back refreshes it);
    * ``sizes``: DescribeCluster as a look does, DescribeLogDirs to each live broker;
    * the broker watch: ApiVersions to each live broker every ``PROBE_INTERVAL`` while steps or
      elections are in flight.

    Where the requests go: DescribeTopicPartitions to kafka-python's least loaded broker (spread over
    the brokers: here in turn); List/AlterPartitionReassignments to kafka-python's cached controller
    id and librdkafka's requests to the broker it uses, each a live broker the client picked at random
    (KRaft answers a random live broker as the controller; measured, brokers 4 and 2 in one run): here
    both the lowest live broker, the busiest the placement can make it."""

    def __init__(self, cluster: SimulatedCluster, rtt: float):
        super().__init__(cluster, rtt)
        self.brokers_at: float | None = None  # when DescribeCluster was last sent
        self.known: dict[int, bool] = {}  # its answer: broker -> alive, every broker seen
        self.counted: set[str] = set()  # topics whose partition count is known (a Metadata of them answered)
        self.min_isr_at: dict[str, float] = {}  # topic -> when its DescribeConfigs was sent
        self.turn = 0  # the least loaded broker's turn
        self.probed_at: float | None = None  # the broker watch's last round
        self.counted_for_budget: deque[tuple[float, int | None]] = deque()  # (time, broker or ANY) of the last
        # WINDOW and later (a request's round trips ahead), as the adapter counts them
        self.totals_for_budget: dict[int | None, int] = {}  # every request counted, by the same keys
        self.probes_for_budget: dict[int, int] = {}  # of them, the broker watch's probes by broker

    def least_loaded(self) -> int:
        live = self.live() or sorted(self.cluster.state.brokers)
        self.turn += 1
        return _Chosen(live[(self.turn - 1) % len(live)])

    def any_broker(self) -> int:
        return _Chosen(self.admin())

    def send(self, *requests: tuple[int, str], together: bool = False) -> None:
        at = self.cluster.time
        for k, (b, _api) in enumerate(requests):  # one after the other: each sent a round trip after the last
            self._count(at if together else at + k * self.rtt, None if isinstance(b, _Chosen) else int(b))
        super().send(*((int(b), api) for b, api in requests), together=together)

    def _count(self, at: float, key: int | None) -> None:
        self.counted_for_budget.append((at, key))
        self.totals_for_budget[key] = self.totals_for_budget.get(key, 0) + 1

    def requests_sent(self) -> RequestsSent:
        """What ``engine.cluster.requests.RequestCounter`` would give the decider's request budget: the totals
        and the ages of the last ``WINDOW`` seconds, by broker and ``ANY`` (older ones are forgotten: a long
        simulation asks this at every tick)."""
        now = self.cluster.time
        recent = self.counted_for_budget
        while recent and recent[0][0] <= now - BUDGET_WINDOW:
            recent.popleft()
        ages: dict[int | None, list[float]] = {}
        for at, key in recent:
            if at > now - BUDGET_WINDOW:
                ages.setdefault(key, []).append(now - at)
        return RequestsSent(dict(self.totals_for_budget), {k: tuple(v) for k, v in ages.items()},
                            dict(self.probes_for_budget))

    def brokers(self, fresh: bool = False) -> None:
        now = self.cluster.time
        if not fresh and self.brokers_at is not None and now - self.brokers_at < BROKERS_MAX_AGE - 1e-9:
            return
        self.brokers_at = now
        self.send((self.any_broker(), "Metadata"))  # librdkafka's DescribeCluster is a Metadata request
        state = self.cluster.state.brokers  # the live ones, and every one seen before (then dead)
        self.known = {b: state[b].alive for b in state if state[b].alive or b in self.known}

    def slices(self, tps) -> int:
        """DescribeTopicPartitions requests of a look at ``tps`` of topics whose counts are known."""
        wanted: dict[str, list[int]] = {}
        for tp in tps:
            wanted.setdefault(tp.topic, []).append(tp.partition)
        counts = {t: self.cluster.state.topics[t].partitions for t in wanted}
        small = [counts[t] for t in sorted(wanted) if counts[t] <= SMALL_TOPIC]
        requests, batch = 0, 0
        for n in small:
            if batch and batch + n > PAGE:
                requests, batch = requests + 1, 0
            batch += n
        requests += 1 if batch else 0
        for t in sorted(wanted):
            if counts[t] > SMALL_TOPIC:
                for lo, hi in runs(sorted(set(wanted[t])), SLICES):
                    requests += math.ceil((hi + 1 - lo) / PAGE)
        return requests

    def observe(self, partitions, read: Callable[[], bool] | None = None):
        tps = list(partitions)
        self.brokers()
        if tps:
            self.send((self.controller(), "ListPartitionReassignments"))
        obs = self.cluster.observe(tps) if read is None or read() else None
        if not tps:
            return obs
        topics = sorted({tp.topic for tp in tps})
        known = [tp for tp in tps if tp.topic in self.counted]
        self.send(*((self.least_loaded(), "DescribeTopicPartitions") for _ in range(self.slices(known))))
        if any(t not in self.counted for t in topics):
            self.send((self.any_broker(), "Metadata"))
            self.counted.update(topics)
        now = self.cluster.time
        stale = [t for t in topics if t not in self.min_isr_at or now - self.min_isr_at[t] >= MIN_ISR_MAX_AGE - 1e-9]
        if stale:
            self.send((self.any_broker(), "DescribeConfigs"))
            self.min_isr_at.update({t: now for t in stale})
        parts = self.cluster.state.partitions
        named = {b for tp in tps if tp in parts for b in parts[tp].replicas}
        in_isr = {b for tp in tps if tp in parts for b in parts[tp].isr}
        if self.cluster.time - self.brokers_at >= BROKERS_MIN_AGE and (
                any(b not in self.known for b in named) or any(self.known.get(b) is False for b in in_isr)):
            self.brokers(fresh=True)
        return obs

    def throttles(self, topics, brokers):
        self.min_isr_at.update({t: self.cluster.time for t in topics})  # read back with the throttles
        return super().throttles(topics, brokers)

    def probe(self, busy: bool) -> None:
        if not busy:
            self.probed_at = None
            return
        now = self.cluster.time
        at = now if self.probed_at is None else self.probed_at + PROBE_INTERVAL
        while at <= now + 1e-9:
            self.requests.extend((at, b, "ApiVersions") for b in self.live())
            for b in self.live():
                self._count(at, b)
                self.probes_for_budget[b] = self.probes_for_budget.get(b, 0) + 1
            self.probed_at = at
            at += PROBE_INTERVAL


def next_tick(done: float, interval: float) -> float:
    """When the decider takes its next tick after finishing one at ``done``: the worker sends one every
    ``interval`` (``--fast-interval``, at most ``--poll-interval``); those queued meanwhile are read at
    once and dropped, and so is any read within half an interval of the last tick's end
    (``engine.runtime.worker``: "one does for all")."""
    k = math.ceil((done + interval / 2) / interval - 1e-9)
    return k * interval


class _SimLog(MemoryLog):
    """The simulated engine's events log: ``MemoryLog``, every append a transaction of its own that takes
    ``APPEND_ROUND_TRIPS`` round trips on the simulated clock (``_Engine.append``), its events recorded at
    the simulated time (what the decider's progress and rate windows read)."""

    def __init__(self, engine: _Engine):
        super().__init__()
        self.engine = engine

    def append(self, events):
        self.engine.append()
        at = datetime.fromtimestamp(round(self.engine.cluster.time, 3), timezone.utc)
        envelopes = [EventEnvelope(new_id(), at, e) for e in events]
        self.records.extend(envelopes)
        return envelopes


KEEPALIVE = 10.0
"""Seconds between the worker's ticks while the decider has nothing due (``engine.runtime.worker``'s
keep-alive, at most 10 s)."""


def tick_at(done: float, interval: float, due: float | None) -> float:
    """When the worker's timer hands the decider its next tick, the last one having ended at ``done``
    and the decider then saying its next look is ``due`` seconds away (``Decider.due_in``; None: nothing
    due): the timer fires every ``interval`` and sends a tick when ``due_in`` is within half an interval
    (``Worker.tick_due``), the first such after ``next_tick``."""
    at = next_tick(done, interval)
    wanted = done + (due if due is not None else KEEPALIVE) - interval / 2
    if wanted > at:
        at = math.ceil(wanted / interval - 1e-9) * interval
    return at


def _decider(scenario: Scenario, limit: float) -> RunResult:
    """Today's engine: the real decider (``engine.runtime.decider.Decider``) on the simulated cluster's clock,
    the cluster reached through today's adapter (``_Today``: every call's requests charged, with their round
    trips), its log a ``_SimLog``; ticks handed to it as the worker's timer hands them (``tick_at``). What a
    tick looks at, measures and reads back is the decider's own (``decide.next_looks``, ``measure_due``,
    ``watched``, ``starting``): the simulator decides none of it."""
    clock = _Clock(scenario)
    cluster = clock.cluster
    engine = _Today(cluster, scenario.request_time)
    d = Decider(_SimLog(engine), engine, clock=lambda: cluster.time, verify_interval=VERIFY_INTERVAL,
                poll_interval=scenario.poll_interval, floor=scenario.fast_interval, budget=scenario.request_budget)
    # (no ``recover``: the log is empty, and its ``gc.freeze`` is a long-lived process's, not a simulation's)
    logger = logging.getLogger("kreassign.decider")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the decider's warnings (a fault's failures) are the run's result, not lines
    try:
        if scenario.limits:  # the engine's limits, set before this request (no append during the run)
            d.state, _set = handle(d.state, ChangeLimits(dict(scenario.limits)))
        if scenario.throttle != DEFAULT_THROTTLE_RATE:
            d.decide(ChangeThrottle(scenario.throttle))
        try:
            submitted = d.decide(Submit(REQUEST_ID, scenario.targets, steps=scenario.steps))
        except Retry as e:
            raise SimulationError(str(e)) from None
        rejected = [e.payload for e in submitted if isinstance(e.payload, ev.CommandRejected)]
        if rejected:
            raise SimulationError("the core rejected the reassignment: " + "; ".join(rejected[0].reasons))
        interval = min(scenario.poll_interval, scenario.fast_interval)  # the worker's timer (Settings.tick_interval)
        finished = False
        busy = False  # steps or elections in flight (the broker watch probes)
        while True:
            engine.probe(busy)
            d.tick()
            engine.probe(busy)
            busy = bool(d.state.steps or d.state.elections)
            if d.state.requests[REQUEST_ID].status == COMPLETED:
                finished = True
                break
            if cluster.time >= limit:
                break
            clock.wait(max(0.0, tick_at(cluster.time, interval, d.due_in()) - cluster.time))
    finally:
        logger.setLevel(level)
    records = [e.payload for e in d.log.records]
    moves = sum(1 for e in records if isinstance(e, ev.StepPlanned))
    return clock.result("kreassign", finished, moves, len(records), engine=engine)


def _kreassign(scenario: Scenario, limit: float, appends: str = "round", adapter: str = "today") -> RunResult:
    """The engine of the calibration's records (2026-11-26): its loop, at its cadence (every ``poll_interval``
    a full look, every ``fast_interval`` the steps close to done); today's engine is ``_decider``."""
    if adapter not in ADAPTERS:
        raise ValueError(f"adapter: one of {', '.join(ADAPTERS)}, not {adapter!r}")
    clock = _Clock(scenario)
    cluster = clock.cluster
    engine = (_Today if adapter == "today" else _Engine)(cluster, scenario.request_time)
    executor = Executor(engine, lambda: cluster.time)  # virtual time: retries and elections follow it
    state = EMPTY
    log: list = []

    def feed(inp) -> list:
        """``Decider.process``: decide, append to the log, act, and feed back the outcomes (every
        outcome of one round of actions decided, then one append)."""
        nonlocal state
        pending = [inp]
        emitted = []
        while pending:
            if appends == "input":  # the engine before issue 26: one append per input
                state, evs = handle(state, pending.pop(0))
                if evs:
                    engine.append()
                    emitted.extend(evs)
                    pending.extend(executor.execute_events(evs))
                continue
            evs = []
            for x in pending:
                state, more = handle(state, x)
                evs.extend(more)
            pending = []
            if not evs:
                continue
            engine.append()
            emitted.extend(evs)
            pending = list(executor.execute_events(evs))
        log.extend(emitted)
        return emitted

    # ``Decider.decide`` of the Submit: observe the new partitions and size them, as the engine records them
    tps = sorted(t.tp for t in scenario.targets)
    first = engine.observe(tps)
    sizes = engine.sizes(tps)
    feed(dataclasses.replace(first, now=cluster.time, partitions={
        tp: p._replace(size_bytes=sizes.get(tp)) for tp, p in first.partitions.items()}))
    if scenario.limits:  # the engine's limits, set before this request (no append during the run)
        state, _set = handle(state, ChangeLimits(dict(scenario.limits)))
    if scenario.throttle != DEFAULT_THROTTLE_RATE:
        feed(ChangeThrottle(scenario.throttle))
    rejected = [e for e in feed(Submit(REQUEST_ID, scenario.targets, steps=scenario.steps))
                if isinstance(e, ev.CommandRejected)]
    if rejected:
        raise SimulationError("the core rejected the reassignment: " + "; ".join(rejected[0].reasons))
    # ``Decider.tick`` at the worker's cadence: every poll_interval a full look at what the core watches,
    # with the catch-up of the copies in flight; at every tick in between (fast_interval) a look at the
    # steps close to done, if any. Each look's requests take their round trips; a look at an unchanged
    # cluster costs its requests but gives an unchanged observation, which is not fed again.
    interval = min(scenario.poll_interval, scenario.fast_interval)
    seen = None
    full_at = None
    verified_at = None
    last_catch_up: dict = {}
    finished = False
    busy = False  # steps or elections in flight (the broker watch probes)
    while True:
        engine.probe(busy)
        now = cluster.time
        full = full_at is None or now - full_at >= scenario.poll_interval - 1e-9
        look = watched(state, now) if full else near_done(state, now, last_catch_up)
        measure = ((copying(state) if full else catch_up_due(state, now, last_catch_up))
                   if state.throttle_rate else [])
        if full or look or measure:
            def fresh() -> bool:  # a full look at a cluster unchanged since the last one sees nothing new
                nonlocal seen
                snapshot = (cluster.state.partitions, cluster.state.brokers)
                if full and snapshot == seen:
                    return False
                seen = snapshot if full else seen
                return True

            obs = engine.observe(sorted(look), read=fresh)
            if full:
                full_at = now
            if obs is not None:
                feed(dataclasses.replace(obs, now=now))
            tps = [tp for tp in measure if tp in state.steps]
            if tps:
                steps = {tp: (state.observed[tp].leader, state.steps[tp].step.nr) for tp in tps}
                measured = engine.catch_up(steps)
                last_catch_up = {tp: n for tp, n in {**last_catch_up, **measured}.items() if tp in state.steps}
                feed(CatchUpObserved(measured, now))
            feed(Tick(now))
            if verified_at is None or now - verified_at >= VERIFY_INTERVAL:
                verified_at = now
                force = state.throttles
                topics = {e.topic for e in force.leader | force.follower} | {tp.topic for tp in state.steps.keys()}
                brokers = force.leader_brokers | force.follower_brokers
                if topics or brokers:
                    read = engine.throttles(sorted(topics), sorted(brokers))
                    feed(ThrottlesObserved(read, frozenset(topics), frozenset(brokers), now))
        engine.probe(busy)
        busy = bool(state.steps or state.elections)
        r = state.requests[REQUEST_ID]
        if r.status == COMPLETED:
            finished = True
            break
        if cluster.time >= limit:
            break
        due = next_tick(cluster.time, interval)
        if not near_done(state, cluster.time, last_catch_up) and not timers_pending(state):
            # the ticks until the next full look find nothing to look at: the first tick of that look
            due = max(due, math.ceil((full_at + scenario.poll_interval) / interval - 1e-9) * interval)
        clock.wait(max(0.0, due - cluster.time))
    moves = sum(1 for e in log if isinstance(e, ev.StepPlanned))
    return clock.result("kreassign", finished, moves, len(log), engine=engine)


def _whole_step(cr, ftr, leader) -> Step:
    nr = tuple(b for b in ftr if b not in cr)
    dr = tuple(b for b in cr if b not in ftr)
    return Step(tuple(cr), tuple(ftr), nr, dr, leader, ftr[0] != leader)


def _all_at_once(scenario: Scenario, limit: float) -> RunResult:
    clock = _Clock(scenario)
    cluster = clock.cluster
    state = cluster.state
    steps = {t.tp: _whole_step(state.partitions[t.tp].replicas, t.replicas, state.partitions[t.tp].leader)
             for t in scenario.targets}
    throttles = needed(steps.items(), scenario.throttle)
    if not throttles.is_empty():
        cluster.apply_throttles(throttles)
    clock.first_alter = cluster.time
    cluster.alter_reassignments({tp: s.tr for tp, s in steps.items()})
    finished = not steps
    seen = None
    while not finished and cluster.time < limit:
        clock.wait(scenario.poll_interval)
        if cluster.state.partitions is not seen:  # unchanged cluster, unchanged answer
            seen = cluster.state.partitions
            obs = cluster.observe(list(steps))
            finished = not any(p.reassignment_in_progress for p in obs.partitions.values())
    return clock.result("all-at-once", finished, len(steps), verify=finished)


def _per_broker_cap(scenario: Scenario, limit: float) -> RunResult:
    clock = _Clock(scenario)
    cluster = clock.cluster
    cap = scenario.per_broker_cap
    queue = list(scenario.targets)
    active: dict[TopicPartition, Step] = {}
    busy: dict[int, int] = {}
    applied: ThrottleSet = NO_THROTTLES
    moves = 0
    seen = None

    def involved(step: Step) -> set[int]:
        return set(step.cr) | set(step.tr)

    freed = True
    while queue or active:
        started = {}
        for t in (list(queue) if freed else ()):  # nothing freed, nothing new may start
            p = cluster.state.partitions[t.tp]
            step = _whole_step(p.replicas, t.replicas, p.leader)
            if all(busy.get(b, 0) < cap for b in involved(step)):
                queue.remove(t)
                started[t.tp] = step
                active[t.tp] = step
                for b in involved(step):
                    busy[b] = busy.get(b, 0) + 1
        if started:
            _remove, to_apply = reconcile(applied, needed(active.items(), scenario.throttle))
            if not to_apply.is_empty():
                cluster.apply_throttles(to_apply)
                applied = after_apply(applied, to_apply)
            if clock.first_alter is None:
                clock.first_alter = cluster.time
            cluster.alter_reassignments({tp: s.tr for tp, s in started.items()})
            moves += len(started)
        if cluster.time >= limit:
            return clock.result("per-broker-cap", False, moves)
        clock.wait(scenario.poll_interval)
        freed = False
        if cluster.state.partitions is seen:  # unchanged cluster, unchanged answer
            continue
        seen = cluster.state.partitions
        obs = cluster.observe(list(active))
        done = [tp for tp, p in obs.partitions.items() if not p.reassignment_in_progress]
        freed = bool(done)
        for tp in done:
            for b in involved(active.pop(tp)):
                busy[b] -= 1
        if done:
            to_remove, _apply = reconcile(applied, needed(active.items(), scenario.throttle))
            if not to_remove.is_empty():
                cluster.remove_throttles(to_remove)
                applied = after_remove(applied, to_remove)
    return clock.result("per-broker-cap", True, moves)


_RUNNERS: dict[str, Callable[[Scenario, float], RunResult]] = {
    "kreassign": _kreassign,
    "all-at-once": _all_at_once,
    "per-broker-cap": _per_broker_cap,
}
