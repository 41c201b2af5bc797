"""Python values <-> Avro data, driven by type hints (one generic converter).

The core's commands and events are frozen dataclasses and ``NamedTuple``
values; fastavro reads and writes plain data (dicts, lists, strings, numbers).
``encoder(T)`` and ``decoder(T)`` compile, once per type, a function between
the two from ``typing.get_type_hints``:

=============================  ===========================================
Python hint                    Avro
=============================  ===========================================
``str`` / ``int`` / ``bool``   ``string`` / ``long`` / ``boolean``
``float``                      ``double``
``bytes``                      ``bytes``
``datetime``                   ``long`` with logicalType ``timestamp-millis``
``X | None``                   ``["null", X]``
``tuple[X, ...]``              ``array`` of X, order kept
``frozenset[X]``               ``array`` of X, sorted (equal sets encode equally)
``Mapping[str, X]``            ``map`` of X
dataclass / ``NamedTuple``     ``record`` named ``io.kreassign.<class name>``
``A | B | ...`` (records)      union of those records, tagged by record name
=============================  ===========================================

``decoder(T)(encoder(T)(x)) == x`` for every value (property-tested for every
command and event type). A hint outside this table is a ``TypeError`` when
the converter is compiled, never a silent guess.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping as AbcMapping
from datetime import datetime
from functools import cache
from typing import Any, Callable, Union

NAMESPACE = "io.kreassign"

Convert = Callable[[Any], Any]


def avro_name(cls: type) -> str:
    """The Avro full name of a record class."""
    return f"{NAMESPACE}.{cls.__name__}"


def is_record(hint: object) -> bool:
    return isinstance(hint, type) and (
        dataclasses.is_dataclass(hint) or (issubclass(hint, tuple) and hasattr(hint, "_fields"))
    )


def record_fields(cls: type) -> list[tuple[str, object]]:
    """(field name, type hint) of a record class, in declaration order."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields)
    return [(n, hints[n]) for n in names]


def union_members(hint: object) -> tuple[object, ...] | None:
    """The members of a union hint (``A | B`` or ``Union[A, B]``), else ``None``."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return None


def _identity(x: Any) -> Any:
    return x


_SCALARS = (str, int, float, bool, bytes, datetime, type(None))


@cache
def encoder(hint: object) -> Convert:
    """A function from a Python value of type ``hint`` to fastavro data."""
    return _compile(hint, encoding=True)


@cache
def decoder(hint: object) -> Convert:
    """A function from fastavro data (as read) to a Python value of type ``hint``."""
    return _compile(hint, encoding=False)


# container origin -> (what encoding builds, what decoding builds, sort the items first when encoding)
_ARRAYS: dict[type, tuple[Callable, Callable, bool]] = {
    tuple: (list, tuple, False),
    frozenset: (list, frozenset, True),  # sorted: equal sets encode to equal bytes
}


def _compile(hint: object, encoding: bool) -> Convert:
    same = encoder if encoding else decoder
    if hint in _SCALARS:
        return _identity
    members = union_members(hint)
    if members is not None:
        rest = tuple(m for m in members if m is not type(None))
        if len(rest) == 1:  # X | None
            inner = same(rest[0])
            return inner if inner is _identity else (lambda v: None if v is None else inner(v))
        return _union_encoder(members) if encoding else _union_decoder(members)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _ARRAYS and (origin is frozenset or (len(args) == 2 and args[1] is Ellipsis)):
        to_avro, to_python, ordered = _ARRAYS[origin]
        build = to_avro if encoding else to_python
        item = same(args[0])
        if encoding and ordered:
            return lambda v: [item(x) for x in sorted(v)]
        if item is _identity:
            return build
        return lambda v: build(item(x) for x in v)
    if origin in (AbcMapping, dict) and args and args[0] is str:
        value = same(args[1])
        return lambda v: {k: value(x) for k, x in v.items()}
    if is_record(hint):
        return _record_encoder(hint) if encoding else _record_decoder(hint)
    raise TypeError(f"no Avro mapping for type {hint!r}")


def _record_encoder(cls: type) -> Convert:
    plain: list[str] = []
    converted: list[tuple[str, Convert]] = []
    for name, hint in record_fields(cls):
        enc = encoder(hint)
        if enc is _identity:
            plain.append(name)
        else:
            converted.append((name, enc))

    def encode(v: Any) -> dict:
        out = {n: getattr(v, n) for n in plain}
        for n, enc in converted:
            out[n] = enc(getattr(v, n))
        return out

    return encode


def _record_decoder(cls: type) -> Convert:
    fields = record_fields(cls)
    plain = [n for n, h in fields if decoder(h) is _identity]
    converted = [(n, decoder(h)) for n, h in fields if decoder(h) is not _identity]

    def decode(d: Any) -> Any:
        if type(d) is tuple:  # (record name, record): a union branch read with its name
            d = d[1]
        kwargs = {n: d[n] for n in plain}
        for n, dec in converted:
            kwargs[n] = dec(d[n])
        return cls(**kwargs)

    return decode


def _union_encoder(members: tuple[object, ...]) -> Convert:
    nullable = type(None) in members
    rest = tuple(m for m in members if m is not type(None))
    if not all(is_record(m) for m in rest):
        raise TypeError(f"a union of several types must be a union of records: {members!r}")
    by_type = {m: (avro_name(m), encoder(m)) for m in rest}

    def encode(v: Any) -> Any:
        if v is None and nullable:
            return None
        try:
            name, enc = by_type[type(v)]
        except KeyError:
            raise TypeError(f"{type(v).__name__} is not one of {[m.__name__ for m in rest]}") from None
        return (name, enc(v))

    return encode


def _union_decoder(members: tuple[object, ...]) -> Convert:
    rest = tuple(m for m in members if m is not type(None))
    by_name = {avro_name(m): decoder(m) for m in rest}

    def decode(d: Any) -> Any:
        if d is None:
            return None
        name, record = d  # read with return_record_name=True
        return by_name[name](record)

    return decode


def records_in(hint: object, seen: dict[str, type] | None = None) -> dict[str, type]:
    """Every record class reachable from ``hint``, by Avro full name."""
    seen = {} if seen is None else seen
    members = union_members(hint)
    if members is not None:
        for m in members:
            records_in(m, seen)
    elif is_record(hint):
        name = avro_name(hint)
        if name not in seen:
            seen[name] = hint
            for _n, h in record_fields(hint):
                records_in(h, seen)
    else:
        for a in typing.get_args(hint):
            if a is not Ellipsis:
                records_in(a, seen)
    return seen
