"""Progress in bytes and time (``engine.views.progress``) and ``kreassign status`` on a real log."""

import json
from datetime import datetime, timedelta, timezone

import pytest

from engine.core import events as ev
from engine.cli import main
from engine.core.commands import Observation
from engine.log.eventlog import EventWriter
from engine.views.progress import WINDOW, Progress
from engine.core.state import EMPTY, apply
from tests.fake_cluster import Driver, FakeCluster
from tests.test_decide import submit, tp

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
GB = 10**9


def run_with_sizes(n=4, size=lambda i: (i + 1) * GB):
    c = FakeCluster({tp(i): (0, 1, 2) for i in range(n)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=size(i)) for i in range(n)}))
    d.feed(submit("r", {tp(i): (3, 4, 2) for i in range(n)}))  # each partition copies two replicas
    d.run()
    return d


def timeline(events, step=timedelta(seconds=1)):
    return [(T0 + i * step, e) for i, e in enumerate(events)]


def fold(timed):
    state, progress = EMPTY, Progress()
    for at, e in timed:
        progress = progress.after(state, e, at)
        state = apply(state, e)
    return state, progress


def test_bytes_to_copy_and_copied_follow_the_steps():
    d = run_with_sizes()
    timed = timeline(d.events)
    state, progress = fold(timed)
    r = progress.requests["r"]
    assert r.bytes_total == sum(2 * (i + 1) * GB for i in range(4))
    assert r.bytes_done == r.bytes_total
    assert r.completed_at == next(at for at, e in timed if isinstance(e, ev.RequestCompleted))
    assert r.eta_seconds(T0 + timedelta(hours=1)) == 0.0
    # halfway: the copied bytes are exactly those of the steps completed so far
    half = timed[: len(timed) // 2]
    state, progress = fold(half)
    done_steps = {(e.tp, e.number) for _at, e in half if isinstance(e, ev.StepCompleted)}
    planned = {(e.tp, e.number): e.step for _at, e in half if isinstance(e, ev.StepPlanned)}
    expected = sum(len(planned[k].nr) * (k[0].partition + 1) * GB for k in done_steps)
    assert progress.requests["r"].bytes_done == expected


def test_rate_and_eta_from_the_recent_window():
    d = run_with_sizes()
    timed = timeline(d.events, step=timedelta(seconds=10))
    completions = [i for i, (_at, e) in enumerate(timed) if isinstance(e, ev.StepCompleted)]
    cut = completions[len(completions) // 2] + 1
    state, progress = fold(timed[:cut])
    r = progress.requests["r"]
    now = timed[cut - 1][0]
    start = max(now - WINDOW, r.accepted_at)
    copied = sum(b for t, b in r.recent if t >= start)
    assert r.rate(now) == pytest.approx(copied / (now - start).total_seconds())
    assert r.eta_seconds(now) == pytest.approx((r.bytes_total - r.bytes_done) / r.rate(now))


def test_cancelled_partitions_leave_the_total_and_a_finished_request_copied_exactly_its_total():
    c = FakeCluster({tp(i): (0, 1, 2) for i in range(4)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(4)}))
    d.feed(submit("r", {tp(i): (3, 4, 2) for i in range(4)}))
    d.tick()
    for t in c.in_progress()[:1]:
        c.finish(t)
    d.observe()
    from engine.core.commands import Cancel
    d.feed(Cancel("r", (tp(2), tp(3)), rollback=True))  # not started yet: nothing to copy back
    d.run()
    _state, progress = fold(timeline(d.events))
    r = progress.requests["r"]
    assert r.completed_at is not None and r.bytes_done == r.bytes_total
    assert r.bytes_total == 2 * 2 * GB + sum(  # partitions 0, 1 moved; 2, 3 copied (then back) what they did
        GB * len(e.step.nr) for e in d.events if isinstance(e, ev.StepPlanned) and e.tp in (tp(2), tp(3))
        and any(isinstance(x, ev.StepCompleted) and (x.tp, x.number) == (e.tp, e.number) for x in d.events))


def test_bytes_copied_never_pass_the_total_when_a_partition_grows_while_it_copies():
    c = FakeCluster({tp(i): (0, 1, 2) for i in range(2)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(2)}))
    d.feed(submit("r", {tp(i): (3, 1, 2) for i in range(2)}))
    d.tick()
    assert c.in_progress()
    d.feed(Observation(partitions={tp(0): c.parts[tp(0)]._replace(size_bytes=3 * GB)}))  # it grew meanwhile
    d.run()
    timed = timeline(d.events)
    for n in range(1, len(timed) + 1):
        r = fold(timed[:n])[1].requests.get("r")
        assert r is None or r.bytes_done <= r.bytes_total
    r = fold(timed)[1].requests["r"]
    assert r.completed_at is not None and r.bytes_done == r.bytes_total == 3 * GB + GB


