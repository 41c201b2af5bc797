"""The decider: the engine's one sequential loop around the pure core. No Faust, no asyncio.

``engine.runtime.worker`` runs it on the worker that owns the decisions partition, one
input at a time, in a thread (every call here blocks). For each input:

1. ``handle(state, input)`` (``engine.core.decide``) -> the new state and events;
2. append the events to the events topic and wait for delivery (**log first**:
   the state advances only once its events are on the log);
3. carry out their actions on the cluster, in log order (``engine.runtime.executor``);
4. feed the outcome of every action (``ActionOutcome``: ok, refused with
   Kafka's error, or unavailable) back through ``handle``, appending and
   executing what they cause, until nothing is left (a round's outcomes are
   all decided before one append). A failed action is an
   ``ActionFailed`` event and a WARNING log line with the reason; the core
   decides when it is tried again (``engine.core.retry``), and nothing else waits.

A tick (``tick()``) observes exactly ``watched(state)`` (never the whole
cluster; it names the ready partitions the tick would start, ``starting``),
feeds the observation (or, if the cluster cannot be observed,
``ObservationFailed``, which the core records once as ``ClusterUnreachable``),
then looks at the partitions that observation made startable (a step it saw
done freed their capacity), the adaptive throttle's proposal if any, then a
``Tick`` with the clock and what the looks showed of the partitions looked at, which retries what is
due and starts only steps of partitions it looked at: every step is charged to
its partition's leader as it is now. Every ``verify_interval`` seconds it also reads the
throttle configuration back from the cluster (``ThrottlesObserved``): what the
log says is in force and the cluster lacks (or holds at another rate) is set again, and said.
A difference the core recorded and has not judged yet (``ThrottlesDiffered``) is read again
``METADATA_SETTLE`` seconds after it was seen, not ``verify_interval``: a rate another tool
deleted or changed is restored within that and a tick.

``recover(executed)`` is how a decider starts (first start, restart after a
crash, failover): fold the events topic to its end, then bring the cluster in
line with the log before deciding anything new: ``executor.recovery_actions``
for the events after ``executed`` (the id of the last event whose actions,
and all before it, were carried out; the worker persists it in a table), i.e.
throttles removed in that stretch, then ``reassert(state)`` (of the throttles
in force, those applied in that stretch).

``Retry`` is raised when an input cannot be decided now (a submit whose
partitions cannot be observed, an event append that failed); the caller
recovers from the log and hands the same input again later. Re-deciding is
safe: ``decide`` is idempotent for re-delivered commands.
"""

from __future__ import annotations

import dataclasses
import gc

import logging
import time
from collections import Counter, deque
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator, Protocol

from engine.core import events as ev
from engine.core.adaptive import AdaptiveThrottle, Sample
from engine.views.attention import attention, rejection_history
from engine.cluster import Cluster
from engine.core.outcomes import Unavailable
from engine.core.commands import CatchUpObserved, Input, LooksPaced, ObservationFailed, Submit, ThrottlesObserved, Tick
from engine.core.budget import ANY, PACED_SHOWN, WINDOW, busiest, look_at
from engine.core.decide import (METADATA_SETTLE, handle, held_over_caps, measure_due, measured_after, next_looks,
                                next_measures, release_candidates, release_points, releasing, starting, watched)
from engine.log.envelope import EventEnvelope, new_id, now
from engine.runtime.executor import Executor, recovery_actions
from engine.core.partition import TopicPartition
from engine.views.progress import Progress, report
from engine.log.replay import DEDUPE_WINDOW, QUIET, RECENT, START, extend
from engine.log.snapshot import Fold
from engine.core.state import EMPTY, TERMINAL, State, apply
from engine.views.summary import bytes_remaining, describe, summarize, throttle_change

log = logging.getLogger("kreassign.decider")


IDLE_LOOK = 30.0
"""Seconds between looks at the brokers of an idle engine (nothing in flight, waiting or due): one
DescribeCluster, so ``status`` says whether the cluster answers and which brokers are alive even with
nothing to do (docs/engine.md, *What the engine's looks cost*)."""


EARLY = 1e-6
"""Seconds a look may be sent before the rule's answer (the times are ages on another clock: rounding)."""
LOOK_COSTS = 8
"""What a read will cost its busiest broker is estimated, for each kind of read (a look, a catch-up
measurement, a throttle read-back), as the most of the last this many of that kind."""
READS = ("look", "catch_up", "verify")
FIRST_COST = 2
"""A read's cost before one of its kind was counted: a look is ListPartitionReassignments (the controller) and
DescribeTopicPartitions (a broker the client library chooses); a catch-up, DescribeLogDirs of the leader and
the new replicas' brokers; a read-back, DescribeConfigs of the topics and of each throttled broker."""


class Retry(RuntimeError):
    """The input cannot be decided now; the message says why. Recover, then try it again."""


class Deposed(RuntimeError):
    """Another decider took over (its producer fenced this one's): this one must neither append
    nor act any more. The message says how it found out."""


class EventLog(Protocol):
    def append(self, events: Iterable[ev.Event]) -> list[EventEnvelope]: ...

    def resume(self) -> tuple[Fold | None, Iterator[tuple[int, EventEnvelope]], list[str]]:
        """Where a fold starts (the latest usable snapshot's, or None: offset 0), the events after
        it, and notes worth a log line (why a snapshot was not used)."""

    @property
    def next_offset(self) -> int:
        """The offset after the last event appended."""

    def guard(self) -> None:
        """Called before every action on the cluster: returns if this decider may act now, raises
        ``Deposed`` if another decider took over, ``Retry`` if this one cannot prove now that none did
        (its lease could not be renewed in time; fencing, ``docs/engine.md``)."""


class MemoryLog:
    """An events log in memory (tests, benchmarks): the same contract as the events topic, snapshots
    included (``write_snapshot``; ``resume`` starts from the latest one)."""

    def __init__(self) -> None:
        self.records: list[EventEnvelope] = []
        self.snapshots: list[Fold] = []

    def append(self, events: Iterable[ev.Event]) -> list[EventEnvelope]:
        t = now()
        envelopes = [EventEnvelope(new_id(), t, e) for e in events]
        self.records.extend(envelopes)
        return envelopes

    def read(self) -> Iterator[tuple[int, EventEnvelope]]:
        return iter(list(enumerate(self.records)))

    def resume(self) -> tuple[Fold | None, Iterator[tuple[int, EventEnvelope]], list[str]]:
        start = self.snapshots[-1] if self.snapshots else None
        skip = start.next_offset if start is not None else 0
        return start, iter(list(enumerate(self.records))[skip:]), []

    @property
    def next_offset(self) -> int:
        return len(self.records)

    def write_snapshot(self, fold: Fold) -> None:
        self.snapshots.append(fold)

    def guard(self) -> None:
        return None


