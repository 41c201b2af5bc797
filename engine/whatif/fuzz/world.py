"""The world a fuzzed engine lives in: the simulated cluster (the truth), the engine's clock, its
events log, and the faults between them.

* ``World`` holds the simulated KRaft cluster on virtual time, the engine's clock (virtual time
  plus an offset that clock faults change), the recent history of the cluster (for looks from a
  lagging metadata cache), the fault windows in force, requests that land late, and the
  bookkeeping the checks need: which reassignments in progress are kreassign's, which partitions
  another tool touched and when, what the engine's last look saw.
* ``FaultyCluster`` is the ``engine.cluster.Cluster`` the engine talks to: every call goes to the
  simulated cluster through the faults in force (lost request or answer, a slow call, a request
  that lands after its answer timed out, one that lands twice, a refusal, a torn or lost look) and
  may be where the engine dies (``Crash``).
* ``FuzzLog`` is ``engine.runtime.decider.MemoryLog`` with deterministic ids and times, a place to
  die before or after an append, and a tap that shows the world every event appended.

Nothing here decides anything for the engine: it only delivers, loses, delays and breaks.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
from collections import deque
from datetime import datetime, timezone
from typing import Callable, Collection, Iterable, Mapping

from engine.core import events as ev
from engine.core.commands import Observation
from engine.core.decide import METADATA_SETTLE
from engine.core.limits import DEFAULT_LIMITS, Limits
from engine.core.outcomes import OK, Ok, Refused, Result, Unavailable
from engine.core.partition import Broker, PartitionState, Replicas, TopicPartition
from engine.core.scheduler import WEIGHT_UNITS
from engine.core.state import EMPTY, State, apply
from engine.core.step import DROPS_HELD
from engine.core.throttles import ThrottleSet
from engine.log.envelope import EventEnvelope
from engine.runtime.decider import MemoryLog
from engine.sim import controller
from engine.sim.cluster import SimulatedCluster
from engine.sim.model import SimState
from engine.whatif.fuzz.plan import Item, Plan

EPOCH = 1_700_000_000.0
"""The engine's clock at virtual time 0 (epoch seconds, so that times render as dates)."""

HISTORY = 10.0  # seconds of cluster history kept for looks from a lagging metadata cache
TORN_LAG = (0.1, 2.0)  # how far behind a lagging broker's metadata is (seconds; measured: 0.64 s)
LATE_LANDING = (0.2, 3.0)  # a request whose answer timed out reaches the controller this much later
SLOW_CALL = (0.5, 5.0)  # seconds a slow call takes (the cluster moves on meanwhile)


class Crash(BaseException):
    """The engine process dies here (a SIGKILL): nothing after this point of the loop happens."""


@dataclasses.dataclass
class Violation:
    """One invariant that did not hold: which (``check``), when (world seconds), what exactly."""

    check: str
    at: float
    detail: str
    tps: tuple = ()
    facts: dict = dataclasses.field(default_factory=dict)  # what the classifier reads
    defect: str | None = None  # set by ``engine.whatif.fuzz.classify``

    def line(self) -> str:
        label = f"[{self.defect}] " if self.defect else ""
        return f"{label}{self.check} at t={self.at:.2f}: {self.detail}"


SHOWN_KEPT = 4  # the engine's looks at a partition whose ISR the ``caps`` check of a free drop accepts


def trs(p) -> Replicas:
    """The target replica set of a partition (RS without the replicas being removed)."""
    return tuple(b for b in p.replicas if b not in p.removing)


def in_sync(state: SimState, p) -> int:
    return sum(1 for b in p.isr if state.alive(b))


def watching(state: State, tp: TopicPartition) -> bool:
    """Whether something of the working state still watches ``tp`` (its observation is needed)."""
    return tp in state.steps or tp in state.waiting or tp in state.elections or tp in state.pending


def retired_leftovers(before: State, after: State, rid: str) -> str | None:
    """What request ``rid``, retired by the event that turned ``before`` into ``after``, left in the
    working maps (``None``: nothing). It must be gone from ``requests`` and ``completable`` (kept as a
    compact record in ``retired``); no partition entry, ready slot or step may be its own (a step it
    started goes on under the request that took its partition over); and its
    partitions that no later request took over and nothing watches must have left ``observed`` and
    ``known_at`` with it."""
    left = []
    if rid in after.requests:
        left.append("requests")
    if rid not in after.retired:
        left.append("no record in retired")
    if rid in after.completable:
        left.append("completable")
    r = before.requests.get(rid)
    members = sorted(r.members.keys()) if r is not None else []
    own = [tp for tp, e in after.partitions.items() if e.request_id == rid]
    if own:
        left.append(f"partitions {', '.join(map(str, sorted(own)[:4]))}")
    # (a step it had in flight where a later request took the partition over goes on under the new owner)
    steps = [tp for tp, f in after.steps.items() if f.request_id == rid and tp not in after.partitions]
    if steps:
        left.append(f"steps {', '.join(map(str, sorted(steps)[:4]))}")
    slots = [name for lanes in after.ready.sources.values() for name in lanes.keys() if name[0] == rid]
    if slots:
        left.append(f"{len(slots)} ready lanes")
    for tp in members:
        if tp in after.partitions or watching(after, tp):
            continue  # a later request's now, or still watched (an election, a step, a wait)
        maps = [name for name, m in (("observed", after.observed), ("known_at", after.known_at)) if tp in m]
        if maps:
            left.append(f"{tp} in {' and '.join(maps)}")
    if not left:
        return None
    return f"request {rid} retired but left in the working state: {'; '.join(left[:6])}"


