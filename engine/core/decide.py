"""``decide(state, input) -> events``: every decision kreassign makes.

Inputs are commands (submit, cancel, limits, throttle, pause, resume),
observations of the cluster, the outcome of every action the executor carried
out, and ticks. ``decide`` is pure: it reads the state and returns the events
to append; ``engine.core.state.apply`` folds them. ``handle`` returns the folded
state as well, which is by construction ``fold(events, state)``. Time is an
input too: observations, outcomes and ticks carry the shell's clock (``now``).

Outcomes (``ActionOutcome``): ``Ok`` is what the log expected; a refusal or an
unavailable cluster is handled by the rule the action concerns (a refused step
fails and is planned again after a backoff, an unanswered one is retried, a
refused abort lets the step go on, a failed throttle change is recorded as not
in force and retried, a failed election is retried and finally given up), and
every failure is an ``ActionFailed`` event with the reason and the time of the
retry (``engine.core.retry`` holds the policy). One failing action never holds up
the others, nor the observation of the cluster.

An observation reconciles every step in flight it covers with what the
cluster reports (done, started, not started, reverted, changed, aborted), but
only a look taken after what the state already knows of the partition (its
latest recorded look, the cluster's latest answer to an alter or cancel of it)
counts, and none judges a step whose alter or cancel is still unanswered: a
look may predate the action it would judge (docs/algorithm.md, section 4). A
``Tick`` retries what is due, settles partitions whose next step must be
planned, removes throttles no step needs, and starts the next batch (throttles
first, then the steps). Because every tick re-derives what to do from the state
alone, a batch of events cut short by a crash heals on the next tick.

Contract with the shells (the engine's executor and watcher): the executor
carries out the log's actions in log order and reports each outcome, and an
observation is taken after the actions logged before it were carried out. An
observation and an outcome carry the shell's clock (``now``): without one
(``None``) a look delivered late is not recognised as older; only the rule
that an unanswered alter or cancel is never judged still holds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Mapping

from engine.core import events as ev
from engine.core import retry
from engine.core.cancellation import (
    ROLLBACK_STOPPED, rollback_skip_reason, rollback_waits, settle_target, skip_reason, unclean_skip_reason,
)
from engine.core.actions import Action, ApplyThrottles, CancelStep, ElectLeader, RemoveThrottles, StartStep
from engine.core.outcomes import Ok, Refused, Unavailable
from engine.core.commands import (
    ActionOutcome, AdaptThrottle, Cancel, CatchUpObserved, ChangeLimits, ChangeThrottle, Input, Observation,
    LooksPaced, ObservationFailed, Pause, Resume, Submit, ThrottlesObserved, Tick, Unverified,
)
from engine.core.limits import resolve_changes
from engine.core.partition import PartitionState, TopicPartition
from engine.core.scheduler import (A, WEIGHT_UNITS, InFlight, Requeue, SchedulingKey, Start, at_alter, creation_caps,
                                   next_batch, refusal, weight_units)
from engine.core.state import (
    ABORTING, ACTIVE, CANCELLED, COMPLETED, FINISHED_KEPT, IN_FLIGHT, READY, REVERTED, TERMINAL, Retired, State, apply,
    RELEASE_REFILL, REVERT_SKIPPED, UNCLEAN_REVERT, release_debt, set_back,
)
from engine.core.step import DEFAULT_STEP_MODE, DROPS_HELD, GROUPED, PlanResult, Step, Waiting, plan_step
from engine.core.throttles import ThrottleSet, in_force, minus, needed, noting, reconcile, union, with_margin
from engine.core.validation import submission_problems

OTHER_TOOLS_REASSIGNMENT = "a reassignment not started by kreassign is in progress"
"""How a partition's wait for a reassignment kreassign did not start begins (``plan``)."""

LEADER_UNCONFIRMED = "waiting for a look that counts"
"""How a ready partition's wait begins when the tick's look showed another leader than the log and could
not be recorded (``_hold_unconfirmed``)."""

REVERT_GRACE = 5.0
"""Seconds after the cluster accepted a step before "back at CR, nothing in progress" counts as
reverted (cancelled by another tool, or dropped): the brokers' metadata may lag the controller."""

METADATA_SETTLE = 5.0
"""Seconds a look that contradicts the log must stand before it counts. A look is torn: what is in
progress comes from the controller, the replicas (and configs) from a broker's metadata, which lags
it (measured on Kafka 4.0: a step's whole RS with nothing in progress, 0.64 s before the broker
showed the step's TR). So a step fails as changed or reverted outside kreassign only when the same
replicas were recorded at least this long before a look that still shows them, and a throttle
read-back's difference from the log is corrected only when a read-back this much later still shows
it (docs/algorithm.md, section 4)."""


ALTER_MAY_LAND = 5.0
"""Seconds after an alter went unanswered during which it may still reach the controller (a request
that timed out in the client can still sit in the broker's queue; the fault simulator delivers such a
request up to 3 s late). An unstarted step is given up (planned again) only after them: given up
before, its alter landing late would start a reassignment that no cap counts (seed 4535: two
partitions in flight against a limit of one)."""


class _Decision:
    """Events emitted so far, and the state they fold to."""

    __slots__ = ("state", "events", "touched", "steps_changed", "now")

    def __init__(self, state: State, now: float | None = None):
        self.state = state
        self.events: list[ev.Event] = []
        self.touched: set[str] = set()
        self.steps_changed = False  # throttles need a look only if steps or the rate changed
        self.now = now  # the shell's clock, from the input (None: no clock)

    def emit(self, event: ev.Event) -> None:
        self.events.append(event)
        self.state = apply(self.state, event)
        if type(event) in _CHANGES_THROTTLE_NEEDS:
            self.steps_changed = True
        rid = getattr(event, "request_id", None)
        if rid:
            self.touched.add(rid)


_CHANGES_THROTTLE_NEEDS = frozenset({
    ev.StepPlanned, ev.StepCompleted, ev.StepAborted, ev.StepFailed, ev.ThrottleRateChanged, ev.ThrottleReleased,
    # a partition that ends, or a pause, may leave a broker rate nothing still to do names (``_keeping_rates``)
    ev.PartitionCompleted, ev.PartitionCancelled, ev.PartitionReverted, ev.Paused, ev.LimitsChanged,
})


def decide(state: State, inp: Input) -> list[ev.Event]:
    return handle(state, inp)[1]


def handle(state: State, inp: Input) -> tuple[State, list[ev.Event]]:
    d = _Decision(state, getattr(inp, "now", None))
    _clock_set_back(d)
    _HANDLERS[type(inp)](d, inp)
    tick = isinstance(inp, Tick)
    if tick or d.steps_changed:
        _reconcile_throttles(d)
    _complete_requests(d, everything=tick)
    return d.state, d.events


def _clock_set_back(d: _Decision) -> None:
    """An input whose clock reads more than CLOCK_SET_BACK before the newest time the log knows: the
    clock was set back (or a decider whose clock lags took over). Every timer is re-based first, so
    none waits for the old clock (docs/algorithm.md, *Timers and the clock*), from the clock's latest
    reading the log knows, not from the newest: after an earlier step back of less than CLOCK_SET_BACK
    the newest is ahead of the clock that set the timers since, and re-based from it they would fire
    early by that much (the fault simulator's seed 86: an unanswered alter given up 2 s after it, not
    ALTER_MAY_LAND)."""
    s = d.state
    if d.now is not None and s.clock is not None and set_back(d.now, s.clock):
        read = s.clock if s.clock_read is None else s.clock_read
        d.emit(ev.ClockSetBack(max(read, d.now), d.now))


# --- planning one partition ----------------------------------------------------------


def plan(s: State, tp: TopicPartition, now: float | None = None) -> PlanResult:
    """The partition's next step towards its goal, from the latest observation."""
    entry = s.partitions[tp]
    denied = s.denied.get(tp.topic)
    if denied is not None:
        return Waiting(f"the engine may not observe topic {tp.topic}: {denied}")
    obs = s.observed.get(tp)
    if obs is None:
        return Waiting("partition not observed yet")
    if entry.retry_at is not None and not retry.due(entry.retry_at, now):
        return Waiting(s.waiting.get(tp) or "the cluster refused its last step: retrying after a backoff")
    request = s.requests.get(entry.request_id)
    if entry.cancelled and not entry.rolling_back:
        goal = settle_target(obs.replicas, entry.original)
        if request is not None and request.steps == GROUPED and _replaced_all(entry, obs):
            goal = entry.target  # its copies are done, only its drop waits (rule 8): it stops moved, not trimmed
    else:
        goal = entry.goal
    if goal is None:
        return Waiting("original replicas unknown")
    el = s.elections.get(tp)
    live = s.live_brokers()
    if el is not None and el.leader in obs.isr and (live is None or el.leader in live):
        detail = f"; attempt {el.attempt} failed: {el.error}" if el.error else ""
        return Waiting(f"waiting for broker {el.leader} to become leader (preferred leader election{detail})")
    if obs.reassignment_in_progress:
        return Waiting(
            f"{OTHER_TOOLS_REASSIGNMENT} "
            f"(adding {list(obs.adding)}, removing {list(obs.removing)})"
        )
    lim = s.limits
    result = plan_step(
        obs.replicas, goal, obs.isr, obs.leader, s.min_insync(tp.topic), lim.max_replicas_per_step, live,
        # a step's copies all come out of one leader and count against the cluster-wide additions:
        # no step may need more than either allows, not even the min.insync catch-up
        max_new=min(lim.max_outgoing_moves_per_broker, lim.max_replica_additions_in_flight),
        steps=request.steps if request is not None else DEFAULT_STEP_MODE,
    )
    if isinstance(result, Step) and request is not None and request.steps == GROUPED:
        why = drops_wait(s, tp, result, now)
        if why is not None:
            return Waiting(why)
    if isinstance(result, Waiting) and entry.rolling_back:
        why = rollback_waits(goal, live)
        if why is not None:
            return Waiting(f"{result.reason}: {why}")
    return result


def drops_wait(s: State, tp: TopicPartition, step: Step, now: float | None = None) -> str | None:
    """Why a ``grouped`` partition's final drop waits (``engine.core.step``, rule 8), or None.

    Each completion that drops a replica bumps the leader epoch, and each bump holds the acks=all
    writes of every partition its leader leads up about a second (the producer's one connection to the
    leader: docs/simulator.md, "The epoch bump"). So the drop of a partition that holds its final
    target, where the target adds replicas (a pure reduction replaces nothing), and drops replicas that
    are all live and in sync, waits while its request still has a copy out of the partition's leader in
    flight (into live brokers) or ready; the tick that finds none releases the leader's held drops
    together (``_release_drops``): one alter (Kafka completes each drop at it: they take no limit), one
    stall. The wait lasts as long as the request's copies out of that leader, and at most
    ``max_drop_hold_seconds`` (H) from the first of the group's drops held (``_hold_over``): then the
    group goes as it is; a cancel or a rollback ends it (a plain cancel completes the drop, a rollback
    drops the new replicas instead), and a drop that is not the final one, or that drops a dead or
    lagging replica, never waits; with H = 0 none does. Nor does a drop already planned whose alter is
    retried (``_replanned`` plans the partition again): released by the bound while copies still run, it
    was given up as "not what the partition needs" and held again for a whole H."""
    entry = s.partitions[tp]
    obs = s.observed.get(tp)
    if step.nr or not step.dr or entry.cancelled or entry.rolling_back or obs is None or obs.leader is None:
        return None
    if tp in s.steps:
        return None  # its drop was released and sent: a retry re-checks it (``_replanned``), the hold is over
    hold = s.limits.max_drop_hold_seconds
    if not hold or _hold_over(s, now, s.held_since.get(tp), s.drops_since.get((entry.request_id, obs.leader))):
        return None
    if not _replaced_all(entry, obs):
        return None
    live = s.live_brokers()
    if any(b not in obs.isr or (live is not None and b not in live) for b in step.dr):
        return None
    if not copies_out(s, entry.request_id, obs.leader):
        return None
    # (H is not in the reason: a limits change does not plan held partitions again, and the reason would
    # keep the old one; status says when each group goes, from the H in force: ``attention._held_for``)
    return (f"{DROPS_HELD}: they leave together once no new replica of this request copies from their "
            f"leader, broker {obs.leader}, or max_drop_hold_seconds after the first of them was held "
            f"(--steps grouped)")


