"""The invariants a fuzzed run must keep, written against what kreassign promises (not how it works).

Checked where things happen (``engine.whatif.fuzz.world``): no cap or limit exceeded when kreassign
starts copies, counted on the cluster (``caps``); never below min.insync.replicas through one of
kreassign's requests (``min_insync``); no false alarm (``false_alarm``: a ``StepFailed`` that says
another tool changed a partition no other tool touched, a ``ThrottlesDrifted`` when no other tool
changed a throttle); no tug of war (``throttle_fight``: the same piece set right twice within
``METADATA_SETTLE``).

Checked here, after every step of the run:

* ``bounded_state``: finished requests retire from the working state (issue 27, defect 7), by the
  core's rule (``engine.core.state.FINISHED_KEPT``): the state keeps at most ``FINISHED_KEPT`` of
  them whole; and a request that retires leaves nothing in the working maps (``World.retired``
  checks it on the fold of the log, at the very event that retires the request);
* ``throttle_leak``: once the engine has looked and decided (``LEAK_TICKS`` ticks in a row), no
  throttle is set on the cluster that no step in flight needs (as the engine sees its steps),
  except what the engine knows failed and retries, a rate on a broker that a partition not yet done
  names while the engine is not paused (kept between steps), and a rate on a broker that is down (it is
  changed on the broker), or that came back less than ``BACK_SEEN`` ago while the engine still
  counts it down (an idle engine looks at its brokers every ``IDLE_LOOK``);
* ``throttle_rate``: after as many looks in a row, every rate the engine counts as its own is the
  throttle plus the margin (``throttle_margin_pct``), unless a throttle change failed, but on a broker
  that is down or came back less than ``BACK_SEEN`` ago (as above: a rate is changed on the broker);
* ``throttle_restore`` / ``throttle_unreported``: a throttle of kreassign's (one it counts in force, one a
  step in flight needs, a kept rate a drift found missing) that the cluster lacks (another client deleted
  it or set a rate to another value: ``configs``) is named in a difference read back within
  ``REPORT_BOUND`` and set again within ``RESTORE_BOUND`` of when it went missing or kreassign last set
  it, counted from the last fault that kept read-backs or throttle changes from their cadence;
* ``drop_held``: after a tick, a ``grouped`` partition whose final drop is held (``DROPS_HELD``) has a cause:
  its request has a copy out of the partition's leader (as last observed) in flight into live brokers
  or ready (its slot's source), computed here from those fields (``drops_held_without_cause``); and it has
  not been held ``max_drop_hold_seconds`` since the engine first held it, by its clock, as the log says
  (``drops_held_too_long``: ``World.held_at``, from the events);
* ``idle_source``: work-conserving scheduling: a source broker that serves no copy, with a ready
  step out of it that fits every limit on its own, does not stay idle for ``IDLE_LIMIT`` seconds
  (but a step the dominant-source rule holds: ``held_by_the_pin``; or what a look the core set aside
  holds: ``unordered_looks``).

What another client set (``World.foreign_on``: still as it set it, and not set by kreassign since) is
not kreassign's: no leak, no throttle left, and its lowest rate counts in the liveness bound.

At the end (``Run.finish``): liveness (every request finished within ``bound`` seconds of the
faults' end, or what holds it says why), nothing left in progress, no throttle of kreassign's left, the engine's
view of every partition equal to the cluster's, every completed partition at its target on the
cluster (``target``; partitions another tool touched are left out of both), and the state equal to
the fold of its log (``fold``). And where kreassign acts: every alter sends a target some step of
its log planned (``unplanned_alter``).
"""

from __future__ import annotations

from engine.core.decide import plan, rate_in_kafka, throttled
from engine.core.partition import TopicPartition
from engine.core.scheduler import A, WEIGHT_UNITS, lacking, refusal, resources
from engine.core.state import ACTIVE, FINISHED_KEPT, READY, TERMINAL, State, fold, set_back
from engine.core.step import DROPS_HELD
from engine.core.decide import METADATA_SETTLE
from engine.core.throttles import ThrottleSet, minus, needed, union
from engine.runtime.decider import IDLE_LOOK
from engine.views.attention import attention
from engine.whatif.fuzz.world import World, trs

