"""KIP-236 cancellation rules, as KRaft's controller applies them.

Cancelling a partition drops its pending steps. A step in flight is aborted,
started or not (its alter may have landed although its answer was lost):
``AlterPartitionReassignments`` with a null target. KRaft answers
NO_REASSIGNMENT_IN_PROGRESS when nothing is in progress (a normal answer), and
otherwise reverts to RS - AR in RS's order (RS = TRS + the removed replicas in
broker id order): the step's CR as a set, not always in CR's order: (1, 2) ->
(2, 3) reverts to (2, 1). ``engine.core.decide`` judges the abort only on a look
taken after the cancel's answer, and cancels again a reassignment that shows up
after it (an alter that reached the controller late).

Skip rules (a ``CancelSkipped`` event with the reason):

1. The original replicas are unknown: nothing to roll back to.
2. The abort of a step in flight would leave no replica in sync: KRaft computes
   the revert as RS - AR with ISR - AR (its ``PartitionReassignmentRevert``) and
   refuses it with INVALID_REPLICA_ASSIGNMENT when that ISR is empty (an
   unclean leader election; kreassign never asks for one). KIP-236's text lets
   the revert proceed when the new replicas are all offline too; KRaft does not,
   and Kafka's behaviour is the spec. The step then goes on, and the cancel
   applies once it completes.
3. The abort of a step in flight would take the partition below
   min.insync.replicas: the revert's ISR (ISR - AR) holds fewer replicas than
   min.insync.replicas and fewer than are in sync now (the new replicas have
   caught up while original ones are out of the ISR: a broker died mid-step).
   Rule 2 is KIP-236's "skip, otherwise it will become offline" for the ISR as
   Kafka's controller counts it; for acks=all producers a partition below
   min.insync.replicas is offline too (NOT_ENOUGH_REPLICAS), and kreassign
   never takes one there. As for rule 2, the step goes on and the cancel
   applies once it completes: a plain cancel then settles the partition
   (``settle_target``: the step drops no replica that is offline, so it waits
   for the original one to come back), a rollback moves it back step by step.
4. On a topic with ``unclean.leader.election.enable=true`` KRaft does not refuse
   that revert: ``cancelPartitionReassignment`` makes the first original
   replica the ISR alone (in sync or not) and elects uncleanly, so what the new
   replicas had is lost. The ISR a cancel is judged on is the last look's, which
   may be stale, so on such a topic a step is aborted only while every replica
   it reverts to was in sync and alive at the last look (for the revert to be
   unclean, all of them must then have left the ISR since); otherwise the step
   goes on and the cancel applies once it completes (``unclean_skip_reason``).
   A retried abort is judged again by rules 2 to 4 on the latest look (``engine.core.decide``).

Where a cancel leaves a partition:

* ``cancel`` (no rollback), like Kafka's ``--cancel``, touches only what is in
  progress: the step in flight is aborted and nothing new starts. A partition
  that holds more replicas than its original replicas (ORS) at that point (a
  KIP-435 step had added a replica before dropping one) is *settled*: one
  metadata-only step drops the replicas this request added, newest first,
  until it holds |ORS| again (``settle_target``); a partition left with ORS's
  replicas in another order (KRaft's revert) is put back in ORS's order, so
  the preferred leader is the operator's again. Nothing is copied, so a
  cancelled partition never keeps a surplus replica or a half-done step; the
  final ``PartitionCancelled`` says where it stays.
* ``cancel --rollback`` re-plans incrementally back to ORS (recorded at
  submission) under the same limits and throttles as any step, for partitions
  that had not finished. Partitions that had completed stay at their target
  unless the cancel says ``include_completed`` (``--include-completed``).
  An incremental rollback never takes a partition offline (each step completes
  only with its whole target in sync), so only rule 1 applies to it.
* ``cancel`` (no rollback) of a partition being rolled back stops the rollback
  where it stands, as Kafka's ``--cancel`` stops what is in progress: its step
  in flight is aborted and the partition settles as after any plain cancel
  (``ROLLBACK_STOPPED``). A second plain cancel, or a second rollback, changes
  nothing.
* A rollback to original replicas on a broker that is down waits for that
  broker: it goes on when the broker is back; a plain cancel stops it where it
  stands, and a new request can move the partition elsewhere
  (``rollback_waits``: the verdict of the cancel and the partition's waiting
  reason say so).
"""

from __future__ import annotations

from typing import AbstractSet

from engine.core.partition import Replicas


