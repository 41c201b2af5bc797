"""Scenario files: a cluster, its load, and the reassignment to run on it.

A scenario is YAML (or JSON, which YAML reads too). docs/simulator.md describes
it too; in short::

    name: add-broker
    seed: 7                          # every generated value derives from it
    network: {in: 125 MB/s, out: 125 MB/s}   # default broker capacity
    brokers: {count: 7, racks: [a, b, c]}    # or a list of {id, rack, network_in, network_out, alive}
    topics:
      - name: orders
        partitions: 300
        replication_factor: 3
        min_insync_replicas: 2
        size: {distribution: lognormal, median: 1 GB, sigma: 0.8, max: 20 GB}
        produce_rate: 100 kB/s       # per partition; the same forms as size
      - name: audit
        assignment:                  # explicit partitions instead of a generator
          - {partition: 0, replicas: [1, 2, 3], size: 5 GB, produce_rate: 0}
    reassignment: {kind: add-broker, brokers: [7], threshold_percentage: 10}
    throttle: 50 MB/s                # or none
    limits: {max_incoming_moves_per_broker: 3}   # kreassign limits (KIP names accepted)
    per_broker_cap: 5                # Cruise Control's moves per broker (per-broker-cap strategy)
    poll_interval: 1s                # how often the watcher polls the cluster
    fast_interval: 100ms             # how often it looks at the steps close to done (kreassign)
    replica_creation_time: 100 ms    # a broker's time to create a new replica's log (default: fitted)
    replica_fetch_backoff: 1s        # the brokers' replica.fetch.backoff.ms (default: Kafka's, 1 s)
    follower_quota_loss: 0.08        # what a used-up follower quota loses to fetchers backing off (default)
    request_time: 30 ms              # one round trip of the engine's requests to the cluster (default: fitted)
    broker_request_capacity: 11      # engine requests/s a broker absorbs beside its load (default: none: free)
    launch_delay: 3s                 # from the launch to the strategy's first request (default 0)
    request_budget: 20               # kreassign's --request-budget (requests/s per broker; default the engine's; 0: none)
    steps: incremental               # how kreassign's request steps: incremental, kip-435, whole or grouped (engine.core.step)
    probe_rate: 200                  # messages/s of the acks=all probe producer (0: no probe)
    faults: [{at: 10m, broker: 3, action: down}, {at: 15m, broker: 3, action: up}]
    security: {users: {engine: secret}, acls: [...]}   # the Kafka front's SASL/PLAIN and ACLs (engine.sim.security)

Reassignment kinds. Three are balancing: their targets are what the product's
balancer proposes (``engine.core.balancer.propose``; its rules are documented in
``engine/core/balancer/`` and nowhere else): replica counts within
``threshold_percentage`` (default 10) of the average, rack-aware, fewest
replicas then fewest bytes moved, then preferred leaders evened out (some
targets only reorder a replica list). The balancer is offered every broker and
told which are down (it never places a replica on one, and refuses a proposal
that would need to unless the kind empties it); that is the cluster
``kreassign balance --scenario FILE`` balances, so it prints the same targets.

* ``add-broker`` (``brokers``: the new brokers, which start empty): mode
  ``add-brokers``.
* ``decommission`` (``brokers``: the brokers to empty, alive or not): mode
  ``remove-brokers``.
* ``rebalance``: mode ``cluster-balance``. It balances replica counts, not
  bytes: give the cluster skewed counts (``placement: random`` with
  ``weights``) for it to move anything.
* ``rack-migration`` (``from_rack``, ``to_rack``): the brokers of ``to_rack``
  start empty; the i-th broker of ``from_rack`` (by id) hands every replica to
  the i-th broker of ``to_rack``, in place.
* ``explicit``: ``targets`` (a list of {topic, partition, replicas}) or
  ``targets_file`` (Kafka's reassignment JSON, relative to the scenario file).

Initial placement of generated topics: ``placement: rack-aware`` (default;
Kafka's round robin over a rack-alternating broker list, from a seeded start)
or ``placement: random`` (seeded, rack-aware, brokers drawn with optional
``weights: {id: w}``, for skewed clusters). Brokers that a kind says start
empty are never placed on.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import yaml

from engine.core.budget import DEFAULT_BUDGET
from engine.core import reassignment_json
from engine.core.balancer import BalanceError, propose
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import PartitionTarget
from engine.core.limits import resolve_changes
from engine.core.step import DEFAULT_STEP_MODE, STEP_MODES
from engine.core.partition import Broker, Replicas, TopicInfo, TopicPartition, in_sync
from engine.sim.model import (
    DEFAULT_FOLLOWER_QUOTA_LOSS, DEFAULT_REPLICA_CREATION_TIME, DEFAULT_REQUEST_TIME, REPLICA_FETCH_BACKOFF,
)
from engine.core.throttles import DEFAULT_THROTTLE_RATE
from engine.core.units import UnitError, parse_duration, parse_rate, parse_size

DEFAULT_NETWORK = 125_000_000  # bytes/s each way: a 1 Gbit/s link
DEFAULT_PER_BROKER_CAP = 5  # Cruise Control's num.concurrent.partition.movements.per.broker
DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_FAST_INTERVAL = 0.1  # the engine's --fast-interval
DEFAULT_PROBE_RATE = 200.0  # messages/s of the acks=all probe producer (the measured runs' probe)
KINDS = ("add-broker", "decommission", "rack-migration", "rebalance", "explicit")
FAULT_ACTIONS = ("down", "up", "slow", "lag", "hang", "resume")
# the kinds whose targets come from the balancer, and its mode for each
BALANCER_MODES = {"add-broker": "add-brokers", "decommission": "remove-brokers", "rebalance": "cluster-balance"}
DEFAULT_THRESHOLD_PERCENTAGE = 10.0  # kreassign balance --threshold-percentage


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class BrokerSpec:
    id: int
    rack: str | None = None
    network_in: int = DEFAULT_NETWORK  # bytes/s the broker can receive
    network_out: int = DEFAULT_NETWORK  # bytes/s it can send
    alive: bool = True


@dataclass(frozen=True)
class PartitionSpec:
    replicas: Replicas
    size: int  # bytes in the log (retention keeps it steady under produce)
    produce_rate: int = 0  # bytes/s produced to the partition


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the reassignment starts
    broker: int
    action: str  # down | up | slow | lag | hang | resume (engine.sim.cluster)
    factor: float = 1.0  # slow: fraction of its network capacity left (1 = normal again)
    seconds: float = 0.0  # lag: how far the broker's metadata trails the controller (0 = caught up again)


@dataclass(frozen=True)
class Scenario:
    name: str
    brokers: tuple[BrokerSpec, ...]
    topics: Mapping[str, TopicInfo]
    partitions: Mapping[TopicPartition, PartitionSpec]
    targets: tuple[PartitionTarget, ...] = ()
    kind: str = "explicit"
    description: str = ""
    seed: int = 0
    throttle: int | None = DEFAULT_THROTTLE_RATE
    limits: Mapping[str, int] = field(default_factory=dict)
    per_broker_cap: int = DEFAULT_PER_BROKER_CAP
    poll_interval: float = DEFAULT_POLL_INTERVAL
    faults: tuple[Fault, ...] = ()
    fast_interval: float = DEFAULT_FAST_INTERVAL
    security: Mapping | None = None  # the document of engine.sim.security (checked when loaded)
    replica_creation_time: float = DEFAULT_REPLICA_CREATION_TIME
    probe_rate: float = DEFAULT_PROBE_RATE
    # what the engine's own work costs (engine.whatif.strategies, engine.sim.load): one round trip of its
    # requests to the cluster, and the requests a broker absorbs per second beside its load (None: free)
    replica_fetch_backoff: float = REPLICA_FETCH_BACKOFF  # the brokers' replica.fetch.backoff.ms
    follower_quota_loss: float = DEFAULT_FOLLOWER_QUOTA_LOSS
    request_time: float = DEFAULT_REQUEST_TIME
    broker_request_capacity: float | None = None
    launch_delay: float = 0.0  # seconds from the launch to the strategy's first request
    request_budget: float | None = DEFAULT_BUDGET  # kreassign's --request-budget (None: none)
    steps: str = DEFAULT_STEP_MODE  # how kreassign's request steps (the Submit's steps: engine.core.step)

    def current(self) -> dict[TopicPartition, Replicas]:
        return {tp: p.replicas for tp, p in self.partitions.items()}

    def target_assignment(self) -> dict[TopicPartition, Replicas]:
        """Every partition's replicas after the reassignment."""
        out = self.current()
        out.update({t.tp: t.replicas for t in self.targets})
        return out

    def snapshot(self) -> ClusterSnapshot:
        """The cluster before the reassignment: every partition healthy, sizes known."""
        live = {b.id for b in self.brokers if b.alive}
        parts = {}
        for tp, p in self.partitions.items():
            state = in_sync(p.replicas)
            isr = frozenset(b for b in p.replicas if b in live) or frozenset(p.replicas[:1])
            leader = next((b for b in p.replicas if b in isr and b in live), None)
            parts[tp] = state._replace(isr=isr, leader=leader, size_bytes=p.size)
        return ClusterSnapshot(
            tuple(Broker(b.id, b.rack, b.alive) for b in self.brokers), dict(self.topics), parts,
        )

    def moved_bytes(self) -> int:
        """Bytes of every replica the reassignment adds (each must be copied once)."""
        return sum(
            self.partitions[t.tp].size * len(set(t.replicas) - set(self.partitions[t.tp].replicas))
            for t in self.targets
        )


