"""Snapshots of the fold: what they hold, how they are stored, and their canonical encoding.

A snapshot is what folding the events topic up to an offset gives (``Fold``):
the core's ``State``, the progress folded beside it (``engine.views.progress``), the
duplicate window of ``engine.log.replay.fold_log``, the last events (for the status
page) and when the steps in flight were planned. Recovery, ``status`` and
``replay`` start from the latest one and fold only the events after it; folding
from offset 0 gives the same thing, byte for byte (tests/test_snapshot.py).

**Canonical encoding** (``canonical``): any tree of the values the state is made
of (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``datetime``,
``tuple``, ``list``, ``frozenset``, ``dict``, ``immutables.Map``, and records:
``NamedTuple`` classes and dataclasses, by field name) as compact JSON, without
a line of code per field. Sets and maps are written sorted (natural order where
the keys are totally ordered, else the order of their encodings), so equal
values give equal bytes whatever their history or the process's hash seed.
This is what "snapshot + tail == full fold" compares.

**Storage** (``dumps``/``loads``): pickle protocol 5, because reading must be
fast: a 100,000-partition state is millions of small objects, and only the C
unpickler builds them at that rate (the canonical form costs a Python-level
walk, about ten times slower; docs/benchmarks.md). Records are pickled as
``tuple.__new__(cls, fields)`` or ``cls(*fields)``, never through their own
``__reduce__``. Reading is restricted: the unpickler resolves only record
classes defined in the fold's modules (``engine.*``), ``immutables.Map``,
``datetime`` values and that constructor, so a snapshot record can build
values, never call anything else (only the engine may write the topic, as for
the events topic).

**Which code may read a snapshot.** A snapshot is only as good as the ``apply``
that folded it. Every snapshot carries a *fingerprint*: a SHA-256 of the format
version and of the source of every module that defines the fold or a class in
the snapshot (``FOLD_MODULES`` and the modules it names). A reader whose
fingerprint differs (any change of the core, a new field included) ignores the
snapshot and folds from offset 0, as it would without one; its own next
snapshot then replaces it. Nothing is ever misread by another version.

**Records.** A snapshot is zlib-compressed and cut into chunks of at most
``CHUNK_BYTES`` (a topic's ``max.message.bytes`` is 1 MB by default); each
chunk is one record of the compacted snapshots topic, with a header naming the
snapshot's id, the events offset it folds up to, the id of the last event it
folds, its index and the chunk count, and a digest of the whole. Keys alternate
between two slots (``snapshot-0-<i>``, ``snapshot-1-<i>``), so that compaction,
which keeps the last record of each key, always keeps the latest complete
snapshot even while a newer one is half written. ``assemble`` returns the
latest complete, intact snapshot of a list of records and says why it skipped
any later one.

Pure: no I/O, no clock (``engine.log.snapshot_store`` reads and writes the topic).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import importlib
import io
import json
import pickle
import struct
import typing
import zlib
from datetime import datetime
from typing import Any, Iterable, NamedTuple

import immutables

from engine.core.step import gc_paused

FORMAT = 1
MAGIC = b"KRSN"
CHUNK_BYTES = 512 * 1024
"""Payload bytes per record: well under Kafka's default ``max.message.bytes``
(1,048,588) with the header, and under the embedded broker's limits."""

FOLD_MODULES = (
    "engine.core.state", "engine.core.partition", "engine.core.scheduler", "engine.core.step", "engine.core.throttles", "engine.core.limits",
    "engine.core.events", "engine.views.progress", "engine.log.replay", "engine.log.envelope", "engine.log.snapshot",
)
"""Modules whose code decides what a fold gives; a change in any of them retires older snapshots."""

# tags of containers (a record's tag is RECORD + its index in the class table)
TUPLE, FROZENSET, MAP, DICT, LIST, DATETIME, BYTES = range(7)
FLAT_TUPLE, FLAT_FROZENSET = 7, 8  # every item a scalar: read back without a walk
RECORD = 16

_SCALARS = frozenset({type(None), bool, int, float, str})


class SnapshotError(ValueError):
    """A value that cannot be encoded, or records that do not make a usable snapshot."""


# --- canonical encoding ----------------------------------------------------------------------


