"""KIP-435 step planner: the next incremental step of one partition.

Terms (KIP-435): CR = current replicas, FTR = final target replicas,
TR = this step's target, NR = new replicas (TR - CR), DR = dropped replicas
(CR - TR), R = replicas added/removed per step.

Rules (docs/algorithm.md has the traces). A request chooses how its partitions
step (``STEP_MODES``, the Submit's ``steps``): ``incremental`` (the default),
``kip-435`` or ``whole``; every rule below holds for the three unless it names
one.

1. *Leader first.* If the final preferred leader FTR[0] is not yet a replica,
   the step adds it and no other new replica, so it can take over leadership
   early and unload the old leader. It may drop up to ``min(R, |NR|)`` live
   excess replicas that are out of the ISR (they carry no data anyone is
   waiting for). ``incremental``: if the current leader is leaving (not in
   FTR), the step drops it too, in the same ``min(R, |NR|)``: at Phase B KRaft
   removes it and elects the first of TR in the ISR, FTR[0], so the partition's
   leader epoch is bumped once for both (a bump holds acks=all writes up about a
   second: docs/simulator.md, "The epoch bump"). ``kip-435``: it drops nothing
   that is in sync, and the new leader is elected on its own after the step:
   two bumps (that election, then the later step that drops the old leader).
   ``whole``: no leader-first step (rule 2 adds FTR[0] with the rest).
2. *Otherwise* DR = the first R excess replicas (CR - FTR), out-of-ISR ones
   first, then CR order; NR = as many of FTR - CR (FTR order) as bring the size
   back to |FTR|, never more than R.
3. *min.insync catch-up.* If fewer replicas are in sync than
   ``min.insync.replicas``, NR grows (beyond R) to enough new replicas to reach
   it, so acks=all producers can continue once they catch up.
4. TR orders the FTR members it holds in FTR order, then the remaining old
   replicas in CR order. The last step therefore equals FTR exactly.
5. *Floor.* Live replicas are dropped only while at least ``min(|CR|, |FTR|)``
   live ones remain (a dead replica counts as a slot to refill before a live one
   goes): if fewer new replicas can be added than planned (targets offline),
   fewer are dropped.
6. *Dead replicas.* Excess replicas on dead brokers that are out of the ISR
   are dropped by every step, beyond R and outside the floor: they hold nothing,
   and a step whose target kept one could never complete (Kafka completes a
   step only when all of TR is in the ISR). Replacing a failed broker is the
   most urgent reassignment an operator runs.
7. *Whole.* ``whole`` takes R as unbounded: one step to FTR (Kafka's tool's
   single alter: one completion, one bump), split only where the caps bound
   |NR| (``max_new``).
8. *Grouped.* ``grouped`` steps as ``incremental`` but splits the step that
   adds the last replicas FTR lacks: that step adds them and drops only dead
   and out-of-ISR replicas, its leader first in TR (no leadership change, no
   election, no epoch bump when it completes); a final step drops the
   replaced replicas (Kafka completes it at once, one bump). The engine holds
   that final step until no new replica of the request copies from the
   partition's leader, or at most ``max_drop_hold_seconds``, so a leader's
   drops go together (one alter: Kafka completes each at it, so they take no
   P or L, ``engine.core.scheduler.at_alter``) and producers to it feel one
   stall for them instead of one per partition (``engine.core.decide``,
   ``drops_wait``).
9. A partition that cannot make progress now is ``Waiting`` with the reason:
   partition offline, target brokers offline, or a replica the step must keep
   is offline (Kafka completes a step only when all of TR is in the ISR).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import AbstractSet, Iterable, NamedTuple

from engine.core.partition import Replicas


class Step(NamedTuple):
    """One AlterPartitionReassignments call: move the partition from CR to TR."""

    cr: Replicas
    tr: Replicas
    nr: Replicas
    dr: Replicas
    leader: int | None  # leader when planned: it feeds the new replicas
    moves_leader: bool  # TR[0] differs from that leader: leadership changes

    @property
    def source(self) -> int | None:
        """The broker the new replicas copy from (None when nothing is copied)."""
        return self.leader if self.nr else None


class Done(NamedTuple):
    pass


class Waiting(NamedTuple):
    reason: str


DONE = Done()

PlanResult = Step | Done | Waiting

INCREMENTAL, KIP_435, WHOLE, GROUPED = "incremental", "kip-435", "whole", "grouped"
STEP_MODES = (INCREMENTAL, KIP_435, WHOLE, GROUPED)
"""How a request's partitions step (the Submit's ``steps``; docs/algorithm.md, section 1):
``incremental`` R replicas a step, the new preferred leader first, joined in the step that drops
the old leader (one epoch bump); ``kip-435`` KIP-435 exactly (the new preferred leader first and
alone, elected after its step); ``whole`` one step to the final target; ``grouped`` as incremental, but
the replaced replicas leave in a final step of their own, held until no new replica of the request copies
from the partition's leader (a leader's partitions take their last bumps together: rule 8)."""
DEFAULT_STEP_MODE = INCREMENTAL

DROPS_HELD = "held to leave with its leader's other replaced replicas"
"""How the reason of a ``grouped`` partition whose final drop is held (rule 8) begins: the state keeps
such partitions by request and leader (``State.drops_held``; a log whose reasons were worded otherwise
folds them as plainly waiting, and a look at them plans them again), and each tick releases a group once
no new replica of its request copies from that leader (``engine.core.decide.drops_wait``)."""


def plan_step(
    cr: Replicas,
    ftr: Replicas,
    isr: AbstractSet[int],
    leader: int | None,
    min_insync_replicas: int = 1,
    max_replicas_per_step: int = 1,
    live: AbstractSet[int] | None = None,
    max_new: int | None = None,
    steps: str = DEFAULT_STEP_MODE,
) -> PlanResult:
    """The next step from CR towards FTR, ``DONE``, or ``Waiting(reason)``.

    ``max_new`` bounds |NR| whatever the rules above say (the scheduler's caps: a step that
    could not fit alone would never start); ``None``: no bound.

    ``live`` is the set of live brokers; ``None`` means all are alive. ``steps``: one of
    ``STEP_MODES``.
    """
    if cr == ftr:
        return DONE
    if leader is None or not isr:
        return Waiting("partition offline: no leader in sync")
    if steps not in STEP_MODES:
        raise ValueError(f"unknown step mode {steps!r}: one of {', '.join(STEP_MODES)}")
    r = max(len(cr), len(ftr)) if steps == WHOLE else max_replicas_per_step
    ftr_set = set(ftr)
    cr_set = set(cr)
    if len(ftr_set) == len(cr_set) and ftr_set == cr_set:
        # Same replicas, new order: one step that only reorders.
        offline = [b for b in ftr if live is not None and b not in live]
        if offline:
            return Waiting(f"replicas {_fmt(offline)} are offline and must stay in this step's target")
        return Step(cr, ftr, (), (), leader, ftr[0] != leader)

    def alive(b: int) -> bool:
        return live is None or b in live

    candidates = [b for b in ftr if b not in cr_set]  # FTR - CR, FTR order
    # Dead replicas out of the ISR carry nothing anyone waits for: a step drops every one of them
    # that FTR does not keep, on top of R, and they never count towards the floor (rule 5).
    dead = [b for b in cr if b not in ftr_set and b not in isr and not alive(b)]
    dead_set = set(dead)
    excess_out = [b for b in cr if b not in ftr_set and b not in isr and b not in dead_set]
    excess_in = [b for b in cr if b not in ftr_set and b in isr]
    in_sync_now = sum(1 for b in cr if b in isr)
    live_cr = len(cr) - len(dead)

    incremental = steps in (INCREMENTAL, GROUPED)
    if ftr[0] not in cr_set and steps != WHOLE:  # rule 1: the new preferred leader first
        if not alive(ftr[0]):
            return Waiting(f"new preferred leader broker {ftr[0]} is offline")
        nr = [ftr[0]]
        catch_up = min_insync_replicas - in_sync_now - 1
        if catch_up > 0:
            nr += [b for b in candidates[1:] if alive(b)][:catch_up]
        if max_new is not None:
            nr = nr[:max(max_new, 1)]
        k = min(r, len(nr))
        dr = dead + excess_out[:k]
        if (incremental and leader in excess_in and len(dr) - len(dead) < k
                and live_cr + len(nr) - (len(dr) - len(dead) + 1) >= min(len(cr), len(ftr))):
            # the old leader leaves in this step: at Phase B KRaft elects the first of TR in the ISR,
            # FTR[0], so one epoch bump does both (rule 5's floor holds)
            dr.append(leader)
    else:  # rule 2
        live_dr = (excess_out + excess_in)[:r]
        need = min(max(len(ftr) - (live_cr - len(live_dr)), 0), r)
        need = max(need, min_insync_replicas - in_sync_now)  # rule 3
        if max_new is not None:
            need = min(need, max_new)
        live_candidates = [b for b in candidates if alive(b)]
        nr = live_candidates[:need]
        floor = min(len(cr), len(ftr))  # rule 5: live replicas left, dead ones counted as slots to refill
        allowed_drops = max(live_cr + len(nr) - floor, 0)
        dr = dead + live_dr[:allowed_drops]
        if not nr and not dr:
            offline = [b for b in candidates if not alive(b)]
            return Waiting(f"target brokers {_fmt(offline)} are offline")

    if steps == GROUPED and nr and all(b in cr_set or b in nr for b in candidates):
        # rule 8: the step that adds the last replicas FTR lacks keeps the replicas it replaces
        dr = [b for b in dr if b in dead_set or b not in isr]
    dropped = set(dr)
    added = set(nr)
    tr = tuple(b for b in ftr if b in cr_set or b in added) + tuple(
        b for b in cr if b not in ftr_set and b not in dropped
    )
    if steps == GROUPED and nr and len(tr) > len(ftr) and leader in tr and tr[0] != leader:
        tr = (leader,) + tuple(b for b in tr if b != leader)  # the split step keeps its leader: no election
    if live is not None:
        offline_kept = [b for b in tr if b not in live and b not in added]
        if offline_kept:
            return Waiting(
                f"replicas {_fmt(offline_kept)} are offline and must stay in this step's target"
            )
    return Step(cr, tr, tuple(b for b in ftr if b in added), tuple(dr), leader, tr[0] != leader)


def plan_all(
    cr: Replicas,
    ftr: Replicas,
    min_insync_replicas: int = 1,
    max_replicas_per_step: int = 1,
    isr: AbstractSet[int] | None = None,
    leader: int | None = None,
    steps: str = DEFAULT_STEP_MODE,
) -> list[Step]:
    """Every step from CR to FTR, assuming each completes with all of TR in sync
    and the preferred leader elected. Raises ``ValueError`` if it cannot start.

    Without ``isr`` and ``leader`` the partition is taken to be healthy (all of
    CR in sync, CR[0] leading): the case of a plan made ahead of time, served by
    a direct walk that equals iterating ``plan_step`` (tested) at a fraction of
    the cost (``grouped`` iterates ``plan_step``).
    """
    if isr is None and leader is None and min_insync_replicas <= min(len(cr), len(ftr)) and steps != GROUPED:
        # Every step of a healthy walk keeps at least min(|CR|, |FTR|) replicas in sync, so the
        # min.insync catch-up (rule 3) can never apply: the direct walk equals iterating plan_step.
        return _plan_all_healthy(cr, ftr, max_replicas_per_step, steps)
    out: list[Step] = []
    isr = set(cr) if isr is None else isr
    leader = (cr[0] if cr else None) if leader is None else leader
    while True:
        result = plan_step(cr, ftr, isr, leader, min_insync_replicas, max_replicas_per_step, steps=steps)
        if type(result) is Done:
            return out
        if type(result) is Waiting:
            raise ValueError(result.reason)
        out.append(result)
        cr = result.tr
        isr = cr
        leader = cr[0]


def _plan_all_healthy(cr: Replicas, ftr: Replicas, r: int, mode: str = DEFAULT_STEP_MODE) -> list[Step]:
    """``plan_all`` when every replica is in sync at every step.

    Then no replica is out of the ISR and no catch-up applies, so DR is always
    the next R of the excess replicas (CR order) and NR the next candidates
    (FTR order): two cursors replace re-deriving sets at each step. The leader is
    CR[0] and then each step's TR[0]; the only excess replica that can lead is
    CR[0], the first of the excess (the ``incremental`` leader-first step drops it).
    """
    if mode not in STEP_MODES:
        raise ValueError(f"unknown step mode {mode!r}: one of {', '.join(STEP_MODES)}")
    if mode == WHOLE:
        r = max(len(cr), len(ftr))
    if cr == ftr:
        return []
    cr_set = set(cr)
    ftr_set = set(ftr)
    if cr_set == ftr_set:
        return [Step(cr, ftr, (), (), cr[0], ftr[0] != cr[0])]
    excess = tuple(b for b in cr if b not in ftr_set)
    cands = tuple(b for b in ftr if b not in cr_set)
    held = [b in cr_set for b in ftr]  # FTR members already replicas (grows as NR are added)
    pos = {b: i for i, b in enumerate(ftr)}
    n_ftr, n_excess, n_cands = len(ftr), len(excess), len(cands)
    e = c = 0
    cur, leader, size = cr, cr[0], len(cr)
    steps: list[Step] = []
    new = tuple.__new__
    while e < n_excess or c < n_cands:
        if c == 0 and not held[0] and mode != WHOLE:  # rule 1: the new preferred leader first
            nr = cands[:1]
            dr = excess[:1] if mode == INCREMENTAL and e == 0 and n_excess and excess[0] == leader else ()
        else:
            dr = excess[e:e + r]
            need = n_ftr - size + len(dr)
            nr = cands[c:c + (r if need > r else need)] if need > 0 else ()
        for b in nr:
            held[pos[b]] = True
        c += len(nr)
        e += len(dr)
        tr = tuple([b for b, h in zip(ftr, held) if h]) + excess[e:]
        steps.append(new(Step, (cur, tr, nr, dr, leader, tr[0] != leader)))
        cur, leader, size = tr, tr[0], len(tr)
    return steps


def plan_many(
    partitions: Iterable[tuple[Replicas, Replicas]], min_insync_replicas: int = 1, max_replicas_per_step: int = 1,
    steps: str = DEFAULT_STEP_MODE,
) -> list[list[Step]]:
    """``plan_all`` for many healthy partitions at once.

    Planning a million partitions allocates tens of millions of tuples that can
    never form reference cycles; the cyclic garbage collector would spend a
    third of the time scanning them, so it is paused for the duration.
    """
    with gc_paused():
        return [plan_all(cr, ftr, min_insync_replicas, max_replicas_per_step, steps=steps) for cr, ftr in partitions]


@contextmanager
def gc_paused(freeze: bool = False):
    """The cyclic garbage collector off while millions of acyclic objects are made: it would walk
    them all again and again (planning, folding, reading a snapshot).

    ``freeze``: for objects made to last (a snapshot's state): they are moved out of the collector's
    reach (``gc.freeze``) before it is enabled again. Else they all sit in its youngest generation,
    and its first collection walks every one of them (0.5 to 0.8 s for a 100,000-partition state).
    Garbage is collected first; what other threads make while the collector is off is frozen with
    them (cycles among it are never collected), so only what runs rarely (a recovery, at a takeover;
    a worker's first read ahead) freezes, never a standby's reads that repeat for days."""
    was_enabled = gc.isenabled()
    if freeze:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def _fmt(brokers: Iterable[int]) -> str:
    return "[" + ", ".join(str(b) for b in brokers) + "]"
