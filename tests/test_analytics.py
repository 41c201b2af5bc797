"""The pure parts of the analytics (no Spark session): audit rows, the partition lifecycle
fold and its byte attribution, the read limit, the report's steps in flight, CLI parsing."""

from __future__ import annotations

import io
import json
from datetime import date

import pytest

from engine.core import events as ev
from engine.cli import CliError
from engine.cli.analytics import parse_lower_bounds, write_rows
from engine.log.codec import codec_for
from engine.core.commands import Cancel, PartitionTarget, Submit
from engine.log.envelope import EventEnvelope
from engine.core.partition import TopicPartition
from spark.audit import NAMES, UNDECODABLE, RawMessage, audit_row
from spark.kafka_source import canonical, limit_rows
from spark.lifecycle import History, PartitionEvent, Span, Transfer, advance, fold, transfers
from spark.report import bucket_seconds, time_unit, wait_label
from tests.analytics_log import START, TimedDriver, one_at_a_time, sized_cluster

def encoded(envelope: EventEnvelope, offset: int = 0) -> RawMessage:
    return RawMessage(0, offset, b"key", codec_for(EventEnvelope).encode(envelope))


# -- audit rows ----------------------------------------------------------------------------------------
def test_every_event_type_becomes_an_audit_row():
    assignment = {TopicPartition("t", i): (i % 4, (i + 1) % 4) for i in range(4)}
    d = TimedDriver(sized_cluster(assignment, range(6), {tp: 100 for tp in assignment}))
    d.feed(Submit("r", tuple(PartitionTarget("t", i, (4, 5)) for i in range(4)), throttle_rate=5))
    d.tick()
    d.feed(Cancel("r", (TopicPartition("t", 3),), rollback=True))
    d.feed(Cancel("nope"))
    d.run(one_at_a_time)
    seen = set()
    for i, e in enumerate(d.envelopes()):
        row = audit_row(encoded(e, i))
        p = e.payload
        seen.add(row["event_type"])
        assert row["event_type"] == type(p).__name__
        assert row["event_id"] == e.id and row["kafka_offset"] == i and row["kafka_key"] == "key"
        assert row["recorded_at"] == int(e.recorded_at.timestamp() * 1000)
        assert row["date"] == (e.recorded_at.date() - date(1970, 1, 1)).days
        assert row["request_id"] == getattr(p, "request_id", None)
        assert row["step_number"] == getattr(p, "number", None)
        assert not _union_pairs(json.loads(row["payload"]))  # JSON, union branches unwrapped
        assert set(row) <= set(NAMES)
    assert len(seen) >= 15


def _union_pairs(value) -> bool:
    """Does JSON data still hold a ``[record name, record]`` pair (an unwrapped union branch)?"""
    if isinstance(value, list):
        if len(value) == 2 and isinstance(value[0], str) and value[0].startswith("io.kreassign."):
            return True
        return any(_union_pairs(v) for v in value)
    if isinstance(value, dict):
        return any(_union_pairs(v) for v in value.values())
    return False


def test_a_record_inside_a_union_is_unwrapped_in_the_payload():
    from engine.core.partition import TopicInfo

    row = audit_row(encoded(EventEnvelope("1", START, ev.TopicObserved("orders", TopicInfo(3, 2)))))
    assert json.loads(row["payload"]) == {"topic": "orders", "info": {
        "partitions": 3, "min_insync_replicas": 2, "topic_id": None, "unclean_leader_election": False}}


def test_a_throttle_rate_and_reasons_have_columns():
    t = START
    row = audit_row(encoded(EventEnvelope("1", t, ev.ThrottleRateChanged(7, "operator", "c1"))))
    assert (row["rate"], row["reason"], row["command_id"]) == (7, "operator", "c1")
    row = audit_row(encoded(EventEnvelope("2", t, ev.CommandRejected("cancel", ("a", "b"), "r"))))
    assert row["reasons"] == ["a", "b"] and row["request_id"] == "r"
    row = audit_row(encoded(EventEnvelope("3", t, ev.TopicObserved("orders", None))))
    assert row["topic"] == "orders" and row["partition"] is None and json.loads(row["payload"])["info"] is None


