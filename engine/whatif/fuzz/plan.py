"""What one seed runs: a small cluster, and a schedule of faults and commands drawn from the seed.

``draw(seed)`` is the only place randomness enters a run. It returns a ``Plan``:
the cluster (a ``Scenario``: brokers, topics, partitions with sizes and produce
rates), the engine's starting throttle and limits, when faults stop (``quiet_at``)
and the schedule: ``Item`` values, each with its time, its kind and its own
sub-seed. Whatever an item draws while it runs (which partition another tool
alters, which call of a window loses its answer) comes from that sub-seed, so
dropping items (``engine.whatif.fuzz.shrink``) leaves the others drawing what they
drew: a schedule is a list that can be shrunk.

Fault classes (``FAULTS``), each toggled by name (``--faults crash,torn``):

| class | items |
| --- | --- |
| ``crash`` | the engine dies at the n-th point of a kind from then on: before an append to its log, halfway through one (half the batch written), after one, before or after a cluster call |
| ``broker`` | a broker dies and returns after a while (or stays dead when no target names it) |
| ``leader`` | the leader of a partition moves to another in-sync replica |
| ``isr`` | a replica leaves the ISR right after one of kreassign's reassignments completes |
| ``lost`` | a window in which calls lose their request or their answer, or looks time out |
| ``late`` | a window in which calls are slow (time passes before the answer) or land after their answer timed out; looks delivered again later |
| ``dup`` | a window in which calls reach the controller twice, looks are delivered twice, commands are redelivered |
| ``other`` | another tool alters or cancels a reassignment, or removes every throttle (``kafka-reassign-partitions --verify``) |
| ``clock`` | the engine's clock steps back or forward |
| ``standby`` | the engine dies and a standby whose clock is skewed takes over |
| ``elect`` | a window in which preferred-leader elections are refused |
| ``throttle`` | a window in which throttle changes are refused |
| ``torn`` | a window in which looks are torn: replicas, ISR, leaders and broker liveness from a broker's lagging metadata cache, reassignments in progress from the controller (current); throttle read-backs lag too; now and then (``torn_late``, a generator of its own) a torn window that opens with a window of late answers, its broker lagging up to ``METADATA_SETTLE`` (5 s) |
| ``configs`` | another client changes the throttle configs as an operator's ``kafka-configs.sh`` does: a broker's ``leader``/``follower.replication.throttled.rate`` set to another value or deleted, a topic's ``*.replication.throttled.replicas`` deleted, rewritten or set to ``*``, or a rate set again and again (an automation that reasserts it); each at a plain time or right at (or a few seconds after) an event it is drawn to meet: a copy released from the throttle, a copy started released, a throttle command, throttling set to none, a pause, a resume, a cancel with rollback, a broker's death or return, a throttle change whose answer is lost (``configs``) |

Commands (always on): submit, supersede (a new request for partitions in flight), replace
(a dead broker, or any, replaced in every partition that holds it: the operator's answer to a lost
broker), cancel (plain, ``--rollback``, ``--include-completed``, a subset of partitions),
limits, throttle, pause/resume, many small requests, and now and then (``burst``) a burst of more
small requests than the state keeps whole once finished; and snapshots of the fold
written at random points (restarts then resume from them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Iterable

from engine.core.decide import METADATA_SETTLE
from engine.core.partition import TopicInfo, TopicPartition
from engine.core.state import FINISHED_KEPT
from engine.sim.scenario import BrokerSpec, PartitionSpec, Scenario

FAULTS = ("crash", "broker", "leader", "isr", "lost", "late", "dup", "other", "clock", "standby", "elect",
          "throttle", "torn", "configs")
OWN_STREAM = ("configs",)  # fault classes drawn from a generator of their own (``configs``): the others' draws stay
COMMANDS = ("submit", "supersede", "replace", "cancel", "limits", "throttle", "pause", "many", "burst")
ALWAYS = ("cmd", "snapshot")  # item kinds that no --faults selection removes

MB = 1_000_000


@dataclass(frozen=True)
class Item:
    """One scheduled thing: at ``at`` (seconds of simulated time), a ``kind`` (a fault class, ``cmd``
    or ``snapshot``), what exactly (``what``) and its parameters; ``seed`` feeds whatever it draws."""

    at: float
    kind: str
    what: str
    args: tuple = ()
    seed: int = 0

    def rng(self) -> random.Random:
        return random.Random(self.seed)

    def line(self) -> str:
        return f"t={self.at:7.2f} {self.name()}"

    def name(self) -> str:
        args = ", ".join(_fmt(a) for a in self.args)
        return f"{self.kind}:{self.what}" + (f"({args})" if args else "")


def _fmt(a) -> str:
    return f"{a:g}" if isinstance(a, float) else str(a)


@dataclass(frozen=True)
class Plan:
    seed: int
    scenario: Scenario
    throttle: int | None  # the engine's throttle rate at the start (a ChangeThrottle before anything)
    limits: dict  # limits changed at the start ({}: the defaults)
    quiet_at: float  # no fault and no new command from then on
    items: tuple[Item, ...] = field(default=())
    faults: tuple[str, ...] = FAULTS  # the fault classes this plan keeps

    def only(self, faults: Iterable[str]) -> "Plan":
        keep = tuple(f for f in FAULTS if f in set(faults))
        return replace(self, items=tuple(i for i in self.items if i.kind in ALWAYS or i.kind in keep), faults=keep)

    def without(self, dropped: Iterable[Item]) -> "Plan":
        gone = set(dropped)
        return replace(self, items=tuple(i for i in self.items if i not in gone))

    def describe(self) -> list[str]:
        s = self.scenario
        parts = ", ".join(
            f"{tp}:{list(p.replicas)} {p.size / MB:.0f}MB" for tp, p in sorted(s.partitions.items()))
        topics = ", ".join(f"{t} (min.insync {i.min_insync_replicas})" for t, i in sorted(s.topics.items()))
        dead = [b.id for b in s.brokers if not b.alive]
        return [
            f"brokers {[b.id for b in s.brokers]}" + (f" (dead: {dead})" if dead else "") + f"; topics {topics}",
            f"partitions {parts}",
            f"throttle {self.throttle if self.throttle is None else f'{self.throttle / MB:g} MB/s'}; "
            f"limits {self.limits or 'default'}; faults stop at t={self.quiet_at:.0f}",
        ]


def draw(seed: int) -> Plan:
    """The cluster and the schedule of seed ``seed`` (every fault class; ``Plan.only`` selects)."""
    rng = random.Random(seed)
    n = rng.randint(4, 7)
    racks = ("a", "b", "c")
    brokers = tuple(BrokerSpec(i, racks[i % 3]) for i in range(n))
    topics: dict[str, TopicInfo] = {}
    partitions: dict[TopicPartition, PartitionSpec] = {}
    for t in range(rng.choice((1, 1, 2))):
        name = f"t{t}"
        count = rng.randint(3, 10)
        rf = min(rng.choice((2, 3, 3, 3)), n - 1)
        min_isr = max(1, min(rf, rng.choice((1, 2, 2, rf))))
        topics[name] = TopicInfo(count, min_isr)
        for p in range(count):
            replicas = tuple(rng.sample(range(n), rf))
            size = int(MB * 10 ** rng.uniform(0.5, 3.2))  # 3 MB to 1.6 GB
            produce = rng.choice((0, 0, 1_000, 20_000, 100_000))
            partitions[TopicPartition(name, p)] = PartitionSpec(replicas, size, produce)
    scenario = Scenario(name=f"fuzz-{seed}", brokers=brokers, topics=topics, partitions=partitions, seed=seed)
    throttle = rng.choice((5 * MB, 10 * MB, 20 * MB, 50 * MB, 50 * MB, None))
    limits = {} if rng.random() < 0.4 else draw_limits(rng)
    if random.Random(f"keep-rates-{seed}").random() < RATES_NOT_KEPT_SHARE:  # its own generator: plans stay
        limits = {**limits, "keep_throttle_rates": 0}
    margin = random.Random(f"margin-{seed}").choice(MARGINS)  # its own generator too
    if margin is not None:
        limits = {**limits, "throttle_margin_pct": margin}
    hold = random.Random(f"hold-{seed}").choice(HOLDS)  # and the bound on grouped drops' hold
    if hold is not None:
        limits = {**limits, "max_drop_hold_seconds": hold}
    quiet_at = round(rng.uniform(120.0, 420.0), 1)
    items: list[Item] = []
    at = [0.0]

    def when(lo: float = 0.0) -> float:
        # faults and commands come in bursts now and then: two events meeting is what breaks
        if items and rng.random() < 0.4:
            t = at[0] + rng.choice((0.0, 0.0, rng.uniform(0.0, 2.0)))
        else:
            t = rng.uniform(lo, quiet_at)
        at[0] = min(round(t, 2), quiet_at)
        return at[0]

    def add(kind: str, what: str, args: tuple = (), lo: float = 0.0) -> None:
        items.append(Item(when(lo), kind, what, args, rng.getrandbits(32)))

    items.append(Item(round(rng.uniform(0.0, 5.0), 2), "cmd", "submit", (), rng.getrandbits(32)))
    todo: list[tuple[str, str]] = []
    for _ in range(rng.randint(1, 8)):
        todo.append(("cmd", rng.choice(("submit", "submit", "supersede", "supersede", "replace", "cancel", "cancel",
                                         "cancel", "limits", "throttle", "pause", "many"))))
    todo += [("snapshot", "write")] * rng.randint(0, 3)
    for kind in FAULTS:
        if kind in OWN_STREAM:
            continue
        if rng.random() < 0.45:
            todo += [(kind, "")] * rng.choice((1, 1, 2, 3))
    rng.shuffle(todo)  # drawn in a random order: a fault may come just before a command or just after
    for kind, what in todo:
        if kind == "cmd":
            add("cmd", what)
            if what == "pause":
                items.append(Item(min(quiet_at, round(at[0] + rng.uniform(1.0, 60.0), 2)), "cmd", "resume", (),
                                  rng.getrandbits(32)))
        elif kind == "snapshot":
            add("snapshot", "write")
        else:
            _fault(kind, rng, add, n)
    items += burst(seed, quiet_at)
    items += configs(seed, quiet_at, n)
    items += torn_late(seed, quiet_at)
    items.sort(key=lambda i: i.at)  # stable: equal times keep their drawing order
    return Plan(seed, scenario, throttle, limits, quiet_at, tuple(items))


RATES_NOT_KEPT_SHARE = 0.25
"""The share of seeds whose engine deletes a broker's rate with its last step in flight
(``keep_throttle_rates`` 0, the rule of the engine the records measured)."""

MARGINS = (None, None, 0, 25)
"""The ``throttle_margin_pct`` a seed's engine starts with (``None``: the default): Kafka's rate the
throttle itself for a quarter of the seeds, 25 % above it for another quarter."""

HOLDS = (None, None, 0, 5, 20, 60)
"""``max_drop_hold_seconds`` a seed draws (None: the default, 300 s, longer than most of a seed's moves): a
bound that ends holds while copies still run, and 0, grouped with nothing held."""

BURST_SHARE = 0.06
"""The share of seeds that draw a burst of more than ``FINISHED_KEPT`` small requests."""


def burst(seed: int, quiet_at: float) -> list[Item]:
    """Now and then (``BURST_SHARE`` of the seeds) a burst of more requests than the state keeps whole
    once finished (``engine.core.state.FINISHED_KEPT``), each of one partition and cheap (most move no
    data): an operator's script that submits one request per partition. With it, a core that stops
    retiring finished requests (issue 27, defect 7) fails the bounded-state check within the CI
    seeds. Drawn from a generator of its own, so the rest of every seed's plan is as it was."""
    rng = random.Random(f"burst-{seed}")
    if rng.random() >= BURST_SHARE:
        return []
    count = FINISHED_KEPT + rng.randint(5, 40)
    return [Item(round(rng.uniform(0.0, quiet_at), 2), "cmd", "burst", (count,), rng.getrandbits(32))]


CONFIGS_SHARE = 0.45
"""The share of seeds whose plan has another client change the throttle configs (as every other fault
class's)."""

CONFIGS_CHANGES = ("rate-other", "rate-other", "rate-delete", "entries-delete", "entries-rewrite", "entries-star",
                   "reassert")
CONFIGS_MEETS = ("at", "at", "release", "release-start", "throttle", "none", "pause", "resume", "rollback", "broker",
                 "lost")
"""What another client's change of the throttle configs is drawn to meet (``at``: nothing, a plain time; the
others: the first such event from the item's time on): ``release`` (a copy released from the throttle),
``release-start`` (a copy started released), ``throttle`` (the throttle's rate changed), ``none``
(throttling disabled), ``pause``, ``resume``, ``rollback`` (a partition cancelled with rollback), ``broker``
(a broker dies or comes back), ``lost`` (a throttle change of kreassign's whose answer is lost or late)."""

COMPANIONS = {"throttle": "throttle", "none": "none", "pause": "pause", "resume": "pause", "rollback": "rollback",
              "broker": "broker", "lost": "lost"}
"""The event a ``configs`` item may bring along (its companion, an item of the same class drawn from the same
generator, so that dropping the class drops both): the command or fault it is drawn to meet."""


def configs(seed: int, quiet_at: float, n: int) -> list[Item]:
    """Another client's changes of the throttle configs (``configs``), from a generator of their own: every
    seed's other items are as they were. Each change is drawn to meet an event (``CONFIGS_MEETS``) and,
    half the time, brings that event along (``COMPANIONS``) at about its time, so that they do meet."""
    rng = random.Random(f"configs-{seed}")
    if rng.random() >= CONFIGS_SHARE:
        return []
    out = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        at = round(rng.uniform(0.0, quiet_at), 2)
        what = rng.choice(CONFIGS_CHANGES)
        meets = rng.choice(CONFIGS_MEETS)
        delay = rng.choice((0.0, 0.0, round(rng.uniform(0.0, 3.0), 2)))
        args: tuple = (meets, delay)
        if what == "reassert":  # every ``period`` seconds for ``duration`` (an automation that keeps its value)
            args += (round(rng.uniform(2.0, 20.0), 1), round(rng.choice((rng.uniform(10, 60), rng.uniform(60, 400))), 1))
        out.append(Item(at, "configs", what, args, rng.getrandbits(32)))
        companion = COMPANIONS.get(meets)
        if companion is not None and rng.random() < 0.5:
            when = min(quiet_at, round(max(0.0, at + rng.uniform(-1.0, 2.0)), 2))
            cargs: tuple = ()
            if companion == "throttle":
                cargs = (rng.choice((5 * MB, 20 * MB, 50 * MB, 100 * MB)),)
            elif companion == "pause":
                cargs = (round(rng.uniform(1.0, 60.0), 1),)
            elif companion == "broker":
                cargs = (rng.randrange(n), round(rng.choice((rng.uniform(2, 30), rng.uniform(30, 300))), 1))
            elif companion == "lost":
                cargs = (round(rng.uniform(2.0, 30.0), 1), rng.choice((0.5, 1.0)))
            out.append(Item(when, "configs", f"with-{companion}", cargs, rng.getrandbits(32)))
    return out


TORN_LATE_SHARE = 0.2
"""The share of seeds that draw a torn window opening with a window of late answers (``torn_late``)."""


def torn_late(seed: int, quiet_at: float) -> list[Item]:
    """Now and then (``TORN_LATE_SHARE`` of the seeds) a window of torn looks that opens with a window of
    late answers: an alter whose answer timed out lands while every look shows the replicas from a broker
    whose metadata predates it beside the controller's reassignment in progress (seed 86, its torn window
    and late answers 12 s later: the step's own reassignment taken for another tool's, the step given
    up, its copy counted by no cap). The two classes drawn apart rarely meet so. Drawn from a generator
    of its own, so the rest of every seed's plan is as it was; the items are plain ``torn`` and ``late``
    ones, dropped with their class. It has not found that defect itself: with the fix undone, seeds 0 to
    1,999 pass (the fix's test is ``tests/test_torn_looks.py``); it keeps the two meeting."""
    rng = random.Random(f"torn-late-{seed}")
    if rng.random() >= TORN_LATE_SHARE:
        return []
    at = round(rng.uniform(0.0, quiet_at), 2)
    late_at = min(quiet_at, round(max(0.0, at + rng.uniform(-1.0, 1.0)), 2))
    # its broker lags at most METADATA_SETTLE, the longest a broker's metadata may trail the controller for
    # the engine (a look that contradicts the log counts once it has stood that long): a longer lag makes a
    # step's completion read as a revert by another tool (seed 523 at 5.1 to 9.6 s), by design
    lag = rng.choice((2.0, round(rng.uniform(0.6 * METADATA_SETTLE, METADATA_SETTLE), 1)))
    return [Item(at, "torn", "looks", (round(rng.uniform(2.0, 12.0), 1), rng.choice((0.5, 1.0, 1.0)), lag),
                 rng.getrandbits(32)),
            Item(late_at, "late", "answers", (round(rng.uniform(2.0, 10.0), 1), rng.choice((0.5, 1.0))),
                 rng.getrandbits(32))]


def draw_limits(rng: random.Random) -> dict:
    """Some of the limits, small (the caps matter when they are small)."""
    out = {}
    for name, values in (("max_partitions_in_flight", (1, 2, 3, 5, 20)), ("max_leader_moves_in_flight", (1, 2, 5)),
                         ("max_replica_additions_in_flight", (1, 2, 4, 10)), ("max_incoming_moves_per_broker", (1, 1, 2, 3)),
                         ("max_outgoing_moves_per_broker", (1, 2, 3)), ("max_new_replicas_per_broker", (1, 1, 2, 3)),
                         ("max_replicas_per_step", (1, 1, 2))):
        if rng.random() < 0.5:
            out[name] = rng.choice(values)
    return out or {"max_outgoing_moves_per_broker": 1}


def _fault(kind: str, rng: random.Random, add, n: int) -> None:
    def window() -> float:
        return round(rng.choice((rng.uniform(1.0, 10.0), rng.uniform(5.0, 60.0), rng.uniform(30.0, 300.0))), 1)

    def p() -> float:
        return rng.choice((0.2, 0.5, 1.0))

    if kind == "crash":
        add(kind, rng.choice(("append-before", "append-cut", "append-after", "call-before", "call-after")),
            (rng.randint(1, 4),))
    elif kind == "broker":
        add(kind, "down", (rng.randrange(n), round(rng.choice((rng.uniform(2, 30), rng.uniform(30, 900))), 1),
                           rng.random() < 0.5))
    elif kind in ("leader", "isr"):
        add(kind, "move" if kind == "leader" else "shrink")
    elif kind == "lost":
        add(kind, rng.choice(("answers", "answers", "looks")), (window(), p()))
    elif kind == "late":
        add(kind, rng.choice(("answers", "answers", "looks")), (window(), p()))
    elif kind == "dup":
        add(kind, rng.choice(("answers", "looks", "commands")), (window(), p()))
    elif kind == "other":
        add(kind, rng.choice(("alter", "alter", "cancel", "throttles")))
    elif kind == "clock":
        size = rng.choice((rng.uniform(1, 30), rng.uniform(30, 600), rng.uniform(600, 7200)))
        add(kind, "step", (round(size if rng.random() < 0.35 else -size, 1),))
    elif kind == "standby":
        size = rng.choice((rng.uniform(0, 5), rng.uniform(5, 600), rng.uniform(600, 7200)))
        add(kind, "takeover", (round(size * rng.choice((-1, 1)), 1),))
    elif kind in ("elect", "throttle"):
        add(kind, "refuse", (window(),))
    elif kind == "torn":
        add(kind, "looks", (window(), p()))
    else:
        raise ValueError(f"unknown fault class {kind!r}")