def test_unknown_sizes_give_unknown_bytes_not_a_guess():
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (3, 1, 2)}))
    d.run()
    _state, progress = fold(timeline(d.events))
    assert progress.requests["r"].bytes_total is None
    assert progress.requests["r"].eta_seconds(T0) is None or progress.requests["r"].completed_at


def test_status_reads_the_log(broker, topics, capsys):
    d = run_with_sizes()
    timed = timeline(d.events)
    with EventWriter(broker.bootstrap, prefix=topics.events[: -len("events")]) as w:
        for at, e in timed:
            w.append([e], recorded_at=at)
    assert main(["status", "--bootstrap-server", broker.bootstrap, "--prefix", topics.events[: -len("events")],
                 "--broker-profile", "embedded", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [r] = doc["requests"]
    assert (r["id"], r["status"], r["done"], r["partitions"]) == ("r", "completed", 4, 4)
    assert r["bytes_total"] == r["bytes_done"] == sum(2 * (i + 1) * GB for i in range(4))
    assert doc["steps_in_flight"] == [] and doc["throttled_brokers"] == []
    assert main(["status", "--bootstrap-server", broker.bootstrap, "--prefix", topics.events[: -len("events")],
                 "--broker-profile", "embedded"]) == 0
    out = capsys.readouterr().out
    assert "request r  completed" in out and "partitions: 4 completed (of 4)" in out and "copied 20 GB of 20 GB" in out
    assert main(["status", "--bootstrap-server", broker.bootstrap, "--prefix", topics.events[: -len("events")],
                 "--broker-profile", "embedded", "--request", "nope"]) == 2


# --- what status says of an ended request, a pause, rejections, a simulated clock ----------------------------


def rolled_back(n=4, cancel_some=None):
    """A request whose copies were in flight when it was cancelled with rollback (all or ``cancel_some``)."""
    from engine.core.commands import Cancel

    c = FakeCluster({tp(i): (0, 1, 2) for i in range(n)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(n)}))
    d.feed(submit("r", {tp(i): (3, 4, 2) for i in range(n)}))
    d.tick()
    assert c.in_progress()
    d.feed(Cancel("r", cancel_some, rollback=True))
    d.run()
    return d


def render_text(doc, scale=1.0) -> str:
    from rich.console import Console

    from engine.cli.status import render

    console = Console(width=160, record=True, file=open("/dev/null", "w"))
    console.print(render(doc, scale))
    return console.export_text()


def status_doc(d, now=T0 + timedelta(hours=1)):
    from engine.views.attention import attention
    from engine.views.progress import report

    state, progress = fold(timeline(d.events))
    return {"attention": attention(state, progress.rejected_at), **report(state, progress, now)}


def test_a_request_rolled_back_entirely_says_rolled_back_not_completed():
    from engine.cli.status import segments

    doc = status_doc(rolled_back())
    [r] = doc["requests"]
    assert r["status"] == "completed"  # the log's word: the request has ended
    assert (r["outcome"], r["completed"], r["rolled_back"], r["done"]) == ("rolled back", 0, 4, 4)
    assert segments(r) == [("rolled_back", 40)]
    text = render_text(doc)
    assert "request r  rolled back" in text and "partitions: 0 completed, 4 rolled back (of 4)" in text
    assert "completed" not in text.splitlines()[0]


def test_a_partial_rollback_is_shown_beside_the_completed_partitions():
    from engine.cli.status import segments

    doc = status_doc(rolled_back(cancel_some=(tp(0),)))
    [r] = doc["requests"]
    assert (r["outcome"], r["completed"], r["rolled_back"]) == ("ended: 3 completed, 1 rolled back", 3, 1)
    assert dict(segments(r)) == {"completed": 30, "rolled_back": 10}
    assert "partitions: 3 completed, 1 rolled back (of 4)" in render_text(doc)


def test_the_bar_has_every_status_in_proportion_and_exactly_its_width():
    from hypothesis import given, strategies as st

    from engine.cli.status import BAR, segments

    keys = ("completed", "rolled_back", "cancelled", "in_flight", "waiting", "queued")

    @given(st.lists(st.integers(0, 10_000), min_size=6, max_size=6))
    def check(counts):
        r = dict(zip(keys, counts))
        cells = segments(r)
        if not sum(counts):
            assert cells == []
            return
        assert sum(n for _k, n in cells) == BAR
        assert [k for k, _n in cells] == [k for k in keys if r[k]]  # every non-empty status, in order
        assert all(n >= 1 for _k, n in cells)

    check()


def test_while_paused_the_eta_says_paused_and_attention_says_so():
    from engine.core.commands import Pause

    c = FakeCluster({tp(i): (0, 1, 2) for i in range(3)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(3)}))
    d.feed(submit("r", {tp(i): (3, 4, 2) for i in range(3)}))
    d.tick()
    c.finish(c.in_progress()[0])
    d.observe()
    d.tick()
    d.feed(Pause())
    doc = status_doc(d, now=T0 + timedelta(seconds=len(d.events)))
    [r] = doc["requests"]
    assert (r["outcome"], r["eta_state"], r["eta_seconds"]) == ("running", "paused", None)
    assert [e["kind"] for e in doc["attention"]] == ["paused"]
    text = render_text(doc)
    assert "ETA paused" in text and "paused: no new step starts until kreassign resume" in text