def _hold_over(s: State, now: float | None, *since: float | None) -> bool:
    """Whether a hold that began at the earliest of ``since`` has lasted ``max_drop_hold_seconds``
    (without a clock, or with no start known, it has not)."""
    begun = [t for t in since if t is not None]
    return now is not None and bool(begun) and now - min(begun) >= s.limits.max_drop_hold_seconds


def _replaced_all(entry, obs) -> bool:
    """The partition holds every replica its target adds (it adds some: a pure reduction replaces nothing)
    and more: only the drop of the replicas they replace is left."""
    target, original = entry.target, entry.original
    return (target is not None and original is not None and bool(set(target) - set(original))
            and set(target) < set(obs.replicas))


def copies_out(s: State, request_id: str, source: int) -> bool:
    """Whether the request has a copy out of ``source`` ready (O(its lanes)) or in flight into live
    brokers (O(steps in flight))."""
    lanes = s.ready.sources.get(source)
    if lanes is not None and any(name[0] == request_id for name in lanes.keys()):
        return True
    live = s.live_brokers()
    return any(f.request_id == request_id and f.source == source and f.step.nr
               and (live is None or all(b in live for b in f.step.nr)) for f in s.steps.values())


def _release_drops(d: _Decision) -> None:
    """Plan again, together, the held drops of every (request, leader) whose request has no new replica
    copying from that leader, or whose hold has lasted ``max_drop_hold_seconds`` (``drops_wait``): they
    start in this tick's batch."""
    for tps in _releasable(d.state, d.now):
        for tp in tps:
            _reconsider(d, tp)


def _releasable(s: State, now: float | None = None) -> list:
    """The groups of held drops (``State.drops_held``) whose request has no new replica copying from their
    leader, or that have been held ``max_drop_hold_seconds``: a tick releases them (``_release_drops``),
    so the shell looks at them just before it (``starting``) and they start in that tick. In a fixed
    order (the log is the same whatever the hash seed). O(groups x (lanes + steps in flight))."""
    groups = sorted(s.drops_held.items(), key=lambda g: (g[0][0], -1 if g[0][1] is None else g[0][1]))
    return [sorted(tps.keys()) for (rid, leader), tps in groups
            if leader is None or _hold_over(s, now, s.drops_since.get((rid, leader))) or not copies_out(s, rid, leader)]


def timers_pending(s: State) -> bool:
    """Whether a later tick may decide something with no new observation: a retry or an election
    check is scheduled. (Otherwise ``decide`` of a tick is a function of the state alone, but for
    the bound on ``grouped`` holds, ``max_drop_hold_seconds``: not counted here, since held partitions
    are waiting and the shell ticks at every full look while any is, so a group goes within a poll
    interval of its bound, and starts at the tick after, from a look.)"""
    return bool(
        s.elections or not s.throttle_failed.is_empty()
        or any(f.retry for f in s.steps.values())
        or any(s.partitions[tp].retry_at is not None for tp in s.waiting.keys())
    )


def weight(s: State, tp: TopicPartition, step: Step) -> int:
    """What one copy of ``step`` weighs against the per-broker move caps (``scheduler.weight_units``).
    A step that copies nothing weighs a whole move in P and L, or nothing where it drops replicas, the
    last look at its partition shows every replica of its target in sync, and it leaves TR[0] leading
    (the leader stays first, or leaves and Kafka elects TR[0]): Kafka completes that drop at its alter,
    so it is never in flight there, no election follows it, and it takes no limit
    (``scheduler.at_alter``). A new order alone, or a drop that keeps a leader TR[0] is not, needs an
    election after its alter: that leader move counts in L."""
    if not step.nr:
        obs = s.observed.get(tp)
        free = (obs is not None and bool(step.dr) and set(step.tr) <= set(obs.isr)
                and (obs.leader == step.tr[0] or obs.leader not in step.tr))
        return 0 if free else WEIGHT_UNITS
    obs = s.observed.get(tp)
    return weight_units(obs.size_bytes if obs is not None else None, s.throttle_rate, s.limits.full_move_seconds)


def watched(s: State, now: float | None = None, ready: bool = True) -> set[TopicPartition]:
    """The partitions an ISR watcher must poll: those with a step in flight, those
    waiting (a change may unblock them), those awaiting a leader election, and (unless
    ``ready`` is false: the caller adds ``starting`` itself) those the next tick would
    start (``starting``: a step is charged to its partition's leader as last observed,
    so it starts from a fresh look). Not the drops ``grouped`` holds (``State.drops_held``): nothing of
    theirs is in progress, and they are looked at when their group is released (``starting``), so a
    large request's held partitions cost its looks nothing."""
    out = set(s.steps.keys()) | set(s.waiting.keys()) | set(s.elections.keys())
    if s.drop_group:
        out.difference_update(s.drop_group.keys())
    return out | set(starting(s, now)) if ready else out


def starting(s: State, now: float | None = None) -> list[TopicPartition]:
    """The ready partitions a tick at ``now`` would start (or re-queue, or hold) if the cluster were as
    the state last saw it: the shell looks at them just before that tick (``Tick.looked``), so the
    caps count each step against its partition's leader as it is now; and the held drops that tick
    releases (``_release_drops``), so they start in it. O(batch + lanes), like a tick's own scheduling,
    plus the groups of held drops."""
    if s.paused:
        return []
    released = [tp for tps in _releasable(s, now) for tp in tps]
    if not s.ready.size:
        return released
    return [x.tp for x in _batch(s, now, None)] + released


def _batch(s: State, now: float | None, looked: Mapping | None) -> list:
    """The scheduler's decision on ``s`` (``engine.core.scheduler.next_batch``); ``looked``: what the
    tick's look showed of each partition it looked at: only those whose recorded leader it confirms may
    start (``unconfirmed``), and a step in flight it showed led by another broker is charged to that one
    as well (``_unordered_leaders``). ``None``: any partition may start, on the counters as recorded."""
    rank = (lambda rid: s.requests[rid].rank) if s.requests else (lambda rid: 0)

    def replan(tp: TopicPartition) -> PlanResult | None:
        if looked is not None and (tp not in looked or unconfirmed(s, tp, looked[tp])):
            return None  # (a tick has made those it looked at wait: ``_hold_unconfirmed``)
        return plan(s, tp, now)

    in_flight = s.in_flight if looked is None else _unordered_leaders(s, looked)
    return next_batch(s.ready, in_flight, s.limits, replan, rank, lambda tp, step: weight(s, tp, step),
                      creations(s), s.live_brokers())


def unconfirmed(s: State, tp: TopicPartition, look: PartitionState) -> bool:
    """Whether the tick's look at ``tp`` leaves the leader the state holds for it unconfirmed: the look
    shows another leader than the record and was set aside (``_observe``: taken at the very time of, or
    before, what the state knows of the partition, as two looks at one instant are, or after a clock set
    back less than ``CLOCK_SET_BACK``; or replicas grown back not confirmed yet), so the state cannot
    tell which of the two leads now. A step planned from the record would be charged to a leader the
    look may have seen move (the fault simulator's seed 9363): it does not start from it, and the next
    look that counts decides. Only the leader holds a step (the caps charge it: *out*, and L): another
    ISR alone starts from the record as before (held, a partition waited 33 s for a standby's clock 34 s
    behind what the log knew: seed 1895). A look older than the record by its leader epoch (``_behind``)
    leaves the record standing: it holds nothing (a broker whose metadata lags without bound would
    otherwise hold the partition for good)."""
    known = s.observed.get(tp)
    if known is None:
        return True
    return known.leader != look.leader and not _behind(known, look)


def _unordered_leaders(s: State, looked: Mapping) -> InFlight:
    """The counters a tick's decision uses: the state's, and each step in flight whose look this tick the
    state set aside (``unconfirmed``) while it showed another leader is charged to that leader as well:
    the state cannot tell which of the two serves its copies now (docs/algorithm.md, section 2: a step in
    flight is charged to its leader as each look shows it; this look could not be recorded). Only the
    outgoing charge and L change, for this decision; the record stays as it is."""
    extra: dict[int, int] = {}
    moves = 0
    for tp, look in looked.items():
        f = s.steps.get(tp)
        if f is None or look.leader is None or not unconfirmed(s, tp, look):
            continue
        if f.step.nr and look.leader != f.source:
            extra[look.leader] = extra.get(look.leader, 0) + f.weight * len(f.step.nr)
        if not at_alter(f.step.nr, f.weight):
            moves += int(f.step.tr[0] != look.leader and not f.moves_leader)
    in_flight = s.in_flight
    if not extra and not moves:
        return in_flight
    outgoing = in_flight.outgoing
    if extra:
        with outgoing.mutate() as m:
            for b, n in extra.items():
                if n:
                    m[b] = m.get(b, 0) + n
            outgoing = m.finish()
    return in_flight._replace(outgoing=outgoing, leader_moves=in_flight.leader_moves + moves)


def creations(s: State):
    """Each broker's new-replica caps (in flight, per decision: ``scheduler.creation_caps``) from how fast
    the state has seen it make new replicas (``State.creation``)."""
    lim, seen = s.limits, s.creation
    return lambda b: creation_caps(lim, seen[b].seconds, seen[b].largest) if b in seen else creation_caps(lim, None)


def _resolve(d: _Decision, tp: TopicPartition, result: PlanResult) -> None:
    entry = d.state.partitions[tp]
    if isinstance(result, Step):
        d.emit(ev.PartitionReady(entry.request_id, tp, result, weight(d.state, tp, result)))
    elif isinstance(result, Waiting):
        d.emit(ev.PartitionWaiting(entry.request_id, tp, result.reason))
    elif entry.rolling_back:
        d.emit(ev.PartitionReverted(entry.request_id, tp))
    elif entry.cancelled:
        here = d.state.observed[tp].replicas
        d.emit(ev.PartitionCancelled(entry.request_id, tp, False, final=True, reason=_left_at(entry, here)))
    else:
        d.emit(ev.PartitionCompleted(entry.request_id, tp, d.state.observed[tp].replicas))


def _left_at(entry, here) -> str:
    if entry.original is not None and tuple(here) == tuple(entry.original):
        return f"cancelled: back at its original replicas {list(here)}"
    if tuple(here) == tuple(entry.target):
        return f"cancelled after it had reached its target {list(here)}"
    return (f"cancelled at {list(here)} (original {list(entry.original or ())}, target {list(entry.target)}); "
            f"cancel with --rollback to return to the original replicas")


def _settle(d: _Decision, first: tuple[TopicPartition, ...] = ()) -> None:
    """Plan every partition that needs a planning decision (``first`` in order)."""
    for tp in first:
        if tp in d.state.pending:
            _resolve(d, tp, plan(d.state, tp, d.now))
    if d.state.pending:
        for tp in sorted(d.state.pending.keys()):
            _resolve(d, tp, plan(d.state, tp, d.now))


def _reconsider(d: _Decision, tp: TopicPartition) -> None:
    """Re-plan a waiting partition; record a change only."""
    result = plan(d.state, tp, d.now)
    if isinstance(result, Waiting) and d.state.waiting.get(tp) == result.reason:
        return
    _resolve(d, tp, result)