class World:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.sim = SimulatedCluster.from_scenario(plan.scenario)
        self.offset = 0.0  # engine clock - (EPOCH + virtual time)
        self.history: deque[tuple[float, SimState]] = deque()
        self.windows: list[tuple[Item, float, random.Random]] = []
        self.landings: list[tuple[float, int, str, Callable[[], None], str]] = []
        self.seq = 0
        self.armed: list[list] = []  # [point, countdown, item] of crashes to come
        self.kreassign: dict[TopicPartition, Replicas] = {}  # kreassign's reassignments in progress: their TRS
        self.completed: list[TopicPartition] = []  # kreassign's reassignments seen completed since the last step
        self.planned_trs: dict[TopicPartition, set] = {}  # every TR the engine's log planned, by partition
        self.weights: dict[TopicPartition, int] = {}  # the weight of each partition's latest planned step
        self.observed_at: dict[TopicPartition, float] = {}  # world time of the engine's last recorded look
        self.planned_on: dict[tuple, float] = {}  # (tp, step number) -> the look its plan came from
        self.limits: Limits = DEFAULT_LIMITS  # the engine's limits, as its log says
        self.planned_limits: dict[TopicPartition, Limits] = {}  # the limits when each partition's step was planned
        # new-replica caps grow with what a broker was seen to complete (docs/algorithm.md, section 2): the
        # steps' new replicas and when the cluster accepted them (the log's StepStarted), and per broker the
        # most new replicas of one alter the log reports complete
        self.back_at: dict[int, float] = {}  # when each broker last came back
        self.step_nr: dict[tuple, tuple] = {}
        self.step_at: dict[tuple, float | None] = {}
        self.batch_done: dict[tuple, int] = {}
        self.largest_new: dict[int, int] = {}
        self.touched: dict[object, list[float]] = {}  # tp or "throttles" -> when another tool changed it
        self.unknown_entries: set = set()  # throttle entries the engine set by a call it was told failed
        self.last_drift = 0.0
        self.differed_at: float | None = None  # when the latest difference of a read-back was first seen
        self.forward: list[float] = []  # world times at which the engine's clock stepped forward
        # world times until which a step of the engine's clock may delay its timers: when it stepped forward,
        # when it stepped back plus the step (docs/algorithm.md, section 6: a step back under
        # ``CLOCK_SET_BACK`` delays a timer by at most that much)
        self.stepped_at: list[float] = []
        self.set_at: dict[tuple, float] = {}  # throttle piece -> when the engine last logged it applied
        self.reapply_failed: list[float] = []  # when a failed apply named throttle entries set on the cluster
        self.look: SimState | None = None  # the cluster when the engine last looked
        self.look_torn = False
        self.torn_leaders: dict[TopicPartition, int | None] = {}  # leaders a torn latest look delivered
        # tp -> the engine's clock when its final drop was first held (DROPS_HELD), until that drop is planned
        self.held_at: dict[TopicPartition, float] = {}
        self.shown_isr: dict[TopicPartition, tuple] = {}  # the ISRs the engine's last looks showed (torn: a lagging one)
        self.looked: dict[TopicPartition, SimState] = {}  # the cluster when the engine last looked at each
        self.held_looks: list[tuple[float, int, float, Observation]] = []  # (due, seq, stamp, look) to redeliver
        self.violations: list[Violation] = []
        self.trace: list[str] = []
        self.quiet = False
        self.shadow: State | None = EMPTY  # the fold of the log so far (what a restart recovers), event by event
        # another client's throttle configs (``configs``): the events its changes are drawn to meet, seen since
        # the last step; the pieces it set that are not kreassign's (piece -> the value set, None for an entry),
        # until kreassign sets them itself; when kreassign last named each piece in a difference it read back
        self.met: list[str] = []
        self.foreign: dict[tuple, int | None] = {}
        self.named_at: dict[tuple, float] = {}
        self.restarted_at: list[float] = []  # when the engine (re)started: a read-back's cadence starts again
        self.missing_since: dict[tuple, float] = {}  # a piece the engine counts in force, lacking on the cluster
        self.drifts_of: dict[tuple, list[float]] = {}  # piece -> when a ThrottlesDrifted set it right
        self.reclaim: set[tuple] = set()  # rates a ThrottlesDrifted found missing, not set or removed since
        self.record()

    # --- time -------------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.sim.time

    def clock(self) -> float:
        """The engine's clock (epoch seconds)."""
        return EPOCH + self.sim.time + self.offset

    def advance_to(self, t: float) -> None:
        while self.landings and self.landings[0][0] <= t:
            due, _seq, _res, fn, _label = self.landings.pop(0)
            if due > self.sim.time:
                self.sim.advance_to(due)
                self.record()
            fn()
            self.record()
        if t > self.sim.time:
            self.sim.advance_to(t)
            self.record()
        self._completions()

    def record(self) -> None:
        s = self.sim.state
        if self.history and self.history[-1][0] == s.time:
            self.history[-1] = (s.time, s)
        else:
            self.history.append((s.time, s))
        while len(self.history) > 2 and self.history[1][0] < s.time - HISTORY:
            self.history.popleft()

    def lagging(self, lag: float) -> SimState:
        """The cluster as a broker whose metadata is ``lag`` seconds behind sees it."""
        t = self.sim.time - lag
        times = [h[0] for h in self.history]
        i = bisect.bisect_right(times, t) - 1
        return self.history[max(i, 0)][1]

    def note(self, line: str) -> None:
        self.trace.append(f"t={self.now:7.2f} {line}")

    def violate(self, check: str, detail: str, tps: Iterable = (), **facts) -> None:
        self.violations.append(Violation(check, self.now, detail, tuple(tps), facts))
        self.note(f"VIOLATION {check}: {detail}")

    # --- fault windows and crash points ------------------------------------------------------------

    def open_window(self, item: Item) -> None:
        self.windows.append((item, min(item.at + item.args[0], self.plan.quiet_at), item.rng()))

    def active(self, kind: str, what: str):
        t = self.sim.time
        for item, end, rng in self.windows:
            if item.kind == kind and item.what == what and item.at <= t < end:
                yield item, rng

    def fate(self) -> tuple[str, float]:
        """What happens to one request to the cluster: ``ok``, ``lost-request``, ``lost-answer``,
        ``slow``, ``late`` (lands after its answer timed out) or ``twice``; and a delay."""
        for kind, fates in (("lost", ("lost-request", "lost-answer")), ("late", ("slow", "late")), ("dup", ("twice",))):
            for item, rng in self.active(kind, "answers"):
                if rng.random() < item.args[1]:
                    fate = rng.choice(fates)
                    delay = rng.uniform(*SLOW_CALL) if fate == "slow" else rng.uniform(*LATE_LANDING)
                    return fate, round(delay, 3)
        return "ok", 0.0

    def refused(self, kind: str) -> bool:
        return any(True for _ in self.active(kind, "refuse"))

    def arm(self, item: Item) -> None:
        self.armed.append([item.what, item.args[0], item])

    def point(self, kind: str) -> None:
        """A place the engine may die: ``append-before``, ``append-cut`` (half the batch written),
        ``append-after``, ``call-before``, ``call-after``."""
        for entry in self.armed:
            if entry[0] == kind:
                entry[1] -= 1
                if entry[1] <= 0:
                    self.armed.remove(entry)
                    self.note(f"engine crashes ({kind})")
                    raise Crash(kind)
                return

    # --- requests landing --------------------------------------------------------------------------

    def schedule(self, delay: float, resource: str, fn: Callable[[], None], label: str) -> None:
        self.seq += 1
        self.landings.append((self.sim.time + delay, self.seq, resource, fn, label))
        self.landings.sort(key=lambda x: (x[0], x[1]))

    def flush(self, resources: Collection[str]) -> None:
        """Requests of the engine still on their way to the controller land before its next one on the
        same resource (one client connection: the controller takes its requests in order)."""
        keep = []
        for entry in self.landings:
            if entry[2] in resources:
                entry[3]()
            else:
                keep.append(entry)
        if len(keep) != len(self.landings):
            self.landings = keep
            self.record()

    def land(self, op: str, tp: TopicPartition, target: Replicas | None = None, sent: tuple | None = None) -> Result:
        """One of the engine's partition requests reaches the controller. ``sent``: what the engine had
        looked at when it sent a request that lands late (``seen``), against which its caps are counted:
        a leader that moved after it was sent is no doing of the engine's."""
        s = self.sim.state
        before = s.partitions.get(tp)
        if op == "alter":
            state, result = controller.alter(s, tp, target)
        elif op == "cancel":
            state, result = controller.cancel(s, tp)
        else:
            state, result = controller.elect_preferred(s, tp)
        self.sim.state = state
        after = state.partitions.get(tp)
        if before is None or after is None:
            return result
        if op == "alter" and isinstance(result, Ok):
            if after.reassigning:
                self.kreassign[tp] = trs(after)
                new = set(after.adding) - (set(before.adding) if before.reassigning else set())
                if new:
                    self._check_caps(tp, after, sent)
            else:
                self.kreassign.pop(tp, None)
        elif op == "cancel" and isinstance(result, Ok):
            self.kreassign.pop(tp, None)
        lost, had, floor = in_sync(state, after), in_sync(s, before), state.min_insync(tp)
        if lost < had and lost < floor and not self._foreseeable(op, tp, target, sent):
            self.note(f"{op} of {tp} left {lost} in sync (min.insync.replicas {floor}, {had} before), which the "
                      f"partition as the engine last looked at it did not foresee: a fault since, not counted")
        elif lost < had and lost < floor:
            self.violate("min_insync", f"{op} of {tp} by kreassign left {lost} in-sync replicas (min.insync.replicas "
                         f"{floor}, {had} before): {list(before.replicas)} isr {sorted(before.isr)} -> "
                         f"{list(after.replicas)} isr {sorted(after.isr)}", [tp], op=op)
        return result

    def _foreseeable(self, op: str, tp: TopicPartition, target: Replicas | None, sent: tuple | None = None) -> bool:
        """Whether ``op`` would have left ``tp`` below min.insync.replicas, with fewer in sync than it had,
        on the cluster as it was when the engine last looked at the partition: the request was sent on
        that look, and a broker that died (or a replica that fell behind) between the look and the
        request is a fault no engine can foresee (seed 3582: a broker died 0.9 s after the look, as the
        cancel came). A decision the look itself condemns still counts."""
        prior = (sent[3] if sent is not None else self.looked).get(tp)  # (a late request: when it was sent)
        if prior is None:
            return True
        p0 = prior.partitions.get(tp)
        if op == "alter":
            state, result = controller.alter(prior, tp, target)
        else:
            state, result = controller.cancel(prior, tp)
        p1 = state.partitions.get(tp)
        if not isinstance(result, Ok) or p0 is None or p1 is None:
            return True
        lost, had = in_sync(state, p1), in_sync(prior, p0)
        return lost < had and lost < state.min_insync(tp)

    # --- the checks made where things happen ---------------------------------------------------------

    def seen(self) -> tuple:
        """What the engine's latest look saw (the cluster then, and the leaders a torn one delivered)."""
        return self.look, self.torn_leaders, self.look_torn, dict(self.looked)

    def _check_caps(self, started: TopicPartition, p, sent: tuple | None = None) -> None:
        """kreassign just started copies of ``started``: every cap it touches must hold, counted on the
        reassignments kreassign has in progress on the cluster, each copy charged to the partition's
        leader as the engine's latest look at the cluster saw it (Kafka's truth then, not the engine's
        belief; for a partition that look delivered torn, the lagging broker's leader it delivered), the
        weight of each as the engine recorded it."""
        s = self.sim.state
        look, torn_leaders, look_torn, _looked = sent or self.seen()
        seen = look or s
        count = {"P": 0, "L": 0, "A": 0}
        per: dict[tuple, int] = {}
        who: dict[object, list] = {}
        for tp in sorted(self.kreassign):
            q = s.partitions[tp]
            if not q.reassigning or trs(q) != self.kreassign[tp]:
                continue
            looked = seen.partitions.get(tp, q)
            # a torn look delivered a lagging broker's leader: the engine cannot know better (no
            # controller answer carries leaders), so that is what its caps can count against
            leader = torn_leaders.get(tp, looked.leader)
            w = self.weights.get(tp, WEIGHT_UNITS)
            adding = q.adding
            if not adding and not w:
                # a drop the engine started as one Kafka completes at its alter (its look showed the whole
                # target in sync: checked where it was planned); the ISR shrank before the alter, so it is
                # in progress: docs/algorithm.md, section 2, counts it in no limit
                continue
            count["P"] += 1
            count["A"] += len(adding)
            moves = trs(q)[0] != leader
            count["L"] += int(moves)
            keys = [("out", leader)] + [("in", b) for b in adding] + [("new", b) for b in adding]
            for key in keys:
                per[key] = per.get(key, 0) + (1 if key[0] == "new" else w * (len(adding) if key[0] == "out" else 1))
                who.setdefault(key, []).append(tp)
            for key in ("P", "A") + (("L",) if moves else ()):
                who.setdefault(key, []).append(tp)
        # a step is planned within the limits then in force; one planned before they were lowered may
        # still start (its retry, for one): the caps are the highest of the counted steps' limits
        counted = {tp for tps in who.values() for tp in tps}
        plans = [self.planned_limits.get(tp, self.limits) for tp in sorted(counted)] or [self.limits]

        def cap(name: str) -> int:
            return max(getattr(x, name) for x in plans)

        limits = Limits(**{name: cap(name) for name in Limits.__dataclass_fields__})
        caps = {"P": limits.max_partitions_in_flight, "L": limits.max_leader_moves_in_flight,
                "A": limits.max_replica_additions_in_flight}
        caps_per = {"out": limits.max_outgoing_moves_per_broker * WEIGHT_UNITS,
                    "in": limits.max_incoming_moves_per_broker * WEIGHT_UNITS,
                    "new": limits.max_new_replicas_per_broker}

        def cap_of(key: tuple) -> int:
            # max_new_replicas_per_broker until the broker is seen to make new replicas; then the engine
            # follows its pace, but never past twice the most of one alter seen complete on it
            if key[0] == "new":
                return max(caps_per["new"], 2 * self.largest_new.get(key[1], 0))
            return caps_per[key[0]]
        over = []
        for key, n in count.items():
            if n > caps[key] and started in who.get(key, []):
                over.append((key, n, caps[key]))
        for key, n in per.items():
            if n > cap_of(key) and started in who.get(key, []):
                over.append((key, n, cap_of(key)))
        for key, n, cap in over:
            name = key if isinstance(key, str) else f"{key[0]} broker {key[1]}"
            unit = "" if isinstance(key, str) or key[0] == "new" else " (eighths of a move)"
            self.violate("caps", f"starting {tp_str(started)} put {name} at {n} > {cap}{unit}: "
                         f"{', '.join(tp_str(t) for t in who[key])}", who[key], resource=key, torn=look_torn)

    def _check_at_alter(self, x) -> None:
        """A drop planned to take no limit (``scheduler.at_alter``) must be one a recent look of the engine at
        its partition showed Kafka would complete at its alter: every replica of its target in sync (a torn
        or late look shows an older ISR: the engine cannot know better, as for the leaders)."""
        shown = self.shown_isr.get(x.tp, ())
        if not any(set(x.step.tr) <= isr for isr in shown):
            what = ", ".join(str(sorted(isr)) for isr in shown) or "no look"
            self.violate("caps", f"{tp_str(x.tp)}'s drop to {list(x.step.tr)} takes no limit, but the engine's last "
                         f"looks showed the ISR {what}", [x.tp])

    def _completions(self) -> None:
        s = self.sim.state
        for tp in sorted(self.kreassign):
            p = s.partitions[tp]
            if not p.reassigning:
                if p.replicas == self.kreassign[tp]:
                    self.completed.append(tp)
                del self.kreassign[tp]

    def logged(self, envelopes: list[EventEnvelope]) -> None:
        """Every event the engine appends: weights of its steps, and the false alarms."""
        for e in envelopes:
            x = e.payload
            kind = type(x)
            if self.shadow is not None:  # (None: events that are no log, as a unit test hands it)
                before = self.shadow
                try:
                    self.shadow = apply(before, x)
                except (KeyError, AttributeError):
                    self.shadow = None
                else:
                    if kind is ev.RequestCompleted and len(self.shadow.retired) > len(before.retired):
                        self.retired(before)
            if kind is ev.LimitsChanged:
                self.limits = x.limits
            elif kind is ev.ThrottlesApplied:
                for piece in _pieces(x.throttles):
                    self.set_at[piece] = self.now
                    self.foreign.pop(piece, None)  # kreassign set it: its own from now on
                    self.reclaim.discard(piece)
            elif kind is ev.ThrottlesRemoved:
                for piece in _pieces(x.throttles):
                    self.reclaim.discard(piece)
            elif kind is ev.ThrottleReleased:
                self.met.append("release" if (x.tp, x.number) in self.step_at else "release-start")
            elif kind is ev.ThrottleRateChanged:
                self.met.append("throttle" if x.rate is not None else "none")
            elif kind is ev.Paused and not x.already:
                self.met.append("pause")
            elif kind is ev.Resumed and not x.already:
                self.met.append("resume")
            elif kind is ev.PartitionCancelled and x.rollback:
                self.met.append("rollback")
            elif kind is ev.PartitionWaiting and x.reason.startswith(DROPS_HELD):
                self.held_at.setdefault(x.tp, self.clock())  # its first hold, on the engine's clock
            elif kind is ev.PartitionQueued:
                self.held_at.pop(x.tp, None)  # another request's: its own hold, if any
            elif kind is ev.StepPlanned:
                if not x.step.nr:
                    self.held_at.pop(x.tp, None)  # its drop goes: the hold is over
                self.step_nr[(x.tp, x.number)] = tuple(x.step.nr)
                self.planned_trs.setdefault(x.tp, set()).add(tuple(x.step.tr))
                self.weights[x.tp] = x.weight
                if not x.step.nr and not x.weight:
                    self._check_at_alter(x)
                self.planned_limits[x.tp] = self.limits
                self.planned_on[(x.tp, x.number)] = self.observed_at.get(x.tp, 0.0)
                self.note(f"engine: {x.request_id} {x.tp} step {x.number} {list(x.step.cr)} -> {list(x.step.tr)}")
            elif kind is ev.StepFailed:
                self.note(f"engine: {x.request_id} {x.tp} step {x.number} failed: {x.reason}")
                if "outside kreassign" in x.reason:
                    # another tool may have changed it after the look the step was planned from
                    since = self.planned_on.get((x.tp, x.number), 0.0)
                    if self.stepped_forward(since):
                        self.note(f"engine blamed another tool for {x.tp} across a clock step forward: time "
                                  f"that passed by the engine's rule, not counted as a false alarm")
                    elif not any(t >= since - 1e-9 for t in self.touched.get(x.tp, [])):
                        self.violate("false_alarm", f"{x.tp} step {x.number}: {x.reason}, but no other tool touched "
                                     f"it since the look the step was planned from (t={since:.2f})", [x.tp],
                                     torn=self.torn_since(since))
            elif kind is ev.PartitionObserved:
                self.observed_at[x.tp] = self.now
            elif kind is ev.ThrottlesDiffered:
                for piece in _pieces(x.missing) + _pieces(x.unexpected):
                    self.named_at[piece] = self.now
                if not (x.missing.is_empty() and x.unexpected.is_empty()):
                    self.note(f"engine: throttles differ (missing {_entries(x.missing)}, left over {_entries(x.unexpected)})")
                empty = x.missing.is_empty() and x.unexpected.is_empty()
                self.differed_at = None if empty else (self.differed_at if self.differed_at is not None
                                                       else self.now)
            elif kind is ev.ThrottlesDrifted:
                self.note(f"engine: throttles drifted (missing {_entries(x.missing)}, left over {_entries(x.unexpected)})")
                for piece in _pieces(x.missing) + _pieces(x.unexpected):
                    self.named_at[piece] = self.now
                    if piece in _pieces(x.missing) and piece[0].endswith("rate"):
                        self.reclaim.add(piece)
                    times = self.drifts_of.setdefault(piece, [])
                    # against another client that keeps setting its own value, kreassign sets its own again
                    # once per confirmed difference, never faster than METADATA_SETTLE: no tug of war at the
                    # pace of its ticks (a clock stepped forward is time that passed, by its rule)
                    if (times and self.now - times[-1] < METADATA_SETTLE - 1e-9 and not self.stepped_forward(times[-1])
                            and not any(v.check == "throttle_fight" for v in self.violations)):
                        self.violate("throttle_fight", f"{piece[0]} {piece[1]} set right again {self.now - times[-1]:.2f} s "
                                     f"after the last time (at most once per {METADATA_SETTLE:g} s)")
                    times.append(self.now)
                since = self.last_drift
                self.last_drift = self.now
                first, self.differed_at = self.differed_at, None
                other = any(t >= since for t in self.touched.get("throttles", []))
                # a piece missing since another tool removed it after the engine last set it: a previous drift
                # may not have named it yet (a read-back that lagged, or did not cover its broker then)
                pieces = _pieces(x.missing)
                removed = self.touched.get("throttles", [])
                # an entry left over that another client listed (``configs``) and kreassign never set: the
                # partition became kreassign's, or its step ended, after an earlier drift was judged
                extra = _pieces(x.unexpected)
                other = other or (bool(pieces or extra) and all(
                    any(t >= self.set_at.get(piece, 0.0) for t in removed) for piece in pieces)
                    and all(piece in self.foreign for piece in extra))
                own = (x.missing.is_empty() and not (x.unexpected.leader_brokers | x.unexpected.follower_brokers)
                       and (x.unexpected.leader | x.unexpected.follower) <= self.unknown_entries)
                if not other and not own and first is not None and self.stepped_forward(first):
                    self.note("engine corrected a throttle difference confirmed across a clock step forward: "
                              "time that passed by the engine's rule, not counted as a false alarm")
                elif not other and not own:
                    self.violate("false_alarm", f"ThrottlesDrifted (missing {_entries(x.missing)}, unexpected "
                                 f"{_entries(x.unexpected)}), but no other tool changed a throttle since t={since:.2f}",
                                 torn=self.torn_since(since), missing=not x.missing.is_empty(),
                                 reapply_failed=bool(self.reapply_failed))

            elif kind is ev.StepStarted:
                self.step_at[(x.tp, x.number)] = x.at
            elif kind is ev.StepCompleted:
                self.note("engine: " + _short(x))
                at = self.step_at.get((x.tp, x.number))
                for b in self.step_nr.get((x.tp, x.number), ()) if at is not None else ():
                    done = self.batch_done[(at, b)] = self.batch_done.get((at, b), 0) + 1
                    self.largest_new[b] = max(self.largest_new.get(b, 0), done)
            elif kind in (ev.StepAborted, ev.PartitionCancelled, ev.PartitionCompleted,
                          ev.PartitionReverted, ev.RequestAccepted, ev.RequestCompleted, ev.CancelSkipped):
                self.note("engine: " + _short(x))
            elif kind is ev.ActionFailed and x.action in ("start_step", "cancel_step"):
                self.note(f"engine: {x.action} of {x.tp} step {x.number} failed ({x.code}) attempt {x.attempt}")
            elif kind is ev.ActionRetried and x.action in ("start_step", "cancel_step"):
                self.note(f"engine: {x.action} of {x.tp} step {x.number} retried (attempt {x.attempt})")

    def retired(self, before: State) -> None:
        """The event just folded retired a request (``engine.core.state.FINISHED_KEPT``): it must leave
        nothing in the working maps (reported once per run)."""
        for rid in sorted(k for k in self.shadow.retired.keys() if k not in before.retired):
            problem = retired_leftovers(before, self.shadow, rid)
            if problem and not any(v.check == "bounded_state" for v in self.violations):
                self.violate("bounded_state", problem, retired=rid)

    def stepped_forward(self, since: float) -> bool:
        """Whether the engine's clock stepped forward since world time ``since``. By the engine's rule a
        step forward is time that passed (docs/algorithm.md, *Timers and the clock*): a look or a
        throttle read-back that must stand ``METADATA_SETTLE`` seconds before it blames another tool is
        then confirmed by the next one, however little time really passed, and a look torn by a lagging
        broker's metadata can be taken for a change. The engine cannot tell such a step from time that
        passed (only a clock that never steps could), so the checks do not count what follows from it."""
        return any(t >= since - 1e-9 for t in self.forward)

    def foreign_on(self) -> ThrottleSet:
        """What another client set (``configs``) that is still on the cluster as it set it and that kreassign
        has not set since: not kreassign's to remove."""
        t = self.sim.state.throttles
        leader, follower, lb, fb = set(), set(), set(), set()
        for (side, x), value in self.foreign.items():
            if side == "leader rate" and t.leader_rate.get(x) == value:
                lb.add(x)
            elif side == "follower rate" and t.follower_rate.get(x) == value:
                fb.add(x)
            elif side in ("leader", "follower") and (x.partition, x.broker) in getattr(t, side).get(x.topic, ()):
                (leader if side == "leader" else follower).add(x)
        return ThrottleSet(frozenset(leader), frozenset(follower), frozenset(lb), frozenset(fb))

    def disturbed_at(self) -> float:
        """The latest time (up to now) something kept the engine's read-backs or throttle changes from their
        cadence: a fault window of looks or answers (lost, late, twice, torn, throttle changes refused) in
        force, a (re)start of the engine, a step of its clock."""
        t = max([0.0] + [x for x in self.restarted_at + self.forward if x <= self.now]
                + [min(x, self.now) for x in self.stepped_at])
        for item, end, _ in self.windows:
            if item.at <= self.now and item.kind in ("lost", "late", "dup", "torn", "throttle"):
                t = max(t, min(end, self.now))
        return t

    def torn_since(self, since: float) -> bool:
        return any(item.at <= self.now and end >= since for item, end, _ in self.windows if item.kind == "torn")


