"""The reassignment state and ``apply(state, event) -> state``.

State is only ever the fold of events: ``fold(events)``. Every field is an
immutable value (``immutables.Map`` is a persistent hash map: an update costs
O(log n) and shares the rest), so a state can be kept, compared and folded at
tens of thousands of events per second with a million partitions.

``apply`` never decides anything: each mutator records what its event says.
Indexes (``ready``, ``pending``, ``waiting``, ``steps``, ``elections``, the
in-flight counters, per-request counts, the ranks of the running requests and
the requests due to complete) are kept here so that ``decide`` never scans the
whole state. Finished requests beyond ``FINISHED_KEPT`` retire from it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, NamedTuple

import immutables

from engine.core import events as ev
from engine.core.limits import DEFAULT_LIMITS, Limits
from engine.core.partition import Replicas, TopicPartition
from engine.core.scheduler import CONTINUING, FRESH, Chain, InFlight, Ranks, ReadyIndex, SchedulingKey, Slot
from engine.core.step import DROPS_HELD, Step
from engine.core.throttles import DEFAULT_THROTTLE_RATE, ThrottleSet, after_apply, after_remove, minus, noting, union

# Partition statuses
PENDING = "pending"  # needs a planning decision (transient within a decision)
READY = "ready"  # next step known, waiting for the scheduler
WAITING = "waiting"  # cannot progress now; the reason is in State.waiting
IN_FLIGHT = "in_flight"
ABORTING = "aborting"  # its step in flight is being cancelled on the cluster
COMPLETED = "completed"
CANCELLED = "cancelled"
REVERTED = "reverted"
TERMINAL = frozenset({COMPLETED, CANCELLED, REVERTED})
STATUSES = (PENDING, READY, WAITING, IN_FLIGHT, ABORTING, COMPLETED, CANCELLED, REVERTED)

ACTIVE = "active"

REJECTIONS_KEPT = 100
"""``State.rejections`` keeps this many latest rejected commands (a flood of bad commands stays bounded)."""

FINISHED_KEPT = 100
"""The retained-history bound: the state keeps this many latest finished requests whole (their
partitions, original and target replicas, notes: a ``cancel --rollback --include-completed`` or a
``verify`` of them works as while they ran). An older finished request *retires*: its partitions
leave the working state (``partitions``, ``observed``, ``known_at``) and the request leaves
``requests`` for ``retired``, a compact record of what ``status`` and ``list`` show (id, partitions,
counts by status). No decision scans either; its history stays in the event log."""


class InFlightStep(NamedTuple):
    request_id: str
    number: int
    step: Step
    started: bool = False
    aborting: bool = False
    attempt: int = 1  # of the alter (or, while aborting, of the cancel)
    error: str | None = None  # why the last attempt failed
    retry: bool = False  # a failed attempt is to be tried again, from retry_at on (None: at once)
    retry_at: float | None = None
    started_at: float | None = None  # the shell's clock when the cluster accepted it
    released: bool = False  # its throttle entries are no longer needed: close to done
    weight: int = 8  # against the per-broker move caps, in eighths of a move
    # Alters and cancels of it logged whose answer has not come back: while any is due, no observation
    # judges the step (the look may predate the action).
    answers_due: int = 0
    # What it is charged against the caps: the broker its copies come out of (its partition's leader
    # as last observed: a new leader serves them) and whether completing it moves leadership (TR[0]
    # is not that leader), counted in L.
    source: int | None = None
    moves_leader: bool = False

    def charge(self) -> tuple[int | None, bool]:
        return self.source, self.moves_leader

    def answered(self) -> "InFlightStep":
        """One of its alters or cancels was answered."""
        return self._replace(answers_due=max(0, self.answers_due - 1))


class Creation(NamedTuple):
    """How fast a broker makes new replicas (``engine.core.scheduler.creation_caps``): the seconds it had
    steps adding a replica to it in flight (the union of their [started, completed] intervals: the
    log created, the copy made, the ISR join, the completion seen), over the replicas completed,
    both decayed by ``CREATION_DECAY`` once per look that saw completions (about the last eight looks
    count; the completions one look saw are one sample, however many); and the most new replicas of one
    alter (the steps the cluster accepted at one time) it was seen to complete (``largest``: the caps
    never run past twice that)."""

    last: float  # the latest look that saw a completion (the shell's clock)
    busy: float  # decayed seconds with a step adding a replica to it in flight
    count: float  # decayed replicas completed
    since: float = 0.0  # where the busy time counted at ``last`` begins (the earliest start of its steps)
    before: float | None = None  # the look before ``last`` that saw a completion: busy time up to it is counted
    batch_at: float | None = None  # when the cluster accepted the alter whose completions are being counted
    batch: int = 0  # its new replicas seen complete so far
    largest: int = 0  # the most new replicas of one alter seen complete

    @property
    def seconds(self) -> float:
        """Seconds per new replica."""
        return self.busy / self.count

    def counted(self, started_at: float) -> "Creation":
        """One more of its new replicas accepted at ``started_at`` seen complete (``batch``, ``largest``)."""
        batch = self.batch + 1 if started_at == self.batch_at else 1
        return self._replace(batch_at=started_at, batch=batch, largest=max(self.largest, batch))


CREATION_DECAY = 7 / 8
"""Weight of the earlier history at each look that saw completions (``Creation``): the rate follows the
broker within about eight such looks."""


class Election(NamedTuple):
    """A preferred-leader election asked for after a step that moved the preferred leader."""

    leader: int
    attempt: int = 1
    since: float | None = None  # when the last attempt was made (shell's clock)
    error: str | None = None
    retry: bool = False  # the last attempt failed: try again from retry_at on (None: at once)
    retry_at: float | None = None


class PartitionReassignment(NamedTuple):
    request_id: str
    original: Replicas | None  # ORS
    target: Replicas  # FTR
    status: str
    seq: int  # admission order
    steps_planned: int = 0  # step numbers are never reused, even after an abort
    steps_done: int = 0
    slot: Slot | None = None  # place in the ready index while READY
    rolling_back: bool = False
    cancelled: bool = False
    note: str | None = None  # last cancel-skip reason, or where a cancel left it
    failures: int = 0  # steps the cluster refused in a row (StepFailed), for the backoff
    retry_at: float | None = None  # a refused step is planned again from then on

    @property
    def goal(self) -> Replicas | None:
        """The replicas this partition is heading to now (ORS when rolling back)."""
        return self.original if self.rolling_back else self.target


class Request(NamedTuple):
    request_id: str
    seq: int
    partitions: int
    digest: str
    status: str = ACTIVE
    counts: immutables.Map = immutables.Map()  # partition status -> count
    members: immutables.Map = immutables.Map()  # every partition it ever queued -> True
    vstart: int = 0  # where it joined the turn-taking between requests (engine.core.scheduler)
    started: int = 0  # steps it has started
    finished_pos: int = -1  # its place in State.finished while it is finished and kept whole
    steps: str = "incremental"  # how its partitions step (engine.core.step.STEP_MODES)

    @property
    def rank(self) -> int:
        """Its place in the turn-taking: the lowest rank starts its next step first."""
        return self.vstart + self.started

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)

    @property
    def open(self) -> int:
        return sum(n for s, n in self.counts.items() if s not in TERMINAL)

    @property
    def completable(self) -> bool:
        """Running, with every partition accounted for and ended: a ``RequestCompleted`` is due."""
        return self.status == ACTIVE and not self.open and sum(self.counts.values()) >= self.partitions


class Retired(NamedTuple):
    """A finished request beyond the ``FINISHED_KEPT`` latest: what ``status`` and ``list`` show of
    it, and its digest (a re-delivered submit is still recognised). Its partitions are not kept."""

    request_id: str
    seq: int
    partitions: int
    digest: str
    status: str
    counts: immutables.Map = immutables.Map()

    members = immutables.Map()  # its partitions are not kept
    open = 0
    retired = True

    def count(self, status: str) -> int:
        return self.counts.get(status, 0)


class State(NamedTuple):
    brokers: immutables.Map = immutables.Map()  # id -> Broker
    topics: immutables.Map = immutables.Map()  # name -> TopicInfo
    observed: immutables.Map = immutables.Map()  # tp -> PartitionState
    partitions: immutables.Map = immutables.Map()  # tp -> PartitionReassignment
    requests: immutables.Map = immutables.Map()  # id -> Request
    ready: ReadyIndex = ReadyIndex()
    in_flight: InFlight = InFlight()
    steps: immutables.Map = immutables.Map()  # tp -> InFlightStep
    pending: immutables.Map = immutables.Map()  # tp -> True
    waiting: immutables.Map = immutables.Map()  # tp -> reason
    # ``grouped`` partitions whose final drop waits for their leader's others (DROPS_HELD): by
    # (request, leader as observed when held) -> Map(tp -> True), and each one's key
    drops_held: immutables.Map = immutables.Map()
    drop_group: immutables.Map = immutables.Map()
    # tp -> the log's clock when its final drop was first held (None: no clock), until that drop starts or
    # the partition ends; (request, leader) -> the earliest of its held drops': the group goes at the latest
    # ``max_drop_hold_seconds`` after it (``decide.drops_wait``)
    held_since: immutables.Map = immutables.Map()
    drops_since: immutables.Map = immutables.Map()
    elections: immutables.Map = immutables.Map()  # tp -> Election
    throttles: ThrottleSet = ThrottleSet()  # in force on the cluster
    throttle_failed: ThrottleSet = ThrottleSet()  # pieces whose last change failed: retried at throttle_retry_at
    throttle_retry_at: float | None = None
    throttle_error: str | None = None
    throttle_attempt: int = 0  # consecutive failed rounds of throttle changes
    # the last read-back's differences from the log not yet confirmed (a ThrottlesDiffered event), or None
    throttles_differed: object = None
    # broker rates a confirmed read-back found missing (ThrottlesDrifted) that no change has set or removed
    # since: kept like those in force (``decide._keeping_rates``), so that a crash that cut the drift's
    # batch before the change setting them again does not forget them (the fault simulator's seed 11101)
    throttles_lost: ThrottleSet = ThrottleSet()
    cluster_error: str | None = None  # why the cluster cannot be observed now
    looks_paced: str | None = None  # why the decider's looks wait for the request budget now (LooksPaced)
    release_debt: immutables.Map = immutables.Map()  # broker -> (bytes released into it, when): a bucket
    denied: immutables.Map = immutables.Map()  # topic -> why the engine may not describe it (engine.kafka.access)
    # tp -> the shell's clock of the newest thing the state knows of the partition: its latest recorded
    # observation, or the cluster's latest answer to an alter or cancel of it. A look taken earlier
    # says nothing new (it may predate the action) and is ignored.
    known_at: immutables.Map = immutables.Map()
    limits: Limits = DEFAULT_LIMITS
    throttle_rate: int | None = DEFAULT_THROTTLE_RATE
    paused: bool = False
    seq: int = 0
    live: frozenset | None = None  # ids of live brokers; None: no broker observed yet
    rejections: tuple = ()  # the latest REJECTIONS_KEPT CommandRejected events, oldest first
    rejected: immutables.Map = immutables.Map()  # command -> how many were ever rejected
    # The newest shell time the log knows (the ``at`` of its events): an input whose clock reads more
    # than CLOCK_SET_BACK before it re-bases every timer (``ClockSetBack``).
    clock: float | None = None
    # The ``at`` of the latest event that carries one, in log order: the clock's latest reading the log
    # knows, what a ``ClockSetBack`` re-bases the timers from. After a step back of less than
    # CLOCK_SET_BACK (no re-base) it reads behind ``clock``, as the timers set since do.
    clock_read: float | None = None
    ranks: Ranks = Ranks()  # the ranks of the running requests: where a new one joins (the least)
    completable: immutables.Map = immutables.Map()  # running requests whose every partition ended -> True
    finished: Chain = Chain()  # ids of the finished requests kept whole, oldest first (FINISHED_KEPT)
    retired: immutables.Map = immutables.Map()  # id -> Retired: finished requests beyond FINISHED_KEPT
    retired_partitions: immutables.Map = immutables.Map()  # status -> partitions that left with them
    creation: immutables.Map = immutables.Map()  # broker -> Creation: how fast it makes new replicas
    named: immutables.Map = immutables.Map()  # broker -> partitions not ended whose target or original names it
    # topic -> the shell's clock of the first look that did not show it (``TopicMissing``), until a look
    # shows it again or one METADATA_SETTLE later confirms it gone
    missing: immutables.Map = immutables.Map()

    def request(self, request_id: str) -> "Request | Retired | None":
        """The request with this id: running, finished and kept whole, or retired."""
        r = self.requests.get(request_id)
        return r if r is not None else self.retired.get(request_id)

    def every_request(self) -> list:
        """Every request ever accepted, kept whole or retired, in the order they were accepted (for the
        views: ``status``, ``list``, ``replay``; no decision calls it)."""
        return sorted([*self.requests.values(), *self.retired.values()], key=lambda r: r.seq)

    def live_brokers(self) -> frozenset[int] | None:
        """Ids of live brokers, or ``None`` if no broker was ever observed."""
        return self.live

    def min_insync(self, topic: str) -> int:
        info = self.topics.get(topic)
        return info.min_insync_replicas if info else 1


EMPTY = State()

_APPLY: dict[type, Callable[[State, object], State]] = {}


def apply(state: State, event: ev.Event) -> State:
    return _APPLY[type(event)](state, event)


def fold(events: Iterable[ev.Event], state: State = EMPTY) -> State:
    for event in events:
        state = _APPLY[type(event)](state, event)
    return state


def _on(event_type: type):
    def register(fn):
        _APPLY[event_type] = fn
        return fn

    return register


# --- helpers -------------------------------------------------------------------------


def _brokers_named(entry: PartitionReassignment | None) -> frozenset[int]:
    if entry is None or entry.status in TERMINAL:
        return frozenset()
    return frozenset(entry.target) | frozenset(entry.original or ())


def _named(named: immutables.Map, old: PartitionReassignment | None, new: PartitionReassignment) -> immutables.Map:
    """``State.named`` after ``old`` became ``new``: the brokers a partition not ended names (its target
    and original replicas), counted, so whether any does is known without a walk (``engine.core.decide``,
    ``_keeping_rates``)."""
    if (old is not None and old.target is new.target and old.original is new.original
            and (old.status in TERMINAL) == (new.status in TERMINAL)):
        return named  # most changes: a status within the same side of ended (the fold's hot path)
    before, after = _brokers_named(old), _brokers_named(new)
    if before == after:
        return named
    with named.mutate() as m:
        for b in before - after:
            left = m[b] - 1
            if left:
                m[b] = left
            else:
                del m[b]
        for b in after - before:
            m[b] = m.get(b, 0) + 1
        return m.finish()


def _put(s: State, tp: TopicPartition, new: PartitionReassignment, old: PartitionReassignment | None) -> State:
    """Store a partition entry and keep the per-status counts of its request(s) exact.

    When another request takes a partition over, the old request keeps it in
    its final status, or counts it as cancelled if it had not finished.
    """
    requests = s.requests
    if old is None:
        requests = _count(requests, new.request_id, new.status, +1)
    elif old.request_id == new.request_id:
        if old.status != new.status:
            requests = _count(requests, old.request_id, old.status, -1)
            requests = _count(requests, new.request_id, new.status, +1)
    else:
        if old.status not in TERMINAL:
            requests = _count(requests, old.request_id, old.status, -1)
            requests = _count(requests, old.request_id, CANCELLED, +1)
        requests = _count(requests, new.request_id, new.status, +1)
    pending = s.pending.set(tp, True) if new.status == PENDING else (
        s.pending.delete(tp) if tp in s.pending else s.pending
    )
    waiting = s.waiting if new.status == WAITING or tp not in s.waiting else s.waiting.delete(tp)
    ready = s.ready
    if old is not None and old.slot is not None and new.slot != old.slot:
        ready = ready.remove(old.slot)
    s = s._replace(partitions=s.partitions.set(tp, new), requests=requests, pending=pending, waiting=waiting,
                   ready=ready, named=_named(s.named, old, new))
    s = _group_drops(s, tp, new)
    if old is None or old.request_id == new.request_id:
        return _touch(s, new.request_id) if old is None or old.status != new.status else s
    return _touch(s, old.request_id, new.request_id)


def _group_drops(s: State, tp: TopicPartition, new: PartitionReassignment) -> State:
    """Keep ``drops_held`` exact: a partition is in it while it waits with a DROPS_HELD reason, under its
    request and its leader as observed; and the times its hold bound counts from (``held_since``: the
    partition's first hold, until its drop starts or it ends; ``drops_since``: its group's earliest). A
    partition that leaves its group ready (released) takes the group's time as its own, so a group the
    bound released is not held again member by member."""
    key = None
    if new.status == WAITING and s.waiting.get(tp, "").startswith(DROPS_HELD):
        obs = s.observed.get(tp)
        key = (new.request_id, obs.leader if obs is not None else None)
    was = s.drop_group.get(tp)
    held_since = s.held_since
    if key is not None and tp not in held_since:
        held_since = held_since.set(tp, s.clock)
    elif key is None and new.status not in (WAITING, READY) and tp in held_since:
        held_since = held_since.delete(tp)  # its drop started, or it ended
    elif key is None and was is not None and tp in held_since:
        first, mine = s.drops_since.get(was), held_since[tp]
        if first is not None and (mine is None or first < mine):
            held_since = held_since.set(tp, first)  # released with its group: the group's time is its own
    if was == key:
        return s if held_since is s.held_since else s._replace(held_since=held_since)
    held, group, since = s.drops_held, s.drop_group, s.drops_since
    if was is not None:
        rest = held[was].delete(tp)
        held = held.set(was, rest) if len(rest) else held.delete(was)
        group = group.delete(tp)
        if not len(rest):
            since = since.delete(was)
    if key is not None:
        held = held.set(key, (held.get(key) or immutables.Map()).set(tp, True))
        group = group.set(tp, key)
        first, mine = since.get(key), held_since.get(tp)
        since = since.set(key, mine if key not in since or (first is not None and mine is not None and mine < first)
                          else first)
    return s._replace(drops_held=held, drop_group=group, drops_since=since, held_since=held_since)


def _count(requests: immutables.Map, request_id: str, status: str, delta: int) -> immutables.Map:
    r = requests.get(request_id)
    if r is None:
        return requests
    n = r.counts.get(status, 0) + delta
    counts = r.counts.set(status, n) if n else r.counts.delete(status)
    reopened = ACTIVE if (delta > 0 and status not in TERMINAL) else r.status
    return requests.set(request_id, r._replace(counts=counts, status=reopened))


def _touch(s: State, *rids: str) -> State:
    """Keep the indexes of the requests ``rids`` exact after their counts or status changed: a finished
    request that got a partition back (a rollback of completed partitions) runs again, and the running
    requests whose every partition ended are known (``completable``) without a scan."""
    ranks, completable, finished, requests = s.ranks, s.completable, s.finished, s.requests
    for rid in rids:
        r = requests.get(rid)
        if r is None:
            continue
        if r.status == ACTIVE and r.finished_pos >= 0:  # reopened
            finished = finished.delete(r.finished_pos)
            r = r._replace(finished_pos=-1)
            requests = requests.set(rid, r)
            ranks = ranks.add(r.rank)
        if r.completable:
            completable = completable.set(rid, True)
        elif rid in completable:
            completable = completable.delete(rid)
    return s._replace(ranks=ranks, completable=completable, finished=finished, requests=requests)


UNCLEAN_REVERT = "UNCLEAN_REVERT"
"""The code of the final ``ActionFailed`` of an abort the core gives up before retrying it: its topic
reverts uncleanly and its original replicas are no longer all in sync (``engine.core.cancellation``)."""
REVERT_SKIPPED = "REVERT_SKIPPED"
"""The same for skip rules 2 and 3 judged again on the latest look: the revert would leave no replica in
sync, or fewer than min.insync.replicas (``engine.core.cancellation``)."""

CLOCK_SET_BACK = 60.0
"""A look or an answer this many seconds older than what the state knows of a partition is no late
delivery (the shells deliver a look within the tick that took it): the clock was set back, or another
engine's clock runs behind. It counts, and the newer times are from then on the ones it gives."""