def _check_step(d: _Decision, tp: TopicPartition, settled: bool = True) -> None:
    """Reconcile a step in flight with what the cluster reported in the observation being decided
    (``_observe`` has already set aside a look older than what the state knows of the partition):
    done, started (its answer was lost), not started (its retry is pending), reverted or changed
    outside kreassign (it fails and the partition is planned again), or aborted. While the answer to
    an alter or a cancel of it has not come back, the look may predate that action: it judges
    nothing (the answer is on its way: the executor reports every action it carries out).
    ``settled``: the look shows what the state already recorded ``METADATA_SETTLE`` seconds before
    (or, without a clock, at the look before); only such a look may blame another tool: a look torn by
    a lagging broker's metadata is never reported as a change that did not happen."""
    f = d.state.steps[tp]
    obs = d.state.observed.get(tp)
    if obs is None:
        return
    step = f.step
    busy = obs.reassignment_in_progress
    ours = runs_step(obs, step)
    if f.answers_due:
        return  # an alter's or a cancel's answer is not back: this look may predate that action
    if f.aborting:
        if ours:
            # The cancel was answered, yet the step's reassignment runs: its alter reached the
            # controller after the cancel did (an alter whose answer was lost, or that came late).
            if not f.retry:
                d.emit(ev.ActionFailed(
                    "cancel_step", "IN_PROGRESS_AFTER_CANCEL",
                    f"step {f.number}'s reassignment is still in progress (adding {list(obs.adding)}) after its "
                    f"cancel was answered: its alter reached the controller after the cancel; cancelling it again",
                    f.attempt, retry.retry_at(d.now, f.attempt), request_id=f.request_id, tp=tp, number=f.number,
                    at=d.now))
            return
        # The cancel was answered and the step's reassignment is not in progress: the abort is over,
        # wherever the partition stands. Kafka (KRaft) reverts a cancelled reassignment to RS minus AR
        # in RS order (the step's CR as a set, not necessarily in CR's order); the step may have
        # completed before the cancel reached it (TR); or another tool moved the partition meanwhile
        # (anything else, or another tool's reassignment in progress: the partition then waits for it).
        # Anything else with nothing in progress counts only once a later look confirms it: a broker's
        # metadata lags the controller, and shows the step's whole RS after KRaft reverted it (planned
        # from, the next step would copy from replicas the partition no longer has).
        elsewhere = set(obs.replicas) != set(step.cr) and tuple(obs.replicas) != tuple(step.tr)
        at_tr = tuple(obs.replicas) == tuple(step.tr)
        if not busy and not settled and (elsewhere or (at_tr and _unproven_end(obs, step))
                                         or (not elsewhere and not at_tr and not _reverted_by_kafka(obs, step))):
            return
        d.emit(ev.StepAborted(f.request_id, tp, f.number, obs.replicas, d.now))
        return
    if not busy and obs.replicas == step.tr:
        if not settled and _unproven_end(obs, step):
            return  # maybe a broker's stale metadata after the step was cancelled: a later look confirms
        # Kafka finished it (a TR replica may have left the ISR since: Kafka's verdict counts)
        d.emit(ev.StepCompleted(f.request_id, tp, f.number, obs.leader != step.tr[0], d.now))
        return
    if ours:
        if not f.started:  # the alter took effect although its answer never came
            d.emit(ev.StepStarted(f.request_id, tp, f.number, d.now))
        return
    if busy or not f.started:
        return  # another tool's reassignment in progress (the step waits), or not started yet
    if not settled:
        return  # maybe a broker's stale metadata: a later look confirms it, or shows the step as it is
    if set(obs.replicas) == set(step.cr):
        if f.started_at is not None and d.now is not None and d.now - f.started_at < REVERT_GRACE:
            return
        reason = (f"step {f.number} was reverted outside kreassign (cancelled by another tool, or dropped by "
                  f"the controller): the partition is back at {list(obs.replicas)}")
    else:
        reason = f"replicas changed outside kreassign to {list(obs.replicas)} during step {f.number}"
    d.emit(ev.StepFailed(f.request_id, tp, f.number, reason, at=d.now))


def runs_step(obs, step: Step) -> bool:
    """Whether the look ``obs`` shows the step's own reassignment in progress: a reassignment to its TR
    (RS less RR is TR: what KRaft completes it to) that copies to TR nothing but its NR (AR less RR within
    NR). Usually RS = TR + CR and AR = NR; when its alter landed over another tool's reassignment in
    progress, RS also holds what that one was adding, now removed (RR), and the step runs all the same:
    Kafka moves the partition to its TR (the fault simulator's seed 4374: counted as not started, the step
    was given up while it copied, and another started past the partition cap). AR is then TR less the RS
    the alter found (part of NR only, if that one was adding some of NR too), or, when that is empty, the
    AR in progress kept (KRaft's PartitionChangeBuilder replaces only a non-empty AR or RR), which may
    hold what is now in RR.

    RS is the look's replicas with AR and RR: Kafka's RS always holds both, and a look whose replicas
    do not is torn (the replicas from a broker whose metadata predates the alter, AR and RR from the
    controller), its RS the two put together. The fault simulator's seed 86 with its torn window 12 s
    later: a late alter from CR 2,1 to TR 3,1 seen as replicas 2,1 adding 3 removing 2, taken for another
    tool's reassignment; the step was given up, its copies counted nowhere, and the next steps copied out
    of broker 2 beside it, past its outgoing cap."""
    rs = set(obs.replicas) | set(obs.adding) | set(obs.removing)
    return (obs.reassignment_in_progress and rs - set(obs.removing) == set(step.tr)
            and set(obs.adding) - set(obs.removing) <= set(step.nr))


def may_alter_again(s: State, tp: TopicPartition, f) -> bool:
    """Whether a restart may alter the step in flight ``f`` again to its TR: the latest look at its partition
    shows its CR with nothing in progress (not started, or its alter lost), or its own reassignment in
    progress. Any other look (another tool moved the partition, or the step is done) is judged by the
    next look: sent again, the old TR would start a move from where nobody planned it (the fault
    simulator's seed 2444: another tool's reassignment completed, then a restart re-sent the step's TR
    and started copies no cap counted)."""
    obs = s.observed.get(tp)
    if obs is None:
        return True
    if obs.reassignment_in_progress:
        return runs_step(obs, f.step)
    return set(obs.replicas) == set(f.step.cr)


def _reverted_by_kafka(obs, step: Step) -> bool:
    """Whether a look at the step's CR (as a set) shows it in the order KRaft's revert leaves, RS - AR in
    RS's order (RS = TR, then the replicas it removes in broker id order), and that order is not CR's:
    a look no broker's metadata from before the step can show. A look at CR in CR's order may be such
    metadata after the step completed (the cancel then finds nothing in progress: the fault simulator's
    seed 9235, a rollback taken as done while the partition stood at its TR): only a look that confirms
    it counts."""
    rs = tuple(step.tr) + tuple(sorted(b for b in step.cr if b not in step.tr))
    revert = tuple(b for b in rs if b not in step.nr)
    return tuple(obs.replicas) == revert and revert != tuple(step.cr)


def _unproven_end(obs, step: Step) -> bool:
    """Whether a look showing the step's TR with nothing in progress may be a broker's stale metadata
    rather than its end: some of its new replicas are out of the ISR. Kafka completes a step only with
    its whole TR in sync, so such a look is a completion followed by an ISR shrink, or, for a step that
    only adds (its RS is its TR), the RS a lagging broker still shows after the step was cancelled (the
    fault simulator's seed 5527: taken for the end, the next step's alter copied a replica the cluster
    had dropped). Either way, only a look that confirms it counts."""
    return not set(step.nr) <= set(obs.isr)


# --- handlers -------------------------------------------------------------------------------


def _submit(d: _Decision, cmd: Submit) -> None:
    s = d.state
    digest = _digest(cmd)
    known = s.request(cmd.request_id)
    if known is not None:
        if known.digest != digest:
            d.emit(ev.CommandRejected(
                "submit", (f"request id '{cmd.request_id}' is already used by another reassignment",),
                cmd.request_id, cmd.command_id,
            ))
            return
        if isinstance(known, Retired):
            return  # re-delivered after it ended and retired: every partition had been queued
        # Re-delivered: queue what a crash may have left unqueued, nothing else.
        missing = [p for p in cmd.partitions if p.tp not in known.members and _owner_seq(s, p.tp) <= known.seq]
        for p in missing:
            _queue(d, cmd.request_id, p.tp, p.replicas)
        _settle(d, tuple(p.tp for p in missing))
        return
    problems = submission_problems(cmd, s.topics, s.brokers, s.observed, s.denied)
    if problems:
        d.emit(ev.CommandRejected("submit", tuple(problems), cmd.request_id, cmd.command_id))
        return
    d.emit(ev.RequestAccepted(cmd.request_id, len(cmd.partitions), digest, cmd.command_id, cmd.steps))
    rate = None if cmd.unthrottled else cmd.throttle_rate
    if (cmd.unthrottled or rate is not None) and rate != s.throttle_rate:  # (None: keep the current rate)
        d.emit(ev.ThrottleRateChanged(rate, f"request {cmd.request_id}", cmd.command_id))
    for p in cmd.partitions:
        _queue(d, cmd.request_id, p.tp, p.replicas)
    _settle(d, tuple(p.tp for p in cmd.partitions))


def _owner_seq(s: State, tp: TopicPartition) -> int:
    entry = s.partitions.get(tp)
    return -1 if entry is None else s.requests[entry.request_id].seq


def _queue(d: _Decision, request_id: str, tp: TopicPartition, target) -> None:
    """Queue one partition; a request still working on it loses its pending steps first."""
    s = d.state
    entry = s.partitions.get(tp)
    f = s.steps.get(tp)
    if entry is not None and entry.status not in TERMINAL and entry.status != ABORTING:
        d.emit(ev.PartitionCancelled(entry.request_id, tp, False, None, request_id))
    obs = s.observed[tp]
    original = f.step.cr if f is not None else tuple(b for b in obs.replicas if b not in obs.adding)
    d.emit(ev.PartitionQueued(request_id, tp, original, tuple(target)))


def _digest(cmd: Submit) -> str:
    doc: object = [[p.topic, p.partition, list(p.replicas)] for p in cmd.partitions]
    if cmd.steps != DEFAULT_STEP_MODE:  # (the default leaves the digest of a submit as it was before the field)
        doc = {"targets": doc, "steps": cmd.steps}
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()[:32]


def _cancel(d: _Decision, cmd: Cancel) -> None:
    s = d.state
    r = s.requests.get(cmd.request_id)
    if r is None and cmd.request_id in s.retired:
        _cancel_retired(d, cmd)
        return
    if r is None:
        d.emit(ev.CommandRejected("cancel", (f"unknown request '{cmd.request_id}'",), cmd.request_id, cmd.command_id))
        return
    if cmd.partitions is not None:
        unknown = [str(tp) for tp in cmd.partitions if tp not in r.members]
        if unknown or not cmd.partitions:
            reason = (f"partitions {unknown} are not part of request '{cmd.request_id}'" if unknown
                      else "the list of partitions to cancel is empty")
            d.emit(ev.CommandRejected("cancel", (reason,), cmd.request_id, cmd.command_id))
            return
    if cmd.include_completed and not cmd.rollback:
        d.emit(ev.CommandRejected("cancel", ("include_completed only applies to a rollback",), cmd.request_id,
                                  cmd.command_id))
        return
    targets = sorted(set(cmd.partitions) if cmd.partitions is not None else r.members.keys())
    d.emit(ev.CancelRequested(cmd.request_id, cmd.partitions, cmd.rollback, cmd.command_id, cmd.include_completed))
    for tp in targets:
        _cancel_partition(d, cmd.request_id, tp, cmd.rollback, cmd.include_completed, named=cmd.partitions is not None)
    _settle(d)


def _cancel_retired(d: _Decision, cmd: Cancel) -> None:
    """A cancel of a request that ended and retired (``engine.core.state.FINISHED_KEPT``): nothing of it
    is in progress, so a plain cancel changes nothing (as for any finished request); a rollback would
    need its partitions' original replicas, which only the event log keeps now: rejected, saying so."""
    rid = cmd.request_id
    if cmd.include_completed and not cmd.rollback:
        d.emit(ev.CommandRejected("cancel", ("include_completed only applies to a rollback",), rid, cmd.command_id))
        return
    if cmd.rollback:
        d.emit(ev.CommandRejected("cancel", (
            f"request '{rid}' ended and was retired (the engine keeps the latest {FINISHED_KEPT} finished "
            f"requests whole): its partitions' original replicas are in the event log only; to move them "
            f"back, submit them as a new request",), rid, cmd.command_id))
        return
    if cmd.partitions is not None and not cmd.partitions:
        d.emit(ev.CommandRejected("cancel", ("the list of partitions to cancel is empty",), rid, cmd.command_id))
        return
    d.emit(ev.CancelRequested(rid, cmd.partitions, False, cmd.command_id, False))
    for tp in sorted(set(cmd.partitions or ())):
        d.emit(ev.CancelSkipped(rid, tp, "its request has ended: a cancel touches only what is in progress"))


