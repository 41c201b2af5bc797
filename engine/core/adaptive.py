"""Adaptive replication throttle (opt-in): keep the rate near what copies achieve, within bounds.

KIP-73 throttles protect client traffic from replica copies. A fixed rate is
either too low (copies crawl while the brokers have room) or too high (it no
longer limits anything when the brokers are busy). With
``--adaptive-throttle MIN:MAX`` the engine measures, for each completed step
that copied data, its *utilisation*: the rate it achieved (bytes copied per
new replica / seconds from start to completion) over the share of the
throttle it could get (the rate divided by the copies that shared its busiest
throttled broker when it started).

* median utilisation of the last ``WINDOW`` steps >= ``RAISE_AT``: the
  throttle is what limits the copies -> raise the rate by ``UP`` (at most MAX);
* <= ``LOWER_AT``: the copies get far less than the throttle allows (the
  brokers are busy) -> lower it by ``DOWN`` (at least MIN), so the throttle
  keeps protecting clients when their traffic comes back;
* in between: no change.

Hysteresis: the thresholds are far apart, and after a change only steps
started at the new rate count, so each change is judged on its own effect.
Every change goes through ``decide`` (an ``AdaptThrottle`` input -> a
``ThrottleRateChanged`` event with the reason); an operator's
``kreassign throttle --rate none`` switches throttling off and adaptation
with it. Pure: the shell measures, this module decides.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from engine.core.commands import AdaptThrottle
from engine.core.units import parse_rate

WINDOW = 5
RAISE_AT = 0.8
LOWER_AT = 0.4
UP = 1.5
DOWN = 0.7
MAX_UTILISATION = 1.5  # a step that completed within one poll says only "at least the throttle"


class BoundsError(ValueError):
    """``MIN:MAX`` that cannot be used; the message says why."""


class Sample(NamedTuple):
    """One completed step that copied data, as the shell measured it."""

    rate: int  # bytes/s the throttle had when the step started
    share: int  # copies sharing the step's busiest throttled broker when it started (>= 1)
    bytes: float  # bytes each new replica copied (the partition's size)
    seconds: float  # from the step's start to its observed completion

    def utilisation(self) -> float:
        if self.seconds <= 0:
            return MAX_UTILISATION
        allowed = self.rate / max(1, self.share)
        return min(MAX_UTILISATION, self.bytes / self.seconds / allowed)


class AdaptiveThrottle(NamedTuple):
    low: int
    high: int
    samples: tuple[float, ...] = ()  # utilisations of steps started at the current rate

    def record(self, sample: Sample, current_rate: int | None) -> "AdaptiveThrottle":
        if current_rate is None or sample.rate != current_rate:
            return self  # started before the last change (or unthrottled): says nothing of this rate
        return self._replace(samples=(self.samples + (sample.utilisation(),))[-WINDOW:])

    def propose(self, current_rate: int | None) -> tuple["AdaptiveThrottle", AdaptThrottle | None]:
        """The next state and the change to make, if any."""
        if current_rate is None or len(self.samples) < WINDOW:
            return self, None
        u = statistics.median(self.samples)
        if u >= RAISE_AT and current_rate < self.high:
            new = min(self.high, max(current_rate + 1, int(current_rate * UP)))
            why = f"adaptive: copies ran at {u:.0%} of their throttle share, raised"
        elif u <= LOWER_AT and current_rate > self.low:
            new = max(self.low, int(current_rate * DOWN))
            why = f"adaptive: copies ran at {u:.0%} of their throttle share, lowered"
        else:
            return self, None
        return self._replace(samples=()), AdaptThrottle(new, why)


def parse_bounds(text: str) -> AdaptiveThrottle:
    """``MIN:MAX`` in bytes/s (units accepted: ``10MB/s:200MB/s``)."""
    low_text, sep, high_text = text.partition(":")
    if not sep:
        raise BoundsError(f"expected MIN:MAX (bytes per second), got {text!r}")
    try:
        low, high = int(parse_rate(low_text.strip())), int(parse_rate(high_text.strip()))
    except ValueError as e:
        raise BoundsError(f"adaptive throttle bounds {text!r}: {e}") from None
    if low < 1 or high < low:
        raise BoundsError(f"adaptive throttle bounds must satisfy 1 <= MIN <= MAX, got {text!r}")
    return AdaptiveThrottle(low, high)