def set_back(at: float, seen: float) -> bool:
    return at < seen - CLOCK_SET_BACK


REBASED_BEFORE = 0.001
"""When the clock was set back, the newest time the log knew is taken as this many seconds before the
new clock's first reading (the step happened between them): what the state knew predates that input."""


def _seen(s: State, at: float | None) -> State:
    """The log knows the shell's time ``at``: the decision clock is the newest such time, the clock's
    latest reading the last one."""
    if at is None:
        return s
    if s.clock is not None and at <= s.clock:
        return s if at == s.clock_read else s._replace(clock_read=at)
    return s._replace(clock=at, clock_read=at)


def _known(s: State, tp: TopicPartition | None, at: float | None) -> State:
    """The state knows ``tp`` as of ``at``: the newest time wins, unless the clock was set back. The
    log knows the time ``at`` (``_seen``)."""
    if at is None:
        return s
    s = _seen(s, at)
    seen = s.known_at.get(tp) if tp is not None else None
    if tp is None or (seen is not None and seen >= at and not set_back(at, seen)):
        return s
    return s._replace(known_at=s.known_at.set(tp, at))


def _elections(s: State, elections: immutables.Map) -> State:
    """Set the pending elections. A pending preferred-leader election moves leadership as much as a
    step does: it counts against L (``in_flight.leader_moves``) until it shows or is given up."""
    delta = len(elections) - len(s.elections)
    if delta:
        s = s._replace(in_flight=s.in_flight._replace(leader_moves=s.in_flight.leader_moves + delta))
    return s._replace(elections=elections)