BACK_SEEN = IDLE_LOOK + 2.0
"""Seconds within which the engine learns that a broker came back (its idle looks at the brokers, and a
tick's slack): until then a rate it could not remove while the broker was down is no leak."""

LEAK_TICKS = 3
"""Looks in a row after which a throttle no step needs is a leak (a torn look may hide one change)."""

IDLE_LIMIT = 20.0
"""Seconds a source broker may stay idle while a ready step out of it fits every limit."""

NETWORK = 125_000_000  # bytes/s: the simulated brokers' links
MOVE_OVERHEAD = 15.0  # seconds per move beyond its bytes: ticks, log creation, the election and its grace
BOUND_BASE = 120.0  # seconds: retries' backoff (at most 30 s), throttle verification, elections' retries


def drops_held_without_cause(state: State) -> list[TopicPartition]:
    """The partitions held to drop with their leader's others (docs/algorithm.md, "Grouped drops") whose
    request copies nothing out of that leader now: no step of it in flight out of the leader into live
    brokers, no ready partition of it queued out of the leader. A tick releases such a group."""
    live = state.live_brokers()
    out = []
    for tp, reason in state.waiting.items():
        if not reason.startswith(DROPS_HELD):
            continue
        rid = state.partitions[tp].request_id
        obs = state.observed.get(tp)
        leader = obs.leader if obs is not None else None
        if any(f.request_id == rid and f.step.nr and f.source == leader and (live is None or set(f.step.nr) <= live)
               for f in state.steps.values()):
            continue
        if any(e.request_id == rid and e.status == READY and e.slot is not None and e.slot.source == leader
               for e in state.partitions.values()):
            continue
        out.append(tp)
    return out


def drops_held_too_long(state: State, now: float, held_at: dict) -> list[tuple[TopicPartition, float]]:
    """The held drops (``DROPS_HELD``) held for longer than ``max_drop_hold_seconds`` after a tick at ``now``
    (the engine's clock), from when the log first showed each held (``held_at``): (partition, seconds)."""
    hold = state.limits.max_drop_hold_seconds
    out = []
    for tp, reason in state.waiting.items():
        at = held_at.get(tp)
        if reason.startswith(DROPS_HELD) and at is not None and now - at > hold:
            out.append((tp, now - at))
    return sorted(out)


def bounded_state(state: State) -> str | None:
    """More finished requests kept whole than the core's bound (``FINISHED_KEPT``), or an index of
    them that disagrees with the requests map (``None``: neither)."""
    finished = [r.request_id for r in state.requests.values() if r.status != ACTIVE]
    if len(finished) > FINISHED_KEPT:
        return (f"the working state holds {len(finished)} finished requests (at most {FINISHED_KEPT} may stay "
                f"whole): {', '.join(sorted(finished)[:5])}...")
    if len(state.finished) != len(finished):
        return (f"the working state holds {len(finished)} finished requests but its index of them (finished) "
                f"{len(state.finished)}")
    return None


def throttle_leak(world: World, state: State) -> str | None:
    """What is set on the cluster that no step in flight needs, after a tick (``None``: nothing)."""
    if state.throttle_error is not None:
        return None  # a change failed: the next tick due retries it
    on = world.sim.state.throttles.as_set()
    allowed = union(needed(throttled(state), rate_in_kafka(state)), state.throttle_failed)
    if not state.paused and state.throttle_rate is not None and state.limits.keep_throttle_rates:
        named = _named_by_moves_left(state)
        allowed = allowed._replace(leader_brokers=allowed.leader_brokers | named,
                                   follower_brokers=allowed.follower_brokers | named)
    dead = _down_or_just_back(world, state)
    on = minus(on, world.foreign_on())  # another client's (``configs``): not kreassign's to remove
    extra = ThrottleSet(on.leader - allowed.leader, on.follower - allowed.follower,
                        on.leader_brokers - allowed.leader_brokers - dead,
                        on.follower_brokers - allowed.follower_brokers - dead)
    if extra.is_empty():
        return None
    tps = sorted({TopicPartition(e.topic, e.partition) for e in extra.leader | extra.follower})
    return (f"throttles no step in flight needs: {len(extra.leader)} leader and {len(extra.follower)} follower entries "
            f"({', '.join(map(str, tps[:6]))}), rates on brokers "
            f"{sorted(extra.leader_brokers | extra.follower_brokers)}")


