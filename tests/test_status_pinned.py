"""The dominant-source rule's holds (docs/algorithm.md, section 2, "A dominant source") reach status, the
status page (both render ``engine.views.attention``) and /metrics, with the broker and the reason."""

import re
from collections import Counter
from types import SimpleNamespace

from engine.core.partition import TopicPartition
from engine.core.scheduler import FRESH, InFlight, ReadyIndex, SchedulingKey
from engine.core.state import EMPTY
from engine.core.step import Step
from engine.views.attention import attention


def step(into: int, leader: int) -> Step:
    return Step((leader, 0, 1), (into, 0, 1), (into,), (leader,), leader, False)


def held_state(limits=None):
    """Broker 5 leads four of the five ready moves and copies into broker 2: broker 1's copy into 2 and 5's
    into 8 wait for it."""
    index = ReadyIndex()
    for seq, (into, leader) in enumerate([(2, 1), (8, 5), (2, 5), (8, 5), (2, 5)]):
        index, _slot = index.add(SchedulingKey.of(step(into, leader)), FRESH, seq, TopicPartition("t", seq), "r1")
    s = EMPTY._replace(ready=index, in_flight=InFlight().plus(step(2, 5)))
    return s._replace(limits=limits) if limits is not None else s


def test_status_says_which_broker_a_dominant_leader_copies_into_alone_and_what_waits_for_it():
    entries = [e for e in attention(held_state()) if e["kind"] == "pinned"]
    assert len(entries) == 1
    e = entries[0]
    assert e["severity"] == "warning" and e["count"] == 3 and e["partitions"] == ["t-0", "t-1", "t-3"]
    assert e["title"] == "broker 5's copies go into one broker at a time: broker 2 (3 partitions wait)"
    assert any("leads no partition the receiving broker follows" in line for line in e["lines"])
    assert any(line.startswith("1 partition of other leaders waits to copy into broker 2") and "t-0" in line
               for line in e["lines"])
    assert any(line.startswith("2 partitions of broker 5 wait to copy into other brokers") and "t-1, t-3" in line
               for line in e["lines"])
    # the rule off: nothing waits for it, nothing said
    off = held_state(EMPTY.limits.changed({"pin_dominant_source": 0}))
    assert not [e for e in attention(off) if e["kind"] == "pinned"]


def test_metrics_count_the_partitions_the_dominant_source_rule_holds_by_reason():
    from engine.runtime.metrics import exposition

    d = SimpleNamespace(deferred=0, budget_status=lambda _t: {"paced": None}, clock=lambda: 0.0, urgent=0,
                        overshoots=0, failures={}, drifts=Counter(), state=held_state(), remaining=lambda: 5,
                        sizes={})
    engine = SimpleNamespace(counters=Counter(), active=True, decider=d, needs_recovery=False, recovery_error=None,
                             s=SimpleNamespace(request_budget=None))
    text = exposition(engine)[0].decode()
    got = {k: float(v) for k, v in re.findall(r'^kreassign_partitions_held_by_pin\{reason="([\w-]+)"\} (\S+)$',
                                              text, re.M)}
    assert got == {"pinned": 1.0, "pin-out": 2.0, "pin-in": 0.0, "drained": 0.0}


def test_the_title_names_no_broker_when_none_is_pinned_or_drained_yet():
    # 5 copies nothing; its copies into 1 wait 'pin-in' (3 feeds 1), and it may start one into 2: no broker
    # is pinned or drained, yet partitions are held (the title once read "into broker  once it has drained")
    index = ReadyIndex()
    for seq, (into, leader) in enumerate([(1, 5), (1, 5), (1, 5), (2, 5), (4, 0)]):
        index, _slot = index.add(SchedulingKey.of(step(into, leader)), FRESH, seq, TopicPartition("t", seq), "r1")
    s = EMPTY._replace(ready=index, in_flight=InFlight().plus(step(1, 3)))
    e = [e for e in attention(s) if e["kind"] == "pinned"]
    assert e and e[0]["title"] == ("broker 5's copies go into one broker at a time: one no other leader copies into"
                                   " (3 partitions wait)")


def test_nothing_waits_for_a_dominant_leader_pinned_to_a_dead_broker():
    # held_state, but broker 2 (which 5 copies into) is dead: 5 is not pinned to it (its copy into 2 stays in
    # flight until 2 returns), so neither 1's copy into 2 nor 5's into 8 waits for it
    dead = held_state()._replace(live=frozenset({1, 5, 8}))
    assert not [e for e in attention(dead) if e["kind"] == "pinned"]
    alive = held_state()._replace(live=frozenset({1, 2, 5, 8}))
    assert [e for e in attention(alive) if e["kind"] == "pinned"]
