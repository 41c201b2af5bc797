"""Issue 26, item 2: fewer leader epoch bumps per partition, chosen per request.

* A request chooses how its partitions step (``Submit.steps``): ``incremental`` (default), ``kip-435``
  or ``whole``. Each completion that drops a replica or moves the leader bumps the leader epoch, and each
  bump holds the partition's acks=all writes up about a second (docs/simulator.md, "The epoch bump"):
  the default joins the new preferred leader in the step that drops the old one (one bump), KIP-435's
  own leader-first step is elected on its own (two).
"""

from __future__ import annotations

import hashlib
import json

from engine.core import events as ev
from engine.core.commands import PartitionTarget, Submit
from engine.core.decide import _digest
from engine.core.partition import TopicPartition
from engine.core.state import fold
from tests.fake_cluster import Driver, FakeCluster


def tp(i):
    return TopicPartition("t", i)


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


def bumps(d: Driver, start: tuple) -> int:
    """Leader epoch bumps KRaft makes (``PartitionChangeBuilder``): each completed step whose replica set
    lost a member (a leader change at its Phase B is in the same record), and each election asked for."""
    n, before = 0, start
    for e in d.events:
        if isinstance(e, ev.StepCompleted):
            step = d.steps_altered[(e.request_id, e.tp, e.number)]
            n += not set(before) <= set(step)
            n += e.elect_leader
            before = step
    return n


def moved(steps: str, target=(4, 2, 3)):
    c = FakeCluster({tp(0): (1, 2, 3)}, range(1, 6))
    d = Driver(c)
    d.feed(Submit("r", (PartitionTarget("t", 0, target),), steps=steps))
    d.run()
    assert c.assignment()[tp(0)] == target and c.parts[tp(0)].leader == target[0]
    return c, d


def test_the_default_moves_a_replica_onto_a_new_preferred_leader_in_one_step_and_one_bump():
    # the measured 24 x 16 MiB runs: (1,2,3) -> (4,2,3) with leader 1; KRaft elects 4 (TR[0]) at Phase B
    c, d = moved("incremental")
    assert [a for a in c.alters if a[1] is not None] == [(tp(0), (4, 2, 3))]
    assert not [e for e in d.events if isinstance(e, ev.StepCompleted) and e.elect_leader]
    assert bumps(d, (1, 2, 3)) == 1
    assert of_type(d.events, ev.RequestAccepted)[0].steps == "incremental"


def test_kip_435_adds_the_new_leader_alone_elects_it_then_drops_the_old_one_two_bumps():
    c, d = moved("kip-435")
    assert [a for a in c.alters if a[1] is not None] == [(tp(0), (4, 2, 3, 1)), (tp(0), (4, 2, 3))]
    assert [e.elect_leader for e in of_type(d.events, ev.StepCompleted)] == [True, False]
    assert bumps(d, (1, 2, 3)) == 2


def test_whole_moves_every_replica_in_one_step():
    c, d = moved("whole", target=(4, 5, 3))
    assert [a for a in c.alters if a[1] is not None] == [(tp(0), (4, 5, 3))]  # 4 and 5 at once, 1 and 2 dropped
    assert bumps(d, (1, 2, 3)) == 1
    c, d = moved("incremental", target=(4, 5, 3))
    assert [a[1] for a in c.alters if a[1] is not None] == [(4, 3, 2), (4, 5, 3)]
    assert bumps(d, (1, 2, 3)) == 2


def test_an_unknown_step_mode_is_rejected_with_the_choices():
    c = FakeCluster({tp(0): (1, 2, 3)}, range(1, 5))
    d = Driver(c)
    events = d.feed(Submit("r", (PartitionTarget("t", 0, (4, 2, 3)),), steps="fast"))
    [rejected] = of_type(events, ev.CommandRejected)
    assert "unknown steps 'fast': one of incremental, kip-435, whole" in rejected.reasons


def test_the_default_mode_leaves_a_submits_digest_as_it_was():
    # a re-delivered submit written before the field existed decodes with the default: same digest
    targets = (PartitionTarget("t", 0, (4, 2, 3)),)
    old = hashlib.sha256(json.dumps([["t", 0, [4, 2, 3]]], separators=(",", ":")).encode()).hexdigest()[:32]
    assert _digest(Submit("r", targets)) == old
    assert _digest(Submit("r", targets, steps="whole")) != old


def test_each_request_keeps_its_own_mode():
    c = FakeCluster({tp(0): (1, 2, 3), tp(1): (1, 2, 3)}, range(1, 5))
    d = Driver(c)
    d.feed(Submit("a", (PartitionTarget("t", 0, (4, 2, 3)),), steps="kip-435"))
    d.feed(Submit("b", (PartitionTarget("t", 1, (4, 2, 3)),)))
    d.run()
    assert [a[1] for a in c.alters if a[0] == tp(0)] == [(4, 2, 3, 1), (4, 2, 3)]
    assert [a[1] for a in c.alters if a[0] == tp(1)] == [(4, 2, 3)]
    assert fold(d.events).requests["a"].steps == "kip-435" == d.state.requests["a"].steps