@pytest.mark.parametrize("value, reason", [
    (None, "empty message"), (b"junk", "not Avro"), (b"\xc3\x01" + b"\0" * 8, "unknown schema fingerprint"),
])
def test_a_message_that_cannot_be_decoded_is_kept_with_its_reason(value, reason):
    row = audit_row(RawMessage(0, 9, None, value))
    assert row["event_type"] == UNDECODABLE and reason in row["reason"] and row["kafka_offset"] == 9


# -- the lifecycle fold ------------------------------------------------------------------------------------
def at(seconds: float) -> int:
    return int(seconds * 1000)


def observed(offset, seconds, replicas, isr, size=None, adding=()):
    state = {"replicas": list(replicas), "isr": sorted(isr), "leader": replicas[0], "size_bytes": size,
             "adding": list(adding), "removing": []}
    return PartitionEvent(offset, at(seconds), "PartitionObserved", None, None, {"state": state})


def planned(offset, seconds, number, cr, tr, leader, request="r"):
    nr = [b for b in tr if b not in cr]
    step = {"cr": list(cr), "tr": list(tr), "nr": nr, "dr": [b for b in cr if b not in tr], "leader": leader,
            "moves_leader": tr[0] != leader}
    return PartitionEvent(offset, at(seconds), "StepPlanned", request, number, {"step": step})


def step_event(offset, seconds, kind, number, request="r"):
    return PartitionEvent(offset, at(seconds), kind, request, number, {})


def test_a_completed_step_moves_one_replica_of_the_last_observed_size_per_new_replica():
    events = [
        observed(0, 0, (1, 2), {1, 2}, size=500),
        planned(1, 10, 1, (1, 2), (3, 4, 1, 2), leader=1),
        step_event(2, 11, "StepStarted", 1),
        observed(3, 30, (3, 4, 1, 2), {1, 2}, size=600, adding=(3, 4)),  # grew while copying
        step_event(4, 70, "StepCompleted", 1),
    ]
    spans = fold(History(), events)
    assert spans == [Span("step", at(10), at(70), "completed", "r", 1, at(11), 1, (3, 4), (), True, 600, 1200,
                          (Transfer(3, "in", 600), Transfer(4, "in", 600), Transfer(1, "out", 1200)))]


def test_aborted_and_failed_steps_move_nothing_and_drop_only_steps_copy_nothing():
    h = History(size_bytes=100)
    assert advance(h, planned(0, 0, 1, (1, 2), (3, 1, 2), 1)) == []
    (aborted,) = advance(h, step_event(1, 5, "StepAborted", 1))
    assert (aborted.outcome, aborted.bytes_moved, aborted.transfers) == ("aborted", 0, ())
    advance(h, planned(2, 6, 2, (1, 2), (3, 1, 2), 1))
    (failed,) = advance(h, step_event(3, 7, "StepFailed", 2))
    assert (failed.outcome, failed.bytes_moved, failed.started_ms) == ("failed", 0, None)
    advance(h, planned(4, 8, 3, (1, 2, 3), (1, 2), 1))
    (dropped,) = advance(h, step_event(5, 9, "StepCompleted", 3))
    assert (dropped.bytes_moved, dropped.source_broker, dropped.transfers) == (0, None, ())
    assert h.open_steps == {}


def test_unknown_size_gives_null_bytes_and_an_end_without_its_plan_is_ignored():
    h = History()
    advance(h, planned(0, 0, 1, (1,), (2, 1), 1))
    (span,) = advance(h, step_event(1, 3, "StepCompleted", 1))
    assert span.bytes_moved is None and span.transfers == (Transfer(2, "in", None), Transfer(1, "out", None))
    assert advance(h, step_event(2, 4, "StepCompleted", 7)) == []