def skip_reason(original: Replicas | None, isr: AbstractSet[int], adding: Replicas = (),
                min_insync: int = 1) -> str | None:
    """Why reverting a reassignment in progress to ``original`` must be skipped, or ``None``.

    ``original`` is what the revert goes back to (RS - AR), ``adding`` the replicas it drops (AR),
    ``isr`` the partition's ISR as last observed. KRaft refuses the revert when none of ``original``
    is in the ISR (rule 2); kreassign does not ask for one that leaves fewer replicas in sync than
    ``min_insync`` when more are in sync now (rule 3)."""
    if original is None:
        return "original replicas unknown: nothing to roll back to"
    if not any(b in isr for b in original):
        return (
            f"none of the replicas {list(original)} it would revert to is in the ISR {sorted(isr)}: "
            f"Kafka refuses such a revert (it would need an unclean leader election); the step goes on "
            f"and the cancel applies when it completes"
        )
    after = sorted(b for b in isr if b not in adding)
    if len(after) < min_insync and len(after) < len(isr):
        return (
            f"the revert to {list(original)} would leave {len(after)} replica{'s' if len(after) != 1 else ''} "
            f"in sync ({after}; Kafka drops the adding replicas {sorted(b for b in isr if b in adding)} from "
            f"the ISR {sorted(isr)}), below min.insync.replicas {min_insync}: acks=all producers would "
            f"fail; the step goes on and the cancel applies when it completes"
        )
    return None


def unclean_skip_reason(topic: str, original: Replicas, isr: AbstractSet[int],
                        live: AbstractSet[int] | None) -> str | None:
    """Why a step reverting to ``original`` on ``topic``, whose unclean leader election is enabled, must not
    be aborted, or ``None``: every replica of ``original`` must be in the ISR (and alive, ``live``: the live
    brokers, ``None`` if unknown) as last seen (rule 4)."""
    out = [b for b in original if b not in isr or (live is not None and b not in live)]
    if not out:
        return None
    return (
        f"unclean leader election is enabled on topic {topic} (unclean.leader.election.enable=true): Kafka "
        f"reverts a cancel whose original replicas have all left the ISR uncleanly, losing what the new "
        f"replicas have, and the last look shows {out} of {list(original)} out of sync or down; the step goes "
        f"on and the cancel applies when it completes"
    )


ROLLBACK_STOPPED = ("its rollback stops where it stands (a cancel without --rollback stops what is in progress; "
                    "cancel with --rollback to roll back again)")
"""The reason of the ``PartitionCancelled`` of a plain cancel of a partition being rolled back."""


def rollback_waits(original: Replicas | None, live: AbstractSet[int] | None) -> str | None:
    """Why a rollback to ``original`` may wait for ever, or ``None``: original replicas on brokers that
    are down (``live``: the live brokers, ``None`` if unknown). Kafka copies to a broker only while it is
    alive, so the rollback waits for them; what else the operator can do is part of the reason."""
    if original is None or live is None:
        return None
    down = [b for b in original if b not in live]
    if not down:
        return None
    which = f"broker {down[0]} is" if len(down) == 1 else f"brokers {down} are"
    return (f"the rollback returns to the original replicas {list(original)}, and {which} down: it goes on "
            f"when {'it is' if len(down) == 1 else 'they are'} back; a cancel without --rollback stops it where "
            f"it stands, or a new request can move the partition elsewhere")


def rollback_skip_reason(original: Replicas | None) -> str | None:
    """Why an (incremental) rollback to ``original`` cannot be done, or ``None``."""
    if original is None:
        return "original replicas unknown: nothing to roll back to"
    return None


def settle_target(cr: Replicas, original: Replicas | None) -> Replicas:
    """Where a cancelled (not rolled back) partition stops: CR less the replicas that are not
    original, newest (last in CR) first, while it holds more than |ORS|; in ORS's order when that
    leaves exactly ORS's replicas (KRaft's revert keeps RS's order, which can put another replica
    first: ORS (1, 2) with target (2, 3) reverts to (2, 1); restoring the order is a step that moves
    no data and gives the operator's preferred leader back). CR itself otherwise, or when ORS is
    unknown."""
    if original is None:
        return cr
    keep = list(cr)
    for b in reversed(cr):
        if len(keep) <= len(original):
            break
        if b not in original:
            keep.remove(b)
    if len(keep) == len(original) and set(keep) == set(original):
        return tuple(original)
    return tuple(keep)