def test_rejections_and_waits_need_attention_with_their_reasons_and_times():
    from engine.core.commands import Cancel

    c = FakeCluster({tp(i): (0, 1, 2) for i in range(3)}, range(5))  # brokers 0-4
    d = Driver(c)
    from engine.core.partition import Broker

    d.feed(Observation(brokers=tuple(Broker(b, alive=b != 4) for b in range(5))))  # broker 4 is down
    d.feed(Cancel("nope"))
    d.feed(submit("r", {tp(0): (4, 3, 2), tp(1): (4, 3, 0)}))
    doc = status_doc(d)
    kinds = [e["kind"] for e in doc["attention"]]
    assert kinds[-1] == "rejected" and "waiting" in kinds
    rejected = doc["attention"][-1]
    assert rejected["title"] == "cancel of request nope rejected: unknown request 'nope'"
    assert rejected["at"] == (T0 + timedelta(seconds=[i for i, e in enumerate(d.events)
                                                      if isinstance(e, ev.CommandRejected)][0])).isoformat()
    waiting = next(e for e in doc["attention"] if e["kind"] == "waiting")
    assert waiting["count"] == 2 and waiting["partitions"] == ["t-0", "t-1"] and waiting["reason"] == "new preferred leader broker 4 is offline"
    text = render_text(doc)
    assert text.startswith("needs attention:")
    assert "! cancel of request nope rejected: unknown request 'nope'" in text
    assert "~ 2 partitions waiting: " in text


def test_a_simulated_clock_labels_rates_in_cluster_time():
    d = run_with_sizes()
    timed = timeline(d.events)
    cut = [i for i, (_at, e) in enumerate(timed) if isinstance(e, ev.StepCompleted)][1] + 1
    state, progress = fold(timed[:cut])
    from engine.views.progress import report

    doc = {"attention": [], **report(state, progress, timed[cut - 1][0])}
    wall = doc["requests"][0]["rate_bytes_per_s"]
    text = render_text(doc, scale=30)
    from engine.core.units import format_rate

    assert f"rate {format_rate(wall / 30)} (all brokers, cluster time)" in text
    assert "the cluster runs 30x the wall clock" in text and "wall clock" in text