def test_steps_of_two_requests_are_told_apart():
    h = History(size_bytes=10)
    advance(h, planned(0, 0, 1, (1,), (2, 1), 1, request="a"))
    advance(h, planned(1, 1, 1, (1,), (3, 1), 1, request="b"))
    (b,) = advance(h, step_event(2, 2, "StepCompleted", 1, request="b"))
    assert (b.request_id, b.new_replicas) == ("b", (3,))
    assert list(h.open_steps) == ["a/1"]


def test_under_replicated_spans_follow_kip_455():
    h = History()
    assert advance(h, observed(0, 0, (1, 2, 3), {1, 2, 3})) == []
    assert advance(h, observed(1, 5, (4, 1, 2, 3), {1, 2, 3}, adding=(4,))) == []  # a replica being added
    assert advance(h, observed(2, 10, (1, 2, 3), {1, 2})) == []
    assert advance(h, observed(3, 20, (1, 2, 3), {1})) == []  # still the same span
    (span,) = advance(h, observed(4, 95, (1, 2, 3), {1, 2, 3}))
    assert (span.kind, span.start_ms, span.end_ms, span.outcome) == ("under_replicated", at(10), at(95), "in_sync")


def test_folding_in_pieces_through_json_state_equals_folding_at_once():
    events = [
        observed(0, 0, (1, 2), {1, 2}, size=5), planned(1, 1, 1, (1, 2), (3, 1, 2), 1),
        observed(2, 2, (1, 2), {1}), step_event(3, 3, "StepStarted", 1), observed(4, 4, (1, 2), {1, 2}),
        step_event(5, 5, "StepCompleted", 1), planned(6, 6, 2, (3, 1, 2), (3, 2), 3),
        step_event(7, 9, "StepCompleted", 2),
    ]
    whole = fold(History(), events)
    pieces, state = [], None
    for chunk in (events[:2], events[2:5], events[5:]):
        h = History.from_json(state)
        pieces += fold(h, reversed(chunk))  # order within a chunk comes from the offsets
        state = h.to_json()
    assert pieces == whole and len(whole) == 3


def test_transfers_name_each_destination_and_the_source():
    assert transfers(7, (1, 2), 10) == (Transfer(1, "in", 10), Transfer(2, "in", 10), Transfer(7, "out", 20))
    assert transfers(7, (), 10) == ()
    assert transfers(None, (1,), 10) == (Transfer(1, "in", 10),)


# -- read limit, report, CLI helpers -----------------------------------------------------------------------------
def test_the_read_limit_shares_rows_by_backlog_and_never_exceeds_it():
    start = {"0": 0, "1": 100, "2": 5}
    end = {"0": 1000, "1": 100, "2": 305}
    limited = limit_rows(start, end, 131)
    assert sum(limited[p] - start[p] for p in start) == 131
    assert all(start[p] <= limited[p] <= end[p] for p in start)
    assert limited["1"] == 100 and limited["0"] - start["0"] > limited["2"] - start["2"]
    assert limit_rows(start, end, 10_000) == end


def test_offsets_have_one_json_form():
    assert json.dumps(canonical({10: 1, "2": 3})) == json.dumps(canonical({"2": 3, "10": 1})) == '{"2": 3, "10": 1}'


@pytest.mark.parametrize("span, bucket", [
    (52 * 30, 30), (100, 2), (60, 1), (3600, 60), (7 * 86400, 10800), (0.5, 0.01),
])
def test_buckets_follow_the_runs_length_at_a_round_size(span, bucket):
    assert bucket_seconds(span) == bucket
    assert span / bucket_seconds(span) <= 60


def test_bucket_sizes_are_the_smallest_round_size_within_the_count():
    from hypothesis import given, strategies as st

    @given(st.floats(0.01, 10**8))
    def check(span):
        b = bucket_seconds(span)
        assert span / b <= 60 + 1e-9
        smaller = [x for x in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
                                600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400) if x < b]
        assert all(span / x > 60 for x in smaller)

    check()