def _end_step(s: State, tp: TopicPartition) -> tuple[State, InFlightStep]:
    f = s.steps[tp]
    return s._replace(steps=s.steps.delete(tp),
                      in_flight=s.in_flight.charge(f.step.nr, f.source, f.moves_leader, -1, f.weight)), f


# --- observations ----------------------------------------------------------------------


@_on(ev.BrokersObserved)
def _(s: State, e: ev.BrokersObserved) -> State:
    return s._replace(
        brokers=immutables.Map({b.id: b for b in e.brokers}),
        live=frozenset(b.id for b in e.brokers if b.alive),
    )


@_on(ev.TopicObserved)
def _(s: State, e: ev.TopicObserved) -> State:
    if e.topic in s.missing:
        s = s._replace(missing=s.missing.delete(e.topic))
    before = s.topics.get(e.topic)
    if before is not None and before.topic_id is not None and (e.info is None or e.info.topic_id != before.topic_id):
        s = _forget_epochs(s, e.topic)
    if e.info is None:
        return s._replace(topics=s.topics.delete(e.topic)) if e.topic in s.topics else s
    return s._replace(topics=s.topics.set(e.topic, e.info))


@_on(ev.TopicMissing)
def _(s: State, e: ev.TopicMissing) -> State:
    s = _seen(s, e.at)
    return s if e.topic in s.missing else s._replace(missing=s.missing.set(e.topic, e.at))