def test_the_same_wait_for_different_brokers_is_one_entry_with_a_line_per_broker():
    from engine.views.attention import attention
    from engine.core.state import fold as fold_state

    state = fold_state([ev.RequestAccepted("r", 4, "d")] + [
        ev.PartitionQueued("r", tp(i), (0, 1, 2), (3, 1, 2)) for i in range(4)
    ] + [
        ev.PartitionWaiting("r", tp(0), "waiting for broker 3 to become leader (preferred leader election)"),
        ev.PartitionWaiting("r", tp(1), "waiting for broker 3 to become leader (preferred leader election)"),
        ev.PartitionWaiting("r", tp(2), "waiting for broker 5 to become leader (preferred leader election)"),
        ev.PartitionWaiting("r", tp(3), "target broker 9 is offline"),
    ])
    entries = attention(state)
    assert [(e["kind"], e["count"]) for e in entries] == [("waiting", 3), ("waiting", 1)]
    assert entries[0]["title"] == "3 partitions waiting: waiting for broker N to become leader (preferred leader election)"
    assert entries[0]["lines"] == ["broker 3: partitions t-0, t-1", "broker 5: partitions t-2", "request r"]
    assert entries[1]["title"] == "1 partition waiting: target broker 9 is offline"
    assert entries[1]["partitions"] == ["t-3"]


# --- what the cluster refused (the core's action outcomes) needs attention, with attempt and retry ----------


def test_steps_the_cluster_did_not_start_are_one_entry_with_partitions_attempt_and_retry():
    from engine.views.attention import attention
    from tests.test_failures import setup

    c, d = setup(3, {tp(i): (0, 1, 4) if i == 0 else ((i + 1) % 4, (i + 2) % 4, 4) for i in range(3)})
    c.unavailable("alter", times=10)  # every alter: connection refused
    d.tick()
    entries = attention(d.state, now=d.now)
    refused = [e for e in entries if e["kind"] == "step"]
    assert len(refused) == 1, entries
    e = refused[0]
    assert e["severity"] == "error" and e["count"] == len(d.state.steps) >= 2
    assert e["title"].startswith(f"{e['count']} steps the cluster did not start: ")
    assert "connection refused" in e["title"]
    assert e["partitions"] == sorted(str(t) for t in d.state.steps)
    assert e["attempt"] == 1 and e["retry_at"] == "1970-01-01T00:16:41+00:00"  # the engine clock: 1001 s
    assert "attempt 1 (highest); next try at 00:16:41 UTC (in 1 s)" in e["lines"]
    assert "request r" in e["lines"]
    assert entries[0] is e  # refusals come before waits


def test_a_refused_throttle_change_needs_attention_and_the_cluster_being_unreachable_replaces_blocked():
    from engine.views.attention import attention
    from engine.core.commands import ObservationFailed
    from tests.test_failures import setup

    c, d = setup(1, {tp(0): (0, 1, 4)})
    c.refuse("apply", "TOPIC_AUTHORIZATION_FAILED", "not authorized", times=4)
    d.tick()
    kinds = {e["kind"]: e for e in attention(d.state, now=d.now)}
    assert "TOPIC_AUTHORIZATION_FAILED" in kinds["throttles"]["title"] and kinds["throttles"]["attempt"] == 1
    d.feed(ObservationFailed("connection refused", d.now))
    entries = attention(d.state, blocked="cannot observe the cluster: connection refused", now=d.now)
    assert [e["kind"] for e in entries].count("cluster") == 1 and "blocked" not in [e["kind"] for e in entries]
    assert next(e for e in entries if e["kind"] == "cluster")["title"] == \
        "cannot observe the cluster: connection refused"
    text = render_text({"attention": entries, **__import__("engine.views.progress", fromlist=["report"]).report(
        d.state, fold(timeline(d.events))[1], T0)})
    assert "! cannot observe the cluster: connection refused" in text