def test_time_axes_read_in_a_unit_the_span_calls_for():
    assert time_unit(90) == ("s", 1.0) and time_unit(1571) == ("min", 60.0) and time_unit(86400) == ("h", 3600.0)


def test_what_a_partition_waits_for_after_each_of_its_events():
    assert wait_label("PartitionReady", None).startswith("ready, waiting for a slot under the limits")
    assert wait_label("PartitionWaiting", "target broker 6 is offline") == "target broker 6 is offline"
    assert wait_label("StepFailed", "NOT_CONTROLLER") == "the cluster refused a step: NOT_CONTROLLER"
    assert wait_label("StepPlanned", None) is None and wait_label("PartitionCompleted", None) is None


def test_lower_bounds():
    assert parse_lower_bounds(["90", "req-a=60.5"]) == {None: 90.0, "req-a": 60.5}
    for bad in ("0", "x", "=5", "r=-1"):
        with pytest.raises(CliError):
            parse_lower_bounds([bad])


@pytest.mark.parametrize("extra, words", [
    (["--trigger", "continuous-seconds", "5"], "--report: only with the available-now trigger"),
    (["--lower-bound", "=5"], "--lower-bound '=5': expected [REQUEST=]SECONDS"),
])
def test_run_with_report_refuses_what_it_cannot_do_before_it_starts(tmp_path, capsys, extra, words):
    from engine.cli import main

    # a port nobody listens on: the refusal comes before any connection or Spark start
    assert main(["analytics", "run", "--bootstrap-server", "127.0.0.1:9", "--warehouse", str(tmp_path / "w"),
                 "--report", str(tmp_path / "r"), *extra]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists() and not (tmp_path / "r").exists()


def test_query_output_formats():
    out = io.StringIO()
    write_rows(["a", "b"], [(1, None), (22, "x")], "table", out)
    assert out.getvalue().splitlines() == ["a   b", "--  ----", "1   NULL", "22  x", "(2 rows)"]
    out = io.StringIO()
    write_rows(["a", "b"], [(1, None)], "csv", out)
    assert out.getvalue().splitlines() == ["a,b", "1,"]
    out = io.StringIO()
    write_rows(["a"], [(START,)], "json", out)
    assert json.loads(out.getvalue()) == {"a": str(START)}




def test_the_waits_chart_shows_every_reason_and_cuts_no_label(tmp_path, monkeypatch):
    """Reasons that differ by orders of magnitude (the demo's: 23 partition-hours ready under the limits,
    seconds waiting for elections) each get a visible bar, and every label is whole and inside the image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spark.report import READY, draw_waits

    reasons = [(READY, 82_000.0, 198)] + [
        (f"waiting for broker {b} to become leader (preferred leader election)", s, n)
        for b, s, n in ((3, 95.0, 32), (4, 60.0, 25), (5, 31.0, 15), (1, 24.0, 13), (2, 6.0, 7))]
    doc = {"time_scale": 30.0, "waits": [{"reason": r, "total_s": s, "partitions": n, "p50_s": 1.0, "max_s": s}
                                         for r, s, n in reasons]}
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure the report draws, to look at it
    draw_waits(doc, tmp_path / "waits.png")
    (fig,) = figures
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert len(bars) == len(reasons)
    assert min(b.width for b in bars) >= 20, [b.width for b in bars]  # pixels: every reason can be seen
    labels = ax.get_yticklabels()
    assert sorted(" ".join(label.get_text().split("\n")) for label in labels) == sorted(r for r, _s, _n in reasons)
    width = fig.get_window_extent(renderer).width
    for label in labels:
        box = label.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= width, label.get_text()
    words = " ".join(t.get_text() for t in ax.texts)
    assert "198 partitions" in words and "7 partitions" in words
    plt.close(fig)