def _cancel_partition(d: _Decision, rid: str, tp: TopicPartition, rollback: bool, include_completed: bool,
                      named: bool) -> None:
    """KIP-236 for one partition (``engine.core.cancellation`` has the rules and where a cancel leaves it)."""
    s = d.state
    entry = s.partitions.get(tp)
    if entry is None or entry.request_id != rid:  # (None: the request that took it over has retired)
        if named:
            who = f"request '{entry.request_id}'" if entry is not None else "a later request (since ended)"
            d.emit(ev.CancelSkipped(rid, tp, f"{who} has taken this partition over"))
        return
    status = entry.status
    if status == REVERTED or (rollback and entry.rolling_back) or (entry.cancelled and not rollback
                                                                   and not entry.rolling_back):
        return  # cancelled the same way already
    if status == COMPLETED and not (rollback and include_completed):
        if named:
            d.emit(ev.CancelSkipped(rid, tp, "already completed: a cancel touches only what is in progress "
                                             "(cancel --rollback --include-completed moves it back)"))
        return
    if rollback:
        reason = rollback_skip_reason(entry.original)
        if reason is not None:
            d.emit(ev.CancelSkipped(rid, tp, reason))
            return
    # what this cancel means for the partition, beyond the summary (the verdict shows it)
    obs = s.observed.get(tp)
    home = obs is not None and not obs.reassignment_in_progress and tuple(obs.replicas) == tuple(entry.original or ())
    note = (None if home else rollback_waits(entry.original, s.live_brokers())) if rollback else (
        ROLLBACK_STOPPED if entry.rolling_back else None)
    f = s.steps.get(tp)
    if status == ABORTING:
        d.emit(ev.PartitionCancelled(rid, tp, rollback, f.number, reason=note))
        return
    if status == IN_FLIGHT:
        skip = _abort_skip(s, tp, f)
        if skip is not None:
            d.emit(ev.CancelSkipped(rid, tp, f"cannot abort step {f.number}: {skip[1]}"))
            d.emit(ev.PartitionCancelled(rid, tp, rollback, None, reason=note))  # applies once the step completes
            return
        d.emit(ev.PartitionCancelled(rid, tp, rollback, f.number, reason=note))
        return
    d.emit(ev.PartitionCancelled(rid, tp, rollback, None, reason=note))


def _abort_skip(s: State, tp: TopicPartition, f) -> tuple[str, str] | None:
    """Why the step in flight ``f`` may not be aborted now (``engine.core.cancellation``, rules 2 to 4: an abort
    reverts to its CR, judged on the ISR of the last look), with the code a retried abort given up for it
    carries: ``UNCLEAN_REVERT`` (rule 4) or ``REVERT_SKIPPED`` (rules 2 and 3); ``None``: it may."""
    obs = s.observed.get(tp)
    isr = obs.isr if obs is not None else frozenset()
    # an abort reverts to RS - AR (the step's CR) with ISR - AR (KRaft's PartitionReassignmentRevert); AR as
    # the cluster last showed it (another tool's alter merged into the step may add more: seed 8635)
    adding = tuple(obs.adding) if obs is not None and obs.reassignment_in_progress else f.step.nr
    info = s.topics.get(tp.topic)
    if info is not None and info.unclean_leader_election:  # (Kafka refuses no revert there: rule 4 says why)
        reason = unclean_skip_reason(tp.topic, f.step.cr, isr, s.live_brokers())
        if reason is not None:
            return UNCLEAN_REVERT, reason
    reason = skip_reason(f.step.cr, isr, adding, s.min_insync(tp.topic))
    return None if reason is None else (REVERT_SKIPPED, reason)


def _limits(d: _Decision, cmd: ChangeLimits) -> None:
    resolved, problems = resolve_changes(cmd.changes)
    if problems:
        d.emit(ev.CommandRejected("limits", tuple(problems), None, cmd.command_id))
        return
    d.emit(ev.LimitsChanged(d.state.limits.changed(resolved), cmd.command_id))


def _throttle(d: _Decision, cmd: ChangeThrottle) -> None:
    rate = cmd.rate
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
        d.emit(ev.CommandRejected(
            "throttle", (f"throttle rate must be an integer >= 1 byte/s (or none), got {rate!r}",),
            None, cmd.command_id,
        ))
        return
    d.emit(ev.ThrottleRateChanged(rate, "operator", cmd.command_id))


def _pause(d: _Decision, cmd: Pause) -> None:
    """Pause is set-like: a repeated pause (a runbook's "pause to be safe", a retried command) is accepted
    and changes nothing (``already``), as a repeated limits or throttle change does; rejected, it failed the
    script and stood in "needs attention" for ten minutes."""
    d.emit(ev.Paused(cmd.command_id, already=d.state.paused))


def _resume(d: _Decision, cmd: Resume) -> None:
    d.emit(ev.Resumed(cmd.command_id, already=not d.state.paused))


def _unverified(d: _Decision, u: Unverified) -> None:
    c = u.command
    d.emit(ev.CommandRejected(COMMAND_NAMES[type(c)], (u.reason,), getattr(c, "request_id", None), c.command_id))


def _adapt(d: _Decision, a: AdaptThrottle) -> None:
    """An adaptive change applies only while throttling is on (an operator's ``none`` wins)."""
    rate = d.state.throttle_rate
    if rate is None or a.rate < 1 or a.rate == rate:
        return
    d.emit(ev.ThrottleRateChanged(a.rate, a.reason))


def _observe(d: _Decision, o: Observation) -> None:
    if d.state.cluster_error is not None:
        d.emit(ev.ClusterUnreachable(None))
    if o.brokers is not None:
        brokers = {b.id: b for b in o.brokers}
        if dict(d.state.brokers.items()) != brokers:
            live_before = d.state.live_brokers()
            d.emit(ev.BrokersObserved(tuple(sorted(o.brokers))))
            if d.state.live_brokers() != live_before:
                for tp in sorted(d.state.waiting.keys()):
                    _reconsider(d, tp)
                _reassert_rates(d, (d.state.live_brokers() or frozenset()) - (live_before or frozenset()))
    gone: list[tuple[str, str]] = []
    unsure: set[str] = set()  # topics the state knows that this look does not show: their partitions wait
    for topic in sorted(o.denied):
        if d.state.denied.get(topic) != o.denied[topic]:
            d.emit(ev.TopicAccessDenied(topic, o.denied[topic]))
    for topic in sorted(o.topics):
        info = o.topics[topic]
        if topic in d.state.denied and topic not in o.denied:
            d.emit(ev.TopicAccessDenied(topic, None))  # it could be described again
        known = d.state.topics.get(topic)
        if known is not None and info is not None and info.topic_id is None:
            info = info._replace(topic_id=known.topic_id)  # a look that gives no id: nothing said of it
        if known is not None and (info is None or known.topic_id not in (None, info.topic_id)):
            # Not the topic the state knows: absent, or another topic of that name. A broker whose metadata
            # lags answers so for a topic it has not seen created: believed only when a look METADATA_SETTLE
            # later still says so, and no look in between showed the topic (docs/algorithm.md, section 5).
            unsure.add(topic)
            if topic not in d.state.missing:
                d.emit(ev.TopicMissing(topic, o.now, info.topic_id if info is not None else None))
            elif _stood(o.now, d.state.missing[topic]):
                d.emit(ev.TopicObserved(topic, None))
                gone.append((topic, f"topic {topic} was deleted" if info is None else
                             f"topic {topic} was deleted and created again (topic id {known.topic_id}, now "
                             f"{info.topic_id})"))
                if info is not None:
                    d.emit(ev.TopicObserved(topic, info))
            continue
        if known != info or topic in d.state.missing:
            d.emit(ev.TopicObserved(topic, info))  # (shown again: what a TopicMissing recorded is cleared)
    for tp in sorted(o.partitions):
        if tp.topic in o.denied or tp.topic in unsure:
            # an adapter that reports it anyway: the partition waits (plan) until the topic can be described;
            # or the look shows another topic of that name (not believed yet): nothing of it is recorded
            continue
        seen = d.state.known_at.get(tp)
        if _not_after(o.now, seen):
            # Taken before (or at the very time of) the newest thing the state knows of it (a look recorded,
            # or the cluster's answer to an alter or cancel): it may predate that action, so it judges and
            # records nothing.
            continue
        ps = o.partitions[tp]
        known = d.state.observed.get(tp)
        if ps.size_bytes is None and known is not None and known.size_bytes is not None:
            ps = ps._replace(size_bytes=known.size_bytes)  # sizes are measured rarely; keep the last one
        if known is not None and _behind(known, ps):
            # A broker whose metadata predates what the log recorded (KRaft's epochs only grow), however
            # long ago: it judges and records nothing.
            continue
        if known is not None and _came_back(d.state, tp, known, ps) and not _stood(o.now, seen):
            # Replicas grew back with nothing in progress: no reassignment shows that; a broker's metadata
            # from before the last change does (planned from, it would copy a dropped replica back).
            continue
        settled = known == ps and _stood(o.now, seen)
        if known != ps:
            d.emit(ev.PartitionObserved(tp, ps, o.now))
        if tp in d.state.steps:
            _check_step(d, tp, settled)
        elif tp in d.state.waiting and (settled or ps.reassignment_in_progress
                                        or not d.state.waiting[tp].startswith(OTHER_TOOLS_REASSIGNMENT)):
            # A partition waiting for another tool's reassignment is planned again once a look that shows
            # it ended is confirmed by one METADATA_SETTLE later: a broker's metadata lags the controller
            # and shows the reassignment's RS after its end (the fault simulator's seeds 2391 and 6531:
            # planned from it, a step copied back a replica the partition had dropped).
            _reconsider(d, tp)
    for topic, reason in gone:
        _topic_deleted(d, topic, reason)
    _settle(d)


def _not_after(at: float | None, seen: float | None) -> bool:
    """Whether a look stamped ``at`` is no later than ``seen``, the newest thing the state knows of its
    partition (and not after a clock set back): it may predate what the state knows, so it counts for nothing."""
    return at is not None and seen is not None and at <= seen and not set_back(at, seen)


def _behind(known, ps) -> bool:
    """Whether the look ``ps`` is older than the one recorded, ``known``, by their leader epochs (both given,
    within one topic id: ``state._forget_epochs``). KRaft bumps a partition's leader epoch at every leader
    change and every replica removal, and a broker answers from the metadata it last applied, which may lag
    without bound (one cut off from the quorum keeps answering). So a lower epoch is older, whatever the
    time between the looks. And a look at the same epoch as a recorded reassignment in progress that both
    adds and drops replicas, showing all of its replicas with nothing in progress, is torn: its completion
    drops RR and its cancel drops AR, and either bumps the epoch, so only the controller's "nothing in
    progress" beside a broker's replicas from before that shows it. (A reassignment that adds nothing is
    cancelled to the very same replicas at the same epoch: no rule for it.) Without epochs the settle rules
    judge (``_came_back``, ``_stood``)."""
    if known.leader_epoch is None or ps.leader_epoch is None:
        return False
    if ps.leader_epoch < known.leader_epoch:
        return True
    # (the recorded look must itself hold a reassignment's whole RS, AR and RR included: a look whose replicas
    # come from metadata that already applied the completion (TR) or a cancel's revert (RS - AR) while its
    # AR/RR come from an earlier answer of the controller shows those replicas "in progress"; taken for the
    # step's RS, it set aside every later look at the partition, for good)
    return (ps.leader_epoch == known.leader_epoch and bool(known.adding) and bool(known.removing)
            and set(known.adding) | set(known.removing) <= set(known.replicas)
            and not ps.reassignment_in_progress and set(ps.replicas) == set(known.replicas))


def _came_back(s: State, tp: TopicPartition, known, ps) -> bool:
    """Whether ``ps`` shows a replica the look recorded before does not (more replicas, or one in place of
    another: the CR of a step that swapped a replica), with nothing in progress in either, and not as the
    target of the step in flight (an add-only step Kafka completed between two looks). A broker's
    metadata from before the last change shows that (seed 86: a step's CR 1,3 seen again just after its
    TR 1,2, taken for a new request's target 1,3, which then completed with no step)."""
    if (known.reassignment_in_progress or ps.reassignment_in_progress
            or not set(ps.replicas) - set(known.replicas)):
        return False
    f = s.steps.get(tp)
    return f is None or tuple(ps.replicas) != tuple(f.step.tr)