def _forget_epochs(s: State, topic: str) -> State:
    """The topic was deleted, or is another one under the same name (another topic id): the leader epochs
    recorded for its partitions belong to the old one, and a new topic's epochs start again at 0
    (``decide._observe`` compares epochs only within one topic id). Rare: a scan."""
    stale = [(tp, p) for tp, p in s.observed.items() if tp.topic == topic and p.leader_epoch is not None]
    if not stale:
        return s
    with s.observed.mutate() as observed:
        for tp, p in stale:
            observed[tp] = p._replace(leader_epoch=None)
        return s._replace(observed=observed.finish())


@_on(ev.PartitionObserved)
def _(s: State, e: ev.PartitionObserved) -> State:
    want = s.elections.get(e.tp)
    if want is not None and e.state.leader == want.leader:
        s = _elections(s, s.elections.delete(e.tp))
    s = s._replace(observed=s.observed.set(e.tp, e.state))
    f = s.steps.get(e.tp)
    if f is not None and e.state.leader is not None:
        # its copies come out of the leader as observed, and whether it moves leadership is judged
        # against it: the caps count what the cluster does, not what the plan remembers
        charge = (e.state.leader if f.step.nr else None, f.step.tr[0] != e.state.leader)
        if charge != f.charge():
            s = s._replace(steps=s.steps.set(e.tp, f._replace(source=charge[0], moves_leader=charge[1])),
                           in_flight=s.in_flight.recharge(f.step.nr, f.weight, f.charge(), charge))
    return _known(s, e.tp, e.at)


