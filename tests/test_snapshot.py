"""Snapshots (engine/log/snapshot.py, engine/log/replay.py's ``extend``, the decider's recovery from one):
a snapshot plus the events after it folds to exactly what the whole log folds to, compared as
canonical bytes; the stored form reads back to equal values; a snapshot that this code cannot
trust is skipped with its reason, never misread."""

import os
import pickle
import random
import subprocess
import sys
from collections import deque

import immutables
import pytest
from hypothesis import given, settings, strategies as st

from engine.log import snapshot as SN
from engine.core.commands import Cancel, ChangeLimits, Submit
from engine.runtime.decider import Decider
from engine.log.envelope import EventEnvelope
from engine.core.partition import TopicPartition
from engine.log.replay import START, extend
from engine.sim.cluster import SimulatedCluster
from engine.core.state import COMPLETED
from engine.core.throttles import ThrottledReplica
from engine.whatif.fuzz.world import Crash as Killed  # the process dies here (test_decider uses it since the fuzz merge)
from tests.test_decider import DyingLog, Recorder, decommission


def stored(fold, chunk_bytes=SN.CHUNK_BYTES, slot=0, sid="s"):
    """The fold through the stored form: records, then assembled back."""
    records = SN.to_records(fold, snapshot_id=sid, slot=slot, written_at="t", writer="test", chunk_bytes=chunk_bytes)
    found = SN.assemble(v for _k, v in records)
    assert found.snapshot is not None, found.skipped
    return found.snapshot.fold, records


def run(seed, kills=12, snapshot_chance=0.3):
    """The decider on the simulated cluster with crashes (test_decider's) and snapshots written
    after inputs, as the worker writes them; every recovery starts from the latest snapshot."""
    rng = random.Random(seed)
    sc = decommission(seed=seed)
    cluster = Recorder(SimulatedCluster.from_scenario(sc))
    log = DyingLog()
    persisted = None
    d = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    d.recover(persisted)
    inputs = [ChangeLimits({"max_partitions_in_flight": 3}), Submit("r1", tuple(sc.targets))]
    cancel_at = rng.randint(40, 80)
    died = rounds = 0
    while rounds < 4000:
        rounds += 1
        if rounds == cancel_at:
            inputs.append(Cancel("r1", tuple(t.tp for t in sc.targets[:3]), rollback=True))
            inputs.append(Submit("r2", tuple(sc.targets[:3])))
        if died < kills and cluster.die_at is None and log.die_at is None and rng.random() < 0.3:
            if rng.random() < 0.5:
                cluster.die_at = cluster.calls + rng.randint(1, 3)
            else:
                log.die_at = log.appends + rng.randint(1, 3)
        try:
            if inputs:
                d.decide(inputs[0])
                inputs.pop(0)
            else:
                d.tick()
            persisted = d.executed
            if rng.random() < snapshot_chance:
                log.write_snapshot(stored(d.fold())[0])
        except Killed:
            died += 1
            cluster.die_at = log.die_at = None
            d = Decider(log, cluster, clock=lambda: cluster.cluster.time)
            d.recover(persisted)
            continue
        done = all(d.state.requests.get(r) is not None and d.state.requests[r].status == COMPLETED for r in ("r1", "r2"))
        if done and not inputs:
            break
        cluster.cluster.advance(1.0)
    return sc, d, cluster, log, died


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_snapshot_plus_tail_is_the_full_fold_byte_for_byte(seed):
    sc, d, cluster, log, died = run(seed)
    assert died >= 8 and len(log.snapshots) >= 10
    s = cluster.cluster.state  # converged exactly, no throttle left
    assert all(s.partitions[tp].replicas == r for tp, r in sc.target_assignment().items())
    assert s.throttles.is_empty()
    records = log.read
    full = extend(START, records())
    # the live decider's own fold (what it writes as a snapshot) is the log's
    assert SN.canonical(d.fold()) == SN.canonical(full)
    for snap in log.snapshots:
        # each snapshot is exactly the fold of the events below its offset ...
        assert SN.canonical(snap) == SN.canonical(extend(START, list(records())[:snap.next_offset]))
        # ... and it plus the rest is the whole fold
        tail = list(records())[snap.next_offset:]
        assert SN.canonical(extend(snap, tail)) == SN.canonical(full)


def test_a_cut_anywhere_folds_to_the_same_bytes_duplicates_included():
    sc, d, cluster, log, _ = run(4, kills=4, snapshot_chance=0.0)
    records = list(log.read())
    # re-delivered writes: copies of earlier envelopes (same id) land later in the log
    rng = random.Random(4)
    for _ in range(30):
        i = rng.randrange(len(records))
        records.insert(min(len(records), i + rng.randint(1, 50)), (None, records[i][1]))
    records = [(n, e) for n, (_o, e) in enumerate(records)]
    full = extend(START, records)
    assert full.duplicates == 30
    for cut in sorted(rng.sample(range(len(records)), 25)) + [0, len(records)]:
        head, _ = stored(extend(START, records[:cut]), chunk_bytes=4096)
        assert SN.canonical(extend(head, records[cut:])) == SN.canonical(full), cut


def test_recovery_from_a_snapshot_equals_recovery_from_offset_0():
    sc, d, cluster, log, _ = run(5, kills=0)
    assert log.snapshots
    from_snapshot = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    report = from_snapshot.recover(d.executed)
    assert report["from_snapshot"]["next_offset"] == log.snapshots[-1].next_offset
    snapshots, log.snapshots = log.snapshots, []
    from_zero = Decider(log, cluster, clock=lambda: cluster.cluster.time)
    assert from_zero.recover(d.executed)["from_snapshot"] is None
    log.snapshots = snapshots
    assert SN.canonical(from_snapshot.fold()) == SN.canonical(from_zero.fold()) == SN.canonical(d.fold())


