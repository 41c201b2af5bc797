"""KIP-236 cancellation rules.

Cancelling a partition drops its pending steps. A step in flight is aborted:
Kafka reverts it to the step's own original replicas (its CR). Partitions that
already finished stay where they are unless a rollback is asked for; a rollback
re-plans incrementally back to the request's original replicas (ORS), recorded
at submission, under the same limits as any other step.

KIP-236 skips a cancellation, with a reason, when:

1. the original replicas are unknown (nothing to roll back to);
2. none of the original replicas is in the ISR while some new replica is online:
   reverting would take the partition offline. If the new replicas are all
   offline too, the partition is offline anyway and the cancellation proceeds.

Where each rule applies. Rule 2 guards Kafka's own revert, which sets the
replicas straight back to the originals: in kreassign that is the abort of a
step in flight (back to the step's CR, dropping its NR). A rollback beyond that
is incremental like any other reassignment: each step completes only when its
whole target is in the ISR, so it never takes a partition offline and only
rule 1 can stop it (``rollback_skip_reason``).
"""

from __future__ import annotations

from typing import AbstractSet

from engine.partition import Replicas


def skip_reason(
    original: Replicas | None,
    new: Replicas,
    isr: AbstractSet[int],
    live: AbstractSet[int] | None,
) -> str | None:
    """Why reverting to ``original`` must be skipped, or ``None`` if it is safe.

    ``new`` are the replicas the reassignment added (those a revert removes);
    ``live`` the live brokers (``None``: all alive).
    """
    if original is None:
        return "original replicas unknown: nothing to roll back to"
    if any(b in isr for b in original):
        return None
    online_new = [b for b in new if live is None or b in live]
    if online_new:
        return (
            f"original replicas {list(original)} are all out of the ISR while new replicas "
            f"{online_new} are online: reverting would take the partition offline"
        )
    return None  # everything is offline anyway: proceed, as KIP-236 does


def rollback_skip_reason(original: Replicas | None) -> str | None:
    """Why an (incremental) rollback to ``original`` cannot be done, or ``None``."""
    return skip_reason(original, (), frozenset(), frozenset())
