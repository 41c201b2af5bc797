"""Drops Kafka completes at their alter take no limit (``engine.core.scheduler.at_alter``; docs/algorithm.md,
section 2): what that must not break (a fresh-eyes review of the rule found each of these; each fails on the
rule's first commit)."""
import os
import subprocess
import sys
from pathlib import Path

from engine.core import events as ev
from engine.core.commands import ChangeLimits, PartitionTarget, Submit
from engine.core.partition import TopicPartition
from engine.views.brokers import stuck_brokers
from tests.fake_cluster import Driver, FakeCluster


def tp(i, t="t"):
    return TopicPartition(t, i)


def test_a_retried_free_drop_is_weighed_again_against_the_latest_look():
    # the first alter goes unanswered; the look before its retry shows the kept replica 2 out of the ISR, so
    # Kafka would keep the reassignment in progress: the retry is given up and the step counts in P when it starts
    c = FakeCluster({tp(0): (1, 2, 3), tp(1): (1, 2, 3)}, range(1, 5))
    c.parts[tp(1)] = c.parts[tp(1)]._replace(isr=frozenset({1, 3}))
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    c.unavailable("alter", tp=tp(0))
    d.feed(Submit("r", (PartitionTarget("t", 0, (1, 2)),)))
    d.observe()
    d.tick()
    assert [e.weight for e in d.events if isinstance(e, ev.StepPlanned)] == [0]
    c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({1, 3}))
    d.observe()
    d.feed(Submit("r2", (PartitionTarget("t", 1, (1, 2)),)))
    d.observe()
    d.tick()
    assert len(c.in_progress()) <= 1, f"P = 1 but {c.in_progress()} in progress on the cluster"


CODE = """
from engine.core import events as ev
from engine.core.commands import PartitionTarget, Submit
from engine.core.partition import TopicPartition
from tests.fake_cluster import Driver, FakeCluster
c = FakeCluster({TopicPartition(t, i): (1, 2, 3) for t in "abcdef" for i in range(2)}, range(1, 5))
d = Driver(c)
for t in "abcdef":
    d.feed(Submit("req-" + t, (PartitionTarget(t, 0, (1, 2)), PartitionTarget(t, 1, (2, 3)))))
d.observe()
d.tick()
print(" ".join(f"{e.tp.topic}{e.tp.partition}" for e in d.events if isinstance(e, ev.StepPlanned)))
"""


def test_free_drops_start_in_the_same_order_whatever_the_hash_seed():
    # the log is the same whatever the hash seed (docs/benchmarks.md): free drops of several requests' lanes
    # start in the order they became ready, not the hash order of the lanes
    outs = {subprocess.run([sys.executable, "-c", CODE], env=dict(os.environ, PYTHONHASHSEED=h), capture_output=True,
                           text=True, check=True, cwd=Path(__file__).resolve().parents[1]).stdout for h in ("0", "1", "2")}
    assert len(outs) == 1, outs


def test_the_stuck_broker_view_does_not_count_a_free_drop_as_taking_p():
    # a drop started free, whose alter then found the ISR shrunk (in progress on the cluster), takes no P:
    # the view of what holds queued partitions back says one step takes it, not two
    c = FakeCluster({tp(i): (1, 2, 3) for i in range(3)}, range(1, 6))
    d = Driver(c)
    d.feed(ChangeLimits({"max_partitions_in_flight": 1}))
    real = c.alter_reassignments

    def late(targets):  # broker 2 leaves t-0's ISR between the look and the alter
        if tp(0) in targets:
            c.parts[tp(0)] = c.parts[tp(0)]._replace(isr=frozenset({1, 3}))
        return real(targets)

    c.alter_reassignments = late
    d.feed(Submit("r", (PartitionTarget("t", 0, (1, 2)),)))
    d.observe(); d.tick()
    c.alter_reassignments = real
    d.feed(Submit("r2", (PartitionTarget("t", 1, (4, 2, 3)), PartitionTarget("t", 2, (5, 2, 3)))))
    d.observe(); d.tick()
    c.brokers[2] = c.brokers[2]._replace(alive=False)
    d.observe()
    lines = [l for e in stuck_brokers(d.state) for l in e["lines"] if "max_partitions_in_flight" in l]
    assert lines and "1 of 1 in flight), 1 of 1 taken" in lines[0], lines


def test_one_alter_stays_within_kraft_max_records_per_user_op():
    # Kafka's controller makes one record per partition of an alter, at most 10,000 per operation
    # (MAX_RECORDS_PER_USER_OP; those past it are refused): free drops go FREE_PER_DECISION a decision
    n = 10_050
    c = FakeCluster({tp(i): (1, 2, 3) for i in range(n)}, range(1, 4))
    d = Driver(c)
    sizes = []
    real = c.alter_reassignments
    c.alter_reassignments = lambda targets: sizes.append(len(targets)) or real(targets)
    d.feed(Submit("r", tuple(PartitionTarget("t", i, (2, 3)) for i in range(n))))
    d.observe(); d.tick()
    assert max(sizes) <= 10_000, sizes
