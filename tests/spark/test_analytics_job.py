"""The analytics job against the embedded broker: exactly once across restarts, and every
aggregate equal to what the test computes itself, in plain Python, from the same events.

One story (module fixture): a log written in several chunks (so the embedded broker's listed
end offset falls short of the true end), an available-now run in small micro-batches, a
restart with nothing new, more events (a cancel with rollback, rejected commands, a throttle
change), and a third run through the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTP

from engine.core import events as ev
from engine.cli import main
from engine.kafka.client_config import ClientConfig
from engine.core.commands import Cancel, ChangeThrottle, PartitionTarget, Submit
from engine.kafka.embedded import EMBEDDED
from engine.log.eventlog import EventWriter
from engine.core.partition import PartitionState, TopicPartition
from engine.kafka.topics import Topics, create, reader_group
from spark import audit_job
from spark import warehouse as wh
from tests.analytics_log import TimedDriver, one_at_a_time, sized_cluster

MB = 1_000_000
ORDERS = [TopicPartition("orders", i) for i in range(8)]
PAYMENTS = [TopicPartition("payments", i) for i in range(4)]


def story_driver() -> TimedDriver:
    assignment = {tp: (tp.partition % 6, (tp.partition + 1) % 6) for tp in ORDERS}
    assignment.update({tp: tuple((tp.partition + k) % 6 for k in range(3)) for tp in PAYMENTS})
    sizes = {tp: (i + 1) * 10 * MB for i, tp in enumerate(ORDERS + PAYMENTS)}
    return TimedDriver(sized_cluster(assignment, range(6), sizes))


def first_part(d: TimedDriver) -> None:
    """req-a moves every orders partition; payments-0 is under-replicated meanwhile."""
    lagging = PartitionState((0, 1, 2), frozenset({0, 1}), 0, 1 * 10 * MB)
    d.record(ev.PartitionObserved(TopicPartition("payments", 0), lagging), d.at)
    d.feed(Submit("req-a", tuple(PartitionTarget(tp.topic, tp.partition, ((tp.partition + 2) % 6, (tp.partition + 3) % 6))
                                 for tp in ORDERS), throttle_rate=30 * MB))
    d.run(one_at_a_time)
    d.record(ev.PartitionObserved(TopicPartition("payments", 0), lagging._replace(isr=frozenset({0, 1, 2}))), d.at)
    d.feed(Cancel("no-such-request"))


def second_part(d: TimedDriver) -> None:
    """A throttle change, req-b with half of it cancelled and rolled back, a rejected submit."""
    d.feed(ChangeThrottle(20 * MB))
    d.feed(Submit("req-b", tuple(PartitionTarget(tp.topic, tp.partition, ((tp.partition + 3) % 6, (tp.partition + 4) % 6,
                                                                       (tp.partition + 5) % 6)) for tp in PAYMENTS)))
    d.tick()
    d.tick()
    d.feed(Cancel("req-b", (PAYMENTS[2], PAYMENTS[3]), rollback=True))
    d.run(one_at_a_time)
    d.feed(Submit("req-c", (PartitionTarget("missing", 0, (1, 2)),)))


def write_in_chunks(broker, prefix, envelopes, chunks: int) -> None:
    config = ClientConfig().with_bootstrap(broker.bootstrap)
    size = -(-len(envelopes) // chunks)
    with EventWriter(config=config, prefix=prefix, profile=EMBEDDED) as w:
        for i in range(0, len(envelopes), size):
            w.write(envelopes[i:i + size])


def listed_end(broker, topic: str) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    try:
        return c.get_watermark_offsets(KafkaTP(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()


def audit_files(warehouse: Path) -> set[str]:
    return {str(p.relative_to(warehouse)) for p in (warehouse / wh.AUDIT).rglob("*.parquet")}


class Story:
    pass


def _utc(value):
    """A collected TIMESTAMP as the naive UTC time the tests compute with: PySpark collects it as a naive
    ``datetime`` in the process's local time zone (its ``fold`` set in a repeated hour), so on a machine
    outside UTC every time compared was off by the offset (TZ=Asia/Kolkata: 7 tests failed)."""
    return value.astimezone(timezone.utc).replace(tzinfo=None) if isinstance(value, datetime) else value


def spark_submit(broker, prefix: str, warehouse: Path) -> subprocess.Popen:
    """``spark-submit spark/audit_job.py``: its own JVM, the same options (started early, to run beside
    the module's other tests: its JVM start and job take as long as they do)."""
    submit = Path(sys.executable).parent / "spark-submit"
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m",
         str(root / "spark" / "audit_job.py"), "--bootstrap-server", broker.bootstrap,
         "--broker-profile", "embedded", "--prefix", prefix, "--warehouse", str(warehouse)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=warehouse.parent,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


REPORT_SCALE, REPORT_POLL = 10.0, 7.0


@pytest.fixture(scope="module")
def story(spark, broker, tmp_path_factory):
    s = Story()
    s.warehouse = tmp_path_factory.mktemp("warehouse")
    s.prefix = "analytics-story."
    create({"bootstrap.servers": broker.bootstrap}, s.prefix)
    topics = Topics.named(s.prefix)
    s.options = audit_job.JobOptions(
        warehouse=str(s.warehouse), topic=topics.events, group=reader_group(s.prefix),
        kafka=ClientConfig().with_bootstrap(broker.bootstrap).confluent(**EMBEDDED.consumer),
        max_events_per_batch=120, split_size=50,
    )
    d = story_driver()
    first_part(d)
    s.first = d.envelopes()
    write_in_chunks(broker, s.prefix, s.first, chunks=4)
    s.listed_after_first = listed_end(broker, topics.events)
    s.run1 = audit_job.run(spark, s.options)
    s.rows1 = spark.read.schema(wh.AUDIT_DDL).parquet(str(s.warehouse / wh.AUDIT)).count()
    s.files1 = audit_files(s.warehouse)
    s.run2 = audit_job.run(spark, s.options)
    s.files2 = audit_files(s.warehouse)
    second_part(d)
    s.second = d.envelopes(len(s.first))
    write_in_chunks(broker, s.prefix, s.second, chunks=3)
    s.submitted = spark_submit(broker, s.prefix, tmp_path_factory.mktemp("submit") / "warehouse")
    # the third run through the command line, the report after it in the same session (--report)
    s.report = tmp_path_factory.mktemp("report")
    s.exit3 = main(["analytics", "run", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded",
                    "--prefix", s.prefix, "--warehouse", str(s.warehouse), "--max-events-per-batch", "200",
                    "--report", str(s.report), "--lower-bound", "req-a=60", "--time-scale", f"{REPORT_SCALE:g}",
                    "--poll-interval", f"{REPORT_POLL:g}"])
    s.all = s.first + s.second
    wh.register(spark, str(s.warehouse))
    s.sql = lambda q: [{k: _utc(v) for k, v in r.asDict().items()} for r in spark.sql(q).collect()]
    yield s
    if s.submitted.poll() is None:  # its test did not run
        s.submitted.kill()
    s.submitted.communicate()


# -- exactly once ------------------------------------------------------------------------------------------
def test_an_available_now_run_reads_every_event_exactly_once(story):
    assert story.listed_after_first < len(story.first), "the embedded broker's listed end should fall short"
    run = {r.name: r for r in story.run1}
    assert run["audit"].rows == len(story.first) == story.rows1
    assert run["audit"].batches == -(-len(story.first) // 120) >= 2  # the read limit per micro-batch


def test_a_restart_with_nothing_new_adds_nothing(story):
    assert {r.name: r.rows for r in story.run2} == {name: 0 for name in audit_job.QUERIES}
    assert story.files2 == story.files1


def test_new_events_after_a_restart_are_added_once(story):
    assert story.exit3 == 0
    rows = story.sql("SELECT event_id, kafka_offset FROM audit")
    assert sorted(r["kafka_offset"] for r in rows) == list(range(len(story.all)))
    assert Counter(r["event_id"] for r in rows) == Counter(e.id for e in story.all)


def test_audit_rows_carry_the_decoded_fields(story):
    rows = {r["event_id"]: r for r in story.sql("SELECT * FROM audit")}
    for e in story.all:
        row = rows[e.id]
        p = e.payload
        assert row["event_type"] == type(p).__name__
        assert row["recorded_at"] == e.recorded_at.replace(tzinfo=None)
        assert row["date"] == e.recorded_at.date()
        assert row["request_id"] == getattr(p, "request_id", None)
        tp = getattr(p, "tp", None)
        assert (row["topic"], row["partition"]) == ((tp.topic, tp.partition) if tp else (getattr(p, "topic", None), None))
        assert row["step_number"] == getattr(p, "number", None)
        assert row["reasons"] == (list(p.reasons) if isinstance(p, ev.CommandRejected) else None)
        if isinstance(p, ev.ThrottleRateChanged):
            assert row["rate"] == p.rate
        payload = json.loads(row["payload"])
        if isinstance(p, ev.StepPlanned):
            assert payload["step"]["tr"] == list(p.step.tr) and payload["number"] == p.number
    assert {r["date"] for r in rows.values()} == {datetime(2026, 3, 1).date(), datetime(2026, 3, 2).date()}


def test_the_audit_table_is_partitioned_by_date_and_event_type(story):
    folders = {p.parent.relative_to(story.warehouse / wh.AUDIT).as_posix()
               for p in (story.warehouse / wh.AUDIT).rglob("*.parquet")}
    assert "date=2026-03-01/event_type=StepPlanned" in folders
    assert all(f.startswith("date=") and "/event_type=" in f for f in folders)


# -- expected values, computed here from the events ---------------------------------------------------------
def minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0, tzinfo=None)


def step_lives(envelopes):
    """(request, tp, number) -> dict(planned, step, end, outcome, size) from the events alone."""
    size: dict[TopicPartition, int] = {}
    steps = {}
    for e in envelopes:
        p = e.payload
        if isinstance(p, ev.PartitionObserved) and p.state.size_bytes is not None:
            size[p.tp] = p.state.size_bytes
        elif isinstance(p, ev.StepPlanned):
            steps[(p.request_id, p.tp, p.number)] = {"planned": e.recorded_at, "step": p.step}
        elif isinstance(p, (ev.StepCompleted, ev.StepAborted, ev.StepFailed)):
            life = steps[(p.request_id, p.tp, p.number)]
            life.update(end=e.recorded_at, outcome=type(p).__name__, size=size.get(p.tp))
    return steps


def percentile(values, q):
    values = sorted(values)
    k = q * (len(values) - 1)
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def test_bytes_moved_per_broker_per_minute(story):
    expected = defaultdict(lambda: [0, 0])
    for life in step_lives(story.all).values():
        if life["outcome"] == "StepCompleted" and life["step"].nr:
            m = minute(life["end"])
            for b in life["step"].nr:
                expected[(m, b)][0] += life["size"]
            expected[(m, life["step"].leader)][1] += life["size"] * len(life["step"].nr)
    got = {(r["minute"], r["broker"]): [r["bytes_in"], r["bytes_out"]]
           for r in story.sql("SELECT * FROM bytes_per_broker_minute")}
    assert got == dict(expected)
    assert len({m for m, _b in got}) >= 3


def test_steps_started_and_completed_per_minute(story):
    expected = Counter((minute(e.recorded_at), type(e.payload).__name__) for e in story.all)
    got = story.sql("SELECT * FROM steps_per_minute")
    assert {r["minute"] for r in got} == {m for m, kind in expected if kind.startswith("Step")}
    for r in got:
        for column, kind in (("planned", "StepPlanned"), ("started", "StepStarted"),
                             ("completed", "StepCompleted"), ("aborted", "StepAborted"), ("failed", "StepFailed")):
            assert r[column] == expected[(r["minute"], kind)], (r["minute"], kind)
    events = {(r["minute"], r["event_type"]): r["events"] for r in story.sql("SELECT * FROM events_per_minute")}
    assert events == dict(expected)


def test_step_duration_percentiles_per_request_and_broker(story):
    by_request, by_broker = defaultdict(list), defaultdict(list)
    for (request, _tp, _n), life in step_lives(story.all).items():
        if life["outcome"] == "StepCompleted":
            seconds = (life["end"] - life["planned"]).total_seconds()
            by_request[request].append(seconds)
            for b in life["step"].nr:
                by_broker[(b, "in")].append(seconds)
            if life["step"].nr:
                by_broker[(life["step"].leader, "out")].append(seconds)
    got = {r["request_id"]: r for r in story.sql("SELECT * FROM step_duration_by_request")}
    assert set(got) == set(by_request) == {"req-a", "req-b"}
    for request, values in by_request.items():
        assert got[request]["steps"] == len(values)
        for q, column in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            assert got[request][column] == pytest.approx(percentile(values, q))
    assert len(set(by_request["req-a"])) > 2  # durations differ: percentiles are not trivial
    got = {(r["broker"], r["direction"]): r for r in story.sql("SELECT * FROM step_duration_by_broker")}
    assert set(got) == set(by_broker)
    for key, values in by_broker.items():
        assert got[key]["p95"] == pytest.approx(percentile(values, 0.95))


def test_steps_that_were_aborted_moved_nothing(story):
    lives = step_lives(story.all)
    aborted = {(r, tp.topic, tp.partition, n) for (r, tp, n), life in lives.items() if life["outcome"] == "StepAborted"}
    got = story.sql("SELECT request_id, topic, partition, step_number, bytes_moved FROM steps WHERE outcome = 'aborted'")
    assert {(r["request_id"], r["topic"], r["partition"], r["step_number"]) for r in got} == aborted
    assert all(r["bytes_moved"] == 0 for r in got)
    assert len(story.sql("SELECT * FROM steps")) == len(lives)


def test_time_partitions_spent_under_replicated(story):
    since, spans = {}, []
    for e in story.all:
        p = e.payload
        if isinstance(p, ev.PartitionObserved):
            short = len(p.state.isr) < len(set(p.state.replicas) - set(p.state.adding))
            if short and p.tp not in since:
                since[p.tp] = e.recorded_at
            elif not short and p.tp in since:
                spans.append((p.tp.topic, p.tp.partition, (e.recorded_at - since.pop(p.tp)).total_seconds(),
                              minute(e.recorded_at)))
    assert spans, "the story has an under-replicated partition"
    got = story.sql("SELECT topic, partition, duration_seconds FROM under_replicated")
    assert sorted((r["topic"], r["partition"], r["duration_seconds"]) for r in got) == sorted(s[:3] for s in spans)
    per_minute = defaultdict(float)
    for topic, _p, seconds, m in spans:
        per_minute[(m, topic)] += seconds
    got = {(r["minute"], r["topic"]): r["seconds"] for r in story.sql("SELECT * FROM under_replicated_per_minute")}
    assert got == dict(per_minute)


def test_throttle_rate_over_time(story):
    expected = {}
    for e in story.all:
        if isinstance(e.payload, ev.ThrottleRateChanged):
            expected[minute(e.recorded_at)] = (e.payload.rate, e.payload.reason)
    got = {r["minute"]: (r["rate"], r["reason"]) for r in story.sql("SELECT * FROM throttle_per_minute")}
    assert got == expected
    assert {rate for rate, _ in expected.values()} == {30 * MB, 20 * MB}


def test_cancellations_and_rejections_with_reasons(story):
    expected = Counter()
    for e in story.all:
        p, m = e.payload, minute(e.recorded_at)
        if isinstance(p, ev.CommandRejected):
            for reason in p.reasons:
                expected[(m, "rejected", p.request_id, reason)] += 1
        elif isinstance(p, ev.CancelSkipped):
            expected[(m, "cancel_skipped", p.request_id, p.reason)] += 1
        elif isinstance(p, ev.PartitionCancelled):
            reason = (f"superseded by {p.superseded_by}" if p.superseded_by
                      else "cancelled with rollback" if p.rollback else "cancelled")
            expected[(m, "cancelled", p.request_id, reason)] += 1
    got = {(r["minute"], r["kind"], r["request_id"], r["reason"]): r["n"]
           for r in story.sql("SELECT * FROM cancellations_per_minute")}
    assert got == dict(expected)
    assert {k[1] for k in expected} >= {"rejected", "cancelled"}
    listed = story.sql("SELECT * FROM cancellations WHERE event_type = 'CommandRejected'")
    assert len(listed) == sum(isinstance(e.payload, ev.CommandRejected) for e in story.all) == 2


def test_request_timeline(story):
    expected = defaultdict(Counter)
    times = defaultdict(dict)
    for e in story.all:
        p = e.payload
        request = getattr(p, "request_id", None)
        if request is None:
            continue
        expected[request][type(p).__name__] += 1
        t = e.recorded_at.replace(tzinfo=None)
        if isinstance(p, ev.RequestAccepted):
            times[request]["accepted_at"] = t
        if isinstance(p, ev.RequestCompleted):
            times[request]["completed_at"] = t
    got = {r["request_id"]: r for r in story.sql("SELECT * FROM requests")}
    assert set(got) == set(expected)
    for request, counts in expected.items():
        row = got[request]
        assert row["events"] == sum(counts.values())
        assert row["steps_completed"] == counts["StepCompleted"]
        assert row["steps_aborted"] == counts["StepAborted"]
        assert row["partitions_cancelled"] == counts["PartitionCancelled"]
        assert row["rejections"] == counts["CommandRejected"]
        assert row["accepted_at"] == times[request].get("accepted_at")
        assert row["completed_at"] == times[request].get("completed_at")
        if "completed_at" in times[request]:
            span = times[request]["completed_at"] - times[request]["accepted_at"]
            assert row["makespan_seconds"] == span.total_seconds()
    lives = step_lives(story.all)
    assert got["req-a"]["bytes_moved"] == sum(
        life["size"] * len(life["step"].nr) for (r, _tp, _n), life in lives.items()
        if r == "req-a" and life["outcome"] == "StepCompleted")
    assert got["req-b"]["partitions_reverted"] == expected["req-b"]["PartitionReverted"] > 0


# -- SQL, report, command line ---------------------------------------------------------------------------
def test_the_example_queries_run_and_find_something(story):
    queries = wh.example_queries()
    assert len(queries) >= 5
    for name, sql in queries.items():
        assert story.sql(sql), name


def test_query_command_prints_rows(story, capsys):
    assert main(["analytics", "query", "--warehouse", str(story.warehouse), "--format", "json",
                 "SELECT request_id, steps_completed FROM requests ORDER BY request_id"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["request_id"] for r in rows] == ["no-such-request", "req-a", "req-b", "req-c"]


def test_query_command_prints_times_in_utc_on_a_machine_elsewhere(story, capsys, monkeypatch):
    # PySpark collects a TIMESTAMP as a naive datetime in the process's local time: in New York the command
    # printed "2023-11-14 17:13:20.250000" for 22:13:20.25 UTC, unmarked, where the warehouse's times are UTC
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert main(["analytics", "query", "--warehouse", str(story.warehouse), "--format", "json",
                     "SELECT timestamp_millis(1700000000250) AS t, named_struct('at', timestamp_millis(1700000000250)) "
                     "AS s, array(timestamp_millis(1700000000250)) AS a"]) == 0
    finally:
        monkeypatch.undo()
        time.tzset()
    utc = "2023-11-14 22:13:20.250000+00:00"  # within a struct or an array too (a window, a collect_list)
    assert json.loads(capsys.readouterr().out) == {"t": utc, "s": [utc], "a": [utc]}


@pytest.mark.parametrize("sql, words", [
    ("SELEC nonsense", "PARSE_SYNTAX_ERROR"),
    ("SELECT * FROM no_such_table", "no_such_table"),
])
def test_bad_sql_is_one_line_and_exit_2(story, capsys, sql, words):
    assert main(["analytics", "query", "--warehouse", str(story.warehouse), sql]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and err.startswith("kreassign analytics: error:")


def test_the_report_answers_each_question_from_the_log(story):
    """Every figure's data (report.json) equals what the test computes from the events itself, in
    cluster time (--time-scale 10); the page says so; each figure is a real, non-blank image. The
    report is the one ``analytics run --report`` wrote after the story's third run, in its session."""
    from PIL import Image

    from spark.report import FIGURES, READY, bucket_seconds

    scale, poll, out = REPORT_SCALE, REPORT_POLL, story.report
    assert story.exit3 == 0
    page = (out / "index.html").read_text()
    doc = json.loads((out / "report.json").read_text())
    for png in FIGURES:
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and f'src="{png}"' in page, png
        assert len(Image.open(out / png).convert("RGB").getcolors(maxcolors=1 << 20)) > 20, png  # drawn on
    assert "Simulated cluster at 10x the wall clock" in page

    times = [e.recorded_at for e in story.all]
    span = (max(times) - min(times)).total_seconds() * scale
    assert doc["bucket_s"] == bucket_seconds(span) and span / doc["bucket_s"] <= 60  # from the run's length

    # 1. each request's outcome as its RequestCompleted says; makespan in cluster time against the bound
    accepted = {e.payload.request_id: e.recorded_at for e in story.all if isinstance(e.payload, ev.RequestAccepted)}
    ended = {e.payload.request_id: e for e in story.all if isinstance(e.payload, ev.RequestCompleted)}
    rows = {r["request"]: r for r in doc["requests"]}
    assert set(rows) == set(accepted)  # rejected submits are no requests
    for rid, e in ended.items():
        r = rows[rid]
        assert (r["completed"], r["rolled_back"], r["cancelled"]) == (e.payload.completed, e.payload.reverted,
                                                                      e.payload.cancelled)
        assert r["makespan_s"] == pytest.approx((e.recorded_at - accepted[rid]).total_seconds() * scale)
    assert rows["req-a"]["lower_bound_s"] == 60
    assert rows["req-a"]["makespan_over_bound"] == pytest.approx(rows["req-a"]["makespan_s"] / 60)
    assert rows["req-b"]["rolled_back"] == 2 and rows["req-b"]["makespan_over_bound"] is None
    assert rows["req-b"]["note"] == "no bound given"

    # 2. per broker: the copy-rate series add up to the bytes each broker received and sent
    size, bytes_in, bytes_out = {}, Counter(), Counter()
    planned, started, copies = {}, {}, []
    for e in story.all:
        p = e.payload
        if isinstance(p, ev.PartitionObserved) and p.state.size_bytes is not None:
            size[p.tp] = p.state.size_bytes
        elif isinstance(p, ev.StepPlanned):
            planned[(p.request_id, p.tp, p.number)] = p.step
        elif isinstance(p, ev.StepStarted):
            started[(p.request_id, p.tp, p.number)] = e.recorded_at
        elif isinstance(p, ev.StepCompleted):
            step = planned[(p.request_id, p.tp, p.number)]
            for b in step.nr:
                bytes_in[b] += size[p.tp]
            if step.nr:
                bytes_out[step.leader] += size[p.tp] * len(step.nr)
                copies.append((e.recorded_at - started[(p.request_id, p.tp, p.number)]).total_seconds() * scale)
    brokers = {b["broker"]: b for b in doc["throttle"]["brokers"]}
    assert set(brokers) == set(bytes_in) | set(bytes_out)
    for b, row in brokers.items():
        assert (row["bytes_in"], row["bytes_out"]) == (bytes_in[b], bytes_out[b])
        assert sum(row["rate_in"]) * doc["bucket_s"] == pytest.approx(bytes_in[b])
        assert sum(row["rate_out"]) * doc["bucket_s"] == pytest.approx(bytes_out[b])
    rates = [r for r in doc["throttle"]["kafka_rate"] if r is not None]
    # Kafka's rate: req-a's throttle, then the operator's change, each + 8 % (throttle_margin_pct's default)
    assert rates[0] == 32_400_000 and rates[-1] == 21_600_000
    # the throttle the engine ran with (ThrottleRateChanged): req-a's, then the operator's
    assert doc["throttle"]["throttle_rate"][0] == 30 * MB and doc["throttle"]["throttle_rate"][-1] == 20 * MB
    assert "30 MB/s (request req-a, from " in page and "then 20 MB/s (operator, from " in page
    # copies released from the throttle (ThrottleReleased): their bytes into each receiving broker
    released_in, completed = Counter(), {(e.payload.request_id, e.payload.tp, e.payload.number) for e in story.all
                                         if isinstance(e.payload, ev.StepCompleted)}
    for e in story.all:
        p = e.payload
        if isinstance(p, ev.ThrottleReleased) and (p.request_id, p.tp, p.number) in completed:
            for b in planned[(p.request_id, p.tp, p.number)].nr:
                released_in[b] += min(p.remaining, size[p.tp])
    assert released_in and {b: row["released_in"] for b, row in brokers.items() if row["released_in"]} == released_in
    assert all(sum(row["released_rate_in"]) * doc["bucket_s"] == pytest.approx(row["released_in"])
               for row in brokers.values())
    assert all(row["peak_over_bound"] is not None for row in brokers.values())

    # 4. partition-time spent ready but held back by the limits: from each PartitionReady to the partition's next event
    kinds = ("PartitionQueued", "PartitionReady", "PartitionWaiting", "StepPlanned", "StepCompleted", "StepAborted",
             "StepFailed", "PartitionCompleted", "PartitionReverted", "PartitionCancelled")
    by_partition = defaultdict(list)
    for e in story.all:
        if type(e.payload).__name__ in kinds:
            by_partition[e.payload.tp].append(e)
    ready = defaultdict(float)
    for tp, es in by_partition.items():
        for a, b in zip(es, es[1:]):
            if isinstance(a.payload, ev.PartitionReady):
                ready[tp] += (b.recorded_at - a.recorded_at).total_seconds() * scale
    waits = {w["reason"]: w for w in doc["waits"]}
    assert waits[READY]["total_s"] == pytest.approx(sum(ready.values()))
    assert waits[READY]["partitions"] == sum(1 for v in ready.values() if v > 0)

    # 5. copies, from the cluster's start of copying to completion, at the engine's resolution
    assert sorted(doc["durations"]["values_s"]) == pytest.approx(sorted(copies))
    assert doc["durations"]["resolution_s"] == poll * scale and "the engine observes every 70 s" in page

    # 6. what was rolled back, and what was rejected
    reverted = {str(e.payload.tp) for e in story.all if isinstance(e.payload, ev.PartitionReverted)}
    assert {r["partition"] for r in doc["rolled_back"]} == reverted and len(reverted) == 2
    assert all(r["original"] and r["target"] and r["cancelled_at"] for r in doc["rolled_back"])
    assert any(r["kind"] == "rejected" and r["reason"] == "unknown request 'no-such-request'" for r in doc["rejections"])


def test_spark_kafka_connector_missing_is_one_line(story, broker, capsys):
    assert main(["analytics", "run", "--bootstrap-server", broker.bootstrap, "--prefix", story.prefix,
                 "--warehouse", str(story.warehouse / "other"), "--source", "kafka"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Kafka connector is not on the classpath" in err


def test_missing_topic_is_one_line(broker, tmp_path, capsys):
    assert main(["analytics", "run", "--bootstrap-server", broker.bootstrap, "--prefix", "no-such-prefix.",
                 "--warehouse", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-prefix.events does not exist" in err


def test_the_connector_path_decodes_like_the_python_source(spark, story):
    """--source kafka decodes Spark's Kafka rows with the same function: same rows, bad bytes kept."""
    from spark.audit import RawMessage, audit_row
    from engine.log.codec import codec_for
    from engine.log.envelope import EventEnvelope

    codec = codec_for(EventEnvelope)
    raw = [(0, i, f"k{i}".encode(), codec.encode(e)) for i, e in enumerate(story.all[:40])]
    raw.append((0, 40, None, b"not avro"))
    df = spark.createDataFrame(raw, "partition int, offset bigint, key binary, value binary")
    got = [r.asDict() for r in audit_job.decode_raw(df).orderBy("kafka_offset").collect()]
    expected = [audit_row(RawMessage(*m)) for m in raw]
    assert [r["event_id"] for r in got] == [e.get("event_id") for e in expected]
    assert [r["payload"] for r in got] == [e.get("payload") for e in expected]
    assert got[-1]["event_type"] == "undecodable" and "not Avro" in got[-1]["reason"]


def test_spark_submit_runs_the_job(spark, story):
    """``spark-submit spark/audit_job.py``: its own Spark, the same options, the same tables (started by
    the story once every event was written)."""
    stdout, stderr = story.submitted.communicate(timeout=300)
    assert story.submitted.returncode == 0, stderr[-3000:]
    assert f"audit: {len(story.all)} rows" in stdout
    warehouse = Path(story.submitted.args[story.submitted.args.index("--warehouse") + 1])
    ids = spark.read.schema(wh.AUDIT_DDL).parquet(str(warehouse / wh.AUDIT)).select("event_id").collect()
    assert sorted(r[0] for r in ids) == sorted(e.id for e in story.all)


def wait_for(condition, what: str, seconds: float = 180.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds``."""
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_repeating_trigger_picks_up_events_as_they_arrive(spark, story, broker, tmp_path):
    import dataclasses
    import threading

    prefix = "analytics-live."
    create({"bootstrap.servers": broker.bootstrap}, prefix)
    options = dataclasses.replace(story.options, warehouse=str(tmp_path / "live"), topic=Topics.named(prefix).events,
                                  trigger_seconds=1.0)
    write_in_chunks(broker, prefix, story.first, chunks=2)
    done: list = []
    stop = threading.Event()
    runner = threading.Thread(target=lambda: done.append(audit_job.run(spark, options, stop)))
    runner.start()

    def rows(table: str, ddl: str) -> int:
        path = tmp_path / "live" / table / "_spark_metadata"
        return spark.read.schema(ddl).parquet(str(path.parent)).count() if path.is_dir() else 0

    try:
        wait_for(lambda: rows(wh.AUDIT, wh.AUDIT_DDL) == len(story.first), "the first events")
        write_in_chunks(broker, prefix, story.second, chunks=2)
        wait_for(lambda: rows(wh.AUDIT, wh.AUDIT_DDL) == len(story.all), "the events written while running")
        steps = len(step_lives(story.all))
        wait_for(lambda: rows(wh.SPANS, wh.SPANS_DDL) == steps + 1, "every step and the under-replicated span")
    finally:
        stop.set()
        runner.join(120)
    assert not runner.is_alive() and done
    assert {r.name: r.rows for r in done[0]}[wh.AUDIT] == len(story.all)
    ids = [r[0] for r in spark.read.schema(wh.AUDIT_DDL).parquet(str(tmp_path / "live" / wh.AUDIT))
           .select("event_id").collect()]
    assert sorted(ids) == sorted(e.id for e in story.all)