# --- the canonical encoding ------------------------------------------------------------------------

keys = st.tuples(st.sampled_from(["a", "b", "t.x"]), st.integers(0, 50)).map(lambda t: TopicPartition(*t))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(keys, st.integers(), max_size=30), st.randoms())
def test_equal_maps_and_sets_encode_equally_whatever_their_history(d, rnd):
    items = list(d.items())
    other = list(items)
    rnd.shuffle(other)
    a = immutables.Map(items)
    b = immutables.Map()
    for k, v in other:  # built one key at a time, in another order, with a detour
        b = b.set(k, v).set(TopicPartition("zz", -1), 0).delete(TopicPartition("zz", -1))
    assert a == b and SN.canonical(a) == SN.canonical(b)
    assert SN.canonical(frozenset(d)) == SN.canonical(frozenset(reversed(list(d))))
    tr = frozenset(ThrottledReplica(k.topic, k.partition, v % 5) for k, v in items)
    assert SN.canonical(tr) == SN.canonical(frozenset(sorted(tr, reverse=True)))
    if items:
        smaller = immutables.Map(items[1:])
        assert SN.canonical(smaller) != SN.canonical(a)


def test_the_encoding_does_not_depend_on_the_hash_seed():
    code = ("import sys; from engine.log import snapshot as SN; from tests.test_snapshot import sample;"
            "sys.stdout.write(SN.canonical(sample()).hex())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(outs) == 1 and outs.pop() == SN.canonical(sample()).hex()


def sample():
    """A value with maps and sets of strings, whose iteration order follows the hash seed."""
    from engine.core.scheduler import SchedulingKey

    return immutables.Map({f"req-{i}": frozenset({f"b{j}" for j in range(i)}) for i in range(20)}).set(
        "keys", immutables.Map({SchedulingKey(bool(i % 2), None if i % 3 else i, (i,)): i for i in range(10)}))


def test_records_of_a_namedtuple_with_its_own_iterator_keep_their_fields():
    from engine.core.scheduler import ReadyIndex

    ready = ReadyIndex()  # iterating it yields partitions, not its fields
    assert SN.loads(*SN.dumps(ready)) == ready
    assert SN.canonical(ready) == SN.canonical(ReadyIndex(immutables.Map(), 0))


# --- records of the snapshots topic ----------------------------------------------------------------


def test_a_large_snapshot_is_cut_into_chunks_each_within_the_record_limit():
    sc, d, *_ = run(6, kills=0)
    fold = d.fold()
    back, records = stored(fold, chunk_bytes=2000)
    assert len(records) > 3
    assert all(len(v) <= 2000 + 600 for _k, v in records)
    assert [k for k, _v in records] == [f"snapshot-0-{i}".encode() for i in range(len(records))]
    assert SN.canonical(back) == SN.canonical(fold)


def test_the_latest_complete_snapshot_is_used_and_every_later_one_skipped_with_its_reason():
    sc, d, *_ = run(7, kills=0)
    fold = d.fold()
    older = SN.to_records(fold._replace(events=1), snapshot_id="older", slot=0, written_at="t", writer="w",
                          chunk_bytes=3000)
    newer = SN.to_records(fold, snapshot_id="newer", slot=1, written_at="t", writer="w", chunk_bytes=3000)
    half = newer[: len(newer) // 2]  # its writer died half way
    found = SN.assemble([v for _k, v in older + half + [(b"decider", b"a lease record")]])
    assert found.snapshot.id == "older" and found.snapshot.fold.events == 1
    assert len(found.skipped) == 1 and "incomplete" in found.skipped[0]
    corrupt = list(newer)
    k, v = corrupt[1]
    corrupt[1] = (k, v[:-1] + bytes([v[-1] ^ 1]))
    found = SN.assemble([v for _k, v in older + corrupt])
    assert found.snapshot.id == "older" and "digest mismatch" in found.skipped[0]
    assert SN.assemble([v for _k, v in older + newer]).snapshot.id == "newer"


def test_a_snapshot_of_other_fold_code_is_ignored_never_misread():
    sc, d, *_ = run(8, kills=0)
    records = SN.to_records(d.fold(), snapshot_id="x", slot=0, written_at="t", writer="w")
    found = SN.assemble((v for _k, v in records), expected="0" * 64)
    assert found.snapshot is None and "other fold code" in found.skipped[0]


def test_the_fingerprint_covers_the_fold_code():
    base = SN.fingerprint()
    assert SN.fingerprint(["engine.core.decide"]) != base  # a module named by the snapshot counts too
    SN._source_digest.cache_clear()
    assert SN.fingerprint() == base


def test_reading_a_snapshot_builds_values_and_calls_nothing_else():
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(SN.SnapshotError, match="may not name"):
        SN.loads(pickle.dumps(Evil()))
    with pytest.raises(SN.SnapshotError, match="may not look up"):
        SN.loads(b"\x80\x05\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x07getattr\x94\x93\x94"
                 b"\x8c\x08builtins\x94\x8c\x05tuple\x94\x93\x94\x8c\x08__init__\x94\x86\x94R\x94.")
    with pytest.raises(SN.SnapshotError, match="only name kreassign's own modules"):
        SN.loads(SN.dumps(1)[0], ["os"])


def test_envelopes_and_datetimes_round_trip():
    sc, d, *_ = run(9, kills=0)
    fold = d.fold()
    assert fold.recent and isinstance(fold.recent[0], EventEnvelope)
    back = SN.loads(*SN.dumps(fold))
    assert back == fold and back.recent[0].recorded_at.tzinfo is not None
    assert deque(back.window) == deque(fold.window)