class _Encoder:
    def __init__(self) -> None:
        self.classes: dict[type, int] = {}
        self.table: list[list] = []  # [module:qualname, [field names]]

    def tag(self, cls: type) -> int:
        i = self.classes.get(cls)
        if i is None:
            i = self.classes[cls] = len(self.table)
            self.table.append([f"{cls.__module__}:{cls.__qualname__}", list(_fields(cls))])
        return RECORD + i

    def walk(self, v: Any) -> Any:
        t = type(v)
        if t in _SCALARS:
            return v
        if t is tuple:
            if all(type(x) in _SCALARS for x in v):
                return [FLAT_TUPLE, *v]
            return [TUPLE, *map(self.walk, v)]
        if t is immutables.Map or t is dict:
            out: list = [MAP if t is immutables.Map else DICT]
            for k, x in _sorted_items(v, self):
                out.append(k)
                out.append(self.walk(x))
            return out
        if t is frozenset:
            items = _sorted_keys(v, self)
            if all(type(x) in _SCALARS for x in v):
                return [FLAT_FROZENSET, *items]
            return [FROZENSET, *items]
        if t is list:
            return [LIST, *map(self.walk, v)]
        if t is datetime:
            return [DATETIME, v.isoformat()]
        if t is bytes:
            return [BYTES, base64.b64encode(v).decode("ascii")]
        if _is_record(t):
            tag = self.tag(t)
            if issubclass(t, tuple):  # tuple's own iterator: a NamedTuple may define another
                return [tag, *map(self.walk, tuple.__iter__(v))]
            return [tag, *(self.walk(getattr(v, f)) for f in _fields(t))]
        raise SnapshotError(f"cannot snapshot a value of type {t.__module__}.{t.__qualname__}")


def _sorted_keys(items: Iterable, enc: _Encoder) -> list:
    """Encoded items in canonical order."""
    items = list(items)
    if _orderable(items):
        return [enc.walk(k) for k in sorted(items)]
    walked = [enc.walk(k) for k in items]
    return sorted(walked, key=_dumps)


def _sorted_items(m, enc: _Encoder) -> list[tuple[Any, Any]]:
    keys = list(m.keys())
    if _orderable(keys):
        return [(enc.walk(k), m[k]) for k in sorted(keys)]
    walked = sorted(((enc.walk(k), k) for k in keys), key=lambda p: _dumps(p[0]))
    return [(w, m[k]) for w, k in walked]


def _orderable(keys: list) -> bool:
    """Whether Python's order of these keys is total (so sorting them is canonical): all of one
    type that is a str, an int, or a record whose every field is hinted a str or an int."""
    if not keys:
        return True
    t = type(keys[0])
    if t is bool or not all(type(k) is t for k in keys):
        return False
    return t is str or t is int or _total_record(t)


@functools.cache
def _total_record(cls: type) -> bool:
    if not _is_record(cls):
        return False
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable hints: not known to be totally ordered
        return False
    return all(hints.get(f) in (str, int) for f in _fields(cls))