def test_an_ended_request_shows_its_average_rate_not_a_window_that_decays_after_it():
    d = run_with_sizes()
    timed = timeline(d.events)
    state, progress = fold(timed)
    from engine.views.progress import report

    r = progress.requests["r"]
    later = report(state, progress, r.completed_at + timedelta(hours=3))["requests"][0]
    seconds = (r.completed_at - r.accepted_at).total_seconds()
    assert later["rate_bytes_per_s"] == pytest.approx(r.bytes_done / seconds)
    assert "average rate" in render_text({"attention": [], **report(state, progress, r.completed_at)})


# --- rejected commands need attention for a while, then are history ------------------------------------------


def test_a_rejection_needs_attention_for_ten_minutes_then_is_history_a_pure_function_of_the_time():
    from engine.views.attention import REJECTIONS_NEED_ATTENTION_FOR, attention, rejection_history

    state, progress = fold([(T0, ev.CommandRejected("cancel", ("unknown request 'nope'",), "nope", "c1")),
                            (T0 + timedelta(minutes=7), ev.CommandRejected("pause", ("already paused",), None, "c2"))])
    at = T0.timestamp()

    def kinds(now):
        return [e["title"] for e in attention(state, progress.rejected_at, now=now)]

    assert REJECTIONS_NEED_ATTENTION_FOR == 600
    assert kinds(at + 8 * 60) == ["pause rejected: already paused", "cancel of request nope rejected: unknown request 'nope'"]
    assert rejection_history(state, progress.rejected_at, at + 8 * 60) is None
    assert kinds(at + 600 + 1) == ["pause rejected: already paused"]  # the first one's ten minutes are over
    history = rejection_history(state, progress.rejected_at, at + 600 + 1)
    assert history == {"count": 1, "latest_at": T0.isoformat(), "line": (
        "1 rejected command before the last 10 minutes, the latest at 2026-11-22 12:00:00 UTC: no longer needing "
        "attention (kreassign replay --format json lists the latest 2)")}
    assert kinds(at + 7 * 60 + 600 + 1) == []  # nothing needs attention now
    assert rejection_history(state, progress.rejected_at, at + 7 * 60 + 600 + 1)["count"] == 2
    assert kinds(at + 10**9) == [] and len(state.rejections) == 2 and dict(state.rejected) == {"cancel": 1, "pause": 1}
    assert len(attention(state, progress.rejected_at)) == 2  # no time given: nothing is aged
    assert kinds(at + 8 * 60) == kinds(at + 8 * 60)  # the same answer for the same input: no clock inside


def test_status_says_nothing_needs_attention_once_the_rejections_are_history():
    from engine.cli.status import render

    state, progress = fold([(T0, ev.CommandRejected("cancel", ("unknown request 'nope'",), "nope", "c1"))])
    from engine.views.attention import attention, rejection_history
    from engine.views.progress import report

    now = T0 + timedelta(hours=1)
    doc = {"attention": attention(state, progress.rejected_at, now=now.timestamp()),
           "rejection_history": rejection_history(state, progress.rejected_at, now.timestamp()),
           **report(state, progress, now)}
    text = " ".join(render_text(doc).split())  # rendered at 160 columns: the line may wrap
    assert "needs attention" not in text and "rejected: unknown request" not in text
    assert text.endswith("1 rejected command before the last 10 minutes, the latest at 2026-11-22 12:00:00 "
                                  "UTC: no longer needing attention (kreassign replay --format json lists the latest 1)")
    render(doc)  # and the renderer takes the document as status --format json prints it


def test_replay_list_and_status_say_how_a_request_ended_in_the_same_words():
    from engine.views.progress import report, request_line
    from engine.views.summary import summarize, to_text

    state, progress = fold(timeline(rolled_back(cancel_some=(tp(0),)).events))
    [r] = report(state, progress, T0 + timedelta(hours=1))["requests"]
    assert r["outcome"] == "ended: 3 completed, 1 rolled back"  # status
    line = "r: ended: 3 completed, 1 rolled back (of 4 partitions)"
    assert request_line(r["id"], r["outcome"], r["partitions"], r) == line  # list
    assert f"\n  {line}\n" in to_text(summarize(state))  # replay
    assert request_line("r1", "completed", 1, {}) == "r1: completed (of 1 partition)"  # not "1 partitions"


