"""Hypothesis strategies for any value the Avro mapping covers, built from type hints.

The mirror of ``engine.log.avro_mapping``: one generic builder, so every command
and event type (and any field added later) is generated without hand-written
strategies.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping as AbcMapping
from datetime import datetime, timedelta, timezone
from functools import cache

from hypothesis import strategies as st

from engine.log.avro_mapping import is_record, record_fields, union_members

LONG = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(-3, 50)  # broker ids and partitions: collisions make sets and maps interesting
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MILLIS = st.integers(0, 253402300799999).map(lambda ms: _EPOCH + timedelta(milliseconds=ms))


@cache
def values(hint: object) -> st.SearchStrategy:
    if hint is str:
        return st.text(max_size=12)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.one_of(SMALL, LONG)
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is bytes:
        return st.binary(max_size=16)
    if hint is datetime:
        return MILLIS
    if hint is type(None):
        return st.none()
    members = union_members(hint)
    if members is not None:
        return st.one_of(*(values(m) for m in members))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return st.lists(values(args[0]), max_size=4).map(tuple)
    if origin is frozenset:
        return st.frozensets(values(args[0]), max_size=4)
    if origin in (AbcMapping, dict):
        return st.dictionaries(values(args[0]), values(args[1]), max_size=4)
    if is_record(hint):
        fields = record_fields(hint)
        return st.builds(lambda *xs: hint(**{n: x for (n, _h), x in zip(fields, xs)}),
                         *(st.deferred(lambda h=h: values(h)) for _n, h in fields))
    raise TypeError(f"no strategy for {hint!r}")