# --- loading ---------------------------------------------------------------------------


def load(path: str) -> Scenario:
    """Read a scenario file (YAML or JSON). Raises ``ScenarioError`` naming the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{path}: {e.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    try:
        return from_document(doc, base_dir=os.path.dirname(os.path.abspath(path)))
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None


_TOP_KEYS = {
    "name", "description", "seed", "network", "brokers", "topics", "reassignment", "throttle",
    "limits", "per_broker_cap", "poll_interval", "fast_interval", "faults", "security", "replica_creation_time",
    "probe_rate", "request_time", "broker_request_capacity", "launch_delay", "replica_fetch_backoff",
    "follower_quota_loss", "steps", "request_budget",
}


def from_document(doc: object, base_dir: str = ".") -> Scenario:
    d = _mapping(doc, "scenario", _TOP_KEYS)
    seed = _int(d.get("seed", 0), "seed")
    rng = random.Random(seed)
    net = _mapping(d.get("network", {}), "network", {"in", "out"})
    default_in = _rate(net.get("in", DEFAULT_NETWORK), "network.in")
    default_out = _rate(net.get("out", DEFAULT_NETWORK), "network.out")
    if "brokers" not in d:
        raise ScenarioError("brokers: missing")
    brokers = _brokers(d["brokers"], default_in, default_out)
    by_id = {b.id: b for b in brokers}
    reassignment = _mapping(d.get("reassignment", {"kind": "explicit", "targets": []}), "reassignment",
                            {"kind", "brokers", "from_rack", "to_rack", "targets", "targets_file",
                             "threshold_percentage"})
    kind = reassignment.get("kind")
    if kind not in KINDS:
        raise ScenarioError(f"reassignment.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    empty = _starting_empty(kind, reassignment, by_id)
    if "topics" not in d:
        raise ScenarioError("topics: missing")
    topics, partitions = _topics(d["topics"], brokers, empty, rng)
    targets = _targets(kind, reassignment, brokers, topics, partitions, base_dir)
    _check_traffic(brokers, partitions, targets)
    throttle_text = d.get("throttle", DEFAULT_THROTTLE_RATE)
    throttle = None if throttle_text in (None, "none") else _rate(throttle_text, "throttle")
    if throttle is not None and throttle < 1:
        raise ScenarioError("throttle: must be at least 1 byte/s, or none")
    limits = _mapping(d.get("limits", {}), "limits", None)
    if limits:
        _resolved, problems = resolve_changes(limits)
        if problems:
            raise ScenarioError("limits: " + "; ".join(problems))
    per_broker_cap = _int(d.get("per_broker_cap", DEFAULT_PER_BROKER_CAP), "per_broker_cap", minimum=1)
    poll = _duration(d.get("poll_interval", DEFAULT_POLL_INTERVAL), "poll_interval")
    if poll <= 0:
        raise ScenarioError("poll_interval: must be above 0")
    fast = _duration(d.get("fast_interval", DEFAULT_FAST_INTERVAL), "fast_interval")
    if fast <= 0:
        raise ScenarioError("fast_interval: must be above 0")
    faults = _faults(d.get("faults", []), by_id)
    security = d.get("security")
    if security is not None:
        from engine.sim.security import SecurityError, from_document as security_from

        try:
            security_from(security)
        except SecurityError as e:
            raise ScenarioError(str(e)) from None
    creation = _duration(d.get("replica_creation_time", DEFAULT_REPLICA_CREATION_TIME), "replica_creation_time")
    if creation < 0:
        raise ScenarioError("replica_creation_time: must be 0 or more")
    probe = d.get("probe_rate", DEFAULT_PROBE_RATE)
    if isinstance(probe, bool) or not isinstance(probe, (int, float)) or probe < 0:
        raise ScenarioError(f"probe_rate: expected messages per second (0 or more), got {probe!r}")
    request_time = _duration(d.get("request_time", DEFAULT_REQUEST_TIME), "request_time")
    if request_time < 0:
        raise ScenarioError("request_time: must be 0 or more")
    capacity = d.get("broker_request_capacity")
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, float))
                                 or capacity <= 0):
        raise ScenarioError(f"broker_request_capacity: expected requests per second (above 0), got {capacity!r}")
    launch = _duration(d.get("launch_delay", 0.0), "launch_delay")
    if launch < 0:
        raise ScenarioError("launch_delay: must be 0 or more")
    backoff = _duration(d.get("replica_fetch_backoff", REPLICA_FETCH_BACKOFF), "replica_fetch_backoff")
    if backoff < 0:
        raise ScenarioError("replica_fetch_backoff: must be 0 or more")
    loss = d.get("follower_quota_loss", DEFAULT_FOLLOWER_QUOTA_LOSS)
    if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not 0 <= loss < 1:
        raise ScenarioError(f"follower_quota_loss: expected a fraction (0 to below 1), got {loss!r}")
    budget = d.get("request_budget", DEFAULT_BUDGET)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                               or not (budget == 0 or budget >= 1)):
        raise ScenarioError(f"request_budget: expected requests per second (0: none, or at least 1), got {budget!r}")
    steps = d.get("steps", DEFAULT_STEP_MODE)
    if steps not in STEP_MODES:
        raise ScenarioError(f"steps: expected one of {', '.join(STEP_MODES)}, got {steps!r}")
    return Scenario(
        name=str(d.get("name", "scenario")), description=str(d.get("description", "")).strip(), seed=seed,
        brokers=brokers, topics=topics, partitions=partitions, targets=targets, kind=kind,
        throttle=throttle, limits=dict(limits), per_broker_cap=per_broker_cap, poll_interval=poll, faults=faults,
        fast_interval=fast, replica_creation_time=creation, probe_rate=float(probe),
        security=security, request_time=request_time,
        broker_request_capacity=None if capacity is None else float(capacity), launch_delay=launch,
        replica_fetch_backoff=backoff, follower_quota_loss=float(loss), steps=steps,
        request_budget=float(budget) if budget else None,
    )


# --- small readers ---------------------------------------------------------------------


def _mapping(value: object, where: str, keys: set[str] | None) -> dict:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {_kind(value)}")
    if keys is not None:
        unknown = sorted(str(k) for k in value if k not in keys)
        if unknown:
            raise ScenarioError(f"{where}: unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                                f"(expected {', '.join(sorted(keys))})")
    return value


def _list(value: object, where: str) -> list:
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: expected a list, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def _int(value: object, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}: expected an integer, got {value!r}")
    if value < minimum:
        raise ScenarioError(f"{where}: must be at least {minimum}, got {value}")
    return value


def _unit(parse: Callable[[object], Any], value: object, where: str):
    try:
        return parse(value)
    except UnitError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _rate(value: object, where: str) -> int:
    return _unit(parse_rate, value, where)


def _size(value: object, where: str) -> int:
    return _unit(parse_size, value, where)


def _duration(value: object, where: str) -> float:
    return _unit(parse_duration, value, where)


def _broker_ids(value: object, where: str, by_id: Mapping[int, BrokerSpec]) -> list[int]:
    ids = [_int(b, f"{where}[{i}]") for i, b in enumerate(_list(value, where))]
    unknown = sorted(set(ids) - set(by_id))
    if unknown:
        raise ScenarioError(f"{where}: brokers {unknown} are not in the scenario's brokers")
    if len(set(ids)) != len(ids):
        raise ScenarioError(f"{where}: a broker is listed twice")
    return ids


# --- brokers -----------------------------------------------------------------------------


def _brokers(value: object, default_in: int, default_out: int) -> tuple[BrokerSpec, ...]:
    if isinstance(value, dict):
        g = _mapping(value, "brokers", {"count", "racks", "first_id", "network_in", "network_out"})
        count = _int(g.get("count"), "brokers.count", minimum=1)
        racks = [str(r) for r in _list(g.get("racks", [None]), "brokers.racks")] or [None]
        first = _int(g.get("first_id", 1), "brokers.first_id")
        net_in = _rate(g.get("network_in", default_in), "brokers.network_in")
        net_out = _rate(g.get("network_out", default_out), "brokers.network_out")
        racks = [None if r == "None" else r for r in racks]
        return tuple(BrokerSpec(first + i, racks[i % len(racks)], net_in, net_out) for i in range(count))
    out = []
    for i, entry in enumerate(_list(value, "brokers")):
        where = f"brokers[{i}]"
        e = _mapping(entry, where, {"id", "rack", "network_in", "network_out", "alive"})
        rack = e.get("rack")
        out.append(BrokerSpec(
            _int(e.get("id"), f"{where}.id"),
            None if rack is None else str(rack),
            _rate(e.get("network_in", default_in), f"{where}.network_in"),
            _rate(e.get("network_out", default_out), f"{where}.network_out"),
            bool(e.get("alive", True)),
        ))
    if not out:
        raise ScenarioError("brokers: the list is empty")
    ids = [b.id for b in out]
    if len(set(ids)) != len(ids):
        raise ScenarioError("brokers: a broker id is listed twice")
    return tuple(sorted(out, key=lambda b: b.id))


def _starting_empty(kind: str, r: Mapping, by_id: Mapping[int, BrokerSpec]) -> set[int]:
    if kind == "add-broker":
        return set(_broker_ids(r.get("brokers"), "reassignment.brokers", by_id))
    if kind == "rack-migration":
        to_rack = r.get("to_rack")
        empty = {b for b, s in by_id.items() if s.rack == to_rack}
        if not empty:
            raise ScenarioError(f"reassignment.to_rack: no broker is on rack {to_rack!r}")
        return empty
    return set()


# --- topics and placement ----------------------------------------------------------------


_TOPIC_KEYS = {
    "name", "copies", "partitions", "replication_factor", "min_insync_replicas", "size", "produce_rate",
    "placement", "weights", "brokers", "assignment",
}


def _topics(value, brokers, empty, rng) -> tuple[dict[str, TopicInfo], dict[TopicPartition, PartitionSpec]]:
    by_id = {b.id: b for b in brokers}
    topics: dict[str, TopicInfo] = {}
    partitions: dict[TopicPartition, PartitionSpec] = {}
    for i, entry in enumerate(_list(value, "topics")):
        where = f"topics[{i}]"
        t = _mapping(entry, where, _TOPIC_KEYS)
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise ScenarioError(f"{where}.name: expected a topic name")
        copies = _int(t.get("copies", 1), f"{where}.copies", minimum=1)
        names = [name] if copies == 1 else [f"{name}-{k}" for k in range(copies)]
        min_isr = _int(t.get("min_insync_replicas", 1), f"{where}.min_insync_replicas", minimum=1)
        size = _distribution(t.get("size", 0), f"{where}.size", _size)
        produce = _distribution(t.get("produce_rate", 0), f"{where}.produce_rate", _rate)
        for topic in names:
            if topic in topics:
                raise ScenarioError(f"{where}.name: topic {topic!r} is defined twice")
            if "assignment" in t:
                parts = _explicit_assignment(t["assignment"], f"{where}.assignment", by_id, size, produce, rng)
            else:
                parts = _generated(t, where, brokers, empty, size, produce, rng)
            n = max(parts) + 1 if parts else 0
            if sorted(parts) != list(range(n)):
                raise ScenarioError(f"{where}: partitions of {topic!r} must be numbered 0..{n - 1}")
            topics[topic] = TopicInfo(n, min_isr)
            for p, spec in parts.items():
                partitions[TopicPartition(topic, p)] = spec
    if not partitions:
        raise ScenarioError("topics: the scenario has no partitions")
    return topics, partitions


def _distribution(value: object, where: str, parse) -> Callable[[random.Random], int]:
    """A fixed value or {distribution: lognormal|uniform, ...}: a function of the scenario's random source."""
    if not isinstance(value, dict):
        fixed = parse(value, where)
        return lambda rng: fixed
    d = _mapping(value, where, {"distribution", "median", "sigma", "min", "max"})
    kind = d.get("distribution")
    low = parse(d["min"], f"{where}.min") if "min" in d else 0
    high = parse(d["max"], f"{where}.max") if "max" in d else None
    if kind == "lognormal":
        if "median" not in d:
            raise ScenarioError(f"{where}.median: missing")
        median = parse(d["median"], f"{where}.median")
        sigma = d.get("sigma", 1.0)
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or sigma < 0:
            raise ScenarioError(f"{where}.sigma: expected a number >= 0, got {sigma!r}")
        mu = math.log(max(median, 1))

        def draw(rng: random.Random) -> int:
            v = int(rng.lognormvariate(mu, sigma))
            return max(low, v if high is None else min(v, high))

        return draw
    if kind == "uniform":
        if high is None:
            raise ScenarioError(f"{where}.max: missing")
        if high < low:
            raise ScenarioError(f"{where}: max is below min")
        return lambda rng: int(rng.uniform(low, high))
    raise ScenarioError(f"{where}.distribution: expected lognormal or uniform, got {kind!r}")


