"""When a failed action is tried again: the one place that decides retries.

An action the cluster refused, or could not be asked (``engine.core.outcomes``),
is recorded as an ``ActionFailed`` event naming the attempt and ``retry_at``;
a later ``Tick`` whose clock has passed ``retry_at`` emits ``ActionRetried``,
which the executor carries out like the original action. Backoff doubles from
``FIRST_BACKOFF`` up to ``MAX_BACKOFF``: a cluster that is down for an hour is
asked twice a minute, never hammered, and never given up on for an action that
must happen (a step, an abort, a throttle change).

A preferred-leader election is the exception: it is an optimisation (the new
leader unloads the old one before the next step), so after ``ELECTION_ATTEMPTS``
failed or lost elections the partition goes on without it, and says so.

Times are the shell's clock (seconds) carried by the inputs; without a clock
(``now`` is ``None``, as in tests that drive the core step by step) every retry
is due at the next tick.
"""

from __future__ import annotations

FIRST_BACKOFF = 1.0  # seconds before the first retry
MAX_BACKOFF = 30.0
ELECTION_ATTEMPTS = 6  # elections tried before the partition goes on without one
ELECTION_GRACE = 5.0  # seconds an accepted election may take to show in the metadata


def backoff(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th failure (1-based)."""
    return min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** max(attempt - 1, 0))


def retry_at(now: float | None, attempt: int) -> float | None:
    """When to try again after the ``attempt``-th failure; ``None`` without a clock (due at once)."""
    return None if now is None else now + backoff(attempt)


def due(at: float | None, now: float | None) -> bool:
    """Whether something scheduled ``at`` is due ``now`` (always, if either is unknown)."""
    return at is None or now is None or now >= at
