"""The verdict on a command, read from the events the engine appended after it (``engine.views.verdict``).

The decisions come from the real core (``decide``) over a fake cluster; the
events are enveloped the way the decider appends them (one append, one
``recorded_at``), with other decisions before and after.
"""

from datetime import datetime, timedelta, timezone

from engine.core.commands import Cancel, ChangeLimits, ChangeThrottle, Pause, PartitionTarget, Resume, Submit
from engine.log.envelope import EventEnvelope
from engine.core.partition import TopicPartition
from engine.views.verdict import Watch
from tests.fake_cluster import Driver, FakeCluster

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def tp(i):
    return TopicPartition("t", i)


class Log:
    """A driver whose every decision is one append at its own time, as the decider writes them."""

    def __init__(self, partitions=6, brokers=range(8)):
        assignment = {tp(i): tuple((i + k) % 4 for k in range(3)) for i in range(partitions)}
        self.d = Driver(FakeCluster(assignment, brokers, 2))
        self.envelopes: list[EventEnvelope] = []

    def decide(self, inp) -> None:
        before = len(self.d.events)
        self.d.feed(inp)
        t = T0 + timedelta(seconds=len(self.envelopes))
        self.envelopes += [EventEnvelope(f"e{len(self.envelopes) + i}", t, e)
                           for i, e in enumerate(self.d.events[before:])]

    def verdict(self, command_id, since=0, ended=True):
        watch = Watch(command_id)
        for e in self.envelopes[since:]:
            watch.feed(e)
        if ended:
            watch.end()
        return watch.verdict


def submit(rid, targets, cid, **kw):
    return Submit(rid, tuple(PartitionTarget("t", p, tuple(r)) for p, r in targets.items()), command_id=cid, **kw)


def test_a_rejected_submit_gives_every_reason_and_is_found_among_other_decisions():
    log = Log()
    log.decide(Pause(command_id="before"))
    log.decide(Submit("r1", (PartitionTarget("t", 0, (1, 2, 99)), PartitionTarget("nope", 0, (1, 2, 3)),
                             PartitionTarget("t", 42, (1, 2, 3))), command_id="c1"))
    log.decide(Resume(command_id="after"))
    v = log.verdict("c1")
    assert not v.accepted and v.command == "submit" and v.request_id == "r1"
    assert v.summary == "rejected: submit of request r1 (3 reasons)"
    assert len(v.details) == 3
    assert any("99" in r for r in v.details)
    assert any("unknown topic 'nope'" in r for r in v.details)
    assert any("unknown partition t-42" in r for r in v.details)


def test_an_accepted_submit_says_how_many_partitions_start_wait_or_are_done_and_the_throttle():
    log = Log()
    log.decide(submit("r1", {0: (5, 1, 2), 1: (6, 2, 3), 2: (2, 3, 0)}, "c1", throttle_rate=2_000_000))
    v = log.verdict("c1")
    assert v.accepted and v.request_id == "r1"
    assert v.summary.startswith("accepted: request r1: 3 partitions (2 ready to start")
    assert "1 already at its target" in v.summary  # t-2 is at (2,3,0) already
    assert "throttle rate for new steps: 2 MB/s" in v.details
    assert any(d.startswith("Kafka's rate is the throttle plus the limit throttle_margin_pct") for d in v.details)


def test_no_verdict_until_the_decision_is_complete_and_none_for_another_command():
    log = Log()
    log.decide(submit("r1", {0: (5, 1, 2)}, "c1"))
    assert log.verdict("c1", ended=False) is None  # the decision may go on in the next message
    assert log.verdict("c1") is not None
    log.decide(Pause(command_id="c2"))
    assert log.verdict("c1", ended=False).accepted  # a later decision closes the first
    assert log.verdict("other") is None


def test_cancel_verdicts_unknown_request_aborts_in_flight_and_skips():
    log = Log()
    log.decide(Cancel("does-not-exist", command_id="c0"))
    v = log.verdict("c0")
    assert not v.accepted and v.details == ("unknown request 'does-not-exist'",)
    log.decide(submit("r1", {0: (5, 1, 2), 1: (6, 2, 3), 2: (7, 3, 0)}, "c1"))
    log.d.tick()  # steps start
    in_flight = len(log.d.state.steps)
    assert in_flight >= 1
    since = len(log.envelopes)
    log.decide(Cancel("r1", rollback=True, command_id="c2"))
    v = log.verdict("c2", since)
    assert v.accepted and v.request_id == "r1"
    assert "(the whole request, with rollback to the original replicas): 3 partitions cancelled" in v.summary
    assert f"{in_flight} {'copy' if in_flight == 1 else 'copies'} in flight being aborted" in v.summary
    since = len(log.envelopes)
    log.decide(Cancel("r1", (tp(0), tp(5)), command_id="c3"))
    v = log.verdict("c3", since)
    assert not v.accepted and "are not part of request 'r1'" in v.details[0]