def test_after_a_rollback_status_says_what_was_rolled_back_not_100_percent_as_if_moved_forward():
    for doc in (status_doc(rolled_back()), status_doc(rolled_back(cancel_some=(tp(0),)))):
        [r] = doc["requests"]
        text = " ".join(render_text(doc).split())
        assert "of bytes" not in text and f"copied {_size(r['bytes_done'])} of " not in text, text
        assert f"{r['rolled_back']} of 4 partitions rolled back to their original replicas" in text
        assert f"copied {_size(r['bytes_done'])} in all (moves forward and the rollback's copies back)" in text


def _size(n):
    from engine.core.units import format_size

    return format_size(n)


def test_the_status_page_lists_a_throttle_change_with_its_rate_and_who_made_it():
    from engine.core.commands import AdaptThrottle, ChangeThrottle, PartitionTarget, Submit
    from engine.runtime.decider import Decider, MemoryLog

    d = Decider(MemoryLog(), FakeCluster({tp(0): (0, 1, 2)}, range(4)))
    d.decide(ChangeThrottle(20_000_000, command_id="c1"))
    d.decide(ChangeThrottle(None, command_id="c2"))
    d.decide(Submit("r1", (PartitionTarget("t", 0, (1, 2, 3)),), 30_000_000, command_id="c3"))
    d.process(AdaptThrottle(36_000_000, "adaptive: copies ran at 95% of their throttle share, raised"))
    details = [e["detail"] for e in reversed(d.status()["recent_events"]) if e["event"] == "ThrottleRateChanged"]
    assert details == [
        "throttle rate for new steps 20 MB/s, set by an operator: kreassign throttle (command c1)",
        "throttle rate for new steps none (unthrottled), set by an operator: kreassign throttle (command c2)",
        "throttle rate for new steps 30 MB/s, set by request r1 (execute --throttle) (command c3)",
        "throttle rate for new steps 36 MB/s, set by the adaptive throttle: copies ran at 95% of their throttle "
        "share, raised",
    ]


def test_replay_counts_partitions_in_the_words_of_status():
    from engine.views.summary import summarize, to_text

    state, _progress = fold(timeline(rolled_back(cancel_some=(tp(0),)).events))
    text = to_text(summarize(state))
    assert "\npartitions: 3 completed, 1 rolled back\n" in text and "reverted" not in text
    assert "throttle rate for new steps: 50 MB/s" in text


def test_status_says_kafkas_rate_beside_the_throttle_when_the_margin_makes_them_differ():
    # kreassign gives Kafka the throttle + throttle_margin_pct (8 % by default): an operator who reads
    # 54 MB/s with kafka-configs --describe after asking for 50 MB/s finds why in `kreassign status`
    from engine.core.commands import ChangeLimits
    from engine.views.progress import report

    d = run_with_sizes()
    timed = timeline(d.events)
    cut = [i for i, (_at, e) in enumerate(timed) if isinstance(e, ev.StepPlanned)][0] + 1
    state, progress = fold(timed[:cut])
    assert (state.throttle_rate, state.throttles.rate) == (50_000_000, 54_000_000)
    doc = {"attention": [], **report(state, progress, timed[cut - 1][0])}
    assert (doc["throttle_rate"], doc["kafka_rate"], doc["margin_pct"]) == (50_000_000, 54_000_000, 8)
    text = render_text(doc)
    assert "throttle 50 MB/s per broker (Kafka's rate 54 MB/s: + 8 %, throttle_margin_pct;" in text
    # at a margin of 0 Kafka's rate is the throttle: nothing to explain
    from engine.core.decide import decide
    changed = decide(state, ChangeLimits({"throttle_margin_pct": 0}))
    for e in changed:
        state = apply(state, e)
    doc = {"attention": [], **report(state, progress, timed[cut - 1][0])}
    assert doc["kafka_rate"] == 50_000_000 and "Kafka's rate" not in render_text(doc)


# --- a skipped cancel needs attention while its request runs, and a while after, then is history ----------