class SteadyClock:
    """The clock a decider stamps the core's inputs with (epoch seconds): the host's wall clock at its first
    reading, then the monotonic clock's elapsed time. Within one process a step of the host's clock (NTP, an
    operator, a VM resumed) moves no timer: the grace periods (``METADATA_SETTLE``, ``REVERT_GRACE``,
    ``ELECTION_GRACE``) and the retries take the time they say. Across processes (a restart, a standby
    taking over) there is no common monotonic clock: each starts from its host's wall clock, and the core
    takes a difference from the log's clock as time that passed, or, more than 60 s back, as a clock set
    back (``ClockSetBack``) (docs/algorithm.md, *Timers and the clock*)."""

    def __init__(self, wall: Callable[[], float] | None = None, mono: Callable[[], float] | None = None):
        self._wall = wall or (lambda: time.time())  # (looked up at each call: a test may stand in for them)
        self._mono = mono or (lambda: time.monotonic())
        self._base: float | None = None

    def __call__(self) -> float:
        m = self._mono()
        if self._base is None:
            self._base = self._wall() - m
        return self._base + m

    def stepped(self) -> float:
        """Seconds the host's wall clock has been stepped since the first reading (+: forward); about 0."""
        return 0.0 if self._base is None else self._wall() - self()


STEADY = SteadyClock()
"""This process's clock for the core's inputs (every decider of the process reads it)."""

CLOCK_STEP_REPORTED = 1.0
"""A host clock step of at least this many seconds is a WARNING line (once per step)."""