# --- requests and partitions -------------------------------------------------------------


@_on(ev.RequestAccepted)
def _(s: State, e: ev.RequestAccepted) -> State:
    # it joins level with the least served request still running, so it neither waits behind the
    # others' backlog nor overtakes them for long (the ranks of the running requests are indexed)
    vstart = s.ranks.least(0)
    r = Request(e.request_id, s.seq, e.partitions, e.digest, vstart=vstart, steps=e.steps)
    s = s._replace(requests=s.requests.set(e.request_id, r), seq=s.seq + 1, ranks=s.ranks.add(vstart))
    return _touch(s, e.request_id)


@_on(ev.CommandRejected)
def _(s: State, e: ev.CommandRejected) -> State:
    """Nothing else changes; the rejection is kept so that status and replay can show it."""
    return s._replace(rejections=(s.rejections + (e,))[-REJECTIONS_KEPT:],
                      rejected=s.rejected.set(e.command, s.rejected.get(e.command, 0) + 1))


@_on(ev.PartitionQueued)
def _(s: State, e: ev.PartitionQueued) -> State:
    old = s.partitions.get(e.tp)
    inherit = old is not None and old.status in (IN_FLIGHT, ABORTING)  # its step in flight goes on
    new = PartitionReassignment(e.request_id, e.original, e.target, old.status if inherit else PENDING, s.seq)
    s = _put(s, e.tp, new, old)
    r = s.requests[e.request_id]
    requests = s.requests.set(e.request_id, r._replace(members=r.members.set(e.tp, True)))
    return s._replace(requests=requests, seq=s.seq + 1)


@_on(ev.PartitionReady)
def _(s: State, e: ev.PartitionReady) -> State:
    old = s.partitions[e.tp]
    if old.slot is not None:
        s = s._replace(ready=s.ready.remove(old.slot))
        old = old._replace(slot=None)
    lane = CONTINUING if (old.steps_planned or old.rolling_back) else FRESH
    ready, slot = s.ready.add(SchedulingKey.of(e.step, e.weight), lane, s.seq, e.tp, old.request_id)
    s = s._replace(ready=ready, seq=s.seq + 1)
    # planned: a backoff it waited for is over (only a waiting partition holds a retry time)
    return _put(s, e.tp, old._replace(status=READY, slot=slot, retry_at=None), old)


@_on(ev.PartitionWaiting)
def _(s: State, e: ev.PartitionWaiting) -> State:
    old = s.partitions[e.tp]
    s = s._replace(waiting=s.waiting.set(e.tp, e.reason))
    return _put(s, e.tp, old._replace(status=WAITING, slot=None), old)


@_on(ev.StepPlanned)
def _(s: State, e: ev.StepPlanned) -> State:
    old = s.partitions[e.tp]
    f = InFlightStep(e.request_id, e.number, e.step, weight=e.weight, answers_due=1, source=e.step.source,
                     moves_leader=e.step.moves_leader)
    s = s._replace(
        steps=s.steps.set(e.tp, f),
        in_flight=s.in_flight.plus(e.step, 1, e.weight),
    )
    new = old._replace(status=IN_FLIGHT, slot=None, steps_planned=old.steps_planned + 1)
    r = s.requests.get(e.request_id)
    if r is not None:
        ranks = s.ranks.add(r.rank + 1).add(r.rank, -1) if r.status == ACTIVE else s.ranks
        s = s._replace(requests=s.requests.set(e.request_id, r._replace(started=r.started + 1)), ranks=ranks)
    return _put(s, e.tp, new, old)


@_on(ev.StepStarted)
def _(s: State, e: ev.StepStarted) -> State:
    f = s.steps[e.tp]
    # the alter's answer; or, the answer having been lost (nothing due), a look showing it in progress
    f = f._replace(started=True, error=None, retry=False, retry_at=None, started_at=e.at).answered()
    return _known(s._replace(steps=s.steps.set(e.tp, f)), e.tp, e.at)


@_on(ev.StepFailed)
def _(s: State, e: ev.StepFailed) -> State:
    s, _f = _end_step(_seen(s, e.at), e.tp)
    old = s.partitions[e.tp]
    s = s._replace(waiting=s.waiting.set(e.tp, e.reason))
    new = old._replace(status=WAITING, failures=old.failures + 1, retry_at=e.retry_at)
    return _put(s, e.tp, new, old)