def _stood(now: float | None, since: float | None) -> bool:
    """Whether what was recorded at ``since`` has stood ``METADATA_SETTLE`` seconds by ``now`` (without
    a clock, or across a clock set back, the look before is the one that confirms)."""
    return now is None or since is None or set_back(now, since) or now - since >= METADATA_SETTLE


def _topic_deleted(d: _Decision, topic: str, reason: str) -> None:
    """Every unfinished partition of a deleted topic ends as cancelled, saying why (rare: a scan)."""
    for tp, entry in sorted(d.state.partitions.items()):
        if tp.topic != topic or entry.status in TERMINAL:
            continue
        f = d.state.steps.get(tp)
        if f is not None:
            d.emit(ev.StepFailed(entry.request_id, tp, f.number, reason, at=d.now))
        d.emit(ev.PartitionCancelled(entry.request_id, tp, False, final=True, reason=reason))


def _looks_paced(d: _Decision, p: LooksPaced) -> None:
    if d.state.looks_paced != p.reason:
        d.emit(ev.LooksPaced(p.reason) if p.reason is not None else
               ev.LooksPaced(None, p.deferred, p.longest_wait, p.lasted))


def _observation_failed(d: _Decision, o: ObservationFailed) -> None:
    if d.state.cluster_error != o.reason:
        d.emit(ev.ClusterUnreachable(o.reason))


# --- what the cluster said to each action --------------------------------------------------------


def _outcome(d: _Decision, o: ActionOutcome) -> None:
    _OUTCOMES[type(o.action)](d, o.action, o.result, o.now)


def _unavailable_code(result) -> tuple[str, str]:
    if isinstance(result, Refused):
        return result.code, result.message
    return "UNAVAILABLE", str(result)


def _start_outcome(d: _Decision, a: StartStep, result, now) -> None:
    f = d.state.steps.get(a.tp)
    if f is None or f.request_id != a.request_id or f.number != a.number:
        return  # about a step no longer in flight
    if f.aborting:
        # Answered after its cancel was decided: the alter may have reached the controller after the
        # cancel did. Only a look taken after this answer judges the abort (and a reassignment it shows
        # still in progress is cancelled again).
        d.emit(ev.ActionAnswered("start_step", a.request_id, a.tp, a.number, now, _note(result)))
        return
    if isinstance(result, Ok):
        if not f.started:
            d.emit(ev.StepStarted(a.request_id, a.tp, a.number, now))
    elif isinstance(result, Refused):
        entry = d.state.partitions[a.tp]
        d.emit(ev.StepFailed(a.request_id, a.tp, a.number, f"the cluster refused step {a.number}: {result}",
                             retry.retry_at(now, entry.failures + 1), now))
    else:  # the cluster could not be asked: the outcome is unknown; the watcher may still see it started
        d.emit(ev.ActionFailed("start_step", "UNAVAILABLE", str(result), f.attempt, retry.retry_at(now, f.attempt),
                               request_id=a.request_id, tp=a.tp, number=a.number, at=now))


def _cancels_step(s: State, a: CancelStep, f) -> bool:
    """Whether ``a`` is a cancel of the step in flight ``f``. A cancel names the request that cancelled
    the partition: the step's own, or, for a step inherited from a request it superseded (the step
    goes on under the new owner), the owner's, which has no step of its own in flight there."""
    if f.number != a.number or not f.aborting:
        return False
    if a.request_id == f.request_id:
        return True
    entry = s.partitions.get(a.tp)
    return entry is not None and entry.request_id == a.request_id


def _cancel_outcome(d: _Decision, a: CancelStep, result, now) -> None:
    f = d.state.steps.get(a.tp)
    if f is None or not _cancels_step(d.state, a, f):
        return
    rid = f.request_id  # the events about the step name its own request
    if isinstance(result, Ok):
        if f.error is not None:
            d.emit(ev.ActionSucceeded("cancel_step", f.attempt, rid, a.tp, a.number))
        # Reverted, or NO_REASSIGNMENT_IN_PROGRESS (Kafka's 85: nothing was in progress, a normal answer).
        # Where the partition stands is what the next look, taken after this answer, shows.
        d.emit(ev.ActionAnswered("cancel_step", rid, a.tp, a.number, now, result.note))
        return
    code, message = _unavailable_code(result)
    if isinstance(result, Refused):  # Kafka will not revert it: the step goes on, the cancel applies after
        d.emit(ev.ActionFailed("cancel_step", code, f"the cluster refused to abort step {a.number} ({message}); "
                               f"the step goes on and the cancel applies when it completes", f.attempt,
                               final=True, request_id=rid, tp=a.tp, number=a.number, at=now))
        return
    d.emit(ev.ActionFailed("cancel_step", code, message, f.attempt, retry.retry_at(now, f.attempt),
                           request_id=rid, tp=a.tp, number=a.number, at=now))


def _note(result) -> str:
    return result.note if isinstance(result, Ok) else f"{type(result).__name__.lower()}: {result}"


def _elect_outcome(d: _Decision, a: ElectLeader, result, now) -> None:
    el = d.state.elections.get(a.tp)
    if el is None or isinstance(result, Ok):
        return  # the watcher sees the new leader (or, after ELECTION_GRACE, that it did not happen)
    _election_failed(d, a.tp, el, *_unavailable_code(result), now)


def _election_failed(d: _Decision, tp: TopicPartition, el, code: str, message: str, now) -> None:
    if el.attempt >= retry.ELECTION_ATTEMPTS:
        d.emit(ev.ActionFailed(
            "elect_leader", code, f"broker {el.leader} did not become leader after {el.attempt} elections "
            f"({message}); the partition goes on without it", el.attempt, final=True, tp=tp, at=now))
    else:
        d.emit(ev.ActionFailed("elect_leader", code, message, el.attempt, retry.retry_at(now, el.attempt), tp=tp,
                               at=now))
    if tp in d.state.waiting:
        _reconsider(d, tp)


def _throttles_outcome(d: _Decision, a, result, now) -> None:
    action = "apply_throttles" if isinstance(a, ApplyThrottles) else "remove_throttles"
    s = d.state
    if isinstance(result, Ok):
        if s.throttle_error is not None and s.throttle_failed.is_empty():
            d.emit(ev.ActionSucceeded(action, s.throttle_attempt, throttles=a.throttles))
        return
    code, message = _unavailable_code(result)
    # One round of changes fails as a whole: the first failing piece sets the retry time.
    pending = s.throttle_retry_at is not None and now is not None and now < s.throttle_retry_at
    attempt = s.throttle_attempt if pending else s.throttle_attempt + 1
    again = s.throttle_retry_at if pending else retry.retry_at(now, attempt)
    d.emit(ev.ActionFailed(action, code, message, attempt, again, throttles=a.throttles, at=now))
    d.steps_changed = True


_OUTCOMES: dict[type, Callable] = {
    StartStep: _start_outcome,
    CancelStep: _cancel_outcome,
    ElectLeader: _elect_outcome,
    ApplyThrottles: _throttles_outcome,
    RemoveThrottles: _throttles_outcome,
}


def _throttles_observed(d: _Decision, o: ThrottlesObserved) -> None:
    """Compare the throttle configuration read back with what the log says is in force. A broker
    answers configs from its metadata, which may lag the controller: a difference is first recorded
    (``ThrottlesDiffered``) and corrected (``ThrottlesDrifted``) only where a read-back taken at least
    ``METADATA_SETTLE`` seconds later still shows it (a piece changed meanwhile is judged afresh).

    A broker's rate counts as missing when it is not set, and also when it is set to another value
    than the rate in force (another tool's ``kafka-configs.sh --alter``, or Kafka's reassign tool's
    ``--throttle``): kreassign would copy at a rate it did not choose. The values read travel with the
    difference (``ThrottleSet.rates``) so that its events say "rate X read, Y in force"."""
    s = d.state
    force, read = s.throttles, o.throttles
    pending = minus(force, s.throttle_failed)  # pieces being retried are known not to match
    live = s.live_brokers()
    # a dead broker's configs cannot be read (a rate is a config of the broker itself): its rate, kept
    # in force, is removed when the broker is back if no step needs it then; read as missing, it would
    # be forgotten while set (the fault simulator's seed 11532: a rate left on a broker back from the dead)
    read_brokers = frozenset(b for b in o.brokers if live is None or b in live)
    values = {r.broker: r for r in read.rates}  # a reader that gives no values is judged on presence alone

    def absent(b: int, present: frozenset[int], side: str) -> bool:
        if b not in present:
            return True
        r = values.get(b)
        return r is not None and force.rate is not None and getattr(r, side) != force.rate

    missing = ThrottleSet(
        frozenset(e for e in pending.leader if e.topic in o.topics and e not in read.leader),
        frozenset(e for e in pending.follower if e.topic in o.topics and e not in read.follower),
        frozenset(b for b in pending.leader_brokers if b in read_brokers and absent(b, read.leader_brokers, "leader")),
        frozenset(b for b in pending.follower_brokers
                  if b in read_brokers and absent(b, read.follower_brokers, "follower")),
    )
    want = needed(throttled(s), rate_in_kafka(s))
    ours = s.partitions
    # an entry whose last change failed may be set or not (a refused change left it as it was, a lost
    # answer may have set it): neither its absence nor its presence is a drift; its retry settles it
    failed = s.throttle_failed
    unexpected = ThrottleSet(
        frozenset(e for e in read.leader if e not in want.leader and e not in force.leader
                  and e not in failed.leader and TopicPartition(e.topic, e.partition) in ours),
        frozenset(e for e in read.follower if e not in want.follower and e not in force.follower
                  and e not in failed.follower and TopicPartition(e.topic, e.partition) in ours),
    )
    prior = s.throttles_differed
    if missing.is_empty() and unexpected.is_empty():
        if prior is not None:
            d.emit(ev.ThrottlesDiffered(ThrottleSet(), ThrottleSet(), o.now))  # it was the lag
        return

    def noted(t: ThrottleSet) -> ThrottleSet:  # the rate in force and the values read on its brokers
        return noting(t, force.rate, read)

    if prior is None or not _stood(o.now, prior.at):
        if prior is None or (missing, unexpected) != (_bare(prior.missing), _bare(prior.unexpected)):
            d.emit(ev.ThrottlesDiffered(noted(missing), unexpected, o.now))  # too soon to judge: read again later
        return
    drift = (_common(missing, prior.missing), _common(unexpected, prior.unexpected))
    rest = (minus(missing, drift[0]), minus(unexpected, drift[1]))
    if not (drift[0].is_empty() and drift[1].is_empty()):
        d.emit(ev.ThrottlesDrifted(noted(drift[0]), drift[1]))
        _reconcile_throttles(d)  # the rates it found missing are set again if still kept (``throttles_lost``)
    if not (rest[0].is_empty() and rest[1].is_empty()) or d.state.throttles_differed is not None:
        d.emit(ev.ThrottlesDiffered(noted(rest[0]), rest[1], o.now))  # seen now for the first time: judged later


def _bare(t: ThrottleSet) -> ThrottleSet:
    """``t`` as pieces alone: without the rate in force and the values read that a difference carries."""
    return t._replace(rate=None, rates=()) if t.rates or t.rate is not None else t


def _common(a: ThrottleSet, b: ThrottleSet) -> ThrottleSet:
    """What both ``a`` and ``b`` name (entries and brokers)."""
    return ThrottleSet(a.leader & b.leader, a.follower & b.follower, a.leader_brokers & b.leader_brokers,
                       a.follower_brokers & b.follower_brokers, a.rate)


# --- throttles released before the ISR join ----------------------------------------------------------


def rate_in_kafka(s: State) -> int | None:
    """The rate kreassign gives Kafka's ``*.replication.throttled.rate`` for the throttle in force: the
    throttle plus the ``throttle_margin_pct`` limit (``throttles.with_margin``). Everything the core
    predicts (copy times, releases, weights) counts with the throttle itself."""
    return with_margin(s.throttle_rate, s.limits.throttle_margin_pct)


def throttled(s: State):
    """(tp, step) of every step in flight whose throttle entries are needed (not released)."""
    return ((tp, f.step) for tp, f in s.steps.items() if not f.released)


def _release_seconds(s: State) -> float:
    return s.limits.throttle_release_ms / 1000.0