class Decider:
    def __init__(self, log: EventLog, cluster: Cluster, *, clock: Callable[[], float] | None = None,
                 adaptive: AdaptiveThrottle | None = None, verify_interval: float = 10.0,
                 poll_interval: float = 0.0, floor: float = 0.0, budget: float | None = None):
        self.log = log
        self.cluster = cluster
        self.clock = clock if clock is not None else STEADY  # (a simulation passes its own)
        self.stepped = 0.0  # the host clock step last reported (``SteadyClock.stepped``)
        self.adaptive = adaptive
        self.verify_interval = verify_interval  # seconds between read-backs of the throttle configs
        self.verified_at: float | None = None
        self.poll_interval = poll_interval  # seconds between full observations (0: every tick is one)
        self.full_at: float | None = None
        self.floor = floor  # the least seconds between two looks at a partition (``decide.next_looks``)
        self.idle_look = IDLE_LOOK  # seconds between looks at the brokers alone while nothing is watched
        self.asked_at: float | None = None  # when the cluster was last asked to be observed
        self.plan: dict[TopicPartition, float] = {}  # when each watched partition is next worth a look
        self.measures: dict[TopicPartition, float] = {}  # when each copy's catch-up is next worth measuring alone
        self.next_at: float | None = None  # when the next tick has something to do (``due_in``)
        self.measured: dict[TopicPartition, tuple] = {}  # catch-up of each copy: (bytes, when, speed): measured_after
        self.budget = budget  # requests per second per broker the looks keep within (None: none; ``_pace``)
        # requests each recent read of a kind cost its busiest broker; those the current tick's reads sent
        self.look_costs: dict[str, deque[int]] = {kind: deque(maxlen=LOOK_COSTS) for kind in READS}
        self.held_measure: list[TopicPartition] = []  # a catch-up the budget held over to the next tick
        self.held_more = False  # a look at what a completion freed, held over likewise
        self.deferred = 0  # looks deferred by the budget since this decider started
        self.first_deferred: float | None = None  # when the read now held was first deferred (at most WINDOW)
        self.overshoots = 0  # reads sent after waiting WINDOW, the window still full (requests never held)
        self.urgent = 0  # catch-ups of copies near their release sent although the budget was used (``releasing``)
        self.held_until: float | None = None  # a look deferred until then (``due_in``)
        # the pacing shown now (deferrals less than PACED_SHOWN apart): its first deferral's time and line, its
        # last deferral's time and details (``deferral``: its busiest broker, that broker's requests in the
        # second before it, the read's cost, how long the look was deferred), the looks deferred, the longest a
        # read waited (s); None: none shown
        self.pacing: dict | None = None
        self.state: State = EMPTY
        self.progress = Progress()
        self.recent: deque[EventEnvelope] = deque(maxlen=RECENT)  # for the status page
        self.executor = Executor(cluster, self.clock, guard=getattr(log, "guard", None))
        self.executed: str | None = None  # last event whose actions (and all before) were carried out
        self.last_event: str | None = None
        self.recovered = False
        self.planned_at: dict[TopicPartition, float] = {}  # step in flight -> when it was planned
        self.sizes: dict[TopicPartition, int] = {}  # bytes of the partitions of unfinished requests (DescribeLogDirs)
        self.blocked: str | None = None  # why actions or observations are held back
        self.counts: Counter = Counter()  # events appended, by type name; "_inputs", "_ticks"
        self.failures: Counter = Counter()  # (action, code) -> ActionFailed events appended
        self.drifts: Counter = Counter()  # what a ThrottlesDrifted corrected -> pieces (drift_kinds)
        self._meta: dict[TopicPartition, tuple[int | None, int, float, tuple[int, ...]]] = {}
        # the rest of the fold beside the state, for snapshots (engine.log.snapshot.Fold)
        self.window: deque[str] = deque(maxlen=DEDUPE_WINDOW)
        self.planned_recorded: dict[TopicPartition, float] = {}
        self.events = self.duplicates = self.next_offset = 0
        self.last_recorded_at: datetime | None = None
        self.snapshot_used: dict | None = None  # what the last recovery started from
        self._candidates: tuple = (None, set())  # (state, the partitions its next tick would start)
        self._after_tick: State | None = None  # the state a tick left (candidates were looked at then)

    # --- recovery ------------------------------------------------------------------------

    def recover(self, executed: str | None) -> dict:
        """Fold the log (from the latest snapshot), then carry out what it asks of the cluster (see
        the module doc). A snapshot is written only by a decider that had carried out the actions of
        every event it folds, so when the marker ``executed`` is not after it, every
        ``ThrottlesRemoved`` after the snapshot is replayed (from offset 0: every one in the log)."""
        started = time.monotonic()
        resume = getattr(self.log, "resume", None)
        start, records, notes = resume() if resume is not None else (None, self.log.read(), [])
        for note in notes:
            log.warning("%s", note)
        after_marker: list = []
        every: list = []
        applied_after: list = []  # ThrottlesApplied after the marker: maybe not carried out
        applied_every: list = []
        found = executed is None

        def tap(records: Iterator[tuple[int, EventEnvelope]]) -> Iterator[tuple[int, EventEnvelope]]:
            nonlocal found
            for offset, envelope in records:
                kind = type(envelope.payload)
                if kind is ev.ThrottlesRemoved:
                    every.append(envelope.payload.throttles)
                    if found:
                        after_marker.append(envelope.payload.throttles)
                elif kind is ev.ThrottlesApplied:
                    applied_every.append(envelope.payload.throttles)
                    if found:
                        applied_after.append(envelope.payload.throttles)
                if envelope.id == executed:
                    found = True
                yield offset, envelope

        loaded = time.monotonic()
        fold = extend(start or START, tap(records))
        # The folded state lives as long as the decider and holds no reference cycles: out of the cyclic
        # garbage collector's reach, a million partitions cost no full collection on the first ticks.
        # No collection first: it would walk the whole state, the very cost this avoids. The fold makes
        # acyclic values (``gc_paused``), so little cyclic garbage is frozen with it.
        gc.freeze()
        removed = after_marker if found else every
        applied = applied_after if found else applied_every
        self.state = fold.state
        self.progress = fold.progress
        self.recent = deque(fold.recent, maxlen=RECENT)
        self.window = deque(fold.window, maxlen=DEDUPE_WINDOW)
        self.events, self.duplicates = fold.events, fold.duplicates
        self.next_offset, self.last_recorded_at = fold.next_offset, fold.last_recorded_at
        self.planned_recorded = dict(fold.planned)
        self.executor = Executor(self.cluster, self.clock, guard=getattr(self.log, "guard", None))
        self.last_event = self.executed = fold.last_event
        self.planned_at = dict(fold.planned)
        self._meta = {}
        self.counts = Counter()
        self.recovered = True
        self.snapshot_used = None if start is None else {"events": start.events, "next_offset": start.next_offset}
        todo, held = held_over_caps(fold.state, recovery_actions(removed, fold.state, applied), self.clock())
        folded = time.monotonic()
        self._refresh_sizes()
        self.process(*held, *self.executor.execute(todo))
        self.executed = self.last_event
        done = time.monotonic()
        return {"events": fold.events - (start.events if start else 0), "duplicates": fold.duplicates,
                "from_snapshot": self.snapshot_used, "snapshot_notes": notes, "actions": len(todo),
                "throttle_removals_replayed": len(removed), "seconds": done - started,
                "seconds_snapshot": loaded - started, "seconds_fold": folded - loaded, "seconds_actions": done - folded}

    def fold(self) -> Fold:
        """What folding the log up to the last event this decider appended gives (a snapshot's
        content). Only a decider that carried out every action of its log may write it."""
        s = self.state
        return Fold(s, self.progress, tuple(self.window), tuple(self.recent),
                    {tp: t for tp, t in self.planned_recorded.items() if tp in s.steps},
                    self.events, self.duplicates, self.next_offset, self.last_event, self.last_recorded_at)

    # --- inputs ----------------------------------------------------------------------------

    def decide(self, inp: Input) -> list[EventEnvelope]:
        """One input from the decisions topic (a command, or a rejection of one)."""
        self.counts["_inputs"] += 1
        if isinstance(inp, Submit):
            fresh = {p.tp for p in inp.partitions} - watched(self.state)
            if fresh:
                now = self.clock()  # the look is stamped like a tick's: the core sets aside a stale or torn one
                obs = self.cluster.observe(sorted(fresh))
                if isinstance(obs, Unavailable):
                    raise Retry(f"cannot observe the partitions of request {inp.request_id}: {obs}")
                sizes = self.cluster.sizes(sorted(fresh))  # recorded once, for progress and ETA
                if not isinstance(sizes, Unavailable) and sizes:
                    obs = dataclasses.replace(obs, partitions={
                        tp: p._replace(size_bytes=sizes.get(tp, p.size_bytes)) for tp, p in obs.partitions.items()
                    })
                return self.process(dataclasses.replace(obs, now=now) if obs.now is None else obs, inp)
        return self.process(inp)

    def tick(self) -> list[EventEnvelope]:
        """``_tick``, after recording the end of a pacing over since the last tick (``_say_paced``): a deferral
        of this tick starts a new one, recorded as such, instead of going on with the old one unsaid."""
        return self._say_paced(self.clock()) + self._tick()

    def _tick(self) -> list[EventEnvelope]:
        """One round: observe, decide, act, looking only at what is due (``decide.next_looks``, the
        core's answer to "what is worth a look, and when"): every ``poll_interval`` (the ceiling) every
        partition the core watches, in between the partitions due now (a copy at its predicted release
        point, a step whose end is near), never a partition sooner than ``floor`` after the last look.
        A tick with nothing due and nothing to decide sends nothing to the cluster; ``due_in`` tells
        the shell when the next tick is worth sending (docs/engine.md, *What the engine's looks cost*)."""
        now = self.clock()
        self._clock_stepped()
        # a clock set back (now before the last full look) makes a full look due: none waits for the old clock
        early = self.floor / 2 + 1e-9  # the shell's timer checks every floor: a look due within half of it is due
        full = self.full_at is None or not 0 <= now - self.full_at < self.poll_interval - early
        changed = self.state is not self._after_tick  # a command (or an outcome) since the last tick
        if full:
            partitions = watched(self.state, now, ready=False)
        else:
            partitions = {tp for tp, at in self.plan.items() if at <= now + early}
        # copies halfway to their predicted release: measured without a look (``decide.next_measures``)
        measuring = set() if full else {tp for tp, at in self.measures.items() if at <= now + early}
        if full or changed or self.held_more:  # (unchanged since the last tick: looked at then)
            partitions |= self._starting(now)
        measure = measure_due(self.state, now, self.measured, self.floor) if (full or partitions) else []
        if not full:
            measure = [tp for tp in measure if tp in self.measured or tp in partitions]
            measure += sorted(measuring - set(measure))
        verify = self._verify_due(now)
        # a retry falls due at a full look (every ceiling); with nothing watched only a throttle change can
        retry = full and not self.state.throttle_failed.is_empty()
        # With nothing watched, the brokers alone are looked at every ``idle_look`` (one DescribeCluster):
        # an idle engine still knows, and says, whether its cluster answers; while it does not, at every
        # full look (every ceiling) until it does.
        idle = full and not partitions and (self.asked_at is None or self.blocked is not None
                                            or not 0 <= now - self.asked_at < self.idle_look - early)
        held = [tp for tp in self.held_measure if tp in self.state.steps]  # a catch-up held over by the budget
        if not partitions and not measure and not verify and not changed and not retry and not idle and not held:
            if full:
                self.full_at = now
            out = self._say_paced(now)
            self._schedule(now)
            return out
        # The request budget (``_pace``): each of the tick's reads goes only when it fits the budget. Its first
        # read (a catch-up or a read-back held over by an earlier tick, else the look) waits with the whole
        # tick; a later one that does not fit is held over to the next tick, which sends it first (so none
        # waits for ever behind looks); the look waits behind a read held over.
        overdue = verify and self.verified_at is not None and now - self.verified_at - self.verify_interval >= WINDOW
        prior = "catch_up" if held else "verify" if overdue else None
        first = prior or ("look" if partitions or idle else "catch_up" if measure else "verify" if verify else None)
        # a catch-up of a copy near its release is never held: held up to a second, it could end throttled
        # (its ISR join stalls acks=all writes), the harm the budget is there to spare producers
        urgent = sorted(set(measure + held) & releasing(self.state, now, self.measured, WINDOW + self.floor)
                        ) if self.budget is not None and (measure or held) else []
        if first is not None and self._pace(now, self._cost(first)):
            out = self._say_paced(now) + self._hold(now, list(dict.fromkeys(self.held_measure + urgent)), urgent)
            self._wake_for_releases(now)
            return out
        self.held_until = None
        more_held = self.held_more  # (held again if the look after a held read waits)
        self.held_measure, self.held_more = [], False
        self.counts["_ticks"] += 1
        out: list[EventEnvelope] = []
        if prior is not None:
            if prior == "catch_up":
                out += self.measure_catch_up(now, held)
                measure = [tp for tp in measure if tp not in held]
            else:
                out += self.verify_throttles()
                verify = False
            later = self.clock()  # (after the held read's round trip: the deferral's time, and the pacing's)
            if (partitions or idle) and self._pace(later, self._cost("look")):
                self.held_more = more_held  # what a completion freed is still to be looked at, first
                out += self._say_paced(later) + self._hold(now, measure, urgent)
                self._wake_for_releases(now)
                return out
        looks: dict = {}
        if partitions or full:
            obs = None
            if partitions or idle:
                self.asked_at = now
                obs = self._read("look", self.cluster.observe, sorted(partitions))
            if isinstance(obs, Unavailable):
                self.blocked = f"cannot observe the cluster: {obs}"
                log.warning("cannot observe the cluster: %s", obs)
                out = self.process(ObservationFailed(str(obs), now))
                out += self._say_paced(now)  # a pacing ended meanwhile is said so even while the cluster is down
                # tried again at the next full look, a ceiling from now, not at every tick
                self.full_at, self._after_tick, self.plan, self.measures, self.next_at = now, self.state, {}, {}, now + self.poll_interval
                return out
            self.blocked = None
            if full:
                self.full_at = now
            before = self.state
            if obs is not None:
                looks.update(obs.partitions)
                out += self.process(dataclasses.replace(obs, now=now))
            # What this look freed (a step done) may start partitions not looked at yet: they are looked at
            # before the tick, which starts only what was looked at (a step is charged to its partition's
            # leader as it is now, never as its queued plan remembers: docs/algorithm.md, section 2).
            more = self._starting(now) - partitions if self.state is not before else set()
            if more and not self._fits(self.clock(), self._cost("look")):
                self.held_more, more = True, set()  # looked at by the next tick, once the budget lets it
            if more:
                again = self._read("look", self.cluster.observe, sorted(more))
                if not isinstance(again, Unavailable):
                    looks.update(again.partitions)
                    out += self.process(dataclasses.replace(again, now=now))
                    partitions |= more
        if measure and not self._fits(self.clock(), self._cost("catch_up")):
            out += self._hold(now, measure, urgent)
        else:
            out += self.measure_catch_up(now, measure)
        if self.adaptive is not None:
            self.adaptive, change = self.adaptive.propose(self.state.throttle_rate)
            if change is not None:
                out += self.process(change)
        self._size_for_release(partitions, looks)
        # what the tick's looks showed of the partitions it looked at: the core starts only those whose
        # record they confirm (a look it set aside starts nothing: docs/algorithm.md, section 2)
        out += self.process(Tick(now, {tp: looks[tp] for tp in partitions if tp in looks}))
        if verify and self._fits(self.clock(), self._cost("verify")):  # else due still: first at a later tick
            out += self.verify_throttles()
        out += self._say_paced(now)
        self._after_tick = self.state
        self._schedule(now)
        return out

    # --- the request budget (engine.core.budget; docs/engine.md, *The request budget*) -------------

    @staticmethod
    def _shown(pacing: dict | None, now: float) -> bool:
        """``pacing`` (``self.pacing`` read once: /status reads it from another thread while the decider may
        end it) is shown: a look was deferred within ``PACED_SHOWN`` s (a clock set back ends it)."""
        return pacing is not None and 0 <= now - pacing["last"] < PACED_SHOWN

    def _say_paced(self, now: float) -> list[EventEnvelope]:
        """Record when the looks start to wait for the request budget (the first deferral's line, which names
        the broker: within the tick that deferred) and when none has waited for ``PACED_SHOWN`` s
        (``LooksPaced``, with the looks the pacing deferred, the longest wait and how long it lasted), or
        sooner, at the first tick after its last deferral with nothing in flight, waiting or ready (a move
        done: no step is left to be seen late, and a warning that it might would mislead): once
        per pacing, so a pacing that goes on, recurs within ``PACED_SHOWN`` s or moves from broker to broker
        adds nothing to the log. Recording it is no news to decide on: a tick that had nothing else to look
        at still has nothing."""
        ended = None
        s = self.state
        if self.pacing is not None and (not self._shown(self.pacing, now) or (
                now > self.pacing["last"] and not (s.steps or s.waiting or s.elections or s.ready.size))):
            ended, self.pacing = self.pacing, None  # (with nothing left to look at, as soon as that is so)
        recorded = self.state.looks_paced
        if (self.pacing is not None) == (recorded is not None):
            return []
        unchanged = self.state is self._after_tick
        if self.pacing is not None:
            inp = LooksPaced(self.pacing["line"], now)
        elif ended is not None:
            inp = LooksPaced(None, now, ended["deferred"], round(ended["longest_wait"], 3),
                             round(ended["last"] - ended["since"], 3))
        else:  # recorded by a decider before this one (a restart): this one has deferred nothing
            inp = LooksPaced(None, now)
        out = self.process(inp)  # (a WARNING line says each, ``_WARN``)
        if unchanged:
            self._after_tick = self.state
        return out

    def _wake_for_releases(self, now: float) -> None:
        """A tick the budget deferred (to ``held_until``) still wakes at the predicted release point of each
        throttled copy that comes first, no sooner than ``floor`` from now: there its measure is due, and never
        held (``releasing``), so a copy ahead of its prediction is released before it joins the ISR. Else the
        deferral's end passed over it: a copy the quota's first-second burst brought near its end, or one an
        urgent measure found just short of its release point, joined still throttled."""
        until = self.held_until
        if until is None:
            return
        early = self.floor / 2 + 1e-9
        points = {tp: max(now + self.floor, at) for tp, at in release_points(self.state, now, self.measured).items()
                  if at < until - early}
        if not points:
            return
        self.measures = {**self.measures, **{tp: min(at, self.measures.get(tp, at)) for tp, at in points.items()}}
        self.held_until = self.next_at = min(until, min(points.values()))

    def _hold(self, now: float, measure: list, urgent: list) -> list[EventEnvelope]:
        """The budget holds ``measure`` over to the next tick, but for the ``urgent`` copies (near their
        release): those are measured now."""
        self.held_measure = [tp for tp in measure if tp not in urgent]
        soon = [tp for tp in measure if tp in urgent]
        if not soon:
            return []
        self.urgent += 1
        return self.measure_catch_up(now, soon)

    def requests_sent(self):
        """What the cluster adapter counted (``RequestsSent``), or None where it counts nothing."""
        found = getattr(self.cluster, "requests_sent", None)
        return found() if found is not None else None

    def _recent(self, now: float) -> dict | None:
        """The requests of the last second by broker, as times on this decider's clock (None: not counted)."""
        sent = self.requests_sent()
        if sent is None:
            return None
        return {b: [now - age for age in ages] for b, ages in sent.ages.items()}

    def _cost(self, kind: str) -> int:
        """What a read of ``kind`` is estimated to cost the busiest broker: the most of the last
        ``LOOK_COSTS`` of that kind; before the first, ``FIRST_COST``."""
        return max(self.look_costs[kind], default=FIRST_COST)

    def _fits(self, now: float, cost: int) -> bool:
        recent = None if self.budget is None else self._recent(now)
        return recent is None or look_at(recent, self.budget, now, cost) <= now + EARLY

    def _pace(self, now: float, cost: int) -> bool:
        """Whether the reads this tick would send (``cost`` requests at the busiest broker, estimated) wait
        for the request budget: with the busiest broker's requests of the last second they would pass it.
        Then the tick is deferred to when the window lets them go (``look_at``: within ``WINDOW``), said in
        the log, ``status`` and ``/metrics``. Actions are never deferred: ticks' reads are not actions, and a
        tick deferred decides nothing (its retries and starts come with its look)."""
        if self.budget is None:
            return False
        recent = self._recent(now)
        if recent is None:
            return False
        at = look_at(recent, self.budget, now, cost)
        if at <= now + EARLY:
            self.first_deferred = None
            return False
        broker, used = busiest(recent, now)
        if self.first_deferred is not None and now - self.first_deferred >= WINDOW - EARLY:
            # requests never held (actions, probes, urgent catch-ups) kept the window full for a whole window:
            # the read goes now, over the budget, rather than wait for ever
            self.first_deferred = None
            self.overshoots += 1
            log.warning("a read waited %g s for the request budget (%g/s) and goes over it: %d requests in the last "
                        "second at the busiest broker, from requests that are never held", WINDOW, self.budget, used)
            return False
        if self.first_deferred is None:
            self.first_deferred = now
        # a read waits a window at most: a tick woken meanwhile (``_wake_for_releases``) whose urgent measures
        # filled the window again would otherwise push it further
        at = min(at, self.first_deferred + WINDOW)
        self.deferred += 1
        self.held_until = self.next_at = at
        where = "every broker (requests whose broker the client library chooses)" if broker is ANY else f"broker {broker}"
        line = f"looks paced by the request budget: {where} at {self.budget:g}/s"
        p = self.pacing  # (read once; replaced, never changed: /status reads it from another thread)
        p = p if self._shown(p, now) else None
        self.pacing = {"since": now if p is None else p["since"], "line": line if p is None else p["line"],
                       "last": now, "deferral": {"broker": broker, "requests_in_the_second_before": used,
                                                 "read_cost": cost, "look_deferred_seconds": round(at - now, 3)},
                       "deferred": 1 + (0 if p is None else p["deferred"]),
                       "longest_wait": max(at - self.first_deferred, 0.0 if p is None else p["longest_wait"])}
        log.warning("looks paced by the request budget: %s at %g/s (%d requests in the last second, the look "
                    "costs %d): the next look in %.2f s", where, self.budget, used, cost, at - now)
        return True

    def _read(self, kind: str, call, *args):
        """``call(*args)``, one of a tick's reads of ``kind`` (a look, a catch-up measurement, a throttle
        read-back): the requests it sent are kept as the cost of a read of that kind (``_cost``)."""
        sent = self.requests_sent()
        if sent is None:
            return call(*args)
        before = sent.totals
        probed = sent.probes
        try:
            return call(*args)
        finally:
            later = self.requests_sent()
            after = {b: n - (later.probes.get(b, 0) - probed.get(b, 0)) for b, n in later.totals.items()}
            delta = {b: n - before.get(b, 0) for b, n in after.items() if n != before.get(b, 0)}
            if delta:  # what it charged its busiest broker (not the broker watch's probes meanwhile)
                anywhere = delta.get(ANY, 0)
                self.look_costs[kind].append(max([n + anywhere for b, n in delta.items() if b is not ANY] or [anywhere]))

    def budget_status(self, now: float) -> dict:
        """The request budget for ``status``: the budget, whether the cluster counts requests, the busiest
        broker's requests of the last second, the looks deferred, and, while they are paced (a look deferred
        within ``PACED_SHOWN`` s), the pacing: its line (its first deferral's, which names that deferral's
        busiest broker: the line the log recorded), its figures, and its last deferral's details apart, under
        ``last_deferral``, each as of that deferral (how long ago it came, its busiest broker, that broker's
        requests in the second before it, the read's cost and how long the look was deferred), never mixed
        with the first deferral's broker or read as figures of now."""
        recent = self._recent(now)
        broker, used = busiest(recent, now) if recent else (None, 0)
        pacing = self.pacing  # (read once: the decider's thread may end it meanwhile)
        pacing = pacing if self._shown(pacing, now) else None
        paced = None if pacing is None else {
            "line": pacing["line"], "deferred": pacing["deferred"],
            "longest_wait_seconds": round(pacing["longest_wait"], 3), "since_seconds": round(now - pacing["since"], 1),
            "ends_in_seconds": round(pacing["last"] + PACED_SHOWN - now, 1),
            "last_deferral": {"seconds_ago": round(now - pacing["last"], 1), **pacing["deferral"]}}
        return {"budget": self.budget, "counted": recent is not None, "busiest_broker": broker,
                "requests_last_second": used, "deferred_looks": self.deferred, "urgent_catch_ups": self.urgent,
                "reads_over_budget": self.overshoots, "paced_shown_seconds": PACED_SHOWN,
                "read_costs": {kind: self._cost(kind) for kind in READS}, "paced": paced}

    def _clock_stepped(self) -> None:
        """Say once when the host's clock was stepped: the engine keeps time by the monotonic clock, so the
        times it records are off the wall clock by that much until it restarts."""
        stepped = getattr(self.clock, "stepped", None)
        if stepped is None:
            return
        step = stepped()
        if abs(step - self.stepped) >= CLOCK_STEP_REPORTED:
            log.warning("the host's clock was stepped by %+.0f s: the engine keeps time by the monotonic clock, so "
                        "no grace period or retry is cut short; the times it records are %+.0f s off the wall "
                        "clock until it restarts", step - self.stepped, -step)
            self.stepped = step

    def _verify_due(self, now: float) -> bool:
        """A read-back of the throttle configuration is due: ``verify_interval`` since the last, or
        ``METADATA_SETTLE`` since a difference not judged yet was seen (``_confirm_at``), and something
        to read (throttles in force or steps in flight)."""
        s = self.state
        if s.throttles.is_empty() and not s.steps:
            return False
        confirm = self._confirm_at()  # judged by the core once ``now - at >= METADATA_SETTLE``
        if confirm is not None and self.verified_at is not None and self.verified_at < confirm - EARLY <= now:
            return True
        return self.verified_at is None or not 0 <= now - self.verified_at < self.verify_interval

    def _confirm_at(self) -> float | None:
        """When the read-back that judges the difference the last one showed is due (the core confirms a
        difference only on a read-back ``METADATA_SETTLE`` after it was first seen): waiting the whole
        ``verify_interval`` would leave a rate another tool deleted or changed in place 10 to 20 s.
        ``None``: no difference waits (or it was seen without a clock)."""
        differed = self.state.throttles_differed
        if differed is None or differed.at is None:
            return None
        return differed.at + METADATA_SETTLE + EARLY  # never before the core would judge it

    def _schedule(self, now: float) -> None:
        """When the next tick has something to do (``due_in``): the earliest look the core asks for, a
        full look every ``poll_interval`` while anything is watched, a timer (a retry) at the ceiling's
        pace, the next throttle read-back; never, when nothing is in flight, waiting or due."""
        s = self.state
        # a measurement from before the step in flight started (an earlier step of the partition) says nothing
        self.measured = {tp: m for tp, m in self.measured.items()
                         if tp in s.steps and s.steps[tp].started_at is not None and m[1] >= s.steps[tp].started_at}
        self.plan = next_looks(s, now, self.measured, self.floor, self.poll_interval)
        self.measures = next_measures(s, now, self.measured, self.floor, self.poll_interval)
        times = list(self.plan.values()) + list(self.measures.values())
        if s.steps or s.waiting or s.elections or s.ready.size or not s.throttle_failed.is_empty():
            times.append((self.full_at if self.full_at is not None else now) + self.poll_interval)
        if not s.throttles.is_empty() or s.steps:
            times.append((self.verified_at if self.verified_at is not None else now) + self.verify_interval)
            confirm = self._confirm_at()
            if confirm is not None and (self.verified_at is None or self.verified_at < confirm - EARLY):
                times.append(confirm)
        asked = self.asked_at if self.asked_at is not None else now
        times.append(asked + (self.poll_interval if self.blocked is not None else self.idle_look))
        if s.looks_paced is not None and self.pacing is not None:  # to record that the pacing has ended
            times.append(self.pacing["last"] + PACED_SHOWN)
        if self.held_measure or self.held_more:  # a read held over by the budget: when it fits
            recent = self._recent(now) if self.budget is not None else None
            cost = self._cost("catch_up" if self.held_measure else "look")
            times.append(now if recent is None else look_at(recent, self.budget, now, cost))
        self.next_at = min(times)

    def due_in(self) -> float | None:
        """Seconds until the next tick has something to do (0: now; None: nothing until an input comes).
        Read by the worker's timer from another thread: it reads values the decider replaces, never changes."""
        if self.state is not self._after_tick:  # a command (or a recovery) changed the state: the next tick
            held = self.held_until               # decides on it, once the budget lets its look go
            return 0.0 if held is None else max(0.0, held - self.clock())
        at = self.next_at
        return None if at is None else at - self.clock()

    def _starting(self, now: float) -> set[TopicPartition]:
        """``decide.starting`` of the current state: computed once per state (a scheduling pass; an
        unchanged state, a tick that saw nothing new, has the same answer)."""
        if self._candidates[0] is not self.state:
            self._candidates = (self.state, set(starting(self.state, now)))
        return self._candidates[1]

    def _size_for_release(self, partitions, looks: dict) -> None:
        """The partitions this tick may start released by the size the log holds (``decide.release_candidates``)
        are sized with its look: the leader's log (DescribeLogDirs, one request per leader), put in what the
        look showed (``looks``), from which the core judges them (``decide.released_at_start``). The log's
        size may be hours old; a look without a size starts its copy throttled. A read the request budget
        has no room for is not sent: they start throttled."""
        ready = [tp for tp in sorted(partitions) if tp in looks and looks[tp].size_bytes is None
                 and looks[tp].leader is not None]
        candidates = release_candidates(self.state, ready)
        if not candidates or not self._fits(self.clock(), self._cost("catch_up")):
            return
        sizes = self._read("catch_up", self.cluster.catch_up, {tp: (looks[tp].leader, ()) for tp in candidates})
        if isinstance(sizes, Unavailable):
            log.warning("cannot size the partitions that may start released: %s", sizes)
            return
        for tp, n in sizes.items():
            if tp in looks:
                looks[tp] = looks[tp]._replace(size_bytes=n)

    def measure_catch_up(self, now: float, tps) -> list[EventEnvelope]:
        """How much the copies ``tps`` still miss, for the core's release rule."""
        s = self.state
        tps = [tp for tp in tps if tp in s.steps] if s.throttle_rate is not None else []
        if not tps:
            return []
        steps = {tp: (s.observed[tp].leader if tp in s.observed else None, s.steps[tp].step.nr) for tp in tps}
        remaining = self._read("catch_up", self.cluster.catch_up, steps)
        if isinstance(remaining, Unavailable):
            log.warning("cannot measure the catch-up of the copies in flight: %s", remaining)
            return []
        self.measured = measured_after(s, self.measured, remaining, now)
        return self.process(CatchUpObserved(remaining, now))

    def verify_throttles(self) -> list[EventEnvelope]:
        """Read the throttle configuration back and let the core compare it with the log. The read-back is
        stamped with the clock as it is sent, not with the tick's start: the core judges a difference
        by a read-back ``METADATA_SETTLE`` after the one that first showed it, and a tick's calls before it
        may take seconds (seed 9475 of the fault simulator: a standby's first tick, whose answers were slow,
        6 s, applied a step's throttles, read them back missing on a lagging broker and stamped that 6 s early;
        the next tick's read-back, 0 s later, confirmed the lag as a drift and set again throttles nobody
        had touched). Sent after every change the tick made was answered, a read-back so stamped is judged
        only once each of those changes has had ``METADATA_SETTLE`` to reach every broker."""
        s = self.state
        force = s.throttles
        topics = {e.topic for e in force.leader | force.follower} | {tp.topic for tp in s.steps.keys()}
        # a broker that does not answer is left out (its rates are read back once it answers again):
        # asked, it would hold the read-back up; left out of what was read, it would read as missing
        brokers = (force.leader_brokers | force.follower_brokers) - set(self.unresponsive())
        taken = self.clock()
        self.verified_at = taken
        if not topics and not brokers:
            return []
        read = self._read("verify", self.cluster.throttles, sorted(topics), sorted(brokers))
        if isinstance(read, Unavailable):
            log.warning("cannot read the throttle configuration back: %s", read)
            return []
        return self.process(ThrottlesObserved(read, frozenset(topics), frozenset(brokers), taken))

    def process(self, *inputs: Input) -> list[EventEnvelope]:
        """Decide, log, execute, and feed back the outcomes, until nothing is left. A round's inputs (those
        given; then the outcomes of one round of actions) are all decided, then their events appended at
        once: a tick that starts n steps pays one append for their n answers, not n (each append is a
        transaction: three round trips), so the next look comes that much sooner."""
        appended: list[EventEnvelope] = []
        todo = list(inputs)
        while todo:
            state, events = self.state, []
            for inp in todo:
                state, more = handle(state, inp)
                events.extend(more)
            todo = []
            if not events:
                continue
            try:
                envelopes = self.log.append(events)
            except Deposed:
                raise
            except Exception as e:  # noqa: BLE001 - the log is unreachable: nothing may happen before it is
                raise Retry(f"cannot append to the events log: {e}") from None
            before = self.state
            for envelope in envelopes:  # bytes and time beside the state (engine.views.progress)
                self.progress = self.progress.after(before, envelope.payload, envelope.recorded_at)
                before = apply(before, envelope.payload)
                self.window.append(envelope.id)
                if type(envelope.payload) is ev.StepPlanned:
                    self.planned_recorded[envelope.payload.tp] = envelope.recorded_at.timestamp()
            self.events += len(envelopes)
            self.next_offset = getattr(self.log, "next_offset", self.next_offset + len(envelopes))
            self.last_recorded_at = envelopes[-1].recorded_at
            self.state = state
            self.recent.extend(e for e in envelopes if type(e.payload) not in QUIET)
            appended.extend(envelopes)
            self.last_event = envelopes[-1].id
            self._track(events)
            todo = list(self.executor.execute_events(events))
        self.executed = self.last_event
        return appended

    # --- bookkeeping for status, metrics and the adaptive throttle ------------------------------

    def _track(self, events: list[ev.Event]) -> None:
        t = self.clock()
        s = self.state
        accepted: list[str] = []
        for e in events:
            kind = type(e)
            self.counts[kind.__name__] += 1
            if kind in _WARN:
                log.warning("%s", describe(e))
            if kind is ev.ActionFailed:
                self.failures[(e.action, e.code)] += 1
            elif kind is ev.ThrottlesDrifted:
                self.drifts.update(drift_kinds(e))
            if kind is ev.StepPlanned:
                self.planned_at[e.tp] = t
                if e.step.nr:
                    self._meta[e.tp] = (s.throttle_rate, self._share(e.step.nr), t, e.step.nr)
            elif kind in (ev.StepCompleted, ev.StepAborted, ev.StepFailed):
                self.planned_at.pop(e.tp, None)
                self.planned_recorded.pop(e.tp, None)
                meta = self._meta.pop(e.tp, None)
                if kind is ev.StepCompleted and meta is not None:
                    self._sample(e.tp, meta, t)
            elif kind is ev.RequestAccepted:
                accepted.append(e.request_id)
            elif kind is ev.RequestCompleted:  # its partitions' sizes are no longer needed
                r = s.request(e.request_id)
                for tp in r.members.keys() if r is not None else ():
                    entry = s.partitions.get(tp)
                    if entry is None or entry.status in TERMINAL:
                        self.sizes.pop(tp, None)
        if accepted:  # the new requests' partitions only, never a look at every partition
            self._refresh_sizes([tp for rid in accepted for tp in getattr(s.request(rid), "members", {}).keys()])

    def _share(self, nr: tuple[int, ...]) -> int:
        """Copies into the busiest broker of ``nr`` now (this step included)."""
        into: Counter = Counter()
        for f in self.state.steps.values():
            into.update(f.step.nr)
        return max((into[b] for b in nr), default=1) or 1

    def _sample(self, tp: TopicPartition, meta, t: float) -> None:
        rate, share, t0, _nr = meta
        size = self.sizes.get(tp)
        if self.adaptive is None or rate is None or size is None:
            return
        self.adaptive = self.adaptive.record(Sample(rate, share, float(size), t - t0), self.state.throttle_rate)

    def _refresh_sizes(self, tps: list[TopicPartition] | None = None) -> None:
        """Sizes of the partitions of unfinished requests, for progress and ETA: the size the log
        recorded for each (a request's partitions are sized when it is submitted), and DescribeLogDirs
        only on those it does not know, never on every partition at each recovery (at 100,000
        partitions that call held a new decider for seconds) nor on the whole cluster (which would
        need Describe on every topic). ``tps``: only these (a request just accepted); the rest stay."""
        s = self.state
        known: dict[TopicPartition, int] = {} if tps is None else dict(self.sizes)  # finished ones dropped
        unknown = []
        entries = s.partitions.items() if tps is None else ((tp, s.partitions[tp]) for tp in tps if tp in s.partitions)
        for tp, e in entries:
            if e.status in TERMINAL:
                continue
            obs = s.observed.get(tp)
            if obs is not None and obs.size_bytes is not None:
                known[tp] = obs.size_bytes  # the latest measure the log holds, newer than one asked before
            elif tp in self.sizes:
                known[tp] = self.sizes[tp]
            else:
                unknown.append(tp)
        if unknown:
            sizes = self.cluster.sizes(sorted(unknown))
            if isinstance(sizes, Unavailable):
                log.warning("no partition sizes (progress and ETA in bytes unknown): %s", sizes)
            else:
                known.update(sizes)
        self.sizes = known

    # --- what an operator sees ------------------------------------------------------------------

    def status(self, limit: int = 1000) -> dict:
        """The ``/status`` document of an active decider (``limit`` caps the per-partition lists)."""
        s = self.state
        t = self.clock()
        doc = summarize(s)
        doc["in_flight"] = [
            {"partition": str(tp), "request": f.request_id, "step": f.number, "cr": list(f.step.cr),
             "tr": list(f.step.tr), "started": f.started, "aborting": f.aborting,
             "age_seconds": round(t - self.planned_at[tp], 3) if tp in self.planned_at else None,
             "attempt": f.attempt, "error": f.error, "retry_in_seconds": (
                 max(0.0, round(f.retry_at - t, 1)) if f.retry and f.retry_at is not None else None)}
            for tp, f in sorted(s.steps.items())[:limit]
        ]
        doc["waiting_partitions"] = [
            {"partition": str(tp), "request": s.partitions[tp].request_id, "reason": reason}
            for tp, reason in sorted(s.waiting.items())[:limit]
        ]
        doc["progress"] = report(s, self.progress, datetime.now(timezone.utc))["requests"]
        doc["recent_events"] = [_event_line(e) for e in reversed(tuple(self.recent))]  # the decider may append meanwhile
        silent = self.unresponsive()
        doc["brokers_unresponsive"] = [{"broker": b, **info} for b, info in sorted(silent.items())]
        doc["cluster_calls_waiting"] = calls = self.calls_waiting()
        silent = {b: {**info, "calls_waiting": calls} for b, info in silent.items()}
        doc["attention"] = attention(s, self.progress.rejected_at, blocked=self.blocked, now=t, brokers=silent,
                                     ended_at=self.progress.requests)
        doc["rejection_history"] = rejection_history(s, self.progress.rejected_at, t)
        doc["partitions_remaining"] = self.remaining()
        doc["bytes_remaining"] = bytes_remaining(s, self.sizes) if self.sizes else None
        doc["blocked"] = self.blocked
        doc["request_budget"] = budget = self.budget_status(t)
        _with_pacing(doc["attention"], budget["paced"])
        doc["adaptive_throttle"] = (
            None if self.adaptive is None else {"min": self.adaptive.low, "max": self.adaptive.high}
        )
        return doc

    def remaining(self) -> int:
        return sum(r.open for r in self.state.requests.values())

    def unresponsive(self) -> dict[int, dict]:
        """The brokers that do not answer, with what waits on each (the cluster adapter's broker watch)."""
        found = getattr(self.cluster, "unresponsive", None)
        return found() if found is not None else {}

    def calls_waiting(self) -> list[dict]:
        """Cluster calls the decider stopped waiting for that have not returned (``engine.runtime.calls``)."""
        found = getattr(self.cluster, "waiting", None)
        return found() if found is not None else []