def _explicit_assignment(value, where, by_id, size, produce, rng) -> dict[int, PartitionSpec]:
    out: dict[int, PartitionSpec] = {}
    for j, entry in enumerate(_list(value, where)):
        w = f"{where}[{j}]"
        e = _mapping(entry, w, {"partition", "replicas", "size", "produce_rate"})
        p = _int(e.get("partition", j), f"{w}.partition")
        if p in out:
            raise ScenarioError(f"{w}.partition: partition {p} is listed twice")
        replicas = tuple(_broker_ids(e.get("replicas"), f"{w}.replicas", by_id))
        if not replicas:
            raise ScenarioError(f"{w}.replicas: empty")
        s = _size(e["size"], f"{w}.size") if "size" in e else size(rng)
        r = _rate(e["produce_rate"], f"{w}.produce_rate") if "produce_rate" in e else produce(rng)
        out[p] = PartitionSpec(replicas, s, r)
    return out


def _generated(t, where, brokers, empty, size, produce, rng) -> dict[int, PartitionSpec]:
    by_id = {b.id: b for b in brokers}
    count = _int(t.get("partitions"), f"{where}.partitions", minimum=1)
    rf = _int(t.get("replication_factor", 3), f"{where}.replication_factor", minimum=1)
    pool_ids = (_broker_ids(t["brokers"], f"{where}.brokers", by_id) if "brokers" in t
                else [b.id for b in brokers if b.alive])
    pool = [by_id[b] for b in pool_ids if b not in empty]
    if len(pool) < rf:
        raise ScenarioError(f"{where}.replication_factor: {rf} replicas need {rf} brokers, "
                            f"{len(pool)} are available for placement")
    placement = t.get("placement", "rack-aware")
    if placement == "rack-aware":
        assignment = rack_aware_round_robin(pool, count, rf, rng)
    elif placement == "random":
        weights = _mapping(t.get("weights", {}), f"{where}.weights", None)
        w = {b.id: float(weights.get(b.id, 1.0)) for b in pool}
        assignment = [random_rack_aware(pool, rf, rng, w) for _ in range(count)]
    else:
        raise ScenarioError(f"{where}.placement: expected rack-aware or random, got {placement!r}")
    return {p: PartitionSpec(replicas, size(rng), produce(rng)) for p, replicas in enumerate(assignment)}