def copy_rates(s: State) -> dict[TopicPartition, float]:
    """The throttle's share each throttled copy in flight gets (bytes/s): the rate of its busiest
    receiving broker, split among the throttled copies into it. Empty when throttling is off."""
    rate = s.throttle_rate
    if rate is None:
        return {}
    into = _copies_into(f.step for f in s.steps.values() if not f.released)
    return {tp: rate / max(into[b] for b in f.step.nr)
            for tp, f in s.steps.items() if not f.released and f.step.nr}


def _copies_into(steps) -> dict[int, int]:
    """How many of the throttled copies of ``steps`` each receiving broker takes."""
    into: dict[int, int] = {}
    for step in steps:
        for b in step.nr:
            into[b] = into.get(b, 0) + 1
    return into


def _catch_up(d: _Decision, o: CatchUpObserved) -> None:
    """Release a copy from the throttle once what it still misses is what the throttle gives it in
    ``throttle_release_ms`` (the time to notice and to change the config): its last bytes flow
    unthrottled and its replicas join the ISR unthrottled, so the leader never waits for an in-sync
    follower the quota holds back (measured on Kafka 4.0: that stalls acks=all producers for
    seconds). What goes unthrottled is bounded per receiving broker by a bucket: at most
    ``throttle_release_ms`` of the rate at once, paid back at a quarter of the rate (``state.
    RELEASE_REFILL``), so a broker receives on average at most 25 % more than its throttle."""
    s = d.state
    if s.throttle_rate is None:
        return
    lead = _release_seconds(s)
    budget = s.throttle_rate * lead
    shares = copy_rates(s)
    debt: dict[int, float] = {}
    for tp in sorted(o.remaining):
        f = s.steps.get(tp)
        remaining = o.remaining[tp]
        if f is None or f.released or f.aborting or not f.started or tp not in shares:
            continue
        if remaining > shares[tp] * lead:
            continue
        owed = {b: debt.get(b, release_debt(s, b, o.now)) for b in f.step.nr}
        if all(x + remaining <= budget for x in owed.values()):
            d.emit(ev.ThrottleReleased(f.request_id, tp, f.number, remaining, o.now))
            debt.update({b: x + remaining for b, x in owed.items()})


HOT_SECONDS = 2.0
"""A copy predicted to be this close to its release (or to its end) is looked at at every fast look,
not only at every poll: it is released in time, and its completion is seen at once."""


def _predicted(s: State, tp: TopicPartition, f, share: float, now: float | None, last: dict) -> float | None:
    """What a copy still misses by now: the least of its last measurement and its size less what the
    throttle's share has moved since it started; ``None`` when neither is known."""
    guesses = []
    if tp in last:
        guesses.append(last[tp])
    obs = s.observed.get(tp)
    if obs is not None and obs.size_bytes is not None and f.started_at is not None and now is not None:
        guesses.append(obs.size_bytes - share * (now - f.started_at))
    return min(guesses) if guesses else None


def near_done(s: State, now: float | None = None, last: dict | None = None) -> set[TopicPartition]:
    """Steps in flight worth looking at more often than the rest (every fast look): released (their
    last bytes flow unthrottled), being aborted, copying nothing (Kafka completes them at once),
    awaiting an election, or predicted within HOT_SECONDS of their release (``last``: the catch-up each copy
    had when last measured)."""
    hot = {tp for tp, f in s.steps.items() if f.released or f.aborting or not f.step.nr} | set(s.elections.keys())
    lead = _release_seconds(s)
    for tp, share in copy_rates(s).items():
        f = s.steps[tp]
        if f.started:
            left = _predicted(s, tp, f, share, now, last or {})
            if left is not None and left <= share * (lead + HOT_SECONDS):
                hot.add(tp)
    return hot


FIRST_MEASURE = 1.0
"""Seconds after a throttled copy starts that its catch-up is first measured, if its release is predicted
later. Kafka's follower quota lets up to a window of the rate through at once (replication.quota.window.num
11 samples of 1 s: a quota that recorded less than its rate for a while), so a copy can start at network
speed and end seconds before the throttle alone would let it: one measured halfway to its predicted release
was seen only after it had joined the ISR still throttled (the simulator, moves drawn as tests/test_simulate.py
draws them: 2 of 80 with an engine answering at once). Measured early, it shows its speed (``measured_after``)."""


def measured_after(s: State, measured: dict, remaining: Mapping[TopicPartition, int], now: float) -> dict:
    """What the engine knows of each copy's catch-up after a measurement at ``now`` (``remaining``: bytes
    each copy still misses): tp -> (bytes missed, when, bytes/s it moved since the measurement before, or
    since it started from its size; ``None`` when neither is known), for the copies still in flight."""
    out = {}
    for tp in {**measured, **remaining}:
        m = measured.get(tp)
        f = s.steps.get(tp)
        if f is None:
            continue
        if tp not in remaining:
            out[tp] = m
            continue
        n = remaining[tp]
        if m is not None and f.started_at is not None and m[1] >= f.started_at:
            before, at = m[0], m[1]
        else:
            obs = s.observed.get(tp)
            before = obs.size_bytes if obs is not None else None
            at = f.started_at
        speed = (before - n) / (now - at) if before is not None and at is not None and now > at else None
        out[tp] = (n, now, speed)
    return out


def _speed(share: float, tp: TopicPartition, measured: dict) -> float:
    """How fast a copy is predicted to move: its throttle share, or faster where its last measurement
    showed it faster (a quota's early burst; never slower, so no release is looked for late)."""
    m = measured.get(tp)
    speed = m[2] if m is not None and len(m) > 2 else None  # (a caller may keep (bytes, when) alone)
    return max(share, speed) if speed is not None else share


def copy_left(s: State, tp: TopicPartition, share: float, now: float, measured: dict) -> float | None:
    """Bytes a throttled copy in flight is predicted to miss at ``now``: from its last measurement
    (``measured``: tp -> (bytes missed, when measured, its speed then: ``measured_after``)) less what it
    moved since at the faster of its throttle share and that speed, else from its size less what the share
    moved since it started; ``None`` when neither is known."""
    f = s.steps[tp]
    if tp in measured:
        left, at = measured[tp][0], measured[tp][1]
        return left - _speed(share, tp, measured) * max(0.0, now - at)
    obs = s.observed.get(tp)
    if obs is not None and obs.size_bytes is not None and f.started_at is not None:
        return obs.size_bytes - share * max(0.0, now - f.started_at)
    return None


def _release_in(s: State, tp: TopicPartition, share: float, left: float, now: float,
                speed: float | None = None) -> float:
    """Seconds until a throttled copy missing ``left`` bytes may be released (``_catch_up``): until its
    bytes are ``throttle_release_ms`` of its share (moving at ``speed``, default the share), and until the
    bucket of each of its receiving brokers has room for them (paid back at ``RELEASE_REFILL`` of the rate)."""
    lead = _release_seconds(s)
    wait = max(0.0, left - share * lead) / (speed or share)
    rate = s.throttle_rate
    if rate:
        at_release = max(0.0, min(left, share * lead))  # what it will miss when its turn comes
        owed = max((release_debt(s, b, now) for b in s.steps[tp].step.nr), default=0.0)
        wait = max(wait, (owed + at_release - rate * lead) / (RELEASE_REFILL * rate))
    return wait


def next_looks(s: State, now: float, measured: dict, floor: float, ceiling: float) -> dict[TopicPartition, float]:
    """When each partition the core watches is next worth a look (absolute times, on ``now``'s clock),
    and so when the shell must look (docs/engine.md, *What the engine's looks cost*). Nothing is looked
    at sooner than ``floor`` seconds from now, and everything watched at least every ``ceiling``:

    * a throttled copy in flight: at its predicted release point (``copy_left`` at the throttle's
      share; ``throttle_release_ms`` before its end, and once the receiving brokers' release bucket has
      room for it), where its catch-up is measured (``measure_due``); a copy whose bytes are not known:
      at the ceiling;
    * a step whose end comes with no more copying (released from the throttle, being aborted, copying
      nothing), and a pending election: at the floor, until the look that sees it done;
    * any other step in flight: at the ceiling.

    Waiting and ready partitions are not listed (there may be many): the shell looks at everything it
    watches at every ceiling anyway. O(steps in flight + elections)."""
    out: dict[TopicPartition, float] = {}
    soon, late = now + floor, now + ceiling
    shares = copy_rates(s)
    for tp, f in s.steps.items():
        if f.released or f.aborting or not f.step.nr:
            out[tp] = soon
        elif f.started and tp in shares:
            left = copy_left(s, tp, shares[tp], now, measured)
            at = late if left is None else now + _release_in(s, tp, shares[tp], left, now,
                                                               _speed(shares[tp], tp, measured))
            out[tp] = min(late, max(soon, at))
        else:
            out[tp] = late
    for tp in s.elections.keys():
        out[tp] = soon
    return out


def next_measures(s: State, now: float, measured: dict, floor: float, ceiling: float) -> dict[TopicPartition, float]:
    """When each throttled copy's catch-up is next worth measuring before the look at its release point
    (``next_looks``): halfway from its last measurement (or its start) to that point, no sooner than
    ``floor`` from now, where ``measure_due`` asks for it. So a copy is measured at about half, three
    quarters ... of its way, and one ahead of its prediction (Kafka's quota lets a window of the rate
    through early) is released before it ends. A measure needs no look at the partition: the shell
    sends only its catch-up requests. Copies whose next look (at their release point, or the full look
    at the ceiling) comes first are left out. O(copies in flight)."""
    out: dict[TopicPartition, float] = {}
    shares = copy_rates(s)
    for tp in copying(s):
        if tp not in shares:
            continue
        left = copy_left(s, tp, shares[tp], now, measured)
        f = s.steps[tp]
        since = measured[tp][1] if tp in measured else f.started_at
        if left is None or since is None:
            continue
        release = now + _release_in(s, tp, shares[tp], left, now, _speed(shares[tp], tp, measured))
        at = (since + release) / 2
        if tp not in measured:  # first measured early: a quota's burst shows (FIRST_MEASURE)
            at = min(at, since + FIRST_MEASURE)
        at = max(now + floor, at)
        if at < min(release, now + ceiling) - 1e-9:
            out[tp] = at
    return out


def _releases_in(s: State, now: float, measured: dict) -> dict[TopicPartition, float]:
    """Seconds from ``now`` until each throttled copy in flight whose bytes are known is predicted to reach
    its release point (``_release_in``; 0 for one already there). O(copies in flight)."""
    shares = copy_rates(s)
    out = {}
    for tp in copying(s):
        if tp not in shares:
            continue
        left = copy_left(s, tp, shares[tp], now, measured)
        if left is not None:
            out[tp] = _release_in(s, tp, shares[tp], left, now, _speed(shares[tp], tp, measured))
    return out


def release_points(s: State, now: float, measured: dict) -> dict[TopicPartition, float]:
    """When each throttled copy in flight whose bytes are known is predicted to reach its release point
    (absolute times on ``now``'s clock): what ``next_looks`` plans for it before the floor and the ceiling
    bound it."""
    return {tp: now + wait for tp, wait in _releases_in(s, now, measured).items()}


def releasing(s: State, now: float, measured: dict, within: float) -> set[TopicPartition]:
    """Throttled copies predicted to reach their release point within ``within`` seconds of ``now``: a
    measure of one of them that waits that long (the request budget holds reads up to a second) could
    see it end throttled, and its ISR join stall acks=all writes."""
    return {tp for tp, wait in _releases_in(s, now, measured).items() if wait <= within}


def measure_due(s: State, now: float, measured: dict, floor: float) -> list[TopicPartition]:
    """Throttled copies whose catch-up is worth measuring at a look at ``now``: those whose bytes are not
    known (``copy_left``), those predicted within ``floor`` of their release (``_release_in``), and those whose last
    measurement (or start) is at least as old as the time still predicted to their release point: a copy
    is measured a few times as it nears that point (at about half, three quarters ...), so a copy ahead of
    its prediction (Kafka's quota window lets some seconds of the rate through early) is released in time."""
    shares = copy_rates(s)
    out = []
    for tp in copying(s):
        if tp not in shares:
            continue
        left = copy_left(s, tp, shares[tp], now, measured)
        if left is None:
            out.append(tp)
            continue
        to_go = _release_in(s, tp, shares[tp], left, now, _speed(shares[tp], tp, measured))
        f = s.steps[tp]
        since = measured[tp][1] if tp in measured else f.started_at
        first = tp not in measured and since is not None and now - since >= FIRST_MEASURE - 1e-9
        if to_go <= floor or first or (since is not None and now - since >= to_go):
            out.append(tp)
    return out