def _down_or_just_back(world: World, state: State) -> set[int]:
    """Brokers whose configs the engine cannot change now: down, or back less than ``BACK_SEEN`` ago
    while the engine still counts them down (a rate is changed on the broker itself)."""
    live = state.live_brokers()
    return {b for b, x in world.sim.state.brokers.items()
            if not x.alive or (live is not None and b not in live and world.now - world.back_at.get(b, 0.0) < BACK_SEEN)}


def throttle_rate(world: World, state: State) -> str | None:
    """A rate that is not the throttle plus the margin (``throttle_margin_pct``, in percent, rounded
    down) after a tick (``None``: every rate as promised). Only rates the engine counts as its own, not
    on a broker down or just back (``_down_or_just_back``), and not while a throttle change failed (its
    retry settles it)."""
    if state.throttle_error is not None or state.throttle_rate is None:
        return None
    want = state.throttle_rate * (100 + state.limits.throttle_margin_pct) // 100
    on = world.sim.state.throttles
    ours = state.throttles
    down = _down_or_just_back(world, state)
    # a rate another client set (``configs``) is the restore check's: set right within ``RESTORE_BOUND``
    other = world.foreign_on()
    wrong = sorted({(side, b, r) for side, rates, brokers, theirs in (
                        ("leader", on.leader_rate, ours.leader_brokers, other.leader_brokers),
                        ("follower", on.follower_rate, ours.follower_brokers, other.follower_brokers))
                    for b, r in rates.items() if b in brokers and r != want and b not in down and b not in theirs})
    if not wrong:
        return None
    return (f"rates other than the throttle {state.throttle_rate} + {state.limits.throttle_margin_pct} % "
            f"({want}): " + ", ".join(f"{side} rate {r} on broker {b}" for side, b, r in wrong[:6]))


RESTORE_BOUND = 10.0 + METADATA_SETTLE + 2.0
"""Seconds within which kreassign sets again a throttle of its own that the cluster lacks (deleted, or a
rate set to another value, by another client): the read-back interval (the fuzz's engine runs with
``--verify-interval`` 10 s: the difference is seen by the first read-back after the change), then
``METADATA_SETTLE`` until the read-back that confirms it, each up to a tick late (``TICK`` 1 s); the
confirming decision sets it again in the same tick."""

REPORT_BOUND = 10.0 + 2.0
"""Seconds within which a throttle of kreassign's that the cluster lacks is named in a difference it
read back (``ThrottlesDiffered``: the ``throttles_differ`` attention; or ``ThrottlesDrifted``): one
read-back interval, up to a tick late, and the tick that reads it."""


def lacking_pieces(world: World, state: State) -> dict[tuple, str]:
    """Every throttle the engine counts in force, or that a step in flight needs, and not being retried
    (``throttle_failed``), that the cluster lacks: an entry not listed (a ``*`` does not count: a read-back leaves it out), a broker's
    rate not set or set to another value than the one in force; rates of brokers down or just back left
    out (``_down_or_just_back``). piece -> what the cluster has."""
    need = needed(throttled(state), rate_in_kafka(state))
    if not state.paused and state.throttle_rate is not None and state.limits.keep_throttle_rates:
        # a kept rate a read-back confirmed missing is set again while it is still kept (docs/algorithm.md,
        # section 3): a broker a partition not ended names
        named = _named_by_moves_left(state)
        lb = frozenset(b for side, b in world.reclaim if side == "leader rate" and b in named)
        fb = frozenset(b for side, b in world.reclaim if side == "follower rate" and b in named)
        need = union(need, ThrottleSet(leader_brokers=lb, follower_brokers=fb, rate=rate_in_kafka(state)))
    force = minus(union(need, state.throttles), state.throttle_failed)
    t = world.sim.state.throttles
    down = _down_or_just_back(world, state)
    out = {}
    for side, entries in (("leader", force.leader), ("follower", force.follower)):
        lists = getattr(t, side)
        for e in entries:
            if (e.partition, e.broker) not in lists.get(e.topic, ()):
                out[(side, e)] = "not listed"
    for side, brokers, rates, kept in (("leader", force.leader_brokers, t.leader_rate, state.throttles.leader_brokers),
                                       ("follower", force.follower_brokers, t.follower_rate,
                                        state.throttles.follower_brokers)):
        for b in brokers:
            if b in down:
                continue
            r = rates.get(b)
            want = state.throttles.rate if b in kept else need.rate
            if r is None:
                out[(f"{side} rate", b)] = "not set"
            elif want is not None and r != want:
                out[(f"{side} rate", b)] = f"{r} (not {want})"
    return out