def _rack_alternating(pool: list[BrokerSpec]) -> list[BrokerSpec]:
    by_rack: dict[str, list[BrokerSpec]] = {}
    for b in sorted(pool, key=lambda b: b.id):
        by_rack.setdefault(str(b.rack), []).append(b)
    lists = [by_rack[r] for r in sorted(by_rack)]
    out = []
    for i in range(max(len(x) for x in lists)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def rack_aware_round_robin(pool: list[BrokerSpec], count: int, rf: int, rng: random.Random) -> list[Replicas]:
    """Kafka's assignment of a new topic: round robin over a rack-alternating list, shifted per round,
    each further replica on a rack the partition does not use yet while there is one."""
    ordered = _rack_alternating(pool)
    n = len(ordered)
    start, shift = rng.randrange(n), rng.randrange(n)
    racks = {b.rack for b in ordered}
    out = []
    for p in range(count):
        if p and p % n == 0:
            shift += 1
        first = (p + start) % n
        chosen = [ordered[first]]
        for j in range(rf - 1):
            base = (first + 1 + (shift + j) % max(n - 1, 1)) % n
            used = {b.rack for b in chosen}
            new_rack = not racks <= used
            for k in range(n):
                b = ordered[(base + k) % n]
                if b not in chosen and not (new_rack and b.rack in used):
                    chosen.append(b)
                    break
        out.append(tuple(b.id for b in chosen))
    return out


def random_rack_aware(pool: list[BrokerSpec], rf: int, rng: random.Random, weights: Mapping[int, float]) -> Replicas:
    chosen: list[BrokerSpec] = []
    racks = {b.rack for b in pool}
    while len(chosen) < rf:
        used = {b.rack for b in chosen}
        cands = [b for b in pool if b not in chosen and (b.rack not in used or used >= racks)]
        total = sum(weights[b.id] for b in cands)
        x = rng.uniform(0, total)
        for b in cands:
            x -= weights[b.id]
            if x <= 0:
                break
        chosen.append(b)
    return tuple(b.id for b in chosen)


# --- the reassignment's targets ---------------------------------------------------------------


def _targets(kind, r, brokers, topics, partitions, base_dir) -> tuple[PartitionTarget, ...]:
    by_id = {b.id: b for b in brokers}
    current = {tp: p.replicas for tp, p in partitions.items()}
    sizes = {tp: p.size for tp, p in partitions.items()}
    racks = {b.id: b.rack for b in brokers}
    if "threshold_percentage" in r and kind not in BALANCER_MODES:
        raise ScenarioError(f"reassignment.threshold_percentage: only for {', '.join(BALANCER_MODES)}")
    if kind in BALANCER_MODES:
        listed = (_broker_ids(r.get("brokers"), "reassignment.brokers", by_id) if kind != "rebalance" else [])
        down = [b.id for b in brokers if not b.alive]
        target = balanced_targets(kind, current, sizes, racks, list(by_id), down, listed, _threshold(r))
    elif kind == "rack-migration":
        from_rack, to_rack = r.get("from_rack"), r.get("to_rack")
        src = sorted(b.id for b in brokers if b.rack == from_rack)
        dst = sorted(b.id for b in brokers if b.rack == to_rack)
        if not src:
            raise ScenarioError(f"reassignment.from_rack: no broker is on rack {from_rack!r}")
        if len(src) != len(dst):
            raise ScenarioError(f"reassignment: rack {from_rack!r} has {len(src)} brokers, "
                                f"rack {to_rack!r} has {len(dst)}; they must match")
        target = rack_migration_targets(current, dict(zip(src, dst)))
    else:
        target = dict(current)
        for t in _explicit_targets(r, base_dir):
            if t.tp not in current:
                raise ScenarioError(f"reassignment.targets: partition {t.tp} is not in the scenario")
            absent = sorted(set(t.replicas) - set(by_id))
            if absent:
                raise ScenarioError(f"reassignment.targets: {t.tp}: brokers {absent} are not in the scenario")
            if not t.replicas or len(set(t.replicas)) != len(t.replicas):
                raise ScenarioError(f"reassignment.targets: {t.tp}: replicas must be distinct and not empty")
            target[t.tp] = t.replicas
    return tuple(
        PartitionTarget(tp.topic, tp.partition, tuple(target[tp]))
        for tp in sorted(current) if tuple(target[tp]) != current[tp]
    )


def _explicit_targets(r: Mapping, base_dir: str) -> tuple[PartitionTarget, ...]:
    if "targets_file" in r:
        path = os.path.join(base_dir, str(r["targets_file"]))
        try:
            with open(path, encoding="utf-8") as f:
                return reassignment_json.parse(f.read())
        except OSError as e:
            raise ScenarioError(f"reassignment.targets_file: {path}: {e.strerror}") from None
        except reassignment_json.ReassignmentJsonError as e:
            raise ScenarioError(f"reassignment.targets_file: {path}: {e}") from None
    try:
        return reassignment_json.from_document({"version": 1, "partitions": r.get("targets", [])})
    except reassignment_json.ReassignmentJsonError as e:
        raise ScenarioError(f"reassignment.targets: {e}") from None


def rack_migration_targets(current, mapping: Mapping[int, int]) -> dict[TopicPartition, Replicas]:
    return {tp: tuple(mapping.get(b, b) for b in replicas) for tp, replicas in current.items()}


def _threshold(r: Mapping) -> float:
    value = r.get("threshold_percentage", DEFAULT_THRESHOLD_PERCENTAGE)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise ScenarioError(f"reassignment.threshold_percentage: expected a number from 0 to 100, got {value!r}")
    return value / 100


def balanced_targets(kind, current, sizes, racks, brokers, down, listed, threshold) -> dict[TopicPartition, Replicas]:
    """Every partition's replicas after the balancer's proposal for ``kind`` (``BALANCER_MODES``).

    ``listed``: the new brokers of add-broker, the brokers to empty of decommission (even if
    down); the balancer refuses to place replicas on any other broker that is ``down``."""
    mode = BALANCER_MODES[kind]
    extra = {"add": listed} if kind == "add-broker" else {"remove": listed} if kind == "decommission" else {}
    try:
        proposal = propose(mode, current, racks, sorted(brokers), sizes, threshold=threshold, down=down, **extra)
    except BalanceError as e:
        raise ScenarioError(f"reassignment: the balancer ({mode}) cannot propose: {e}") from None
    target = dict(current)
    target.update(proposal.proposed)
    return target


def _check_traffic(brokers, partitions, targets) -> None:
    """Refuse a cluster whose produce traffic alone fills a broker's network, before or after."""
    by_id = {b.id: b for b in brokers}
    final = {tp: p.replicas for tp, p in partitions.items()}
    final.update({t.tp: t.replicas for t in targets})
    for when, assignment in (("before", {tp: p.replicas for tp, p in partitions.items()}), ("after", final)):
        inbound: dict[int, float] = {}
        outbound: dict[int, float] = {}
        for tp, replicas in assignment.items():
            rate = partitions[tp].produce_rate
            for b in replicas:
                inbound[b] = inbound.get(b, 0) + rate
            outbound[replicas[0]] = outbound.get(replicas[0], 0) + rate * (len(replicas) - 1)
        for b, rate in sorted(inbound.items()):
            if rate >= by_id[b].network_in:
                raise ScenarioError(f"broker {b} would receive {rate / 1e6:.1f} MB/s of produce and replication "
                                    f"traffic {when} the reassignment, at or above its network_in "
                                    f"({by_id[b].network_in / 1e6:.1f} MB/s): lower produce_rate or raise network")
        for b, rate in sorted(outbound.items()):
            if rate >= by_id[b].network_out:
                raise ScenarioError(f"broker {b} would send {rate / 1e6:.1f} MB/s of replication traffic {when} "
                                    f"the reassignment, at or above its network_out ({by_id[b].network_out / 1e6:.1f} "
                                    f"MB/s): lower produce_rate or raise network")


def _faults(value, by_id) -> tuple[Fault, ...]:
    out = []
    for i, entry in enumerate(_list(value, "faults")):
        where = f"faults[{i}]"
        e = _mapping(entry, where, {"at", "broker", "action", "factor", "seconds"})
        action = e.get("action")
        if action not in FAULT_ACTIONS:
            raise ScenarioError(f"{where}.action: expected one of {', '.join(FAULT_ACTIONS)}, got {action!r}")
        broker = _int(e.get("broker"), f"{where}.broker")
        if broker not in by_id:
            raise ScenarioError(f"{where}.broker: broker {broker} is not in the scenario")
        factor = e.get("factor", 1.0)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
            raise ScenarioError(f"{where}.factor: expected a number in (0, 1], got {factor!r}")
        seconds = _duration(e.get("seconds", 0), f"{where}.seconds")
        out.append(Fault(_duration(e.get("at", 0), f"{where}.at"), broker, action, float(factor), seconds))
    return tuple(sorted(out, key=lambda f: f.at))


def dump_targets(scenario: Scenario) -> str:
    """The scenario's reassignment as Kafka's JSON (what the Kafka tool would be given)."""
    return reassignment_json.dumps({t.tp: t.replicas for t in scenario.targets})


def to_json(scenario: Scenario) -> str:
    return json.dumps(scenario.snapshot().to_document())