def skipped_completed():
    """Request r: partition 0 completed, then ``cancel --rollback`` naming 0 and 1 (1 still in flight):
    0 is skipped ("already completed"), 1 rolls back, and the request ends."""
    from engine.core.commands import Cancel

    c = FakeCluster({tp(i): (0, 1, 2) for i in range(2)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(2)}))
    d.feed(submit("r", {tp(i): (3, 4, 2) for i in range(2)}))
    d.tick()
    while d.state.partitions[tp(0)].status != "completed":
        for t in c.in_progress():
            if t == tp(0):
                c.finish(t)
        d.observe()
        d.tick()
    d.feed(Cancel("r", (tp(0), tp(1)), rollback=True))
    return d


def test_a_skipped_cancel_needs_attention_while_its_request_runs_and_ten_minutes_after_it_ended():
    from engine.views.attention import SKIPS_NEED_ATTENTION_FOR, attention

    d = skipped_completed()
    running = d.state
    assert running.request("r").status != "completed"
    cut = len(d.events)
    d.run()
    timed = timeline(d.events, step=timedelta(minutes=1))  # a minute between events
    state, progress = fold(timed)
    assert state.request("r").status == "completed" and state.partitions[tp(0)].note.startswith("already completed")
    ended = progress.requests["r"].completed_at.timestamp()

    def skips(state, now):
        return [e for e in attention(state, progress.rejected_at, now=now, ended_at=progress.requests)
                if e["kind"] == "skipped"]

    # while it runs: shown whatever the time
    [shown] = skips(fold(timed[:cut])[0], ended + 10**6)
    assert shown["title"].startswith("1 partition not cancelled: already completed") and shown["partitions"] == [str(tp(0))]
    assert "request r (running)" in shown["lines"]
    assert SKIPS_NEED_ATTENTION_FOR == 600
    [shown] = skips(state, ended + 599)
    assert any("request r ended at" in line and "kreassign list" in line for line in shown["lines"])
    assert skips(state, ended + 601) == []  # the request ended more than ten minutes ago: history
    assert len(skips(state, None)) == 1  # no time given: nothing is aged
    # and status --request r says the same as status
    assert [e for e in attention(state, progress.rejected_at, "r", now=ended + 601, ended_at=progress.requests)
            if e["kind"] == "skipped"] == []


def test_a_skipped_cancel_stays_in_its_requests_history_list_and_replay():
    from engine.views.progress import report, request_line, skip_lines
    from engine.views.summary import summarize, to_text

    d = skipped_completed()
    d.run()
    state, progress = fold(timeline(d.events))
    text = to_text(summarize(state))  # kreassign replay
    assert ("  r: ended: 1 completed, 1 rolled back (of 2 partitions)\n    not cancelled (1): already completed: a cancel "
            "touches only what is in progress (cancel --rollback --include-completed moves it back): t-0") in text
    [r] = report(state, progress, T0 + timedelta(days=1))["requests"]  # kreassign list
    assert skip_lines(r["cancel_skipped"]) == [text.splitlines()[2].strip()]


# --- a request that takes over a partition mid-step: the inherited step's copy is its own ------------------


def taken_over():
    """r1 copies t-0 and t-1 (a replica each, 1 GB); while t-0's step is in flight, r2 takes t-0 over
    with the step's own target: the step goes on under r2 (``decide._cancels_step``)."""
    c = FakeCluster({tp(i): (0, 1, 2) for i in range(2)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(i): c.parts[tp(i)]._replace(size_bytes=GB) for i in range(2)}))
    d.feed(submit("r1", {tp(i): (3, 1, 2) for i in range(2)}))
    d.tick()
    assert tp(0) in d.state.steps and d.state.steps[tp(0)].step.nr == (3,)
    d.feed(submit("r2", {tp(0): (3, 1, 2)}))
    d.run()
    return d


def test_a_request_that_takes_over_a_step_in_flight_is_credited_with_its_copy():
    state, progress = fold(timeline(taken_over().events))
    r1, r2 = progress.requests["r1"], progress.requests["r2"]
    assert state.request("r2").status == "completed"
    assert (r2.bytes_total, r2.bytes_done) == (GB, GB)  # it owed the copy of broker 3, which the inherited step made
    assert (r1.bytes_total, r1.bytes_done) == (GB, GB)  # t-1's copy only: t-0 was handed over before it ended


