"""Balancer proposal on a large cluster: 100,000 partitions, 50 brokers, RF 3, 5 racks.

    python -m benchmarks.balancer [--brokers N]

Four proposals over the same seeded cluster (replicas rack-aware on brokers
0 to N-6, so the last five start empty): adding the five empty brokers, a
replica balance of a skewed cluster, removing two brokers, and a leader balance
of the cluster with every replica list written in ascending order (KAFKA-5319's
case: the lowest broker of each partition leads it). Prints one JSON line per
proposal: seconds, replicas moved, the lower bound and their ratio, preferred
leaders changed.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from engine.core.balancer import propose, rack_spread_kept
from engine.core.partition import TopicPartition


def cluster(partitions: int = 100_000, brokers: int = 50, racks: int = 5, seed: int = 1):
    rnd = random.Random(seed)
    rack_of = {b: f"rack-{b % racks}" for b in range(brokers)}
    old = brokers - 5
    by_rack = {r: [b for b in range(old) if b % racks == r] for r in range(racks)}
    assignment, sizes = {}, {}
    for i in range(partitions):
        tp = TopicPartition(f"topic-{i % 200}", i // 200)
        assignment[tp] = tuple(rnd.choice(by_rack[r]) for r in rnd.sample(range(racks), 3))
        sizes[tp] = rnd.randint(1 << 20, 1 << 30)
    return assignment, rack_of, sizes


def skewed(assignment, rack_of, seed: int = 2):
    """Move a third of the replicas onto the lower half of each rack (keeping racks)."""
    rnd = random.Random(seed)
    out = {}
    for tp, r in assignment.items():
        if rnd.random() < 1 / 3:
            r = tuple(b - (b % 10) + (b % 5) if (b - (b % 10) + (b % 5)) not in r else b for b in r)
        out[tp] = r
    return out


def run(name, mode, assignment, rack_of, sizes, brokers, **kw):
    t0 = time.perf_counter()
    p = propose(mode, assignment, rack_of, brokers, sizes, **kw)
    seconds = time.perf_counter() - t0
    after = {**assignment, **p.proposed}
    print(json.dumps({
        "benchmark": f"balancer/{name}", "partitions": len(assignment), "seconds": round(seconds, 2),
        "replicas_moved": p.replicas_moved, "lower_bound": p.lower_bound,
        "moves_over_bound": round(p.replicas_moved / p.lower_bound, 4) if p.lower_bound else None,
        "balanced": p.balanced, "rack_spread_kept": rack_spread_kept(assignment, after, rack_of),
        "leaders_moved": p.leaders_moved,
    }))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.balancer")
    parser.add_argument("--brokers", type=int, default=50, help="brokers (at least 32; the last five start empty)")
    n = parser.parse_args(argv).brokers
    assignment, rack_of, sizes = cluster(brokers=n)
    old, new = range(n - 5), range(n - 5, n)
    run("add-5-brokers", "add-brokers", assignment, rack_of, sizes, old, add=new)
    full = {**assignment, **propose("add-brokers", assignment, rack_of, old, sizes, add=new).proposed}
    run("replica-balance-skewed", "cluster-balance", skewed(full, rack_of), rack_of, sizes, range(n))
    run("remove-2-brokers", "remove-brokers", full, rack_of, sizes, range(n), remove=[7, 31])
    ascending = {tp: tuple(sorted(r)) for tp, r in assignment.items()}
    run("leader-balance-ascending", "leader-balance", ascending, rack_of, sizes, range(n))


if __name__ == "__main__":
    main()