@_on(ev.StepCompleted)
def _(s: State, e: ev.StepCompleted) -> State:
    s, f = _end_step(s, e.tp)
    s = _created(_known(s, e.tp, e.at), f, e.at)
    if e.elect_leader:
        s = _elections(s, s.elections.set(e.tp, Election(f.step.tr[0], 1, e.at)))
    old = s.partitions[e.tp]
    new = old._replace(status=PENDING, steps_done=old.steps_done + 1, failures=0, retry_at=None)
    return _put(s, e.tp, new, old)


@_on(ev.PartitionCompleted)
def _(s: State, e: ev.PartitionCompleted) -> State:
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=COMPLETED, slot=None), old)


@_on(ev.RequestCompleted)
def _(s: State, e: ev.RequestCompleted) -> State:
    r = s.requests[e.request_id]
    ranks = s.ranks.add(r.rank, -1) if r.status == ACTIVE else s.ranks
    finished, pos = (s.finished, r.finished_pos) if r.finished_pos >= 0 else s.finished.push(e.request_id)
    s = s._replace(requests=s.requests.set(e.request_id, r._replace(status=COMPLETED, finished_pos=pos)),
                   ranks=ranks, finished=finished,
                   completable=s.completable.delete(e.request_id) if e.request_id in s.completable else s.completable)
    gone = retiring(s)
    return _retire(s, gone) if gone is not None else s


def _created(s: State, f: InFlightStep, at: float | None) -> State:
    """A completed step's new replicas into the brokers' creation rates (``Creation``): each broker of NR
    was busy with it from when the cluster accepted it, or the previous look that saw a completion if
    later, to now. The completions one look sees are one sample: the history decays once per look, and
    a second completion seen by the same look adds only the busy time its earlier start uncovers."""
    if not f.step.nr or at is None or f.started_at is None:
        return s
    creation = s.creation
    for b in f.step.nr:
        c = creation.get(b)
        if c is None:
            c = Creation(at, max(0.0, at - f.started_at), 1.0, min(f.started_at, at))
        elif at == c.last:  # the same look: no decay; the union of the intervals grows by an earlier start
            start = min(c.since, f.started_at) if c.before is None else max(c.before, min(c.since, f.started_at))
            c = c._replace(busy=c.busy + (c.since - start), count=c.count + 1, since=start)
        elif at > c.last:
            start = min(at, max(f.started_at, c.last))
            c = c._replace(last=at, busy=c.busy * CREATION_DECAY + (at - start), count=c.count * CREATION_DECAY + 1,
                           since=start, before=c.last)
        else:
            continue  # an answer from before the last completion counted (clock stepped): nothing learnt
        creation = creation.set(b, c.counted(f.started_at))
    return s._replace(creation=creation)


def retires(s: State, e: "ev.RequestCompleted") -> str | None:
    """The finished request that ``e`` retires, ``s`` being the state before it (``FINISHED_KEPT``)."""
    r = s.requests.get(e.request_id)
    kept = len(s.finished) + (1 if r is not None and r.finished_pos < 0 else 0)
    if kept <= FINISHED_KEPT:
        return None
    return s.finished.entry(s.finished.head) if len(s.finished) else e.request_id


def retiring(s: State) -> str | None:
    """The finished request to retire now: the oldest kept whole, once more than FINISHED_KEPT are."""
    return s.finished.entry(s.finished.head) if len(s.finished) > FINISHED_KEPT else None


def _retire(s: State, rid: str) -> State:
    """``rid`` leaves the working state for a compact record (``FINISHED_KEPT``): its partitions
    (those it still owns, all ended) with their observations, unless something still watches one."""
    r = s.requests[rid]
    partitions, observed, known_at, gone = s.partitions, s.observed, s.known_at, s.retired_partitions
    watched = (s.steps, s.waiting, s.elections, s.pending)
    for tp in r.members.keys():
        entry = partitions.get(tp)
        if entry is None or entry.request_id != rid:
            continue  # taken over by a later request: its own now
        partitions = partitions.delete(tp)
        gone = gone.set(entry.status, gone.get(entry.status, 0) + 1)
        if not any(tp in m for m in watched):
            if tp in observed:
                observed = observed.delete(tp)
            if tp in known_at:
                known_at = known_at.delete(tp)
    record = Retired(rid, r.seq, r.partitions, r.digest, r.status, r.counts)
    return s._replace(requests=s.requests.delete(rid), retired=s.retired.set(rid, record),
                      finished=s.finished.delete(r.finished_pos), partitions=partitions, observed=observed,
                      known_at=known_at, retired_partitions=gone)


# --- cancellation ----------------------------------------------------------------------------


@_on(ev.CancelRequested)
def _(s: State, e: ev.CancelRequested) -> State:
    return s


@_on(ev.CancelSkipped)
def _(s: State, e: ev.CancelSkipped) -> State:
    old = s.partitions.get(e.tp)
    if old is None or old.request_id != e.request_id:
        return s  # another request's now, or its request has retired
    return s._replace(partitions=s.partitions.set(e.tp, old._replace(note=e.reason)))


@_on(ev.PartitionCancelled)
def _(s: State, e: ev.PartitionCancelled) -> State:
    """A cancel (or the end of one: ``final``). Not final, a partition that is not in flight
    goes back to planning: a rollback heads for ORS, a plain cancel settles where it stands
    (``engine.core.cancellation.settle_target``) and a final ``PartitionCancelled`` ends it."""
    old = s.partitions[e.tp]
    rolling_back = e.rollback
    # where a final cancel leaves it; a cancel that goes on says what it means in its event only
    note = (e.reason or old.note) if e.final else old.note
    if e.aborting is not None:
        status = ABORTING
        f = s.steps[e.tp]
        f = f._replace(aborting=True, attempt=1, error=None, retry=False, retry_at=None, answers_due=f.answers_due + 1)
        s = s._replace(steps=s.steps.set(e.tp, f))
    elif old.status in (IN_FLIGHT, ABORTING):
        status = old.status  # superseded, or cancelled again: the step in flight finishes first
    elif e.final or e.superseded_by is not None:
        status = CANCELLED
    else:
        status = PENDING
    new = old._replace(status=status, slot=None, cancelled=True, rolling_back=rolling_back, note=note)
    return _put(s, e.tp, new, old)