def test_a_request_with_nothing_to_copy_says_so_not_sizes_unknown():
    from engine.views.progress import report

    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(Observation(partitions={tp(0): c.parts[tp(0)]._replace(size_bytes=GB)}))
    d.feed(submit("r", {tp(0): (0, 1, 2)}))  # already at its target
    d.run()
    state, progress = fold(timeline(d.events))
    doc = {"attention": [], **report(state, progress, T0 + timedelta(hours=1))}
    assert doc["requests"][0]["bytes_total"] == 0
    text = render_text(doc)
    assert "sizes unknown" not in text and "copied 0 B: nothing to copy" in text
    c = FakeCluster({tp(0): (0, 1, 2)}, range(8))
    d = Driver(c)
    d.feed(submit("r", {tp(0): (3, 1, 2)}))  # no size known
    d.run()
    state, progress = fold(timeline(d.events))
    assert "copied 0 B (sizes unknown)" in render_text({"attention": [], **report(state, progress, T0)})


def test_what_needs_attention_and_list_name_the_same_skipped_cancels():
    """One rule (``progress.cancel_skipped``) for a skipped cancel in what needs attention and in ``list`` /
    ``replay``'s ``cancel_skips``: a partition of every status, with and without a note, is in both or neither."""
    from engine.core.state import ABORTING, CANCELLED, COMPLETED, IN_FLIGHT, PENDING, READY, REVERTED, WAITING
    from engine.views.attention import attention
    from engine.views.progress import cancel_skipped, cancel_skips

    state = skipped_completed().state  # r running; t-0 skipped ("already completed")
    assert state.request("r").status != "completed"
    for status in (PENDING, READY, WAITING, IN_FLIGHT, ABORTING, COMPLETED, REVERTED, CANCELLED):
        for note in (None, "a note"):
            entry = state.partitions[tp(1)]._replace(status=status, note=note)
            s = state._replace(partitions=state.partitions.set(tp(1), entry))
            shown = {p for e in attention(s) if e["kind"] == "skipped" for p in e["partitions"]}
            listed = {p for k in cancel_skips(s, s.request("r")) for p in k["partitions"]}
            assert shown == listed, (status, note)
            assert (str(tp(1)) in listed) == cancel_skipped(entry) == (note is not None and status != CANCELLED)


def test_numbers_all_reasons_of_a_wait_share_are_in_its_title_and_the_lines_tell_them_apart_by_place():
    # a number every reason of the shape has in the same place is said once, in the title (it read "attempt N",
    # and the lines, which leave such numbers out, said it nowhere); the lines keep what differs, place by place
    # (two looks with the leaders swapped shared both numbers as sets, and their lines said neither)
    from engine.core.decide import LEADER_UNCONFIRMED
    from engine.core.state import fold as fold_state
    from engine.views.attention import attention

    def why(b, attempt=2):
        return f"waiting for broker {b} to become leader (preferred leader election; attempt {attempt} failed: gone)"

    def look(now, was):
        return f"{LEADER_UNCONFIRMED}: a look shows broker {now} leading where the log has broker {was}, and it could not be recorded"

    state = fold_state([ev.RequestAccepted("r", 4, "d")] + [
        ev.PartitionQueued("r", tp(i), (0, 1, 2), (3, 1, 2)) for i in range(4)
    ] + [
        ev.PartitionWaiting("r", tp(0), why(3)), ev.PartitionWaiting("r", tp(1), why(5)),
        ev.PartitionWaiting("r", tp(2), look(3, 1)), ev.PartitionWaiting("r", tp(3), look(1, 3)),
    ])
    elect, seen = sorted((e for e in attention(state) if e["kind"] == "waiting"), key=lambda e: e["partitions"])
    assert elect["title"] == ("2 partitions waiting: waiting for broker N to become leader (preferred leader election; "
                              "attempt 2 failed: gone)")
    assert elect["lines"][:2] == ["broker 3: partitions t-0", "broker 5: partitions t-1"]
    assert seen["lines"][:2] == ["broker 1, broker 3: partitions t-3", "broker 3, broker 1: partitions t-2"], seen["lines"]