def throttle_restore(world: World, state: State) -> tuple[str, str] | None:
    """(check, what) when a throttle of kreassign's that the cluster lacks was not set again within
    ``RESTORE_BOUND`` (``throttle_restore``), or not named in a difference read back within
    ``REPORT_BOUND`` (``throttle_unreported``), counted from when a tick first saw it lacking, from when
    kreassign last set it, and from the last fault that kept its read-backs or throttle changes from their
    cadence (``World.disturbed_at``): the bound is on kreassign's answer, not on another client that sets
    its own value again faster than a read-back can confirm it (kreassign sets its own again each time)."""
    now = world.now
    lacking = lacking_pieces(world, state)
    since = world.missing_since
    for piece in [p for p in since if p not in lacking]:
        del since[piece]
    calm = world.disturbed_at()
    for piece, has in sorted(lacking.items(), key=lambda x: str(x[0])):
        first = since.setdefault(piece, now)
        start = max(first, world.set_at.get(piece, 0.0), calm)
        side, x = piece
        name = f"broker {x}'s {side}" if isinstance(x, int) else f"{side} entry {x.topic}-{x.partition}:{x.broker}"
        if now - start > REPORT_BOUND and world.named_at.get(piece, -1.0) < first - 1e-9:
            return "throttle_unreported", (f"{name} lacking on the cluster ({has}) since t={first:.2f} and named in "
                                           f"no difference read back")
        if now - start > RESTORE_BOUND:
            return "throttle_restore", (f"{name} lacking on the cluster ({has}) since t={first:.2f}, not set again "
                                        f"within {RESTORE_BOUND:g} s")
    return None


def _named_by_moves_left(state: State) -> frozenset[int]:
    """Every broker a partition not in a final status names: its target and its original replicas (a
    scan of every partition by status, not the fold's count)."""
    out: set[int] = set()
    for entry in state.partitions.values():
        if entry.status not in TERMINAL:
            out.update(entry.target, entry.original or ())
    return frozenset(out)


def idle_sources(state: State) -> dict[int, list[tuple]]:
    """Source brokers that serve no copy while a ready step out of them fits every limit on its own:
    source -> [(partition, its scheduling key)]."""
    if state.paused or not state.throttle_failed.is_empty():
        return {}
    out: dict[int, list[TopicPartition]] = {}
    c = state.in_flight
    live = state.live_brokers()
    for src, lanes in state.ready.sources.items():
        if src is None or c.outgoing.get(src, 0) or (live is not None and src not in live):
            continue
        for chain in lanes.values():
            for _seq, tp, key in chain:
                if refusal(c, state.limits, key) is None:
                    out.setdefault(src, []).append((tp, key))
    return out


def _set_aside_look(state: State, world: World, now: float, tp: TopicPartition):
    """The engine's latest look at ``tp`` (``World.looked``) where the core could not record it: it
    showed another leader than the record, and the engine's clock (``now``) read no later than what the
    state knows of the partition (docs/algorithm.md, section 4: a clock set back less than
    ``CLOCK_SET_BACK``, or a standby's that lags). ``None``: no such look."""
    known, at, seen = state.observed.get(tp), state.known_at.get(tp), world.looked.get(tp)
    look = seen.partitions.get(tp) if seen is not None else None
    if (known is not None and look is not None and look.leader != known.leader and at is not None
            and now <= at and not set_back(now, at)):
        return look
    return None