def _pieces(t: ThrottleSet) -> list[tuple]:
    """Every entry and broker rate of ``t``, each with its side."""
    return ([("leader", e) for e in t.leader] + [("follower", e) for e in t.follower]
            + [("leader rate", b) for b in t.leader_brokers] + [("follower rate", b) for b in t.follower_brokers])


def tp_str(tp) -> str:
    return str(tp)


def _entries(t: ThrottleSet) -> str:
    n = len(t.leader) + len(t.follower)
    brokers = sorted(t.leader_brokers | t.follower_brokers)
    return f"{n} entries" + (f", rates of brokers {brokers}" if brokers else "")


def _short(x) -> str:
    name = type(x).__name__
    if isinstance(x, ev.StepCompleted):
        return f"{x.request_id} {x.tp} step {x.number} completed"
    if isinstance(x, ev.StepAborted):
        return f"{x.request_id} {x.tp} step {x.number} aborted at {list(x.replicas)}"
    if isinstance(x, ev.PartitionCancelled):
        extra = f" aborting step {x.aborting}" if x.aborting else ""
        extra += f" superseded by {x.superseded_by}" if x.superseded_by else ""
        extra += " final" if x.final else ""
        return f"{x.request_id} {x.tp} cancelled{' (rollback)' if x.rollback else ''}{extra}"
    if isinstance(x, ev.PartitionCompleted):
        return f"{x.request_id} {x.tp} completed at {list(x.replicas)}"
    if isinstance(x, ev.RequestAccepted):
        return f"{x.request_id} accepted ({x.partitions} partitions)"
    if isinstance(x, ev.CancelSkipped):
        return f"{x.request_id} {x.tp} cancel skipped: {x.reason}"
    return f"{name} {getattr(x, 'request_id', '') or ''} {getattr(x, 'tp', '') or ''}".strip()