@_on(ev.StepAborted)
def _(s: State, e: ev.StepAborted) -> State:
    s, _f = _end_step(s, e.tp)
    s = _known(s, e.tp, e.at)
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=PENDING), old)


@_on(ev.PartitionReverted)
def _(s: State, e: ev.PartitionReverted) -> State:
    old = s.partitions[e.tp]
    return _put(s, e.tp, old._replace(status=REVERTED, slot=None), old)


# --- throttles, limits, control -----------------------------------------------------------------


@_on(ev.ThrottlesApplied)
def _(s: State, e: ev.ThrottlesApplied) -> State:
    return s._replace(throttles=after_apply(s.throttles, e.throttles), throttle_failed=minus(s.throttle_failed, e.throttles),
                      throttles_differed=_changed(s.throttles_differed, e.throttles),
                      throttles_lost=minus(s.throttles_lost, e.throttles))


@_on(ev.ThrottlesRemoved)
def _(s: State, e: ev.ThrottlesRemoved) -> State:
    return s._replace(throttles=after_remove(s.throttles, e.throttles), throttle_failed=minus(s.throttle_failed, e.throttles),
                      throttles_differed=_changed(s.throttles_differed, e.throttles),
                      throttles_lost=minus(s.throttles_lost, e.throttles))


def _changed(differed, delta: ThrottleSet):
    """A difference seen before ``delta`` changed the same pieces says nothing of them any more: the
    next read-back judges them afresh."""
    if differed is None:
        return None
    missing, unexpected = minus(differed.missing, delta), minus(differed.unexpected, delta)
    if missing.is_empty() and unexpected.is_empty():
        return None
    if _pieces(missing) == _pieces(differed.missing) and unexpected == differed.unexpected:
        return differed
    missing = noting(missing, differed.missing.rate, differed.missing)  # the values read of those still judged
    return dataclasses.replace(differed, missing=missing, unexpected=unexpected)


def _pieces(t: ThrottleSet) -> tuple:
    return t.leader, t.follower, t.leader_brokers, t.follower_brokers


@_on(ev.ThrottleReleased)
def _(s: State, e: ev.ThrottleReleased) -> State:
    s = _seen(s, e.at)
    f = s.steps.get(e.tp)
    if f is None or f.number != e.number:
        return s
    s = s._replace(steps=s.steps.set(e.tp, f._replace(released=True)))
    # the bytes it copies unthrottled are charged to its receiving brokers' release bucket
    bucket = s.release_debt
    for b in f.step.nr:
        bucket = bucket.set(b, (release_debt(s, b, e.at) + e.remaining, e.at))
    return s._replace(release_debt=bucket)


RELEASE_REFILL = 0.25
"""Bytes released from the throttle are paid back at this fraction of the throttle rate: on average a
broker receives at most 25 % more than its throttle, in bursts of at most ``throttle_release_ms``."""


def release_debt(s: "State", broker: int, now: float | None) -> float:
    """Bytes released from the throttle into ``broker`` not yet paid back by ``now`` (0 without a clock)."""
    debt = s.release_debt.get(broker)
    if debt is None or now is None or debt[1] is None or s.throttle_rate is None:
        return 0.0
    owed, at = debt
    return max(0.0, float(int(owed - RELEASE_REFILL * s.throttle_rate * max(0.0, now - at))))  # whole bytes


@_on(ev.ThrottlesDrifted)
def _(s: State, e: ev.ThrottlesDrifted) -> State:
    lost = ThrottleSet(leader_brokers=s.throttles_lost.leader_brokers | e.missing.leader_brokers,
                       follower_brokers=s.throttles_lost.follower_brokers | e.missing.follower_brokers)
    return s._replace(throttles=union(minus(s.throttles, e.missing), e.unexpected), throttles_differed=None,
                      throttles_lost=lost)


@_on(ev.ThrottlesDiffered)
def _(s: State, e: ev.ThrottlesDiffered) -> State:
    # the read-back's time is one the log knows: a clock set back re-bases the difference with the others
    # (kept at an older time, it would be re-based into the future: seed 4413 of the fault simulator)
    s = _seen(s, e.at)
    empty = e.missing.is_empty() and e.unexpected.is_empty()
    return s._replace(throttles_differed=None if empty else e)


# --- action outcomes ---------------------------------------------------------------------------


@_on(ev.ActionFailed)
def _(s: State, e: ev.ActionFailed) -> State:
    error = f"{e.code}: {e.message}" if e.message else e.code
    s = _seen(s, e.at)
    if e.action in ("apply_throttles", "remove_throttles"):
        piece = e.throttles or ThrottleSet()
        # A failed apply is not in force; a failed removal still is. Either is retried as a whole
        # round at throttle_retry_at (the tick's reconcile re-derives what to send).
        force = minus(s.throttles, piece) if e.action == "apply_throttles" else union(s.throttles, piece)
        return s._replace(throttles=force, throttle_failed=union(s.throttle_failed, piece),
                          throttle_retry_at=e.retry_at, throttle_error=error, throttle_attempt=e.attempt)
    if e.action == "elect_leader":
        el = s.elections.get(e.tp)
        if el is None:
            return s
        if e.final:
            return _elections(s, s.elections.delete(e.tp))
        el = el._replace(attempt=e.attempt, error=error, retry=True, retry_at=e.retry_at)
        return s._replace(elections=s.elections.set(e.tp, el))
    f = s.steps.get(e.tp)
    if f is None:
        return s
    s = _known(s, e.tp, e.at)  # an answer (or a look showing the action had no effect)
    if e.action == "cancel_step" and e.final:  # the abort was refused: the step goes on
        f = f._replace(aborting=False, attempt=1, error=None, retry=False, retry_at=None)
        f = f if e.code in (UNCLEAN_REVERT, REVERT_SKIPPED) else f.answered()  # (the core's own: no answer)
        s = s._replace(steps=s.steps.set(e.tp, f))
        old = s.partitions[e.tp]
        return _put(s, e.tp, old._replace(status=IN_FLIGHT, note=e.message), old)
    # an answer; or (IN_PROGRESS_AFTER_CANCEL) a look, decided only when no answer was due
    f = f._replace(attempt=e.attempt, error=error, retry=not e.final, retry_at=e.retry_at).answered()
    return s._replace(steps=s.steps.set(e.tp, f))