def unordered_looks(state: State, world: World, now: float,
                    idle: dict[int, list[tuple]]) -> dict[int, list[tuple]]:
    """``idle`` without what the engine may not start yet while its looks are set aside
    (``_set_aside_look``; docs/algorithm.md, section 2, "Caps count the cluster's leaders as last
    observed"), at most the step back long (section 6: a step back under 60 s delays a timer by at most
    that much):

    * a ready step whose own latest look showed another leader than its record: started from the
      record, its copies could go out of a leader the look saw leave (seed 9363); it starts once a look
      counts. Seed 3977: the clock stepped back 28.7 s as a leader moved, and the partition waited 20 s
      and more;
    * every ready step out of a source that the set-aside look of a step in flight shows leading: that
      step's copies (its weight, into its new replicas) are charged, for the tick's decision, to that
      leader as well as to the recorded one (the core cannot tell which of the two serves them), so the
      source serves a copy as the engine must count it, and is not idle. Seed 10533: the clock stepped
      back 26.6 s just after t0-2's step (2 -> 4 leading) started; its looks, which showed it done and
      led by 4, were set aside until the clock caught up, and t1-1 and t1-5, ready out of 4 with an
      outgoing cap of one move, waited 23 s."""
    charged = {look.leader for tp, f in state.steps.items()
               if f.weight and f.step.nr and (look := _set_aside_look(state, world, now, tp)) is not None
               and look.leader is not None and look.leader != f.source}
    out = {}
    for src, fit in idle.items():
        if src in charged:
            continue
        kept = [(tp, k) for tp, k in fit if _set_aside_look(state, world, now, tp) is None]
        if kept:
            out[src] = kept
    return out


def waiting_for_what_it_lacks(state: State, idle: dict[int, list[tuple]]) -> dict[int, list[tuple]]:
    """``idle`` without the ready steps that need what the oldest blocked step lacks: the scheduler
    reserves that for it, so that it starts as soon as enough is free however many smaller steps keep
    arriving (docs/algorithm.md, section 2, *No starvation*: "at most what it lacks idles"). Capacity it
    has room on is never reserved (issue 27's defect 5): a ready step that needs only that still counts
    (seed 2829: a step that needs two additions of two while one is in flight holds the additions; a
    one-addition step out of an idle broker waits for it, as documented)."""
    blocked = oldest_blocked(state)
    if blocked is None or not idle:
        return idle
    _prio, _tp, key, why = blocked
    lacked = lacking(state.in_flight, state.limits, key) | ({A} if why == A else set())
    out = {}
    for src, fit in idle.items():
        kept = [(tp, k) for tp, k in fit if not resources(k) & lacked]
        if kept:
            out[src] = kept
    return out


