"""The report on a move whose every copy starts released (``release_at_start``): small partitions at
40 MB/s, so no throttled-replica entry and no Kafka rate is ever set. The report must still show the
throttle the engine ran with, the bytes that went released, and judge each broker against the release
bucket's bound, not report the move as unthrottled (a peak over nothing: ``None``). Two empty partitions move
with them: their copies start released too, with nothing to copy (``remaining`` 0), and are no released copy."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.core import events as ev
from engine.core.commands import PartitionTarget, Submit
from engine.core.partition import TopicPartition
from tests.analytics_log import TimedDriver, one_at_a_time, sized_cluster
from tests.spark.reports import report_of

MB = 1_000_000
THROTTLE = 40 * MB
PARTS = [TopicPartition("small", i) for i in range(12)]
EMPTY = [TopicPartition("empty", i) for i in range(2)]
COPIES = 2 * len(PARTS)
EMPTY_COPIES = 2 * len(EMPTY)


def released_log() -> list:
    """12 x 1 MB moved to two other brokers each (24 copies, one replica per step) at 40 MB/s: each copy's
    whole log is within ``throttle_release_ms`` (1 s) of its share, so every copy starts released; and 2
    empty partitions likewise (4 copies released with 0 bytes)."""
    d = TimedDriver(sized_cluster({tp: (tp.partition % 6, (tp.partition + 1) % 6) for tp in PARTS + EMPTY}, range(6),
                                  {**{tp: 1 * MB for tp in PARTS}, **{tp: 0 for tp in EMPTY}}), seconds_per_round=0.5)
    d.feed(Submit("small", tuple(PartitionTarget(tp.topic, tp.partition, ((tp.partition + 2) % 6, (tp.partition + 3) % 6))
                                 for tp in PARTS + EMPTY), throttle_rate=THROTTLE))
    d.run(one_at_a_time)
    return d.envelopes()


@pytest.fixture(scope="module")
def released(spark, broker, tmp_path_factory):
    return report_of(spark, broker, tmp_path_factory, "released", released_log())


def test_what_producers_added_to_a_copy_released_at_its_start_went_released_too(spark, broker, tmp_path_factory):
    """A copy released at its start (``release_at_start``) is unthrottled from start to end: the bytes
    producers added while it copied (its log measured at 0.9 MB at the release, 1 MB moved) went released
    too. The report counted them throttled, moved within the step's first millisecond."""
    import dataclasses

    grown = [e._replace(payload=dataclasses.replace(e.payload, remaining=900_000))
             if isinstance(e.payload, ev.ThrottleReleased) and e.payload.remaining else e for e in released_log()]
    _log, doc, _page = report_of(spark, broker, tmp_path_factory, "grown", grown)
    brokers = [b for b in doc["throttle"]["brokers"] if b["bytes_in"]]
    assert brokers and all(b["released_in"] == b["bytes_in"] for b in brokers), brokers
    assert all(b["released_out"] == b["bytes_out"] for b in doc["throttle"]["brokers"])


def test_a_move_whose_copies_all_start_released_is_judged_against_the_release_bucket(released):
    log, doc, page = released
    kinds = Counter(type(e.payload).__name__ for e in log)
    planned = {(e.payload.tp, e.payload.number): e.payload.step for e in log if isinstance(e.payload, ev.StepPlanned)}
    releases = [e.payload for e in log if isinstance(e.payload, ev.ThrottleReleased)]
    # the premise: every copy started released, so the engine never gave Kafka a rate
    assert kinds["ThrottleReleased"] == kinds["StepPlanned"] == kinds["StepCompleted"] == COPIES + EMPTY_COPIES
    assert sorted(r.remaining for r in releases if r.tp in EMPTY) == [0] * EMPTY_COPIES
    assert not any(e.payload.throttles.rate for e in log if isinstance(e.payload, ev.ThrottlesApplied))

    t = doc["throttle"]
    # the throttle the engine ran with (the request's: ThrottleRateChanged), and no Kafka rate
    assert set(t["throttle_rate"]) == {THROTTLE} and set(t["kafka_rate"]) == {None}
    # every byte each broker received went released, as the log's ThrottleReleased say
    released_in = Counter()
    for r in releases:
        for b in planned[(r.tp, r.number)].nr:
            released_in[b] += min(r.remaining, 1 * MB)
    brokers = {b["broker"]: b for b in t["brokers"]}
    assert {b: row["released_in"] for b, row in brokers.items() if row["bytes_in"]} == dict(released_in)
    assert all(row["released_in"] == row["bytes_in"] for row in brokers.values())
    # a release of 0 bytes released nothing: not a released copy, said apart
    assert t["released_copies"] == t["released_at_start"] == COPIES
    assert t["released_nothing"] == EMPTY_COPIES
    # judged against the bucket's bound: at most 1000 ms of the throttle at once, paid back at a quarter
    # of it: T * (1 s + D / 4) / D in a bucket of D seconds, over no Kafka rate
    d = doc["bucket_s"]
    bound = THROTTLE * (1.0 + d / 4) / d
    for row in brokers.values():
        assert row["peak_over_bound"] is not None
        ratios = []
        for k, (rate, rel) in enumerate(zip(row["rate_in"], row["released_rate_in"])):
            if rel > 0:
                assert row["bound_in"][k] == pytest.approx(bound)
                ratios.append(rate / bound)
        assert row["peak_over_bound"] >= max(ratios) > 0
    # the page says what ran and why a line may be over the throttle
    assert "The throttle</b> the engine ran with: 40 MB/s (request small, from 23:58:10 UTC)." in page
    assert "<b>never set</b>, no copy ran throttled" in page
    assert (f"{COPIES} copies (24 MB received) went unthrottled (<code>ThrottleReleased</code>), {COPIES} from their "
            f"start (<code>release_at_start</code>); {EMPTY_COPIES} more were released with nothing left to copy "
            "(0 bytes) and are not counted.") in page
    assert "(1000 ms) of the throttle at once (40 MB)" in page and "25 % over the throttle" in page
