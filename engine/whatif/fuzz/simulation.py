"""One fuzzed run: the real engine (``engine.runtime.decider.Decider``: the core, the executor, its
log, snapshots, restarts and recovery) against the simulated cluster on virtual time, through the
faults of a ``Plan``, with the invariants checked after every step.

The loop: the engine ticks every ``TICK`` seconds of virtual time (a full look at what it watches,
decisions, actions); between ticks the plan's items happen at their times (faults applied to the
world, commands handed to the engine, snapshots written). The engine dies where a crash item says
(or a standby takes over) and a new decider recovers from the log and the executed marker the worker
would have persisted, exactly as ``engine.runtime.worker`` does; a command that was being decided is
handed again, as Kafka redelivers an uncommitted message. At ``plan.quiet_at`` faults stop: every
broker a target names comes back, and the run goes on until every request has finished and the
cluster is settled, or until the liveness bound (``engine.whatif.fuzz.checks.bound``) has passed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
from dataclasses import dataclass

from engine.core.commands import Cancel, ChangeLimits, ChangeThrottle, Pause, PartitionTarget, Resume, Submit
from engine.core.partition import TopicPartition
from engine.core.state import ACTIVE, CLOCK_SET_BACK, COMPLETED, TERMINAL
from engine.log.snapshot import canonical, dumps, loads
from engine.runtime.decider import Decider, Retry
from engine.sim import controller
from engine.whatif.fuzz import checks
from engine.core.throttles import ThrottledReplica, minus
from engine.whatif.fuzz.plan import MB, Item, Plan, draw_limits
from engine.whatif.fuzz.world import Crash, FaultyCluster, FuzzLog, Violation, World, trs

TICK = 1.0  # seconds of virtual time between two ticks of the engine
SETTLE = 60.0  # seconds a finished run may take to settle (throttles removed, elections done)
VERIFY_INTERVAL = 10.0  # the engine's --verify-interval


@dataclass
class Result:
    plan: Plan
    violations: list[Violation]
    trace: list[str]
    digest: str = ""
    ticks: int = 0
    events: int = 0
    restarts: int = 0
    end: float = 0.0
    finished_at: float | None = None  # when every request had finished (virtual seconds)
    bound: float | None = None  # the liveness bound (seconds after the faults stopped)

    @property
    def ok(self) -> bool:
        return not self.violations


GROUPED_SHARE = 0.4
"""The share of submits and supersedes that step ``grouped`` (their final drops held for their leader's
others: ``engine.core.step``, rule 8); drawn from a generator of its own (``steps_drawn``), so every other
draw of a seed is what it was."""


def steps_drawn(item: Item) -> str:
    return "grouped" if random.Random(f"steps {item.seed}").random() < GROUPED_SHARE else "incremental"


def _delays(back: float) -> float:
    """How long a step of the engine's clock ``back`` seconds back may delay a timer (docs/algorithm.md,
    section 6): by as much under ``CLOCK_SET_BACK``; a longer one is a clock set back, whose timers are
    re-based at once."""
    return back if 0.0 < back < CLOCK_SET_BACK else 0.0


class Engine:
    """The engine process: a decider, and the marker of the last input carried out (the worker's
    table). ``start`` is a (re)start: fold the log, carry out what it asks, dying again if told to."""

    def __init__(self, world: World, log: FuzzLog):
        self.world = world
        self.log = log
        self.d: Decider | None = None
        self.persisted: str | None = None
        self.restarts = -1

    def start(self) -> None:
        self.world.held_looks.clear()  # looks on their way to the process that died die with it
        self.world.restarted_at.append(self.world.now)
        while True:
            self.restarts += 1
            d = Decider(self.log, FaultyCluster(self.world), clock=self.world.clock, verify_interval=VERIFY_INTERVAL)
            try:
                d.recover(self.persisted)
            except Crash:
                continue
            except Retry as e:
                self.world.note(f"recovery gave up for now: {e}")
                continue
            self.d = d
            return

    def deliver(self, fn) -> str:
        """``ok``; ``crashed`` (restarted since); ``retry`` (the decider gave the input up for now, and
        recovered)."""
        try:
            fn(self.d)
        except Crash:
            self.start()
            return "crashed"
        except Retry as e:
            self.world.note(f"engine: {e} (recover, hand it again)")
            self.start()
            return "retry"
        self.persisted = self.d.executed
        return "ok"


class Run:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.world = World(plan)
        self.log = FuzzLog(self.world)
        self.engine = Engine(self.world, self.log)
        self.pending: list[tuple[str, object]] = []  # commands to hand over, in order (label, command)
        self.pending_due = 0.0  # when the first of them is handed (again)
        self.ups: list[tuple[float, int]] = []  # (due, broker) brokers coming back
        self.stays: set[int] = set()  # brokers that may stay dead after the faults stop
        self.isr_armed: list[Item] = []
        self.requests = 0
        self.commands = 0
        self.ticks = 0
        self.first: set[str] = set()  # checks already reported (each once per run)
        self.idle: dict[int, tuple] = {}  # source -> (since, successful ticks, timers ahead) idle with work fitting
        self.bound_end: float | None = None
        self.leaks = 0  # looks in a row after which throttles no step needs were still set
        self.wrong_rates = 0  # looks in a row after which a rate of the engine's was not the throttle + margin
        self.ahead: list[str] = []  # timers far ahead of the engine's clock seen since faults stopped
        self.bound: float | None = None
        self.finished_at: float | None = None
        self.pending_targets: dict[TopicPartition, tuple] = {}
        self.items: list[Item] = []  # the plan's items still to come (and those items bring along)
        self.armed_configs: list[Item] = []  # another client's config changes waiting for the event they meet
        self.operator = Operator(self.world, self)

    # --- the loop --------------------------------------------------------------------------------------

    def run(self, until: float | None = None) -> Result | None:
        """The whole run (``until``: stop there, for a look at the state; no final checks). The decider's
        warnings (every failure the faults cause) stay out of the log meanwhile."""
        logger = logging.getLogger("kreassign.decider")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            return self._run(until)
        finally:
            logger.setLevel(level)

    def _run(self, until: float | None) -> Result | None:
        w = self.world
        self.engine.start()
        if self.plan.throttle != self.engine.d.state.throttle_rate:
            self.hand(ChangeThrottle(self.plan.throttle, command_id=self.command_id()),
                      f"throttle at start: {self.plan.throttle}")
        if self.plan.limits:
            self.hand(ChangeLimits(dict(self.plan.limits), command_id=self.command_id()),
                      f"limits at start: {self.plan.limits}")
        items = self.items = list(self.plan.items)
        next_tick = TICK
        quiet_done = False
        while True:
            t_next = min([next_tick] + [q[0][0] for q in (self.ups, w.held_looks) if q]
                         + ([max(self.pending_due, w.now)] if self.pending else [])
                         + ([items[0].at] if items else []) + ([] if quiet_done else [self.plan.quiet_at]))
            if until is not None and t_next > until:
                return None
            w.advance_to(max(t_next, w.now))
            self.after_step()
            while self.ups and self.ups[0][0] <= w.now:
                _, b = self.ups.pop(0)
                self.broker(b, "up")
            while items and items[0].at <= w.now:
                self.item(items.pop(0))
                self.after_step()
            if not quiet_done and w.now >= self.plan.quiet_at:
                quiet_done = True
                self.quiet()
            self.drain()
            while w.held_looks and w.held_looks[0][0] <= w.now:
                _, _, stamp, obs = w.held_looks.pop(0)
                if not w.quiet:
                    self.engine.deliver(lambda d: d.process(dataclasses.replace(obs, now=stamp)))
                    self.after_step()
            if w.now >= next_tick - 1e-9:
                next_tick = w.now + TICK
                self.tick()
                if quiet_done and self.done():
                    break
                if self.bound_end is not None and w.now > self.bound_end:
                    break
        return self.finish()

    def tick(self) -> None:
        self.ticks += 1
        d_before = self.engine.d
        looked = d_before.counts["_ticks"]
        outcome = self.engine.deliver(lambda d: d.tick())
        self.after_step()
        d = self.engine.d
        if self.bound_end is not None and not self.ahead and self.ticks % 10 == 0:
            self.ahead = checks.timers_ahead(d.state, d.clock()) + checks.decider_ahead(d, d.clock())
        if outcome != "ok" or d is not d_before or d.blocked is not None or d.counts["_ticks"] == looked:
            return  # the engine did not look and decide (it died, could not observe, or skipped the tick)
        leak = checks.throttle_leak(self.world, d.state)
        self.leaks = self.leaks + 1 if leak else 0
        if self.leaks >= checks.LEAK_TICKS:  # one look may be torn: a leak is one that the next looks keep
            self.once("throttle_leak", leak, timers=checks.timers_ahead(d.state, d.clock()),
                      torn=self.world.torn_since(0.0))
        restore = checks.throttle_restore(self.world, d.state)
        if restore is not None:
            self.once(restore[0], restore[1], timers=checks.timers_ahead(d.state, d.clock()),
                      torn=self.world.torn_since(0.0))
        wrong = checks.throttle_rate(self.world, d.state)
        self.wrong_rates = self.wrong_rates + 1 if wrong else 0
        if self.wrong_rates >= checks.LEAK_TICKS:
            self.once("throttle_rate", wrong, timers=checks.timers_ahead(d.state, d.clock()))
        self.check_idle(d.state)
        held = checks.drops_held_without_cause(d.state)
        if held:
            self.once("drop_held", f"{', '.join(map(str, held[:4]))} held to drop with their leader's others after a "
                      f"tick although no new replica of their request copies from it", held)
        late = checks.drops_held_too_long(d.state, d.clock(), self.world.held_at)
        if late:
            self.once("drop_held", f"{', '.join(f'{tp} for {s:.1f} s' for tp, s in late[:4])} held to drop with their "
                      f"leader's others after a tick, more than max_drop_hold_seconds "
                      f"({d.state.limits.max_drop_hold_seconds})", [tp for tp, _s in late])

    def after_step(self) -> None:
        w = self.world
        d = self.engine.d
        if d is not None:
            problem = checks.bounded_state(d.state)
            if problem:
                self.once("bounded_state", problem)
        for tp in w.completed:
            if self.isr_armed:
                item = self.isr_armed.pop(0)
                self.shrink_isr(tp, item)
        w.completed.clear()
        self.met_configs()

    def met_configs(self) -> None:
        """Another client's config changes whose event came (``plan.CONFIGS_MEETS``); one that meets nothing
        (``at``) comes as soon as kreassign has a throttle in force (what it is there to change)."""
        w = self.world
        d = self.engine.d
        busy = d is not None and not d.state.throttles.is_empty()
        if not self.armed_configs or not (w.met or busy):
            w.met.clear()
            return
        met, w.met = w.met, []
        for item in list(self.armed_configs):
            meets = item.args[0]
            if (meets in met or (meets == "at" and busy)) and not w.quiet:
                self.armed_configs.remove(item)
                self.operator.fire(item, f"meeting {meets}" if meets != "at" else "")

    def once(self, check: str, detail: str, tps=(), **facts) -> None:
        if check not in self.first:
            self.first.add(check)
            self.world.violate(check, detail, tps, **facts)

    def check_idle(self, state) -> None:
        now = self.world.now
        d = self.engine.d
        idle = checks.unordered_looks(state, self.world, d.clock(),
                                      checks.held_by_the_pin(
                                          state, checks.waiting_for_what_it_lacks(state, checks.idle_sources(state))))
        for src in list(self.idle):
            if src not in idle:
                del self.idle[src]
        ahead = checks.timers_ahead(state, d.clock()) + checks.decider_ahead(d, d.clock()) if idle else []
        for src, fit in sorted(idle.items()):
            tps = [tp for tp, _key in fit]
            since, n, timers = self.idle.get(src, (now, 0, []))
            self.idle[src] = (since, n + 1, timers or ahead)
            if now - since >= checks.IDLE_LIMIT and n + 1 >= checks.IDLE_LIMIT / 2:
                blocked = checks.oldest_blocked(state)
                facts = {"source": src, "ready": tps, "timers": timers or ahead}
                if blocked is not None:
                    _prio, btp, key, why = blocked
                    held = checks.reserved(key, why)
                    facts.update(blocker=btp, blocker_source=key.source, blocker_lacks=why,
                                 held=any(held & checks.resources(k) for _tp, k in fit))
                    tps = list(tps) + [btp] + [tp for tp, f in sorted(state.steps.items())  # what holds it
                                               if isinstance(why, tuple) and why[0] == "in" and why[1] in f.step.nr]
                    about = f"; the oldest blocked step ({btp}, out of broker {key.source}) lacks {why}"
                else:
                    about = ""
                self.once("idle_source", f"broker {src} has served no copy for {now - since:.0f} s while ready steps "
                          f"out of it fit every limit ({', '.join(map(str, facts['ready'][:4]))}){about}", tps,
                          **facts)

    def done(self) -> bool:
        d = self.engine.d
        s = d.state
        if self.pending or any(r.status == ACTIVE for r in s.requests.values()):
            return False
        if self.finished_at is None:
            self.finished_at = self.world.now
        settled = (not s.steps and not s.elections and not self.world.kreassign and not self.world.landings
                   and self.world.sim.state.throttles.is_empty())
        return settled or self.world.now >= self.finished_at + SETTLE

    # --- items ---------------------------------------------------------------------------------------

    def item(self, item: Item) -> None:
        w = self.world
        if w.quiet:
            return
        kind = item.kind
        if kind == "cmd":
            self.command(item)
            return
        w.note(item.name())
        if kind == "snapshot":
            d = self.engine.d
            data, modules = dumps(d.fold())
            d.log.write_snapshot(loads(data, modules, freeze=False))
        elif kind == "crash":
            w.arm(item)
        elif kind == "broker":
            b, duration, stays = item.args
            self.broker(b, "down")
            if stays and item.at + duration >= self.plan.quiet_at:
                self.stays.add(b)
            else:
                self.ups.append((item.at + duration, b))
                self.ups.sort()
        elif kind == "leader":
            self.move_leader(item)
        elif kind == "isr":
            self.isr_armed.append(item)
        elif kind in ("lost", "late", "dup", "torn", "elect", "throttle"):
            w.open_window(item)
        elif kind == "other":
            self.other_tool(item)
        elif kind == "configs":
            if item.what.startswith("with-"):
                self.companion(item)
            else:
                self.armed_configs.append(item)
                self.met_configs()
        elif kind == "clock":
            w.stepped_at.append(w.now + _delays(-item.args[0]))
            w.offset += item.args[0]
            if item.args[0] > 0:
                w.forward.append(w.now)
            w.held_looks.clear()  # a late look is stamped by the clock it was taken with: not across a step
        elif kind == "standby":
            w.stepped_at.append(w.now + _delays(w.offset - item.args[0]))
            if item.args[0] > w.offset:
                w.forward.append(w.now)
            w.offset = item.args[0]
            self.engine.start()
        else:
            raise ValueError(f"unknown item {item}")

    def broker(self, b: int, action: str) -> None:
        w = self.world
        alive = w.sim.state.brokers[b].alive
        if (action == "up") == alive:
            return
        w.sim.state = controller.broker_down(w.sim.state, b) if action == "down" else controller.broker_up(w.sim.state, b)
        w.record()
        w.met.append("broker")
        if action == "up":
            self.stays.discard(b)
            w.back_at[b] = w.now
            w.note(f"broker {b} is back")

    def quiet(self) -> None:
        """Faults stop: every broker a target names comes back (and every other one not told to stay
        dead); the liveness bound starts."""
        w = self.world
        w.quiet = True
        w.armed.clear()
        self.armed_configs.clear()
        self.isr_armed.clear()
        w.held_looks.clear()
        s = self.engine.d.state
        named: set[int] = set()
        for tp, e in s.partitions.items():
            if e.status in TERMINAL:
                continue
            named.update(e.target)
            if e.rolling_back or e.cancelled:
                named.update(e.original or ())
        for f in s.steps.values():
            named.update(f.step.tr)
        for p in w.sim.state.partitions.values():
            if p.reassigning:
                named.update(trs(p))
        for _, command in self.pending:
            for p in getattr(command, "partitions", None) or ():
                named.update(getattr(p, "replicas", ()))
        for b in sorted(w.sim.state.brokers):
            if not w.sim.state.brokers[b].alive and (b not in self.stays or b in named):
                self.broker(b, "up")
        self.ups.clear()
        if self.engine.d.state.paused:  # an operator's pause is no fault: the liveness claim is about faults
            self.hand(Resume(command_id=self.command_id()), "resume (the operator, as faults stop)")
            s = self.engine.d.state
        w.note(f"faults stop; dead brokers left: {sorted(b for b, x in w.sim.state.brokers.items() if not x.alive)}")
        self.ahead = checks.timers_ahead(s, self.engine.d.clock()) + checks.decider_ahead(self.engine.d,
                                                                                           self.engine.d.clock())
        # a throttle command still to be handed (an operator's, drawn before the faults stopped) may lower
        # the rate the copies run at: the bound counts with the lowest rate in force from now on
        rates = [s.throttle_rate or checks.NETWORK] + [c.rate or checks.NETWORK for _, c in self.pending
                                                       if isinstance(c, ChangeThrottle)]
        # a rate another client left on a broker (``configs``) throttles what it lists there, an operator's
        # ``*`` every replica of a topic, kreassign's copies too: not kreassign's to remove
        t = w.sim.state.throttles
        rates += [r for side in ("leader", "follower") for b, r in getattr(t, f"{side}_rate").items()
                  if (f"{side} rate", b) in w.foreign and w.foreign[(f"{side} rate", b)] == r]
        self.bound = checks.bound(w, s, self.pending_targets, min(rates))
        self.bound_end = w.now + self.bound

    def move_leader(self, item: Item) -> None:
        w = self.world
        rng = item.rng()
        s = w.sim.state
        d = self.engine.d
        busy = sorted(tp for tp, p in s.partitions.items() if p.reassigning)
        ready = sorted(set(d.state.ready) | set(d.state.steps.keys())) if d is not None else []
        pool = [tp for tp in busy + ready if self._other_leader(s, tp)] or \
            [tp for tp in sorted(s.partitions.keys()) if self._other_leader(s, tp)]
        if not pool:
            w.note("no partition can change its leader")
            return
        tp = rng.choice(pool)
        p = s.partitions[tp]
        new = rng.choice(self._other_leader(s, tp))
        w.sim.state = controller.put(s, tp, p._replace(leader=new))
        w.record()
        w.note(f"leader of {tp} moves {p.leader} -> {new}")

    @staticmethod
    def _other_leader(s, tp) -> list[int]:
        p = s.partitions[tp]
        return sorted(b for b in p.isr if b != p.leader and b in p.replicas and s.alive(b))

    def shrink_isr(self, tp: TopicPartition, item: Item) -> None:
        w = self.world
        s = w.sim.state
        p = s.partitions[tp]
        followers = sorted(b for b in p.isr if b != p.leader)
        if not followers:
            return
        b = item.rng().choice(followers)
        w.sim.state = controller.leave_isr(s, tp, b, float(max(1, p.size // 100)))
        w.record()
        w.note(f"{tp} completed; broker {b} leaves its ISR")

    def other_tool(self, item: Item) -> None:
        w = self.world
        rng = item.rng()
        s = w.sim.state
        if item.what == "throttles":
            on = s.throttles.as_set()
            if on.is_empty():
                w.note("another tool finds no throttle to remove")
                return
            w.sim.state = controller.remove_throttles(s, on)
            w.touched.setdefault("throttles", []).append(w.now)
            w.note("another tool removes every throttle (kafka-reassign-partitions --verify)")
            w.record()
            return
        busy = sorted(tp for tp, p in s.partitions.items() if p.reassigning)
        d = self.engine.d
        mine = sorted(d.state.steps.keys()) if d is not None else []
        if item.what == "cancel":
            if not busy:
                w.note("another tool finds no reassignment to cancel")
                return
            tp = rng.choice(busy)
            w.sim.state, result = controller.cancel(s, tp)
        else:
            pool = busy or mine or sorted(s.partitions.keys())
            tp = rng.choice(pool)
            p = s.partitions[tp]
            target = list(trs(p))
            others = [b for b in sorted(s.brokers) if b not in target]
            if others and rng.random() < 0.8:
                target[rng.randrange(len(target))] = rng.choice(others)
            else:
                rng.shuffle(target)
            w.sim.state, result = controller.alter(s, tp, tuple(target))
        w.kreassign.pop(tp, None)
        w.touched.setdefault(tp, []).append(w.now)
        w.record()
        q = w.sim.state.partitions[tp]
        w.note(f"another tool {item.what}s {tp}: {result.__class__.__name__}; now {list(q.replicas)} adding "
               f"{list(q.adding)} removing {list(q.removing)}")

    def companion(self, item: Item) -> None:
        """What a ``configs`` item brings along, so that another client's change meets it
        (``engine.whatif.fuzz.plan.COMPANIONS``)."""
        w = self.world
        what = item.what[len("with-"):]
        d = self.engine.d.state
        if what in ("throttle", "none"):
            rate = item.args[0] if what == "throttle" else None
            self.hand(ChangeThrottle(rate, command_id=self.command_id()), f"throttle {rate} (with configs)")
        elif what == "pause":
            self.hand(Pause(command_id=self.command_id()), "pause (with configs)")
            at = min(self.plan.quiet_at, round(w.now + item.args[0], 2))
            i = next((k for k, x in enumerate(self.items) if x.at > at), len(self.items))
            self.items.insert(i, Item(at, "cmd", "resume", (), item.seed))
        elif what == "rollback":
            active = sorted((r for r in d.requests.values() if r.status == ACTIVE), key=lambda r: r.seq)
            if not active:
                w.note("no request to cancel with rollback")
                return
            r = item.rng().choice(active)
            self.hand(Cancel(r.request_id, None, rollback=True, command_id=self.command_id()),
                      f"cancel {r.request_id} (rollback, with configs)")
        elif what == "broker":
            b, duration = item.args
            self.broker(b, "down")
            self.ups.append((w.now + duration, b))
            self.ups.sort()
        elif what == "lost":
            window = Item(item.at, "lost", "answers", item.args, item.seed)
            w.windows.append((window, min(item.at + item.args[0], self.plan.quiet_at), window.rng()))
        else:
            raise ValueError(f"unknown companion {item.what!r}")

    # --- commands ------------------------------------------------------------------------------------

    def command_id(self) -> str:
        self.commands += 1
        return f"c{self.commands}"

    def request_id(self) -> str:
        self.requests += 1
        return f"r{self.requests}"

    def command(self, item: Item) -> None:
        rng = item.rng()
        for command, label in self.make(item, rng):
            self.hand(command, label)
            for dup, drng in self.world.active("dup", "commands"):
                if drng.random() < dup.args[1]:  # the same message read twice in a row (redelivered)
                    self.hand(command, f"{label} (delivered again)")

    def hand(self, command, label: str) -> None:
        """A command reaches the decider after every one before it (one partition of the decisions
        topic: an input the decider gives up for now, or dies on, is handed again before the next)."""
        self.pending.append((label, command))
        if isinstance(command, Submit):
            for p in command.partitions:
                self.pending_targets[p.tp] = p.replicas
        self.drain()

    def drain(self) -> None:
        w = self.world
        while self.pending and w.now >= self.pending_due:
            label, command = self.pending[0]
            w.note(f"command {label}")
            outcome = self.engine.deliver(lambda d: d.decide(command))
            if outcome != "ok":
                self.pending[0] = (f"{label.split(' (handed again')[0]} (handed again after {outcome})", command)
                self.pending_due = w.now + (0.5 if outcome == "crashed" else 1.0)
                self.after_step()
                return
            self.pending.pop(0)
            if isinstance(command, Submit):
                for p in command.partitions:
                    self.pending_targets.pop(p.tp, None)
            self.after_step()

    def make(self, item: Item, rng: random.Random) -> list[tuple[object, str]]:
        w = self.world
        s = w.sim.state
        d = self.engine.d.state
        what = item.what
        cid = self.command_id
        if what in ("submit", "supersede", "many"):
            tps = sorted(s.partitions.keys())
            if what == "supersede":
                pool = sorted(d.steps.keys()) or sorted(
                    tp for tp, e in d.partitions.items() if e.status not in TERMINAL)
                if pool:
                    tps = pool
            if what == "many":
                out = []
                for _ in range(rng.randint(5, 15)):
                    tp = rng.choice(tps)
                    rid = self.request_id()
                    out.append((Submit(rid, (self._target(rng, tp),), command_id=cid()), f"submit {rid} (one of many)"))
                return out
            chosen = sorted(rng.sample(tps, rng.randint(1, min(len(tps), 3 if what == "supersede" else 6))))
            rid = self.request_id()
            targets = tuple(self._target(rng, tp) for tp in chosen)
            text = ", ".join(f"{t.tp}->{list(t.replicas)}" for t in targets)
            steps = steps_drawn(item)
            return [(Submit(rid, targets, command_id=cid(), steps=steps), f"{what} {rid} ({steps}): {text}")]
        if what == "burst":  # one request per partition, most moving no data (``plan.burst``)
            tps = sorted(s.partitions.keys())
            out = []
            for _ in range(item.args[0]):
                tp = rng.choice(tps)
                p = s.partitions[tp]
                current = [b for b in p.replicas if b not in p.adding]
                x = rng.random()
                if x < 0.45:
                    target = PartitionTarget(tp.topic, tp.partition, tuple(current))  # where it is: nothing to do
                elif x < 0.9:
                    target = PartitionTarget(tp.topic, tp.partition, tuple(current[1:] + current[:1]))  # a leader
                else:
                    target = self._target(rng, tp)
                rid = self.request_id()
                out.append((Submit(rid, (target,), command_id=cid()), f"submit {rid} (burst)"))
            return out
        if what == "replace":
            dead = sorted(b for b, x in s.brokers.items() if not x.alive)
            gone = rng.choice(dead or sorted(s.brokers))
            targets = []
            for tp in sorted(s.partitions.keys()):
                p = s.partitions[tp]
                current = [b for b in p.replicas if b not in p.adding]
                if gone not in current:
                    continue
                spare = [b for b in sorted(s.brokers) if b not in current and s.alive(b)] or \
                    [b for b in sorted(s.brokers) if b not in current]
                if spare:
                    targets.append(PartitionTarget(tp.topic, tp.partition,
                                                   tuple(rng.choice(spare) if b == gone else b for b in current)))
            if not targets:
                return []
            rid = self.request_id()
            return [(Submit(rid, tuple(targets), command_id=cid()), f"replace broker {gone}: {rid} "
                     + ", ".join(f"{t.tp}->{list(t.replicas)}" for t in targets))]
        if what == "cancel":
            requests = sorted(d.requests.values(), key=lambda r: r.seq)
            if not requests:
                return []
            active = [r for r in requests if r.status == ACTIVE]
            r = rng.choice(active if active and rng.random() < 0.8 else requests)
            how = rng.choice(("plain", "plain", "rollback", "rollback-all", "some", "some-rollback"))
            parts = None
            members = sorted(r.members.keys())
            if how.startswith("some") and members:
                parts = tuple(sorted(rng.sample(members, rng.randint(1, len(members)))))
            c = Cancel(r.request_id, parts, rollback="rollback" in how, command_id=cid(),
                       include_completed=how == "rollback-all")
            return [(c, f"cancel {r.request_id} ({how}{': ' + ', '.join(map(str, parts)) if parts else ''})")]
        if what == "limits":
            limits = draw_limits(rng)
            if rng.random() < 0.3:  # Kafka's rate changes for every rated broker, kept rates included
                limits["throttle_margin_pct"] = rng.choice((0, 8, 25))
            return [(ChangeLimits(limits, command_id=cid()), f"limits {limits}")]
        if what == "throttle":
            rate = rng.choice((5_000_000, 20_000_000, 50_000_000, None))
            return [(ChangeThrottle(rate, command_id=cid()), f"throttle {rate}")]
        if what == "pause":
            return [(Pause(command_id=cid()), "pause")]
        if what == "resume":
            return [(Resume(command_id=cid()), "resume")]
        raise ValueError(f"unknown command {what!r}")

    def _target(self, rng: random.Random, tp: TopicPartition) -> PartitionTarget:
        s = self.world.sim.state
        p = s.partitions[tp]
        current = [b for b in p.replicas if b not in p.adding]
        others = [b for b in sorted(s.brokers) if b not in current]
        alive = [b for b in others if s.alive(b)]
        if alive and rng.random() < 0.9:  # an operator moves replicas to brokers that are up, mostly
            others = alive
        floor = max(1, s.min_insync(tp))
        x = rng.random()
        target = list(current)
        if x < 0.55 and others:
            for i in rng.sample(range(len(target)), rng.randint(1, min(len(target), len(others)))):
                target[i] = others.pop(rng.randrange(len(others)))
        elif x < 0.7 and len(target) > 1:
            rng.shuffle(target)
        elif x < 0.85 and others:
            target.insert(rng.randrange(len(target) + 1), rng.choice(others))
        elif len(target) - 1 >= floor:
            target.pop(rng.randrange(len(target)))
        elif others:
            target[rng.randrange(len(target))] = rng.choice(others)
        return PartitionTarget(tp.topic, tp.partition, tuple(target))

    # --- the end -------------------------------------------------------------------------------------

    def finish(self) -> Result:
        w = self.world
        d = self.engine.d
        s = d.state
        now = d.clock()
        unfinished = sorted(r.request_id for r in s.requests.values() if r.status == ACTIVE)
        rows = checks.stuck_report(w, s, now)
        if unfinished or self.pending:
            dead = {b for b, x in w.sim.state.brokers.items() if not x.alive}
            excused = [r for r in rows if r["waiting"] and "offline" in r["waiting"]
                       and dead & set(r["replicas"])]
            if len(excused) < len(rows) or self.pending:
                quiet = [str(r["tp"]) for r in rows if r not in excused]
                self.once("liveness", f"{len(unfinished)} requests unfinished {w.now - self.plan.quiet_at:.0f} s after the "
                          f"faults stopped (bound {self.bound:.0f} s): {', '.join(unfinished[:6])}; partitions "
                          f"{', '.join(quiet[:6])}", [r["tp"] for r in rows if r not in excused],
                          rows=[r for r in rows if r not in excused],
                          timers=checks.timers_ahead(s, now) + checks.decider_ahead(d, now) + self.ahead,
                          silent=checks.silent(s, rows, now), pending=len(self.pending))
        else:
            left = minus(w.sim.state.throttles.as_set(), w.foreign_on())  # another client's are its own
            dead = {b for b, x in w.sim.state.brokers.items() if not x.alive}
            kept = (s.throttles.leader_brokers | s.throttles.follower_brokers | s.throttle_failed.leader_brokers
                    | s.throttle_failed.follower_brokers)
            if not (left.leader or left.follower) and (left.leader_brokers | left.follower_brokers) <= dead & kept:
                left = left._replace(leader_brokers=frozenset(), follower_brokers=frozenset())  # removed once back
            timers = checks.timers_ahead(s, now) + checks.decider_ahead(d, now) + self.ahead
            if not left.is_empty():
                self.once("throttle_left", f"throttles left on the cluster after every request finished: "
                          f"{len(left.leader) + len(left.follower)} entries, rates on "
                          f"{sorted(left.leader_brokers | left.follower_brokers)}", timers=timers,
                          torn=w.torn_since(0.0))
            if s.steps or w.kreassign:
                self.once("settled", f"steps still in flight after every request finished: "
                          f"{sorted(map(str, s.steps.keys()))} (cluster: {sorted(map(str, w.kreassign))})",
                          timers=timers)
            differ = [str(tp) for tp, e in sorted(s.partitions.items())
                      if tp in s.observed and s.observed[tp].replicas != w.sim.state.partitions[tp].replicas
                      and not w.sim.state.partitions[tp].reassigning and tp not in w.touched]
            if differ and not s.steps:
                self.once("view", f"the engine's view differs from the cluster once settled: {', '.join(differ[:6])}",
                          torn=w.torn_since(0.0))
            elsewhere = [f"{tp} at {list(w.sim.state.partitions[tp].replicas)}, not {list(e.target)}"
                         for tp, e in sorted(s.partitions.items())
                         if e.status == COMPLETED and tp not in w.touched
                         and w.sim.state.partitions[tp].replicas != tuple(e.target)]
            if elsewhere:
                self.once("target", f"partitions completed but not at their target: {'; '.join(elsewhere[:4])}",
                          torn=w.torn_since(0.0))
        if not checks.fold_matches(self.log.records, s):
            self.once("fold", "the engine's state is not the fold of its log")
        w.violations.sort(key=lambda v: v.at)
        digest = hashlib.sha256()
        for e in self.log.records:
            digest.update(canonical((e.id, e.recorded_at, e.payload)))
        for line in w.trace:
            digest.update(line.encode())
        return Result(self.plan, w.violations, w.trace, digest.hexdigest()[:16], self.ticks, len(self.log.records),
                      self.engine.restarts, w.now, self.finished_at, self.bound)


def run(plan: Plan) -> Result:
    return Run(plan).run()


class Operator:
    """Another client that changes the throttle configs behind kreassign's back, as an operator's
    ``kafka-configs.sh`` does (``configs`` items): a broker's rate set to another value or deleted, a topic's
    throttled-replicas list deleted, rewritten or set to ``*``, or a rate set again every few seconds (an
    automation that keeps its own value). It mostly picks what kreassign has set (that is what it must
    defend); a broker's rate is a config of the broker itself: a dead broker is not changed."""

    def __init__(self, world: World, run: "Run"):
        self.w = world
        self.run = run

    def fire(self, item: Item, why: str) -> None:
        delay = item.args[1]
        label = f"{item.name()}{' ' + why if why else ''}"
        if delay:
            self.w.schedule(delay, "configs", lambda: self.change(item, label), label)
        else:
            self.change(item, label)

    def change(self, item: Item, label: str, rng: random.Random | None = None) -> None:
        w = self.w
        if w.quiet:
            return
        rng = rng or item.rng()
        s = w.sim.state
        t = s.throttles
        d = self.run.engine.d.state
        ours = d.throttles
        live = sorted(b for b in s.brokers if s.alive(b))
        what = item.what
        if what in ("rate-other", "rate-delete", "reassert"):
            if what == "rate-delete":
                rated = sorted({b for b in (*t.leader_rate.keys(), *t.follower_rate.keys()) if s.alive(b)})
                mine = [b for b in rated if b in ours.leader_brokers | ours.follower_brokers]
                pool = mine if mine and rng.random() < 0.8 else rated
            else:
                mine = sorted(b for b in ours.leader_brokers | ours.follower_brokers if s.alive(b))
                pool = mine if mine and rng.random() < 0.8 else live
            if not pool:
                w.note(f"{label}: no broker to change")
                return
            b = rng.choice(pool)
            sides = rng.choice((("leader",), ("follower",), ("leader", "follower")))
            if what == "rate-delete":
                value = None
            else:
                base = ours.rate or d.throttle_rate or 50 * MB
                value = int(rng.choice((1 * MB, base // 2, base * 3, 500 * MB, base + 1)))
            self.set_rates(b, sides, value, label)
            if what == "reassert":
                period, duration = item.args[2], item.args[3]
                end = min(w.now + duration, self.run.plan.quiet_at)
                self._again(b, sides, value, period, end, label)
            return
        topics = sorted({topic for lists in (t.leader, t.follower) for topic, es in lists.items() if es})
        mine = sorted({e.topic for e in ours.leader | ours.follower})
        pool = mine if mine and rng.random() < 0.8 else (topics or sorted(s.topics))
        topic = rng.choice(pool)
        sides = rng.choice((("leader",), ("follower",), ("leader", "follower")))
        for side in sides:
            before = getattr(w.sim.state.throttles, side).get(topic, frozenset())
            if what == "entries-delete":
                entries = frozenset()
            elif what == "entries-star":
                entries = frozenset({"*"})
            else:  # rewritten: some of what is there kept, some other replicas listed
                kept = [e for e in sorted(x for x in before if x != "*") if rng.random() < 0.5]
                count = s.topics[topic].partitions
                added = {(rng.randrange(count), rng.choice(sorted(s.brokers))) for _ in range(rng.randint(0, 3))}
                entries = frozenset(kept) | frozenset(added)
            w.sim.state = controller.set_throttled_replicas(w.sim.state, topic, side, entries)
            for e in [x for x in before if x != "*"]:
                if e not in entries:
                    w.foreign.pop((side, ThrottledReplica(topic, *e)), None)
            for e in entries:
                if e != "*" and e not in before:
                    w.foreign[(side, ThrottledReplica(topic, *e))] = None
            gone = sum(1 for e in getattr(ours, side) if e.topic == topic and (e.partition, e.broker) not in entries)
            w.note(f"another client ({label}) sets {topic}'s {side}.replication.throttled.replicas to "
                   f"{','.join(sorted(x if x == '*' else f'{x[0]}:{x[1]}' for x in entries)) or '(deleted)'}"
                   + (f" (kreassign's entries lost: {gone})" if gone else ""))
        self._touched()

    def set_rates(self, b: int, sides: tuple, value: int | None, label: str) -> None:
        w = self.w
        if not w.sim.state.alive(b):
            return
        ours = self.run.engine.d.state.throttles
        mine = [side for side in sides if b in getattr(ours, f"{side}_brokers")]
        for side in sides:
            w.sim.state = controller.set_throttle_rate(w.sim.state, b, side, value)
            if value is None:
                w.foreign.pop((f"{side} rate", b), None)
            else:
                w.foreign[(f"{side} rate", b)] = value
        w.note(f"another client ({label}) {'deletes' if value is None else f'sets to {value}'} "
               f"{'/'.join(sides)}.replication.throttled.rate of broker {b}"
               + (f" (kreassign's: {'/'.join(mine)})" if mine else ""))
        self._touched()

    def _again(self, b: int, sides: tuple, value: int, period: float, end: float, label: str) -> None:
        w = self.w
        if w.now + period >= end:
            return

        def again() -> None:
            if w.quiet:
                return
            self.set_rates(b, sides, value, label + " again")
            self._again(b, sides, value, period, end, label)

        w.schedule(period, "configs", again, label + " again")

    def _touched(self) -> None:
        w = self.w
        w.touched.setdefault("throttles", []).append(w.now)
        w.record()