def held_by_the_pin(state: State, idle: dict[int, list[tuple]]) -> dict[int, list[tuple]]:
    """``idle`` without the ready steps the dominant-source rule holds (docs/algorithm.md, section 2, "A
    dominant source"), its conditions computed here from the ready steps and the steps in flight (not by
    the scheduler's code): a source with at least twice the ready steps of any other (and another has
    some) is dominant; it is pinned to the brokers it copies something that weighs into and has a ready
    copy that weighs something for, if live (a dead source is not dominant). Held: another source's copy
    that weighs something, of a request the dominant source has a ready step of, into a broker it is
    pinned to; its own copy into a live broker another live source copies into (the broker drains for it); and,
    when it has no ready copy that fits every limit into brokers no other source copies into (and, pinned,
    only into those), another source's copy (of such a request) into a broker of one of its copies that fits every limit
    and goes into a broker another source copies into (its brokers drain for it). Work is not lost: the
    broker it is pinned to takes its copies at its whole rate (a leader's rate is a follower's), and a
    source idle here has copies only for such a broker."""
    if not state.limits.pin_dominant_source or not idle:
        return idle
    counts = {src: sum(len(chain) for chain in lanes.values())
              for src, lanes in state.ready.sources.items() if src is not None}
    if len(counts) < 2:
        return idle
    dom = max(counts, key=lambda s: counts[s])
    live = state.live_brokers()
    if any(n and 2 * n > counts[dom] for s, n in counts.items() if s != dom) or (live is not None and dom not in live):
        return idle

    def alive(b) -> bool:
        return live is None or b in live

    feeds: dict[int, set] = {}
    for f in state.steps.values():
        if f.weight and f.step.nr and f.source is not None:
            for b in f.step.nr:
                feeds.setdefault(b, set()).add(f.source)
    mine = [key for chain in state.ready.sources[dom].values() for _seq, _tp, key in chain
            if key.weight and key.nr]
    requests = {name[0] for name in state.ready.sources[dom]}
    rid = {tp: name[0] for lanes in state.ready.sources.values() for name, chain in lanes.items()
           for _seq, tp, _key in chain}
    pinned = {b for key in mine for b in key.nr if dom in feeds.get(b, ()) and alive(b)}

    def others(b: int) -> bool:
        return alive(b) and any(s != dom and alive(s) for s in feeds.get(b, ()))

    fits = [key for key in mine if refusal(state.in_flight, state.limits, key) is None]
    free = any(not any(others(b) for b in key.nr) and (not pinned or all(b in pinned for b in key.nr))
               for key in fits)
    drained = set() if free else {b for key in fits if any(others(x) for x in key.nr) for b in key.nr}

    def held(tp, key) -> bool:
        if not key.weight or not key.nr or key.source is None:
            return False
        if key.source != dom:
            return rid.get(tp) in requests and any(b in pinned or b in drained for b in key.nr)
        return any(others(b) for b in key.nr) or bool(pinned and any(b not in pinned for b in key.nr))

    out = {}
    for src, fit in idle.items():
        kept = [(tp, k) for tp, k in fit if not held(tp, k)]
        if kept:
            out[src] = kept
    return out


def reserved(key, why) -> set:
    """What a reservation for a blocked step could hold: the capacity it takes (its brokers' and the
    cluster-wide additions). The ready steps that need what it lacks are set aside before
    (``waiting_for_what_it_lacks``), so a step still held by any of this is held by capacity the
    blocked step has room on: issue 27's defect 5."""
    return resources(key)


def oldest_blocked(state: State):
    """The ready step the scheduler reserves capacity for: the first in its order refused by a
    per-broker cap or by A (a replay of its order: sources whose outgoing cap is full skipped, then
    leader moves, continuing, rank, seq)."""
    c = state.in_flight
    best = None
    full = state.limits.max_outgoing_moves_per_broker * WEIGHT_UNITS
    for src, lanes in state.ready.sources.items():
        if src is not None and c.outgoing.get(src, 0) >= full:
            continue  # the scheduler skips a source whose outgoing cap is full
        for name, chain in lanes.items():
            for seq, tp, key in chain:
                why = refusal(c, state.limits, key)
                if why in (None, "P", "L"):
                    continue
                r = state.requests.get(name[0])
                prio = (name[1], name[2], r.rank if r is not None else 0, seq)
                if best is None or prio < best[0]:
                    best = (prio, tp, key, why)
    return best


# --- liveness ----------------------------------------------------------------------------------------


def bound(world: World, state: State, pending_targets: dict, rate: int | None = None) -> float:
    """Seconds within which every request must finish once faults stop (docs/benchmarks.md derives it):
    ``BOUND_BASE`` plus, for every unfinished partition, each replica its goal still lacks and one
    more step (a reorder or the last one), copied one after another at the throttle rate less what
    producers add meanwhile, plus ``MOVE_OVERHEAD`` each. Serial on purpose: it does not depend on the
    limits or on any parallelism the scheduler finds. ``rate``: the throttle to count with (by default
    the engine's; the caller gives the lowest of it and of throttle commands still to be handed)."""
    sim = world.sim.state
    rate = rate or state.throttle_rate or NETWORK
    total = BOUND_BASE
    goals = {}
    for tp, e in state.partitions.items():
        if e.status in TERMINAL:
            continue
        goals[tp] = e.original if e.rolling_back else (e.target if not e.cancelled else ())
    for tp, target in pending_targets.items():
        goals.setdefault(tp, target)
    for tp, goal in sorted(goals.items()):
        p = sim.partitions.get(tp)
        if p is None:
            continue
        adds = len(set(goal or ()) - set(trs(p))) + (len(p.adding) if p.reassigning else 0)
        eff = max(rate - p.produce_rate, rate / 2)
        total += (adds + 1) * (p.size / eff + MOVE_OVERHEAD)
    return total


