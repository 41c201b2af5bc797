"""decide + apply throughput, and replay (fold) throughput, on a realistic log.

    python -m benchmarks.fold --partitions 20000

Runs a reassignment of N partitions (RF 3, every replica moved, default limits)
to completion against an instant in-memory cluster (the test double of
tests/fake_cluster.py: it carries out each step at once), timing only the
core's ``handle`` calls; then folds the resulting log from scratch. Prints one
JSON line with events/s for both.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.planner import workload
from engine.core.commands import PartitionTarget, Submit
from engine.core.partition import TopicPartition
from engine.core.state import fold
from engine.core import decide
from tests import fake_cluster
from tests.fake_cluster import Driver, FakeCluster


class _Timed:
    """Wraps ``handle`` where the driver calls it, so only the core is timed."""

    seconds = 0.0

    def __call__(self, state, inp):
        t0 = time.perf_counter()
        result = decide.handle(state, inp)
        self.seconds += time.perf_counter() - t0
        return result


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--partitions", type=int, default=20_000)
    args = p.parse_args(argv)
    assignment, targets = {}, {}
    for i, (cr, ftr) in enumerate(workload(args.partitions)):
        tp = TopicPartition(f"topic-{i % 100}", i // 100)
        assignment[tp], targets[tp] = cr, ftr
    cluster = FakeCluster(assignment, range(60))
    timed = fake_cluster.handle = _Timed()
    d = Driver(cluster)
    d.feed(Submit("bench", tuple(PartitionTarget(t.topic, t.partition, r) for t, r in targets.items())))
    wall = time.perf_counter()
    d.run()
    wall = time.perf_counter() - wall
    assert cluster.assignment() == targets
    n = len(d.events)
    t0 = time.perf_counter()
    state = fold(d.events)
    fold_s = time.perf_counter() - t0
    assert state == d.state
    print(json.dumps({
        "benchmark": "fold", "partitions": args.partitions, "events": n,
        "decide_apply_events_per_s": round(n / timed.seconds),
        "fold_events_per_s": round(n / fold_s),
        "run_seconds_including_fake_cluster": round(wall, 1),
    }))


if __name__ == "__main__":
    main()