class FaultyCluster:
    """The simulated cluster as the engine reaches it, through the faults in force."""

    def __init__(self, world: World):
        self.w = world
        self.pending_reapply = False

    # --- looks ---------------------------------------------------------------------------------------

    def _lost_look(self) -> bool:
        return any(rng.random() < item.args[1] for item, rng in self.w.active("lost", "looks"))

    def _lag(self) -> float | None:
        for item, rng in self.w.active("torn", "looks"):
            if rng.random() < item.args[1]:  # (a third argument: the longest lag, TORN_LAG's otherwise)
                return round(rng.uniform(TORN_LAG[0], item.args[2] if len(item.args) > 2 else TORN_LAG[1]), 3)
        return None

    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation | Unavailable:
        w = self.w
        w.point("call-before")
        if self._lost_look():
            w.point("call-after")
            return Unavailable("the metadata request timed out")
        stamp = w.clock()
        obs = w.sim.observe(partitions)
        lag = self._lag()
        if lag is not None:  # metadata from a broker whose cache lags; reassignments from the controller
            old = w.lagging(lag)
            cur = w.sim.state
            parts = {}
            for tp, ps in obs.partitions.items():
                q = old.partitions.get(tp, cur.partitions[tp])
                parts[tp] = PartitionState(q.replicas, q.isr, q.leader, None, ps.adding, ps.removing)
            brokers = tuple(Broker(b.id, b.rack, b.alive) for b in sorted(old.brokers.values()))
            obs = dataclasses.replace(obs, partitions=parts, brokers=brokers)
        w.look, w.look_torn = w.sim.state, lag is not None
        w.torn_leaders = {tp: ps.leader for tp, ps in obs.partitions.items()} if lag is not None else {}
        for tp, ps in obs.partitions.items():
            w.looked[tp] = w.sim.state
            w.shown_isr[tp] = (w.shown_isr.get(tp, ()) + (frozenset(ps.isr),))[-SHOWN_KEPT:]
        for item, rng in w.active("late", "looks"):
            if rng.random() < item.args[1]:
                self._hold(rng.uniform(1.0, 5.0), stamp, obs)
        for item, rng in w.active("dup", "looks"):
            if rng.random() < item.args[1]:
                self._hold(0.0, stamp, obs)
        w.point("call-after")
        return obs

    def _hold(self, delay: float, stamp: float, obs: Observation) -> None:
        w = self.w
        w.seq += 1
        w.held_looks.append((w.now + delay, w.seq, stamp, obs))
        w.held_looks.sort(key=lambda x: (x[0], x[1]))

    def sizes(self, partitions: Collection[TopicPartition]):
        self.w.point("call-before")
        out = Unavailable("DescribeLogDirs timed out") if self._lost_look() else self.w.sim.sizes(partitions)
        self.w.point("call-after")
        return out

    def catch_up(self, steps):
        self.w.point("call-before")
        out = Unavailable("DescribeLogDirs timed out") if self._lost_look() else self.w.sim.catch_up(steps)
        self.w.point("call-after")
        return out

    def throttles(self, topics: Collection[str], brokers: Collection[int]):
        w = self.w
        w.point("call-before")
        if self._lost_look():
            out = Unavailable("DescribeConfigs timed out")
        else:
            lag = self._lag()
            state = w.lagging(lag) if lag is not None else w.sim.state
            out = state.throttles.as_set(set(topics), set(brokers))
        w.point("call-after")
        return out

    def snapshot(self):
        return self.w.sim.snapshot()

    # --- actions -------------------------------------------------------------------------------------

    def _partition_call(self, op: str, targets: Mapping[TopicPartition, Replicas | None],
                        refused: Refused | None = None) -> dict[TopicPartition, Result]:
        w = self.w
        w.point("call-before")
        w.flush({str(tp) for tp in targets})
        if refused is not None:
            w.point("call-after")
            return {tp: refused for tp in targets}
        fate, delay = w.fate()
        out: dict[TopicPartition, Result] = {}
        if fate in ("lost-request", "late"):
            for tp, target in targets.items():
                out[tp] = Unavailable("the request timed out")
                if fate == "late":
                    w.schedule(delay, str(tp), lambda tp=tp, target=target, sent=w.seen(): w.land(op, tp, target, sent),
                               f"{op} {tp}")
            w.note(f"{op} {', '.join(map(str, targets))}: {fate}" + (f" (lands in {delay:g} s)" if fate == "late" else ""))
        else:
            for tp, target in targets.items():
                r = w.land(op, tp, target)
                out[tp] = Unavailable("the answer timed out") if fate == "lost-answer" else r
                if fate == "twice":
                    w.schedule(delay, str(tp), lambda tp=tp, target=target, sent=w.seen(): w.land(op, tp, target, sent),
                               f"{op} {tp} again")
            if fate != "ok":
                w.note(f"{op} {', '.join(map(str, targets))}: {fate}")
            if fate == "slow":
                w.record()  # what the call did, in the history lagging looks read, before time passes
                w.advance_to(w.now + delay)
        w.record()
        w.point("call-after")
        return out

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas]) -> dict[TopicPartition, Result]:
        for tp, target in sorted(targets.items()):
            if tuple(target) not in self.w.planned_trs.get(tp, ()):
                self.w.violate("unplanned_alter", f"kreassign altered {tp} to {list(target)}, a target no step it "
                               f"logged has", [tp])
        return self._partition_call("alter", dict(targets))

    def cancel_reassignments(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._partition_call("cancel", {tp: None for tp in partitions})

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        refused = (Refused("PREFERRED_LEADER_NOT_AVAILABLE", "the election was refused")
                   if self.w.refused("elect") else None)
        return self._partition_call("elect", {tp: None for tp in partitions}, refused)

    def _throttle_call(self, op: str, throttles: ThrottleSet) -> Result:
        w = self.w
        w.point("call-before")
        w.flush({"throttles"})
        if op == "apply":  # entries already set that this change names: if it fails, the log drops them
            on = w.sim.state.throttles.as_set()
            if (throttles.leader & on.leader) or (throttles.follower & on.follower):
                self.pending_reapply = True
        if w.refused("throttle"):
            self._reapply_failed(op)
            w.point("call-after")
            return Refused("POLICY_VIOLATION", "the throttle change was refused")
        fate, delay = w.fate()
        change = controller.apply_throttles if op == "apply" else controller.remove_throttles
        # a broker's rate is changed on that broker (the admin client sends a BROKER resource to it): a
        # dead broker cannot be asked, the rest of the change goes through
        dead = frozenset(b for b in throttles.leader_brokers | throttles.follower_brokers if not w.sim.state.alive(b))
        if dead:
            throttles = throttles._replace(leader_brokers=throttles.leader_brokers - dead,
                                           follower_brokers=throttles.follower_brokers - dead)

        def carry_out() -> None:
            w.sim.state = change(w.sim.state, throttles)

        out: Result = Unavailable(f"broker(s) {sorted(dead)} not available") if dead else OK
        if op == "apply" and fate in ("late", "lost-answer"):  # set, though the engine hears it failed
            w.unknown_entries |= throttles.leader | throttles.follower
        if fate in ("late", "lost-answer", "lost-request"):
            w.met.append("lost")
        if fate in ("lost-request", "late"):
            out = Unavailable("the request timed out")
            self._reapply_failed(op)
            if fate == "late":
                w.schedule(delay, "throttles", carry_out, f"{op} throttles")
        else:
            carry_out()
            if fate == "lost-answer":
                out = Unavailable("the answer timed out")
                self._reapply_failed(op)
            elif fate == "twice":
                w.schedule(delay, "throttles", carry_out, f"{op} throttles again")
            elif fate == "slow":
                w.record()
                w.advance_to(w.now + delay)
        w.record()
        w.point("call-after")
        return out

    def _reapply_failed(self, op: str) -> None:
        if op == "apply" and self.pending_reapply:
            self.w.reapply_failed.append(self.w.now)
        self.pending_reapply = False

    def apply_throttles(self, throttles: ThrottleSet) -> Result:
        return self._throttle_call("apply", throttles)

    def remove_throttles(self, throttles: ThrottleSet) -> Result:
        return self._throttle_call("remove", throttles)

    def close(self) -> None:
        pass


class FuzzLog(MemoryLog):
    """The events log in memory, with ids and times the run decides (byte-for-byte reproducible), a
    place to die before or after each append, and the world's tap on every event."""

    def __init__(self, world: World):
        super().__init__()
        self.world = world

    def append(self, events: Iterable[ev.Event]) -> list[EventEnvelope]:
        events = list(events)
        w = self.world
        w.point("append-before")
        at = datetime.fromtimestamp(round(w.clock(), 3), tz=timezone.utc)
        base = len(self.records)
        envelopes = [EventEnvelope(f"e{base + i}", at, e) for i, e in enumerate(events)]
        try:
            w.point("append-cut")
        except Crash:  # the process dies with only the first half of the batch written
            half = envelopes[:len(envelopes) // 2]
            self.records.extend(half)
            w.logged(half)
            raise
        self.records.extend(envelopes)
        w.logged(envelopes)
        w.point("append-after")
        return envelopes
