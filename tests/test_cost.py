"""What a decision and a fold cost does not grow with the requests ever made (issue 27, defect 7):
counted in work (scans, calls), never in time. And finished requests retire from the working state
(``engine.core.state.FINISHED_KEPT``) while ``status``, ``list``, ``replay`` and the tables show what
they showed without it."""

from datetime import datetime, timedelta, timezone

import immutables
import pytest

from engine.core import events as ev
from engine.core import scheduler, state as core_state
from engine.core.commands import Cancel, Observation, PartitionTarget, Submit
from engine.core.decide import decide
from engine.core.limits import Limits
from engine.core.partition import TopicPartition
from engine.core.scheduler import FRESH, InFlight, ReadyIndex, SchedulingKey, next_batch
from engine.core.state import COMPLETED, EMPTY, FINISHED_KEPT, fold
from engine.core.step import Step
from engine.views import tables
from engine.views.progress import Progress, report
from engine.views.summary import summarize
from tests.fake_cluster import Driver, FakeCluster


class Scanned(AssertionError):
    pass


class NoScan:
    """An ``immutables.Map`` that refuses to be walked: any scan of it raises ``Scanned``."""

    def __init__(self, m):
        self.m = m

    def get(self, k, default=None):
        return self.m.get(k, default)

    def __getitem__(self, k):
        return self.m[k]

    def __contains__(self, k):
        return k in self.m

    def __len__(self):
        return len(self.m)

    def set(self, k, v):
        return NoScan(self.m.set(k, v))

    def delete(self, k):
        return NoScan(self.m.delete(k))

    def _scan(self, *_a):
        raise Scanned("a scan of every entry")

    keys = values = items = __iter__ = _scan


def tp(i):
    return TopicPartition("t", i)


def one_partition_requests(n, finished, brokers=12):
    """``finished`` one-partition requests run to completion, then ``n - finished`` more submitted."""
    assignment = {tp(i): (i % 4, 4 + i % 4, 8 + i % 2) for i in range(n)}
    d = Driver(FakeCluster(assignment, range(brokers)))
    for i in range(n):
        d.feed(Submit(f"r{i}", (PartitionTarget("t", i, assignment[tp(i)][:2] + (10 + i % 2,)),)))
        if i < finished and (i + 1) % 50 == 0:
            d.run()
    if finished == n:
        d.run()
    return d


def no_scans(s):
    return s._replace(requests=NoScan(s.requests), partitions=NoScan(s.partitions))


def test_no_decision_scans_the_requests_or_the_partitions():
    # FINISHED_KEPT + 100 requests finished (100 of them retired), 50 more submitted: every decision
    # from there to the end (ticks starting batches, looks completing steps, partitions and requests,
    # a new request joining the turns, a cancel of a retired one) finds what it needs without a scan
    d = one_partition_requests(FINISHED_KEPT + 150, finished=FINISHED_KEPT + 100)
    d.state = no_scans(d.state)
    d.run()
    assert len(d.state.requests) == FINISHED_KEPT and len(d.state.retired) == 150
    new = FINISHED_KEPT + 150
    d.cluster.parts[tp(new)] = d.cluster.parts[tp(0)]
    d.cluster.min_isr_seen[tp(new)] = 3
    obs = d.cluster.observation({tp(new)})
    d.feed(Observation(obs.brokers, obs.topics, obs.partitions))
    late = Submit("late", (PartitionTarget("t", new, (0, 4, 11)),))
    assert any(isinstance(e, ev.RequestAccepted) for e in d.feed(late))
    assert [type(e) for e in d.feed(Cancel("r0"))] == [ev.CancelRequested]
    d.run()
    assert d.state.request("late").status == COMPLETED


def test_folding_a_request_scans_neither_the_requests_nor_the_progress():
    d = one_partition_requests(FINISHED_KEPT + 60, finished=FINISHED_KEPT + 60)
    s = no_scans(EMPTY)
    progress = Progress(requests=NoScan(immutables.Map()))
    at = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for i, e in enumerate(d.events):
        progress = progress.after(s, e, at + timedelta(seconds=i))
        s = core_state.apply(s, e)
    assert len(s.requests) == FINISHED_KEPT and len(s.retired) == 60


