"""Full KIP-435 plan for N partitions at RF 3, every replica moved to new brokers.

    python -m benchmarks.planner --partitions 1000000

Prints one JSON line: seconds, peak_rss_mib, partitions, steps.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time

from engine.core.step import plan_many


def workload(n: int, brokers: int = 30, seed: int = 7):
    """Partition i lives on three random old brokers and moves to three random new
    ones (seeded): practically no two partitions share a (CR, FTR) pair."""
    rnd = random.Random(seed)
    old = range(brokers)
    new = range(brokers, 2 * brokers)
    for _ in range(n):
        yield tuple(rnd.sample(old, 3)), tuple(rnd.sample(new, 3))


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--partitions", type=int, default=1_000_000)
    p.add_argument("--max-replicas-per-step", type=int, default=1)
    args = p.parse_args(argv)
    partitions = list(workload(args.partitions))
    t0 = time.perf_counter()
    plans = plan_many(partitions, 1, args.max_replicas_per_step)
    seconds = time.perf_counter() - t0
    steps = sum(len(s) for s in plans)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"benchmark": "planner", "partitions": args.partitions, "steps": steps,
                      "seconds": round(seconds, 2), "peak_rss_mib": round(rss, 1)}))


if __name__ == "__main__":
    main()
