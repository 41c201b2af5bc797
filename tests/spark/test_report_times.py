"""The report's words about when things happened compare instants, not ISO strings: a time written without a
fraction ("12:00:00Z") sorts after one with it ("12:00:00.250000Z") as a string, and one with another UTC offset
sorts by its local clock. No Spark here: the words are a pure function of ``report.json``'s document."""

from __future__ import annotations

from spark.report import _throttle_text

MB = 1_000_000


def doc(first_event: str, changes: list[dict]) -> dict:
    return {"first_event": first_event, "bucket_s": 1.0, "throttle": {
        "throttle_changes": changes, "kafka_rates": [], "margin_pct": [8], "released_copies": 0,
        "release_allowance": [], "throttle_release_ms": [1000], "throttle_rate": [], "brokers_total": 0,
        "brokers": []}}


def test_a_change_a_fraction_of_a_second_after_a_whole_second_first_event_follows_the_default():
    # as strings "...12:00:00.250000Z" < "...12:00:00Z" ('.' < 'Z'): the change would seem to precede the run
    words = _throttle_text(doc("2024-05-01T12:00:00Z", [
        {"at": "2024-05-01T12:00:00.250000Z", "rate": 40 * MB, "reason": "request r"}]))[0]
    assert "(the engine's default) until 12:00:00 UTC, then 40 MB/s (request r, from 12:00:00 UTC)." in words


def test_a_change_at_the_first_event_is_the_throttle_from_the_start():
    # the same instant in two widths: as strings "...00.250Z" > "...00.250000Z" ('Z' > '0')
    words = _throttle_text(doc("2024-05-01T12:00:00.250000Z", [
        {"at": "2024-05-01T12:00:00.250Z", "rate": 40 * MB, "reason": "request r"}]))[0]
    assert "default" not in words and "ran with: 40 MB/s (request r, from 12:00:00 UTC)." in words


def test_times_with_another_utc_offset_compare_and_read_as_utc():
    # 10:00:00+02:00 is the first event's instant (08:00 UTC), though "10:00" > "08:00" as strings
    same = _throttle_text(doc("2024-05-01T08:00:00Z", [
        {"at": "2024-05-01T10:00:00+02:00", "rate": 40 * MB, "reason": "request r"}]))[0]
    assert "default" not in same and "ran with: 40 MB/s (request r, from 08:00:00 UTC)." in same
    # 08:30 UTC is after a first event at 10:00:00+02:00 (08:00 UTC), though "08:30" < "10:00" as strings
    later = _throttle_text(doc("2024-05-01T10:00:00+02:00", [
        {"at": "2024-05-01T08:30:00Z", "rate": 40 * MB, "reason": "request r"}]))[0]
    assert "(the engine's default) until 08:30:00 UTC, then 40 MB/s (request r, from 08:30:00 UTC)." in later


def test_a_time_spark_collects_outside_utc_is_read_as_the_instant_it_is(monkeypatch):
    """PySpark hands a TIMESTAMP to Python as a naive ``datetime`` in the process's local time zone, whatever
    the session's (``datetime.fromtimestamp``, as ``TimestampType.fromInternal`` does): on a machine in New
    York the report read it as UTC, five hours off, and cut every bucket at the wrong instants (the request's
    40 MB/s throttle lost to the default in tests/spark/test_report_released.py run with TZ=America/New_York)."""
    import time
    from datetime import datetime

    from spark.report import _iso, _ms

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        collected = datetime.fromtimestamp(1_700_000_000.25)  # what PySpark gives for that instant here
        assert collected.hour == 17  # local: 22:13:20 UTC
        assert _ms(collected) == 1_700_000_000_250
        assert _iso(collected) == "2023-11-14T22:13:20.250000Z"
    finally:
        monkeypatch.undo()
        time.tzset()