def _dumps(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"), allow_nan=True)


@functools.cache
def _is_record(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return tuple(cls._fields)


def canonical(value: Any) -> bytes:
    """The canonical bytes of ``value``: equal values, equal bytes (see the module doc)."""
    enc = _Encoder()
    body = enc.walk(value)
    return _dumps({"classes": enc.table, "value": body}).encode()


# --- which code may read a snapshot ---------------------------------------------------------


@functools.cache
def _source_digest(module: str) -> str:
    mod = importlib.import_module(module)
    loader = getattr(mod.__spec__, "loader", None)
    source = loader.get_source(module) if loader is not None and hasattr(loader, "get_source") else None
    if source is None:
        raise SnapshotError(f"the source of {module} cannot be read: snapshots need it to fingerprint the fold")
    return hashlib.sha256(source.encode()).hexdigest()


def fingerprint(modules: Iterable[str] = ()) -> str:
    """SHA-256 of the format and of the source of the fold's modules (and ``modules``)."""
    h = hashlib.sha256(f"kreassign snapshot format {FORMAT}\n".encode())
    for name in sorted(set(FOLD_MODULES) | set(modules)):
        h.update(f"{name} {_source_digest(name)}\n".encode())
    return h.hexdigest()


# --- what a snapshot holds --------------------------------------------------------------------


class Fold(NamedTuple):
    """Everything a fold of the events topic up to ``next_offset`` gives (see the module doc)."""

    state: Any  # engine.core.state.State
    progress: Any  # engine.views.progress.Progress
    window: tuple[str, ...]  # ids of the latest events, oldest first (fold_log's duplicate window)
    recent: tuple  # the latest EventEnvelopes, oldest first (the status page's recent events)
    planned: dict  # TopicPartition -> when its step in flight was planned (epoch seconds)
    events: int  # events applied since offset 0
    duplicates: int  # events skipped as duplicates since offset 0
    next_offset: int  # the offset after the last event folded
    last_event: str | None  # id of the last event folded
    last_recorded_at: datetime | None


class Snapshot(NamedTuple):
    id: str
    fold: Fold
    written_at: str
    writer: str
    size: int  # bytes compressed



# --- storage: restricted pickle ------------------------------------------------------------------


def _dataclass(cls: type, values: tuple) -> Any:
    return cls(*values)


class _Pickler(pickle.Pickler):
    def __init__(self, file) -> None:
        super().__init__(file, protocol=5)
        self.modules: set[str] = set()

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        if t is datetime or t is immutables.Map or not _is_record(t):
            return NotImplemented
        self.modules.add(t.__module__)
        if issubclass(t, tuple):
            return tuple.__new__, (t, tuple(tuple.__iter__(obj)))
        return _dataclass, (t, tuple(getattr(obj, f) for f in _fields(t)))


def dumps(value: Any) -> tuple[bytes, list[str]]:
    """The stored form of ``value`` and the modules of the record classes in it."""
    out = io.BytesIO()
    p = _Pickler(out)
    with gc_paused():
        p.dump(value)
    return out.getvalue(), sorted(p.modules)


def _tuple_new_only(obj: Any, name: str) -> Any:
    """What a pickle of ``tuple.__new__`` calls (``getattr(tuple, "__new__")``), and nothing else."""
    if obj is tuple and name == "__new__":
        return tuple.__new__
    raise SnapshotError(f"a snapshot may not look up {name!r} on {obj!r}")


_ALLOWED_OTHER = {
    ("builtins", "getattr"): _tuple_new_only,
    ("builtins", "tuple"): tuple,
    ("engine.log.snapshot", "_dataclass"): _dataclass,
    ("immutables", "Map"): immutables.Map,
    ("immutables._map", "Map"): immutables.Map,
    ("immutables.map", "Map"): immutables.Map,
    ("datetime", "datetime"): datetime,
}


def _allowed(modules: Iterable[str]) -> dict[tuple[str, str], Any]:
    import datetime as dt

    allowed = dict(_ALLOWED_OTHER)
    allowed[("datetime", "timezone")] = dt.timezone
    allowed[("datetime", "timedelta")] = dt.timedelta
    for name in set(FOLD_MODULES) | set(modules):
        if not name.startswith("engine."):
            raise SnapshotError(f"a snapshot may only name kreassign's own modules, not {name}")
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if isinstance(obj, type) and obj.__module__ == name and _is_record(obj):
                allowed[(name, obj.__qualname__)] = obj
    return allowed


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, allowed: dict) -> None:
        super().__init__(file)
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise SnapshotError(f"a snapshot may not name {module}.{name}") from None


def loads(data: bytes, modules: Iterable[str] = (), freeze: bool = True) -> Any:
    """What ``dumps`` was given; ``SnapshotError`` for anything else (see the module doc).
    ``freeze``: out of the cyclic collector's reach at once (``gc_paused``), for a state about to be
    folded on; a standby reading snapshots ahead in the background passes False (the freeze would
    also take what other threads made meanwhile, again at every read)."""
    try:
        with gc_paused(freeze=freeze):  # a snapshot's state lives as long as the decider (no cycles)
            return _Unpickler(io.BytesIO(data), _allowed(modules)).load()
    except SnapshotError:
        raise
    except Exception as e:  # noqa: BLE001 - a bad or foreign snapshot is skipped with the reason
        raise SnapshotError(f"cannot read the snapshot: {type(e).__name__}: {e}") from None


# --- records ------------------------------------------------------------------------------------


def slot_key(slot: int, index: int) -> bytes:
    return f"snapshot-{slot}-{index}".encode()


def to_records(fold: Fold, *, snapshot_id: str, slot: int, written_at: str, writer: str,
               chunk_bytes: int = CHUNK_BYTES) -> list[tuple[bytes, bytes]]:
    """(key, value) records of one snapshot of ``fold``, in the order to write them."""
    data, modules = dumps(fold)
    payload = zlib.compress(data, 1)
    digest = hashlib.sha256(payload).hexdigest()
    chunks = [payload[i:i + chunk_bytes] for i in range(0, len(payload), chunk_bytes)] or [b""]
    header = {
        "format": FORMAT, "id": snapshot_id, "fingerprint": fingerprint(modules), "modules": modules,
        "next_offset": fold.next_offset, "last_event": fold.last_event, "events": fold.events,
        "count": len(chunks), "size": len(payload), "digest": digest, "written_at": written_at, "writer": writer,
    }
    out = []
    for i, chunk in enumerate(chunks):
        h = json.dumps({**header, "index": i}, separators=(",", ":")).encode()
        out.append((slot_key(slot, i), MAGIC + struct.pack(">HI", FORMAT, len(h)) + h + chunk))
    return out


class Chunk(NamedTuple):
    header: dict
    data: bytes


def parse(value: bytes | None) -> Chunk:
    """One record of the snapshots topic; ``SnapshotError`` if it is not a snapshot chunk."""
    if value is None or value[:4] != MAGIC or len(value) < 10:
        raise SnapshotError("not a snapshot record")
    fmt, n = struct.unpack(">HI", value[4:10])
    if fmt != FORMAT:
        raise SnapshotError(f"snapshot format {fmt}, this version reads {FORMAT}")
    try:
        header = json.loads(value[10:10 + n])
    except ValueError as e:
        raise SnapshotError(f"bad snapshot header: {e}") from None
    return Chunk(header, value[10 + n:])


class Assembled(NamedTuple):
    snapshot: Snapshot | None
    skipped: tuple[str, ...]  # why each newer snapshot could not be used


def assemble(values: Iterable[bytes | None], expected: str | None = None, freeze: bool = True) -> Assembled:
    """The latest complete, intact snapshot readable by this code among the records ``values``
    (in topic order), and the reasons for every later one skipped. ``expected``: the fingerprint
    (defaults to this code's, per snapshot's modules); ``freeze``: see ``loads``."""
    by_id: dict[str, dict[int, Chunk]] = {}
    order: list[str] = []
    for value in values:
        try:
            chunk = parse(value)
        except SnapshotError:
            continue  # claims and tombstones share the topic
        sid = chunk.header.get("id")
        if sid not in by_id:
            by_id[sid] = {}
        else:
            order.remove(sid)
        order.append(sid)  # ordered by each snapshot's last record
        by_id[sid][chunk.header.get("index", -1)] = chunk
    skipped: list[str] = []
    for sid in reversed(order):
        chunks = by_id[sid]
        header = next(iter(chunks.values())).header
        label = f"snapshot {sid} (events offset {header.get('next_offset')})"
        count = header.get("count", 0)
        if sorted(chunks) != list(range(count)):
            skipped.append(f"{label}: incomplete, {len(chunks)} of {count} records")
            continue
        try:
            mine = expected or fingerprint(header.get("modules") or ())
        except Exception as e:  # noqa: BLE001 - a module of the snapshot is not here
            skipped.append(f"{label}: {type(e).__name__}: {e}")
            continue
        if header.get("fingerprint") != mine:
            skipped.append(f"{label}: written by other fold code (fingerprint {str(header.get('fingerprint'))[:12]}, "
                           f"this version {mine[:12]}); folding without it")
            continue
        payload = b"".join(chunks[i].data for i in range(count))
        if hashlib.sha256(payload).hexdigest() != header.get("digest"):
            skipped.append(f"{label}: digest mismatch (corrupt)")
            continue
        try:
            fold = loads(zlib.decompress(payload), header.get("modules") or (), freeze)
        except (SnapshotError, zlib.error) as e:
            skipped.append(f"{label}: {e}")
            continue
        if not isinstance(fold, Fold):
            skipped.append(f"{label}: not a fold")
            continue
        return Assembled(Snapshot(sid, fold, header.get("written_at", ""), header.get("writer", ""), len(payload)),
                         tuple(skipped))
    return Assembled(None, tuple(skipped))