def catch_up_due(s: State, now: float | None, last: dict) -> list[TopicPartition]:
    """Copies to measure at a fast look: the hot ones still throttled."""
    hot = near_done(s, now, last)
    return [tp for tp in copying(s) if tp in hot]


def copying(s: State) -> list[TopicPartition]:
    """Steps whose catch-up is worth measuring: started, copying, throttled still."""
    return sorted(tp for tp, f in s.steps.items()
                  if f.started and f.step.nr and not f.released and not f.aborting)


# --- ticks -------------------------------------------------------------------------------------


def _tick(d: _Decision, _t: Tick) -> None:
    # A step starts only from a look taken just before this tick (``_t.looked``, when the shell says
    # which partitions it looked at): the caps count it against its partition's leader as it is now.
    # Steps in flight are judged when they are observed (``_observe``), never here: a tick may follow
    # a look at only some partitions, and the last observation of the others may predate their step.
    _retry_steps(d)
    _check_elections(d)
    _settle(d)
    _release_drops(d)
    _reconcile_throttles(d)
    if d.state.paused:
        return
    _hold_unconfirmed(d, _t.looked)
    s = d.state
    starts: list[Start] = []
    for decision in _batch(s, d.now, _t.looked):
        if isinstance(decision, Start):
            if _held_by_throttles(d.state, decision.tp, decision.step):
                continue  # its throttles failed and their retry is not due: it stays ready
            starts.append(decision)
        elif isinstance(decision, Requeue):
            d.emit(ev.PartitionReady(s.partitions[decision.tp].request_id, decision.tp, decision.step,
                                     weight(s, decision.tp, decision.step)))
        else:
            _resolve(d, decision.tp, decision.result)
    _release_drops(d)  # a copy re-queued under another leader above may have been a held group's last
    if not starts:
        return
    free = released_at_start(d.state, [(x.tp, x.step) for x in starts], d.now, _t.looked)
    want = needed(list(throttled(d.state)) + [(x.tp, x.step) for x in starts if x.tp not in free],
                  rate_in_kafka(d.state))
    _removed, to_apply = reconcile(d.state.throttles, want)
    to_apply = minus(to_apply, _dead_brokers(d.state, to_apply))
    if not to_apply.is_empty():
        d.emit(ev.ThrottlesApplied(to_apply))  # before the steps that need them
    for x in starts:
        entry = d.state.partitions[x.tp]
        d.emit(ev.StepPlanned(entry.request_id, x.tp, entry.steps_planned + 1, x.step, x.weight))
        if x.tp in free:
            d.emit(ev.ThrottleReleased(entry.request_id, x.tp, entry.steps_planned + 1, free[x.tp], d.now))


def release_candidates(s: State, tps) -> list[TopicPartition]:
    """The ready partitions of ``tps`` that may start released (``released_at_start``) by the size the log
    holds: the shell measures their size with the tick's look (a leader's DescribeLogDirs), as the log's
    may be hours old (measured at the request's submit; a partition grows)."""
    rate = s.throttle_rate
    if rate is None or not s.limits.release_at_start:
        return []
    most = rate * _release_seconds(s)
    out = []
    for tp in tps:
        entry, obs = s.partitions.get(tp), s.observed.get(tp)
        if entry is not None and entry.status == READY and obs is not None and obs.size_bytes is not None \
                and obs.size_bytes <= most:
            out.append(tp)
    return out


def released_at_start(s: State, starts: list, now: float | None,
                      looked: Mapping | None = None) -> dict[TopicPartition, int]:
    """The starting copies (``starts``: (tp, step) in the order they start) that the release rule
    (``_catch_up``) would let go at once: the whole log a copy makes (its partition's size, as the tick's
    look measured it: ``looked``; the log's size only for a shell that gives no look, whose observations
    all count as fresh) is no more than its share of the throttle gives it in ``throttle_release_ms``, and each of
    its receiving brokers' release bucket has room for it. They start released: no throttle entry is set
    for them and removed a moment later (two config changes, each a metadata record every broker applies,
    per small step), and their bytes are charged to the bucket as a release's are, so what a broker
    receives unthrottled is bound as before (``release_at_start``, Q = 1). tp -> bytes charged."""
    rate = s.throttle_rate
    if rate is None or not s.limits.release_at_start:
        return {}
    lead = _release_seconds(s)
    budget = rate * lead
    into = _copies_into([f.step for f in s.steps.values() if not f.released] + [step for _tp, step in starts])
    out: dict[TopicPartition, int] = {}
    debt: dict[int, float] = {}
    for tp, step in starts:
        obs = s.observed.get(tp) if looked is None else looked.get(tp)
        size = obs.size_bytes if obs is not None else None  # a look that measured no size: started throttled
        if not step.nr or size is None or size > rate / max(into[b] for b in step.nr) * lead:
            continue
        owed = {b: debt.get(b, release_debt(s, b, now)) for b in step.nr}
        if all(x + size <= budget for x in owed.values()):
            out[tp] = size
            debt.update({b: x + size for b, x in owed.items()})
            for b in step.nr:
                into[b] -= 1  # not throttled: the others' shares grow
    return out


def _hold_unconfirmed(d: _Decision, looked: Mapping | None) -> None:
    """A ready partition whose look this tick leaves its leader unconfirmed (``unconfirmed``: the look
    shows another leader and could not be recorded) starts nothing from it, and says so: it waits, with
    the two leaders and why the look was set aside, until a look that counts plans it again
    (``_observe``). Held silently, it waited as long as a clock set back (up to ``CLOCK_SET_BACK``) with
    no reason anywhere."""
    if not looked:
        return
    s = d.state
    for tp in sorted(looked):
        entry = s.partitions.get(tp)
        if entry is None or entry.status != READY or not unconfirmed(s, tp, looked[tp]):
            continue
        known = s.observed.get(tp)
        was = f"broker {known.leader}" if known is not None and known.leader is not None else "no leader"
        now = f"broker {looked[tp].leader}" if looked[tp].leader is not None else "no leader"
        d.emit(ev.PartitionWaiting(entry.request_id, tp, (
            f"{LEADER_UNCONFIRMED}: a look shows {now} leading where the log has {was}, and "
            f"{_set_aside_why(s, tp, looked[tp], d.now)}")))


def _set_aside_why(s: State, tp: TopicPartition, look: PartitionState, now: float | None) -> str:
    """Why ``_observe`` set aside the look ``look`` at ``tp`` (stamped ``now``, as the tick's own look is),
    in the words of a waiting reason: the rule that held it, not a guess."""
    known, seen = s.observed.get(tp), s.known_at.get(tp)
    if _not_after(now, seen):
        return ("it was taken no later than what the log knows of the partition (two looks at one instant, or a "
                "clock set back)")
    if known is not None and _came_back(s, tp, known, look):
        back = sorted(set(look.replicas) - set(known.replicas))
        return (f"it shows replica(s) {back} back with nothing in progress, as a broker's metadata from before the "
                f"last change does: it counts once a look {METADATA_SETTLE:g} s after the log's confirms it")
    return "it could not be recorded (its topic is not shown as the log knows it, or may not be described)"


def _retry_steps(d: _Decision) -> None:
    """Alters and aborts that failed (the cluster could not be asked) are tried again when due; an
    alter only once the throttles it needs are in force, so a step never starts unthrottled, and only if
    planning the partition again from the latest look gives the same step (``_replanned``). A step
    not started whose new replicas' broker went down meanwhile, or that is no longer the partition's
    next step, is given up: it is planned again."""
    s = d.state
    live = s.live_brokers()
    for tp in sorted(s.steps.keys()):
        f = s.steps[tp]
        if not f.started and not f.aborting and live is not None and any(b not in live for b in f.step.nr):
            if _may_still_land(f, d.now):
                continue  # still counted: its last alter, unanswered, may yet reach the controller (seed 2401)
            down = [b for b in f.step.nr if b not in live]
            d.emit(ev.StepFailed(f.request_id, tp, f.number,
                                 f"step {f.number} had not started when broker(s) {down} it copies to went down",
                                 at=d.now))
            continue
        if not f.retry or not retry.due(f.retry_at, d.now):
            continue
        if f.aborting:
            skip = _abort_skip(s, tp, f)
            if skip is not None:  # judged again (rules 2 to 4): the ISR may have changed since the cancel was decided
                code, why = skip
                d.emit(ev.ActionFailed("cancel_step", code, f"step {f.number} is not aborted again: {why}",
                                       f.attempt, final=True, request_id=f.request_id, tp=tp, number=f.number,
                                       at=d.now))
                continue
            d.emit(ev.ActionRetried("cancel_step", f.attempt + 1, f.request_id, tp, f.number, at=d.now))
            continue
        if f.started:
            continue
        stale = _replanned(d.state, tp, f, d.now) or over_caps(d.state, f, tp)
        if stale is not None:
            if _may_still_land(f, d.now):
                continue  # not sent again, and still counted: its last alter may yet reach the controller
            d.emit(ev.StepFailed(f.request_id, tp, f.number, stale, at=d.now))
        elif s.throttle_rate is None or f.released or in_force(d.state.throttles, tp, f.step, live):
            d.emit(ev.ActionRetried("start_step", f.attempt + 1, f.request_id, tp, f.number, f.step.tr, d.now))


def _replanned(s: State, tp: TopicPartition, f, now: float | None) -> str | None:
    """Why the unstarted step ``f`` must not be retried as it was planned (``None``: it may): planned
    again from the latest look, the partition's next step is another one (a replica the step drops
    because it was dead is back in sync, the replicas or the ISR changed, the partition was cancelled or
    taken over, the limits changed). Sent unchanged, it could drop a replica back in sync below
    min.insync.replicas: a retried alter is re-checked against the latest look, as the scheduler
    re-checks a queued step before its first alter (docs/algorithm.md, section 6)."""
    result = plan(s, tp, now)
    if isinstance(result, Step) and (result.cr, result.tr) == (f.step.cr, f.step.tr):
        return None
    obs = s.observed.get(tp)
    seen = "" if obs is None else f" (now {list(obs.replicas)}, in sync {sorted(obs.isr)})"
    return (f"step {f.number} {list(f.step.cr)} -> {list(f.step.tr)} had not started and is not what the partition "
            f"needs any more{seen}: it is planned again")


def _may_still_land(f, now: float | None) -> bool:
    """Whether the last alter of the unstarted step ``f``, which went unanswered, may still reach the
    controller (``ALTER_MAY_LAND``; without a clock, no)."""
    if now is None or f.retry_at is None:
        return False
    return now - (f.retry_at - retry.backoff(f.attempt)) < ALTER_MAY_LAND


def over_caps(s: State, f, tp: TopicPartition | None = None) -> str | None:
    """Why the unstarted step ``f`` must not be retried now (``None``: it may): its copies, charged to
    its partition's leader as last observed (a leader that moved since it was planned serves them),
    with every other step in flight, would exceed a limit. Caps are promises to the operator: a retried
    alter is re-checked as the scheduler checks a first one (section 2); the step is given up and its
    partition planned and scheduled again. A drop that took no limit because Kafka would complete it at
    its alter (``at_alter``) is weighed again from the latest look at ``tp``: one that would no longer
    complete there (a kept replica fell out of the ISR) is given up as well, and counts when it starts."""
    if tp is not None and at_alter(f.step.nr, f.weight) and weight(s, tp, f.step):
        return (f"step {f.number} had not started, and Kafka would no longer complete it at its alter (the latest "
                f"look shows a replica it keeps out of the ISR, or a leader it keeps that is not its first "
                f"replica): it is planned again, to count in the limits")
    key = SchedulingKey(f.moves_leader, f.source, tuple(sorted(f.step.nr)), f.weight)
    others = s.in_flight.charge(f.step.nr, f.source, f.moves_leader, -1, f.weight)
    why = refusal(others, s.limits, key, creations(s))
    if why is None:
        return None
    what = {"P": "partitions in flight", "L": "leader moves in flight", A: "replica additions in flight"}.get(why) \
        if not isinstance(why, tuple) else f"{'incoming' if why[0] == 'in' else 'outgoing'} moves of broker {why[1]}"
    return (f"step {f.number} had not started, and started now (its copies served by broker {f.source}, its leader "
            f"as last observed) it would exceed the limit on {what}: it is planned again")