def test_a_decision_takes_turns_between_requests_without_looking_at_every_request():
    # 2,000 requests with a step each, all copying into broker 9, which is full: nothing starts, and
    # the requests' ranks are read once each (and once more per pop), not once per request per pop
    index = ReadyIndex()
    plans = {}
    for i in range(2000):
        s = Step((i % 5, 6, 7), (i % 5, 6, 9), (9,), (7,), i % 5, False)
        index, _slot = index.add(SchedulingKey.of(s), FRESH, i, tp(i), f"r{i}")
        plans[tp(i)] = s
    calls = []
    busy = InFlight().plus(Step((0,), (0, 9), (9,), (), 8, False)).plus(Step((0,), (0, 9), (9,), (), 8, False))
    assert next_batch(index, busy, Limits(), plans.get, lambda rid: calls.append(rid) or 0) == []
    assert len(calls) <= 2 * 2000 + scheduler.SCAN, len(calls)


@pytest.fixture
def kept(monkeypatch):
    """Run the same story with retirement (FINISHED_KEPT) and without it (nothing ever retires)."""
    def run(keep):
        monkeypatch.setattr(core_state, "FINISHED_KEPT", keep)
        d = one_partition_requests(130, finished=100)
        d.feed(Cancel("r125"))
        d.feed(Cancel("r3"))  # retired, or kept: nothing in progress either way
        at = datetime(2025, 1, 1, tzinfo=timezone.utc)
        progress = Progress()
        s = EMPTY
        for i, e in enumerate(d.events):
            progress = progress.after(s, e, at + timedelta(seconds=i))
            s = core_state.apply(s, e)
        assert s == d.state
        return s, progress
    return run


def test_retired_requests_show_in_status_list_and_replay_as_before(kept):
    s, progress = kept(20)
    whole, whole_progress = kept(10**9)
    assert len(s.requests) < len(whole.requests) and len(s.partitions) < len(whole.partitions)
    assert len(s.requests) == 20 + 29 and len(s.retired) == 81  # 101 finished: 20 kept, 81 retired; 29 running
    now = datetime(2025, 1, 2, tzinfo=timezone.utc)
    assert report(s, progress, now)["requests"] == report(whole, whole_progress, now)["requests"]
    assert report(s, progress, now, only="r3")["requests"] == report(whole, whole_progress, now, only="r3")["requests"]
    a, b = summarize(s), summarize(whole)
    assert a["requests"] == b["requests"] and a["partitions"] == b["partitions"]
    assert tables.rows(s)["requests"] == tables.rows(whole)["requests"]
    assert s.request("r3").status == COMPLETED and s.request("r3").count(COMPLETED) == 1


def test_a_retired_request_cannot_be_rolled_back_and_says_why():
    d = one_partition_requests(FINISHED_KEPT + 5, finished=FINISHED_KEPT + 5)
    assert "r0" in d.state.retired and "r0" not in d.state.requests
    [rejected] = decide(d.state, Cancel("r0", rollback=True, include_completed=True))
    assert isinstance(rejected, ev.CommandRejected) and "event log only" in rejected.reasons[0]
    assert decide(d.state, Submit("r0", (PartitionTarget("t", 0, (9, 9, 9)),)))[0].reasons == (
        "request id 'r0' is already used by another reassignment",)
    again = d.events[[type(e) for e in d.events].index(ev.RequestAccepted)]
    assert again.request_id == "r0"
    # the latest FINISHED_KEPT are whole: a rollback of completed partitions works as before
    last = f"r{FINISHED_KEPT + 4}"
    d.feed(Cancel(last, rollback=True, include_completed=True))
    assert d.state.requests[last].status != COMPLETED and len(d.state.finished) == FINISHED_KEPT - 1  # reopened
    d.run()
    assert d.state.requests[last].status == COMPLETED and d.state.requests[last].count("reverted") == 1
    assert len(d.state.finished) == FINISHED_KEPT and len(d.state.retired) == 5 and "r5" in d.state.requests
    assert d.cluster.assignment()[tp(FINISHED_KEPT + 4)] == (0, 4, 8)  # back at its original replicas
    assert fold(d.events) == d.state