def test_a_verdict_of_one_says_one():
    """'1 partitions cancelled, 1 copies in flight being aborted' was what an operator read after
    cancelling one partition."""
    log = Log()
    log.decide(submit("r1", {0: (5, 1, 2)}, "c1"))
    assert log.verdict("c1").summary.startswith("accepted: request r1: 1 partition (")
    log.d.tick()  # its step starts
    assert len(log.d.state.steps) == 1
    since = len(log.envelopes)
    log.decide(Cancel("r1", (tp(0),), rollback=True, command_id="c2"))
    v = log.verdict("c2", since)
    assert "(1 named partition, with rollback to the original replicas): 1 partition cancelled, " \
           "1 copy in flight being aborted" in v.summary, v.summary
    since = len(log.envelopes)
    log.decide(submit("r2", {0: (5, 1, 3)}, "c3"))  # the same partition, its copy still being aborted
    assert log.verdict("c3", since).summary == "accepted: request r2: 1 partition (0 ready to start, " \
                                               "1 finishes a step in flight first)"


def test_control_command_verdicts():
    log = Log()
    log.decide(ChangeLimits({"reassignment.parallel.partition.count": 5}, command_id="l1"))
    log.decide(ChangeLimits({"nope": 5}, command_id="l2"))
    log.decide(ChangeThrottle(None, command_id="t1"))
    log.decide(Pause(command_id="p1"))
    log.decide(Pause(command_id="p2"))
    log.decide(Resume(command_id="r1"))
    log.decide(Resume(command_id="r2"))
    assert "max_partitions_in_flight=5" in log.verdict("l1").details[0]
    assert log.verdict("l2").details == ("unknown limit 'nope'",)
    assert log.verdict("t1").summary == "accepted: throttle rate for new steps none (unthrottled)"
    assert log.verdict("p1").accepted and log.verdict("p1").summary.startswith("accepted: paused")
    # set-like, as limits and throttle are: a repeated pause or resume changes nothing and is no error (a
    # runbook that pauses to be safe must not fail, nor stand in "needs attention")
    assert log.verdict("p2").accepted and log.verdict("p2").summary.startswith("accepted: already paused")
    assert log.verdict("r1").accepted and log.verdict("r1").summary == "accepted: resumed: steps start again"
    assert (log.verdict("r2").accepted, log.verdict("r2").summary) == (True, "accepted: not paused, nothing changed")
    assert log.verdict("r2").to_json()["verdict"] == "accepted"
    assert not [e for e in log.envelopes if type(e.payload).__name__ == "CommandRejected" and
                e.payload.command in ("pause", "resume")]


def test_a_cancel_counts_each_partition_once_and_never_calls_partitions_that_did_not_move_back():
    for rollback in (False, True):
        log = Log()
        log.decide(submit("r1", {0: (5, 1, 2), 1: (6, 2, 3), 2: (7, 3, 0), 3: (4, 5, 6)}, "c1"))  # nothing started
        since = len(log.envelopes)
        log.decide(Cancel("r1", rollback=rollback, command_id="c2"))
        v = log.verdict("c2", since)
        assert v.summary.endswith("): 4 partitions cancelled, 4 still at their original replicas (nothing to undo)")
        assert not any("back at" in line for line in (v.summary, *v.details)), v


def test_a_cancel_of_a_whole_request_says_which_completed_partitions_stay_at_their_target():
    from engine.views.verdict import completed_staying

    log = Log()
    log.decide(submit("r1", {0: (5, 1, 2), 1: (6, 2, 3)}, "c1"))
    log.d.run()  # both complete
    request = log.d.state.requests["r1"]
    assert completed_staying(request, include_completed=False, rollback=True) == (
        "2 partitions of request r1 had completed and stay at their target (a cancel touches only what is in "
        "progress; cancel --rollback --include-completed moves them back)")
    assert completed_staying(request, include_completed=True, rollback=True) is None  # they are rolled back
    assert completed_staying(None, False, False) is None