def held_over_caps(state: State, todo: list[Action], now: float | None) -> tuple[list[Action], list[ActionOutcome]]:
    """``todo`` without the alters of unstarted steps that the caps no longer admit, and for each of those an
    outcome saying it was not sent: its copies, charged to its partition's leader as last seen, would exceed a
    cap with the other steps in flight (a leader moved while its alter went unanswered: the fault simulator's
    seed 2102, where a restart altered two partitions out of one broker against a limit of one). The core's
    retry rules then judge the step (``_retry_steps``: given up and planned again), and say why."""
    keep: list[Action] = []
    held: list[ActionOutcome] = []
    for a in todo:
        f = state.steps.get(a.tp) if isinstance(a, StartStep) else None
        why = over_caps(state, f, a.tp) if f is not None and not f.started else None
        if why is None:
            keep.append(a)
        else:
            held.append(ActionOutcome(a, Unavailable(f"not altered again after a restart: {why}"), now))
    return keep, held


def _check_elections(d: _Decision) -> None:
    """Retry failed elections when due; an accepted election that does not show within
    ELECTION_GRACE seconds was lost (the leader changed again, or the request went astray)."""
    for tp, el in sorted(d.state.elections.items()):
        if el.retry:
            if retry.due(el.retry_at, d.now):
                d.emit(ev.ActionRetried("elect_leader", el.attempt + 1, tp=tp, at=d.now))
        elif el.since is not None and d.now is not None and d.now - el.since >= retry.ELECTION_GRACE:
            _election_failed(d, tp, el, "ELECTION_LOST",
                             f"broker {el.leader} was not leader {retry.ELECTION_GRACE:g} s after the election", d.now)


def _held_by_throttles(s: State, tp: TopicPartition, step: Step) -> bool:
    """Whether a step needs a throttle piece whose change failed and is not due for retry yet (the
    tick's reconcile has already sent every piece that is due). A dead broker's rate is not needed (it
    cannot be set, and the broker serves and receives nothing: ``in_force``): a failed change of it
    holds nothing, or a step that replaces a dead broker would wait for it for ever."""
    failed = s.throttle_failed
    if failed.is_empty():
        return False
    want = needed([(tp, step)], rate_in_kafka(s))
    want = minus(want, _dead_brokers(s, want))
    return bool(want.leader & failed.leader or want.follower & failed.follower
                or want.leader_brokers & failed.leader_brokers or want.follower_brokers & failed.follower_brokers)


def _reconcile_throttles(d: _Decision) -> None:
    """Bring the throttles in force to what the steps in flight need. Pieces whose last change
    failed wait for their retry time (``throttle_retry_at``); the rest goes at once. Rates a read-back
    confirmed missing (``State.throttles_lost``) are set again if they are still to be kept
    (``_keeping_rates``): in the drift's decision, or at the next tick if a crash cut its batch short. So
    are rates whose setting failed (out of what is in force, in ``throttle_failed``): a kept rate whose
    re-apply was refused or unanswered is set again at its retry, not removed as stale."""
    s = d.state
    failed = s.throttle_failed
    unset = minus(failed, s.throttles)  # a failed apply is not in force; a failed removal still is
    restore = ThrottleSet(leader_brokers=s.throttles_lost.leader_brokers | unset.leader_brokers,
                          follower_brokers=s.throttles_lost.follower_brokers | unset.follower_brokers)
    want = _keeping_rates(s, needed(throttled(s), rate_in_kafka(s)), restore)
    to_remove, to_apply = reconcile(s.throttles, want)
    if not failed.is_empty():
        if not retry.due(s.throttle_retry_at, d.now):
            to_remove, to_apply = minus(to_remove, failed), minus(to_apply, failed)
        else:
            # a change that failed as unavailable may have happened anyway: what is no longer wanted
            # is removed (removing what is absent changes nothing), so nothing is left behind
            stale = minus(minus(failed, want), s.throttles)
            to_remove = union(to_remove, stale._replace(rate=s.throttles.rate or want.rate))
            # a removal that failed left its piece in force; wanted again meanwhile (a rate kept for a
            # move still to do), it is set again, or it would stay failed and hold that move for ever
            again = _common(_common(failed, want), s.throttles)
            if not again.is_empty():
                to_apply = union(to_apply, again._replace(rate=want.rate))
    dead = _dead_brokers(s, to_remove, to_apply)
    if dead:  # a broker's rate is changed on that broker: wait until it is back, never block on it
        to_remove, to_apply = minus(to_remove, dead), minus(to_apply, dead)
    if not to_remove.is_empty():
        d.emit(ev.ThrottlesRemoved(to_remove))
    if not to_apply.is_empty():
        d.emit(ev.ThrottlesApplied(to_apply))


def _keeping_rates(s: State, want: ThrottleSet, restore: ThrottleSet = ThrottleSet()) -> ThrottleSet:
    """``want`` with the rates in force that a partition not ended still names (its target, or the
    replicas it started from: a cancel's way back; counted in the fold, ``State.named``): a
    broker keeps its rate between its steps and loses it once nothing left to do names it (or
    throttling is off, or the engine is paused, or the ``keep_throttle_rates`` limit is 0). A rate
    throttles only the replicas listed in the topics' throttled-replicas configs; setting it
    and deleting it around every step took two IncrementalAlterConfigs to the broker each time (on
    ``ops/scenarios/add-broker.yaml``, 2,279 moves over 12 brokers: two thirds of the engine's config
    requests, 3.9 a second). ``restore``: rates a read-back found missing are kept like those in force:
    set again, not forgotten (a read-back may lag; forgotten, one that was in fact set would be left
    behind: the fault simulator's seed 1741)."""
    force = union(s.throttles, restore._replace(leader=frozenset(), follower=frozenset()))
    extra = (force.leader_brokers - want.leader_brokers) | (force.follower_brokers - want.follower_brokers)
    if not extra or s.throttle_rate is None or s.paused or not s.limits.keep_throttle_rates:
        return want
    kept = frozenset(b for b in extra if s.named.get(b))
    if not kept:
        return want
    return ThrottleSet(want.leader, want.follower,
                       want.leader_brokers | (force.leader_brokers & kept),
                       want.follower_brokers | (force.follower_brokers & kept), rate_in_kafka(s))


def wanted_throttles(s: State) -> ThrottleSet:
    """The throttles the engine wants in force now: what its steps in flight need, and the rates it keeps
    between steps (``_keeping_rates``). Anything else in force is on its way out (a removal to retry)."""
    return _keeping_rates(s, needed(throttled(s), rate_in_kafka(s)))


def kept_for_others(state: State | None, request_id: str | None, found: ThrottleSet) -> tuple[ThrottleSet, dict]:
    """Of the throttles ``found`` on the cluster, those the engine keeps for another running request: it
    wants them in force now (``decide.wanted_throttles``: a throttle it failed to remove and retries is
    not kept) and they serve that request (a replica of its step in flight; a rate its partitions not
    ended name). (What is left once they are taken out, the keeping request -> a ThrottleSet of what it
    keeps); a rate serving several requests is named with each."""
    if state is None:
        return found, {}
    running = {rid for rid, r in state.requests.items() if rid != request_id and r.status == ACTIVE and r.open}
    if not running:
        return found, {}
    want = wanted_throttles(state)
    kept: dict[str, dict] = {}

    def owner(e) -> str | None:
        entry = state.partitions.get(TopicPartition(e.topic, e.partition))
        if entry is not None and entry.request_id in running and entry.status not in TERMINAL:
            return entry.request_id
        return None

    naming: dict[int, set[str]] = {}  # broker -> the running requests whose partitions not ended name it
    for tp, entry in state.partitions.items():
        if entry.request_id in running and entry.status not in TERMINAL:
            f = state.steps.get(tp)
            for b in {*entry.target, *(entry.original or ()), *(f.step.cr + f.step.tr if f is not None else ())}:
                naming.setdefault(b, set()).add(entry.request_id)
    left = {}
    for side in ("leader", "follower"):
        wanted = getattr(want, side)
        left[side] = set()
        for e in getattr(found, side):
            rid = owner(e) if e in wanted else None
            if rid is None:
                left[side].add(e)
            else:
                kept.setdefault(rid, {}).setdefault(side, set()).add(e)
    for side in ("leader_brokers", "follower_brokers"):
        wanted = getattr(want, side)
        left[side] = set()
        for b in getattr(found, side):
            rids = naming.get(b, ()) if b in wanted else ()
            if not rids:
                left[side].add(b)
            for rid in rids:
                kept.setdefault(rid, {}).setdefault(side, set()).add(b)
    return (ThrottleSet(frozenset(left["leader"]), frozenset(left["follower"]), frozenset(left["leader_brokers"]),
                        frozenset(left["follower_brokers"]), found.rate),
            {rid: ThrottleSet(frozenset(k.get("leader", ())), frozenset(k.get("follower", ())),
                              frozenset(k.get("leader_brokers", ())), frozenset(k.get("follower_brokers", ())),
                              found.rate) for rid, k in sorted(kept.items())})


def kept_rates(s: State) -> tuple[frozenset[int], frozenset[int]]:
    """(leader side, follower side): the brokers whose rate on that side is in force only because a
    partition not ended names them (no step in flight needs it): what ``status`` says is kept between
    steps. A rate whose broker nothing names any more, waiting for its removal's retry, is not kept: it is
    on its way out."""
    want = needed(throttled(s), rate_in_kafka(s))
    kept = _keeping_rates(s, want)
    return kept.leader_brokers - want.leader_brokers, kept.follower_brokers - want.follower_brokers


def _reassert_rates(d: _Decision, back: frozenset) -> None:
    """A broker back from the dead gets its rates set again: a rate change made while it was down
    could not reach it (rates are changed on the broker itself)."""
    force = d.state.throttles
    lead, follow = force.leader_brokers & back, force.follower_brokers & back
    if (lead or follow) and force.rate is not None:
        d.emit(ev.ThrottlesApplied(ThrottleSet(leader_brokers=lead, follower_brokers=follow, rate=force.rate)))


def _dead_brokers(s: State, *deltas: ThrottleSet) -> ThrottleSet:
    """The broker rates in ``deltas`` that name a broker known to be down."""
    live = s.live_brokers()
    if live is None:
        return ThrottleSet()
    named = set().union(*(t.leader_brokers | t.follower_brokers for t in deltas))
    dead = frozenset(b for b in named if b not in live)
    return ThrottleSet(leader_brokers=dead, follower_brokers=dead) if dead else ThrottleSet()


def _complete_requests(d: _Decision, everything: bool) -> None:
    """A running request whose every partition ended completes: those the decision touched, and at a
    tick every one the state knows to be due (``State.completable``, an index: a batch cut short by a
    crash heals at the next tick without a scan of the requests)."""
    due = d.state.completable
    for rid in sorted(due.keys() if everything else (t for t in d.touched if t in due)):
        r = d.state.requests.get(rid)
        if r is None or not r.completable:
            continue
        d.emit(ev.RequestCompleted(rid, r.count(COMPLETED), r.count(CANCELLED), r.count(REVERTED)))


_HANDLERS: dict[type, Callable[[_Decision, object], None]] = {
    Submit: _submit,
    Cancel: _cancel,
    ChangeLimits: _limits,
    ChangeThrottle: _throttle,
    Pause: _pause,
    Resume: _resume,
    Observation: _observe,
    ObservationFailed: _observation_failed,
    ActionOutcome: _outcome,
    ThrottlesObserved: _throttles_observed,
    CatchUpObserved: _catch_up,
    Tick: _tick,
    Unverified: _unverified,
    AdaptThrottle: _adapt,
    LooksPaced: _looks_paced,
}

COMMAND_NAMES: dict[type, str] = {
    Submit: "submit", Cancel: "cancel", ChangeLimits: "limits", ChangeThrottle: "throttle",
    Pause: "pause", Resume: "resume",
}
"""The ``command`` of a ``CommandRejected`` event, per command type."""
