"""Sizes, rates and durations as operators write them: ``2 GB``, ``50 MB/s``, ``90s``.

Decimal units as Kafka's docs and network gear use them (``kB``/``KB`` 10^3,
``MB`` 10^6, ``GB`` 10^9, ``TB`` 10^12) and binary ones (``KiB`` ... ``TiB``).
A bare number is bytes, bytes/s or seconds. Anything else raises
``UnitError`` naming the text.
"""

from __future__ import annotations

import re

_BYTES = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SECONDS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


class UnitError(ValueError):
    """Text that is not a size, rate or duration."""


def _split(text: object, what: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise UnitError(f"expected a {what}, got {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise UnitError(f"expected a {what} >= 0, got {text!r}")
        return float(text), ""
    if not isinstance(text, str):
        raise UnitError(f"expected a {what}, got {text!r}")
    m = _QUANTITY.match(text)
    if not m:
        raise UnitError(f"expected a {what} such as {_EXAMPLES[what]}, got {text!r}")
    return float(m.group(1)), m.group(2).lower()


_EXAMPLES = {"size": "'2 GB' or '512 MiB'", "rate": "'50 MB/s'", "duration": "'90s', '5m' or '2h'"}


def parse_size(text: object) -> int:
    """Bytes: ``2 GB`` -> 2000000000."""
    value, unit = _split(text, "size")
    if unit not in _BYTES:
        raise UnitError(f"unknown size unit {unit!r} in {text!r} (use B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return int(round(value * _BYTES[unit]))


def parse_rate(text: object) -> int:
    """Bytes per second: ``50 MB/s`` -> 50000000 (``/s`` may be left out)."""
    if isinstance(text, str) and text.rstrip().lower().endswith("/s"):
        text = text.rstrip()[:-2]
    try:
        return parse_size(text)
    except UnitError:
        raise UnitError(f"expected a rate such as '50 MB/s', got {text!r}") from None


def parse_duration(text: object) -> float:
    """Seconds: ``5m`` -> 300.0."""
    value, unit = _split(text, "duration")
    if unit not in _SECONDS:
        raise UnitError(f"unknown duration unit {unit!r} in {text!r} (use ms, s, m, h, d)")
    return value * _SECONDS[unit]


def format_size(n: float) -> str:
    for unit, factor in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"


def format_rate(n: float) -> str:
    return format_size(n) + "/s"


def format_duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{seconds:.1f}s"