@_on(ev.ActionRetried)
def _(s: State, e: ev.ActionRetried) -> State:
    s = _seen(s, e.at)
    if e.action == "elect_leader":
        el = s.elections.get(e.tp)
        if el is None:
            return s
        el = el._replace(attempt=e.attempt, since=e.at, retry=False, retry_at=None)
        return s._replace(elections=s.elections.set(e.tp, el))
    f = s.steps.get(e.tp)
    if f is None:
        return s
    f = f._replace(attempt=e.attempt, retry=False, retry_at=None, answers_due=f.answers_due + 1)  # asked again
    return s._replace(steps=s.steps.set(e.tp, f))


@_on(ev.ActionAnswered)
def _(s: State, e: ev.ActionAnswered) -> State:
    s = _known(s, e.tp, e.at)
    f = s.steps.get(e.tp)
    if f is None or f.number != e.number:
        return s
    return s._replace(steps=s.steps.set(e.tp, f.answered()))


@_on(ev.ActionSucceeded)
def _(s: State, e: ev.ActionSucceeded) -> State:
    if e.action in ("apply_throttles", "remove_throttles"):
        if s.throttle_failed.is_empty():
            return s._replace(throttle_retry_at=None, throttle_error=None, throttle_attempt=0)
        return s
    f = s.steps.get(e.tp) if e.tp is not None else None
    if f is None:
        return s
    return s._replace(steps=s.steps.set(e.tp, f._replace(error=None, retry=False, retry_at=None)))


@_on(ev.ClockSetBack)
def _(s: State, e: ev.ClockSetBack) -> State:
    """Every timer moves back by what the clock lost (``seen``, its latest reading before the step, taken
    as REBASED_BEFORE before ``now``): each keeps the time it had left at that reading. What the state
    knows of a partition (``known_at``) predates ``now`` whatever clock stamped it."""
    shift = e.seen - e.now + REBASED_BEFORE
    before = e.now - REBASED_BEFORE

    def back(t: float | None) -> float | None:
        return None if t is None else t - shift

    with s.steps.mutate() as steps:
        for tp, f in s.steps.items():
            if f.retry_at is not None or f.started_at is not None:
                steps[tp] = f._replace(retry_at=back(f.retry_at), started_at=back(f.started_at))
        steps = steps.finish()
    with s.partitions.mutate() as partitions:
        for tp in set(s.waiting.keys()) | set(s.pending.keys()):
            entry = s.partitions[tp]
            if entry.retry_at is not None:
                partitions[tp] = entry._replace(retry_at=back(entry.retry_at))
        partitions = partitions.finish()
    elections = immutables.Map({tp: el._replace(since=back(el.since), retry_at=back(el.retry_at))
                                for tp, el in s.elections.items()})
    debt = immutables.Map({b: (owed, back(at)) for b, (owed, at) in s.release_debt.items()})
    creation = immutables.Map({b: c._replace(last=c.last - shift, since=c.since - shift, before=back(c.before),
                                           batch_at=back(c.batch_at))
                               for b, c in s.creation.items()})
    with s.known_at.mutate() as known:
        for tp, at in s.known_at.items():
            known[tp] = min(at - shift, before)
        known = known.finish()
    missing = immutables.Map({t: back(at) for t, at in s.missing.items()})
    held_since = immutables.Map({tp: back(at) for tp, at in s.held_since.items()})
    drops_since = immutables.Map({key: back(at) for key, at in s.drops_since.items()})
    differed = s.throttles_differed  # when a read-back first showed a difference: judged METADATA_SETTLE later
    if differed is not None and differed.at is not None:
        differed = dataclasses.replace(differed, at=back(differed.at))
    return s._replace(steps=steps, partitions=partitions, elections=elections, release_debt=debt, known_at=known,
                      throttle_retry_at=back(s.throttle_retry_at), throttles_differed=differed, clock=e.now,
                      clock_read=e.now,
                      creation=creation, missing=missing, held_since=held_since, drops_since=drops_since)


@_on(ev.ClusterUnreachable)
def _(s: State, e: ev.ClusterUnreachable) -> State:
    return s._replace(cluster_error=e.reason)


@_on(ev.LooksPaced)
def _(s: State, e: ev.LooksPaced) -> State:
    return s._replace(looks_paced=e.reason)


@_on(ev.TopicAccessDenied)
def _(s: State, e: ev.TopicAccessDenied) -> State:
    if e.reason is None:
        return s._replace(denied=s.denied.delete(e.topic)) if e.topic in s.denied else s
    return s._replace(denied=s.denied.set(e.topic, e.reason))


@_on(ev.LimitsChanged)
def _(s: State, e: ev.LimitsChanged) -> State:
    return s._replace(limits=e.limits)


@_on(ev.ThrottleRateChanged)
def _(s: State, e: ev.ThrottleRateChanged) -> State:
    return s._replace(throttle_rate=e.rate)


@_on(ev.Paused)
def _(s: State, e: ev.Paused) -> State:
    return s._replace(paused=True)


@_on(ev.Resumed)
def _(s: State, e: ev.Resumed) -> State:
    return s._replace(paused=False)


assert set(_APPLY) == set(ev.EVENT_TYPES), set(ev.EVENT_TYPES) - set(_APPLY)
