"""One scheduler decision with N partitions queued.

    python -m benchmarks.scheduler --partitions 1000000

The queue holds the first steps of N partitions moving from 30 old to 30 new
brokers (as in benchmarks.planner). Two decisions are timed: from an idle
cluster (the batch fills every limit) and from a saturated one (every broker
at its cap: nothing may start, the case a queue scan would be slowest at).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.planner import workload
from engine.limits import Limits
from engine.partition import TopicPartition
from engine.scheduler import FRESH, InFlight, ReadyIndex, SchedulingKey, next_batch
from engine.step import _gc_paused, plan_step


def build(n: int):
    index = ReadyIndex()
    steps = {}
    for i, (cr, ftr) in enumerate(workload(n)):
        tp = TopicPartition(f"topic-{i % 1000}", i // 1000)
        step = plan_step(cr, ftr, set(cr), cr[0])
        steps[tp] = step
        index, _ = index.add(SchedulingKey.of(step), FRESH, i, tp)
    return index, steps


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--partitions", type=int, default=1_000_000)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    with _gc_paused():  # setup only: a million inserts of acyclic tuples
        index, steps = build(args.partitions)
    build_s = time.perf_counter() - t0
    limits = Limits()
    t0 = time.perf_counter()
    batch = next_batch(index, InFlight(), limits, steps.__getitem__)
    idle_ms = (time.perf_counter() - t0) * 1000
    busy = InFlight()
    for d in batch:
        busy = busy.plus(d.step)
    t0 = time.perf_counter()
    nothing = next_batch(index, busy, limits, steps.__getitem__)
    saturated_ms = (time.perf_counter() - t0) * 1000
    print(json.dumps({
        "benchmark": "scheduler", "partitions": args.partitions, "buckets": len(index.buckets),
        "chosen": len(batch), "idle_decision_ms": round(idle_ms, 1),
        "saturated_decision_ms": round(saturated_ms, 1), "chosen_when_saturated": len(nothing),
        "build_seconds": round(build_s, 1),
    }))


if __name__ == "__main__":
    main()