def stuck_report(world: World, state: State, now: float) -> list[dict]:
    """Every unfinished partition: what the engine holds for it and what the cluster has."""
    sim = world.sim.state
    out = []
    for tp, e in sorted(state.partitions.items()):
        if e.status in TERMINAL:
            continue
        p = sim.partitions[tp]
        f = state.steps.get(tp)
        row = {"tp": tp, "request": e.request_id, "status": e.status, "waiting": state.waiting.get(tp),
               "target": e.target, "original": e.original, "rolling_back": e.rolling_back, "cancelled": e.cancelled,
               "retry_at": e.retry_at, "replicas": p.replicas, "adding": p.adding, "removing": p.removing,
               "isr": tuple(sorted(p.isr)), "leader": p.leader,
               "dead": tuple(sorted(b for b, x in sim.brokers.items() if not x.alive)), "now": now,
               "election": state.elections.get(tp)}
        if f is not None:
            row["step"] = f
        elif e.status == READY:
            row["ready_step"] = plan(state, tp, now)
        failed = state.throttle_failed
        row["throttle_failed_brokers"] = tuple(sorted(failed.leader_brokers | failed.follower_brokers))
        out.append(row)
    return out


def timers_ahead(state: State, now: float, slack: float = 60.0) -> list[str]:
    """Timers of the state set further in the future than any backoff would put them (a clock that
    stepped back, or a standby whose clock lags, left them in the old clock)."""
    late = []
    horizon = now + slack
    for tp, f in state.steps.items():
        if f.retry and f.retry_at is not None and f.retry_at > horizon:
            late.append(f"step retry of {tp} in {f.retry_at - now:.0f} s")
        if f.started_at is not None and f.started_at > horizon:
            late.append(f"step of {tp} started {f.started_at - now:.0f} s in the future")
    for tp in state.waiting.keys():
        e = state.partitions[tp]
        if e.retry_at is not None and e.retry_at > horizon:
            late.append(f"replanning of {tp} in {e.retry_at - now:.0f} s")
    for tp, el in state.elections.items():
        if el.retry and el.retry_at is not None and el.retry_at > horizon:
            late.append(f"election retry of {tp} in {el.retry_at - now:.0f} s")
        if el.since is not None and el.since > horizon:
            late.append(f"election of {tp} asked {el.since - now:.0f} s in the future")
    if state.throttle_retry_at is not None and state.throttle_retry_at > horizon:
        late.append(f"throttle retry in {state.throttle_retry_at - now:.0f} s")
    for b, (_owed, at) in state.release_debt.items():
        if at is not None and at > horizon:
            late.append(f"release bucket of broker {b} refills from {at - now:.0f} s in the future")
    return late


def decider_ahead(d, now: float, slack: float = 5.0) -> list[str]:
    """The decider's own timers (its last full look, its last throttle read-back) further in the
    future than ``slack``: it skips its looks until its clock catches up with them."""
    late = []
    if d.full_at is not None and d.full_at > now + slack:
        late.append(f"the decider's last full look is {d.full_at - now:.0f} s in the future")
    if d.verified_at is not None and d.verified_at > now + slack:
        late.append(f"the decider's last throttle read-back is {d.verified_at - now:.0f} s in the future")
    return late


def silent(state: State, rows: list[dict], now: float) -> list[str]:
    """Unfinished partitions about which neither the waits nor ``attention`` say anything."""
    if state.paused:
        return []  # attention says so, for every partition
    said = attention(state, now=now)
    named = {p for a in said for p in a["partitions"]}
    out = []
    for row in rows:
        if row["waiting"] is None and str(row["tp"]) not in named:
            out.append(str(row["tp"]))
    return out


def fold_matches(log_records, state: State) -> bool:
    return fold(e.payload for e in log_records) == state
