"""Scheduler decisions with N partitions queued, and a full tick on a state that big.

    python -m benchmarks.scheduler --partitions 1000000 --brokers 300 --replicas-per-step 2

Partition i lives on three random brokers of ``--brokers`` and moves to three other random ones
(seeded); its queued step is a random one of its KIP-435 plan (first and later steps mixed), in two
requests. Measured, one JSON line:

* ``decision_ms``: one ``next_batch`` from an idle cluster (it fills the limits), median of 15;
* ``full_decision_ms``: the same with P already full (nothing may start: it returns at once);
* ``saturated_decision_ms``: after the idle batch started, every broker it touched at its cap;
* ``first_tick_ms`` / ``tick_ms``: ``decide(Tick)`` on a ``State`` holding all of it, the first one after
  the state was built (as after a recovery: the engine freezes the folded state out of the garbage
  collector's reach, ``engine.runtime.decider``) and the median of the next ones.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time

import immutables

from engine.core.commands import Tick
from engine.core.decide import handle, weight
from engine.core.limits import Limits
from engine.core.partition import PartitionState, TopicInfo, TopicPartition
from engine.core.scheduler import (
    WEIGHT_UNITS, FRESH, InFlight, Ranks, ReadyIndex, SchedulingKey, next_batch, weight_units,
)
from engine.core.throttles import DEFAULT_THROTTLE_RATE
from engine.core.state import EMPTY, READY, PartitionReassignment, Request
from engine.core.step import Step, gc_paused, plan_all


SIZE = 1_000_000_000  # bytes per partition: 20 s at the default throttle, a whole move each


def workload(n: int, brokers: int, r: int, seed: int = 7):
    rnd = random.Random(seed)
    ids = range(brokers)
    for i in range(n):
        cr = tuple(rnd.sample(ids, 3))
        ftr = tuple(rnd.sample([b for b in ids if b not in cr], 3))
        steps = plan_all(cr, ftr, 1, r)
        step = steps[rnd.randrange(len(steps))]
        yield TopicPartition(f"topic-{i % 1000}", i // 1000), cr, ftr, step


def build(n: int, brokers: int, r: int):
    """The ready index alone, and a State holding the same partitions (observed at their step's CR)."""
    index = ReadyIndex()
    steps: dict[TopicPartition, Step] = {}
    obs = immutables.Map().mutate()
    parts = immutables.Map().mutate()
    for i, (tp, cr, ftr, step) in enumerate(workload(n, brokers, r)):
        rid = "r1" if i % 2 else "r2"
        w = weight_units(SIZE, DEFAULT_THROTTLE_RATE, Limits().full_move_seconds) if step.nr else WEIGHT_UNITS
        index, slot = index.add(SchedulingKey.of(step, w), FRESH, i, tp, rid)
        steps[tp] = step
        obs[tp] = PartitionState(step.cr, frozenset(step.cr), step.cr[0], SIZE)
        parts[tp] = PartitionReassignment(rid, cr, ftr, READY, i, slot=slot)
    half = n // 2
    requests = immutables.Map({rid: Request(rid, k, half, "x", counts=immutables.Map({READY: half}))
                               for k, rid in enumerate(("r1", "r2"))})
    topics = immutables.Map({f"topic-{t}": TopicInfo(n // 1000 + 1, 1) for t in range(1000)})
    state = EMPTY._replace(observed=obs.finish(), partitions=parts.finish(), ready=index, requests=requests,
                           topics=topics, limits=Limits(max_replicas_per_step=r), seq=n,
                           live=frozenset(range(brokers)), ranks=Ranks().add(0, len(requests)))
    return index, steps, state


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), result


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--partitions", type=int, default=1_000_000)
    p.add_argument("--brokers", type=int, default=300)
    p.add_argument("--replicas-per-step", type=int, default=2)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    with gc_paused():  # setup only: millions of acyclic tuples
        index, steps, state = build(args.partitions, args.brokers, args.replicas_per_step)
    build_s = time.perf_counter() - t0
    gc.freeze()  # what the engine does with a state it folded (engine.runtime.decider.Decider.recover)
    limits = state.limits
    replan = steps.__getitem__
    weigh = lambda tp, step: weight(state, tp, step)  # noqa: E731
    decision_ms, batch = timed(lambda: next_batch(index, InFlight(), limits, replan, weigh=weigh), 15)
    full = InFlight()._replace(partitions=limits.max_partitions_in_flight)
    full_ms, _ = timed(lambda: next_batch(index, full, limits, replan, weigh=weigh), 15)
    busy = InFlight()
    for d in batch:
        busy = busy.plus(d.step, 1, d.weight)
    saturated_ms, more = timed(lambda: next_batch(index, busy, limits, replan, weigh=weigh), 5)
    first_tick_ms, (s1, events) = timed(lambda: handle(state, Tick(1.0)))
    tick_ms, _ = timed(lambda: handle(state, Tick(2.0)), 5)
    print(json.dumps({
        "benchmark": "scheduler", "partitions": args.partitions, "brokers": args.brokers,
        "replicas_per_step": args.replicas_per_step, "started": len(batch),
        "decision_ms": round(decision_ms, 1), "full_decision_ms": round(full_ms, 2),
        "saturated_decision_ms": round(saturated_ms, 1), "started_when_saturated": len(more),
        "first_tick_ms": round(first_tick_ms, 1), "tick_ms": round(tick_ms, 1),
        "tick_events": len(events), "build_seconds": round(build_s, 1),
    }))


if __name__ == "__main__":
    main()