def drift_kinds(e: ev.ThrottlesDrifted) -> Counter:
    """The pieces a throttle drift corrected, by kind: ``entry_missing``, ``entry_left_over``,
    ``rate_missing`` (a broker rate not set) and ``rate_changed`` (set to another value than in force)."""
    reads = {r.broker: r for r in e.missing.rates}
    out: Counter = Counter(entry_missing=len(e.missing.leader) + len(e.missing.follower),
                           entry_left_over=len(e.unexpected.leader) + len(e.unexpected.follower))
    for side, brokers in (("leader", e.missing.leader_brokers), ("follower", e.missing.follower_brokers)):
        for b in brokers:
            read = getattr(reads[b], side) if b in reads else None
            out["rate_missing" if read is None else "rate_changed"] += 1
    return +out


_WARN = frozenset({ev.ActionFailed, ev.StepFailed, ev.ClusterUnreachable, ev.ThrottlesDrifted, ev.CancelSkipped,
                   ev.TopicAccessDenied, ev.ClockSetBack, ev.TopicMissing, ev.LooksPaced})
"""Events that report a failure or a correction: each is also a WARNING line of the engine's log."""


def _event_line(envelope: EventEnvelope) -> dict:
    """One line of the status page's recent events."""
    e = envelope.payload
    tp = getattr(e, "tp", None)
    detail = getattr(e, "reason", None) or (", ".join(e.reasons) if hasattr(e, "reasons") else None)
    if isinstance(e, ev.StepPlanned):
        detail = f"step {e.number}: {list(e.step.cr)} -> {list(e.step.tr)}"
    elif isinstance(e, ev.ActionAnswered):
        detail = f"{e.action.replace('_', ' ')} of step {e.number} answered: {e.note or 'ok'}"
    elif isinstance(e, ev.StepAborted):
        detail = f"step {e.number} aborted: the partition is at {list(e.replicas)}"
    elif isinstance(e, (ev.ClockSetBack, ev.ThrottlesDrifted, ev.LooksPaced)):
        detail = describe(e)
    elif isinstance(e, ev.ThrottleRateChanged):
        detail = throttle_change(e)
    return {"at": envelope.recorded_at.isoformat(), "event": type(e).__name__,
            "request": getattr(e, "request_id", None), "partition": str(tp) if tp is not None else None,
            "detail": detail}



def _with_pacing(entries: list[dict], paced: dict | None) -> None:
    """The ``paced`` entry of what needs attention, on the engine's own ``/status`` and status page: its last
    line, which sends ``kreassign status`` (folded from the log, which has no figures until the pacing ends) to
    the engine's ``request_budget.paced``, gives those figures themselves: the looks deferred, since when, the
    longest wait, the last deferral (when, and its broker: the title names the first's) and how long the warning
    stays shown."""
    if paced is None:
        return
    last = paced["last_deferral"]
    where = "every broker" if last["broker"] is ANY else f"broker {last['broker']}"
    for e in entries:
        if e["kind"] == "paced":
            n = paced["deferred"]
            e["lines"] = e["lines"][:-1] + [
                f"{n} look{'' if n == 1 else 's'} deferred over the last {paced['since_seconds']:g} s, the longest "
                f"wait {paced['longest_wait_seconds']:.2f} s; the last {last['seconds_ago']:g} s ago ({where}): "
                f"shown {paced['ends_in_seconds']:g} s more unless a read waits again"]
