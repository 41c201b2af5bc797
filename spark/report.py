"""``kreassign analytics report``: an HTML page that answers an operator's questions, with PNG plots.

One section, one figure, per question:

1. Did each request reach its target, and how long did it take against the lower bound?
2. Is the throttle held per broker? Copy rates in and out of each broker over time, against
   the throttle the engine ran with and Kafka's rate; the bytes released from the throttle
   (``ThrottleReleased``) and the release bucket that bounds them.
3. How many moves ran at once?
4. How long did partitions wait, and why? Partition-time per reason: waiting for a slot under
   the limits, waiting for a broker, a refused step, ...
5. How long did a copy take, from the cluster's start of copying (``StepStarted``) to its
   completion as observed (``StepCompleted``)? The resolution is the engine's poll interval.
6. What was rolled back (KIP-236), and what did the engine reject?

Time. A simulated cluster runs ``--time-scale`` times faster than the wall clock (the demo
passes its ``--speed``): every duration and rate on the page is then in cluster time
(simulated seconds), and the page says so at the top; real clusters have scale 1. Buckets
over time are chosen from the run's length (about 60 per run, at a round size), never a
fixed minute. ``--lower-bound`` takes cluster-time seconds (``kreassign simulate`` prints
one; the demo computes its request's).

Everything is read through the warehouse's views with Spark SQL (so it scales with the
warehouse); only per-bucket and per-reason aggregates reach the driver. The data behind each
figure is written beside the page as ``report.json``.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path

from engine.core.limits import DEFAULT_LIMITS
from engine.core.state import RELEASE_REFILL
from engine.core.throttles import DEFAULT_THROTTLE_RATE
from spark import warehouse as wh

ALL = None  # key of a lower bound that applies to every request
BUCKETS = 60  # about this many buckets over a run
ROUND_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MAX_BROKERS = 8  # the busiest brokers get a panel each in the throttle figure
WAIT_REASONS = 10
ROLLED_BACK_ROWS = 200

READY = "ready, waiting for a slot under the limits (partitions, leaders, per-broker moves)"
BETWEEN = "between steps: waiting for the engine's next decision"
QUEUED = "queued: waiting to be planned"


def bucket_seconds(span_seconds: float, buckets: int = BUCKETS) -> float:
    """The smallest round bucket size giving at most ``buckets`` buckets over ``span_seconds``."""
    want = span_seconds / buckets
    for b in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, *ROUND_SECONDS):
        if b >= want:
            return float(b)
    return float(ROUND_SECONDS[-1] * math.ceil(want / ROUND_SECONDS[-1]))


def time_unit(span_seconds: float) -> tuple[str, float]:
    """(name, seconds) of the unit an axis spanning ``span_seconds`` reads best in."""
    if span_seconds <= 300:
        return "s", 1.0
    if span_seconds <= 300 * 60:
        return "min", 60.0
    return "h", 3600.0


def wait_label(event_type: str, reason: str | None) -> str | None:
    """What a partition waits for after this event of its own (``None``: it is not waiting)."""
    if event_type == "PartitionReady":
        return READY
    if event_type == "PartitionWaiting":
        return reason
    if event_type == "StepFailed":
        return f"the cluster refused a step: {reason}"
    if event_type in ("StepCompleted", "StepAborted"):
        return BETWEEN
    if event_type == "PartitionQueued":
        return QUEUED
    return None


PARTITION_EVENTS = ("PartitionQueued", "PartitionReady", "PartitionWaiting", "StepPlanned", "StepCompleted",
                    "StepAborted", "StepFailed", "PartitionCompleted", "PartitionReverted", "PartitionCancelled")
"""The events that change where a partition stands (observations and the like do not)."""


def _ms(ts: datetime) -> int:
    """``ts``, a timestamp Spark collected, as milliseconds since the epoch. PySpark hands a TIMESTAMP to
    Python as a naive ``datetime`` in the Python process's local time zone (whatever the session's time
    zone), so a naive one is read as local time, as ``datetime.timestamp`` does: read as UTC, every time of
    the report was off by the machine's offset outside UTC (its buckets cut at the wrong instants, and the
    request's throttle lost to the default one)."""
    return int(ts.timestamp() * 1000)


def _iso(ts: datetime) -> str:
    """``ts`` (naive: the Python process's local time, as PySpark collects a TIMESTAMP: ``_ms``) in ISO 8601,
    in UTC, always with microseconds."""
    ts = ts.astimezone(timezone.utc)
    return ts.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _instant(iso: str) -> datetime:
    """An ISO 8601 time of the document as an instant: times are compared as instants, never as strings
    (``12:00:00Z`` sorts after ``12:00:00.250000Z`` as a string, and ``+02:00`` by its local clock)."""
    t = datetime.fromisoformat(iso)
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _utc_clock(iso: str | None, ms: bool = False) -> str:
    """The UTC time of day of an ISO 8601 time (``HH:MM:SS``, with ``.mmm`` if ``ms``); empty for none."""
    return "" if iso is None else _instant(iso).isoformat(timespec="milliseconds" if ms else "seconds")[11:23 if ms else 19]


# --- the data ------------------------------------------------------------------------------------------


def collect(spark, lower_bounds: dict | None = None, time_scale: float = 1.0,
            poll_interval: float | None = None) -> dict:
    """Every figure's and table's data, as JSON-ready values (durations and rates in cluster time)."""
    lower_bounds = lower_bounds or {}
    sql = lambda q: [r.asDict(recursive=True) for r in spark.sql(q).collect()]  # noqa: E731
    span = sql("SELECT min(recorded_at) AS first, max(recorded_at) AS last FROM audit "
               "WHERE event_type <> 'undecodable'")[0]
    doc: dict = {"time_scale": time_scale, "poll_interval_s": poll_interval}
    if span["first"] is None:
        return {**doc, "empty": True}
    t0 = _ms(span["first"])
    wall = max((_ms(span["last"]) - t0) / 1000, 0.001)
    bucket = bucket_seconds(wall * time_scale)  # cluster seconds
    bucket_wall_ms = bucket / time_scale * 1000
    n_buckets = int(wall * 1000 // bucket_wall_ms) + 1
    doc.update(first_event=_iso(span["first"]), last_event=_iso(span["last"]),
               span_wall_s=wall, span_cluster_s=wall * time_scale, bucket_s=bucket, buckets=n_buckets)
    doc["requests"] = _requests(sql, lower_bounds, time_scale)
    doc["throttle"] = _throttle(sql, t0, bucket_wall_ms, n_buckets, bucket, time_scale)
    doc["in_flight"] = _in_flight(sql, t0, bucket_wall_ms, n_buckets)
    doc["waits"] = _waits(sql, time_scale)
    doc["durations"] = _durations(sql, time_scale, poll_interval)
    doc["rolled_back"] = _rolled_back(sql)
    doc["rejections"] = sql("SELECT kind, reason, sum(n) AS n FROM cancellations_per_minute "
                            "GROUP BY kind, reason ORDER BY n DESC, kind, reason LIMIT 50")
    return doc


def _requests(sql, lower_bounds, scale) -> list[dict]:
    rows = sql("""
        SELECT r.request_id, r.partitions, r.steps_completed, r.bytes_moved, r.accepted_at, r.completed_at,
               r.makespan_seconds,
               CAST(get_json_object(c.payload, '$.completed') AS BIGINT) AS completed,
               CAST(get_json_object(c.payload, '$.reverted') AS BIGINT) AS rolled_back,
               CAST(get_json_object(c.payload, '$.cancelled') AS BIGINT) AS cancelled
        FROM requests r LEFT JOIN (SELECT request_id, max(payload) AS payload FROM audit
                                   WHERE event_type = 'RequestCompleted' GROUP BY request_id) c USING (request_id)
        WHERE r.accepted_at IS NOT NULL ORDER BY r.accepted_at, r.request_id""")
    out = []
    for r in rows:
        bound = lower_bounds.get(r["request_id"], lower_bounds.get(ALL))
        makespan = None if r["makespan_seconds"] is None else r["makespan_seconds"] * scale
        whole = r["completed_at"] is not None and not (r["rolled_back"] or r["cancelled"])
        note = ("running" if r["completed_at"] is None
                else "no bound given" if bound is None
                else "cancelled in part: its bound does not apply" if not whole else "")
        out.append({
            "request": r["request_id"], "partitions": r["partitions"], "completed": r["completed"],
            "rolled_back": r["rolled_back"], "cancelled": r["cancelled"], "steps_completed": r["steps_completed"],
            "bytes_moved": r["bytes_moved"],
            "accepted_at": _iso(r["accepted_at"]), "completed_at":
                _iso(r["completed_at"]) if r["completed_at"] else None,
            "makespan_s": makespan, "lower_bound_s": bound,
            "makespan_over_bound": (makespan / bound) if (whole and bound and makespan is not None) else None,
            "note": note,
        })
    return out


def _spread(source: str, t0: int, bucket_ms: float, weight: str) -> str:
    """SQL: each interval [s, e) (epoch ms) of ``source`` cut into the buckets it overlaps, with
    ``weight`` shared in proportion to the overlap: columns k (bucket), the source's keys, share."""
    b = f"{float(bucket_ms)!r}D"  # a double literal (a plain one would be a decimal)
    return f"""
        SELECT *, {weight} * (least(e, {t0} + (k + 1) * {b}) - greatest(s, {t0} + k * {b})) / (e - s) AS share
        FROM (SELECT *, explode(sequence(CAST(floor((s - {t0}) / {b}) AS BIGINT),
                                         CAST(floor((e - 1 - {t0}) / {b}) AS BIGINT))) AS k
              FROM ({source}))"""


def _throttle(sql, t0, bucket_ms, n, bucket, scale) -> dict:
    """Copy rates per broker and direction per bucket (cluster bytes/s), the part of them released from the
    throttle, the throttle the engine ran with, Kafka's rate, and the bound each bucket is judged against.

    The throttle (``throttle_rate``) is the operator's, as the engine's state has it: the default until a
    ``ThrottleRateChanged``; none once turned off. Kafka's rate (``kafka_rate``) is what ``ThrottlesApplied``
    set (the throttle plus ``throttle_margin_pct``), none until then: a run whose copies all started released
    never sets it. Each bucket has the highest of each in force at any moment of it (the one in force at its
    start and every one set within it; the throttle none if it was off for a moment): a copy's bytes are
    spread evenly over its life, so a copy that ran at 50 MB/s and then at 1 MB/s puts more than 1 MB/s into
    the bucket where the rate went to 1 MB/s, and judging that bucket by the last rate set in it would call
    Kafka's throttle broken. A copy released from the throttle (``ThrottleReleased``: at its start, ``release_at_start``,
    or near its end) moves its ``remaining`` bytes unthrottled from its release to its completion (one
    released at its start moves every byte so, what producers added while it copied included), and they
    are charged to its receiving brokers' release bucket (at most ``throttle_release_ms`` of the throttle at
    once, paid back at a quarter of it): in a bucket of D seconds, released bytes into a broker are at most
    T * (U + D / 4) / D per second. A broker's bound in a bucket is Kafka's rate plus that allowance where
    released bytes flowed into it (out of a leader: once per broker it sent released bytes to)."""
    released = """
        SELECT request_id, topic, partition, step_number, min(unix_millis(recorded_at)) AS r,
               min_by(CAST(get_json_object(payload, '$.remaining') AS BIGINT), kafka_offset) AS remaining
        FROM audit WHERE event_type = 'ThrottleReleased' GROUP BY request_id, topic, partition, step_number"""
    steps = f"""
        SELECT st.*, x.r AS released_ms, coalesce(x.remaining, 0) AS remaining
        FROM (SELECT *, unix_millis(coalesce(started, planned)) AS s0,
                     greatest(unix_millis(ended), unix_millis(coalesce(started, planned)) + 1) AS e0
              FROM steps WHERE outcome = 'completed') st
        LEFT JOIN ({released}) x USING (request_id, topic, partition, step_number)"""
    transfers = f"""
        SELECT s0, e0, least(greatest(coalesce(released_ms, e0), s0), e0) AS r, t.broker AS broker,
               t.direction AS direction, t.bytes AS bytes,
               CASE WHEN released_ms <= s0 AND remaining > 0 THEN t.bytes  -- released from its start: all of it
                    ELSE least(t.bytes, remaining * CASE t.direction WHEN 'in' THEN 1 ELSE size(new_replicas) END)
               END AS rel,
               CASE t.direction WHEN 'in' THEN array(t.broker) ELSE new_replicas END AS receivers
        FROM ({steps}) LATERAL VIEW explode(transfers) x AS t WHERE t.bytes IS NOT NULL"""
    parts = f"""
        SELECT s0 AS s, greatest(r, s0 + 1) AS e, broker, direction, bytes - rel AS bytes, false AS released,
               receivers FROM ({transfers}) WHERE bytes > rel
        UNION ALL
        SELECT least(r, e0 - 1) AS s, e0 AS e, broker, direction, rel AS bytes, true AS released, receivers
        FROM ({transfers}) WHERE rel > 0"""
    rows = sql(f"SELECT k, broker, direction, released, sum(share) AS bytes, "
               f"size(array_distinct(flatten(collect_list(receivers)))) AS receivers "
               f"FROM ({_spread(parts, t0, bucket_ms, 'bytes')}) GROUP BY k, broker, direction, released")
    totals = sql(f"SELECT broker, direction, sum(bytes) AS bytes, sum(rel) AS released FROM ({transfers}) "
                 "GROUP BY broker, direction")
    # a release with nothing left to copy (remaining 0: an empty partition started released, or a copy already
    # caught up when measured) released no byte: it is no released copy, and is counted apart
    copies = sql(f"SELECT count_if(remaining > 0) AS n, count_if(remaining > 0 AND released_ms <= s0) AS at_start, "
                 f"count_if(remaining = 0) AS nothing FROM ({steps}) "
                 "WHERE released_ms IS NOT NULL AND size(new_replicas) > 0")[0]
    zeros = lambda: [0.0] * n  # noqa: E731
    series: dict[int, dict[str, list[float]]] = {}
    for r in rows:
        if 0 <= r["k"] < n:
            per = series.setdefault(r["broker"], {key: zeros() for key in (
                "in", "out", "released_in", "released_out", "receivers_in", "receivers_out")})
            per[r["direction"]][r["k"]] += r["bytes"] / bucket  # bytes per cluster second
            if r["released"]:
                per[f"released_{r['direction']}"][r["k"]] += r["bytes"] / bucket
                per[f"receivers_{r['direction']}"][r["k"]] = r["receivers"]
    changes = sql("""
        SELECT unix_millis(recorded_at) AS t, recorded_at, event_type, rate, reason,
               CAST(get_json_object(payload, '$.limits.throttle_release_ms') AS BIGINT) AS release_ms,
               CAST(get_json_object(payload, '$.limits.throttle_margin_pct') AS BIGINT) AS margin_pct
        FROM audit WHERE event_type IN ('ThrottlesApplied', 'ThrottleRateChanged', 'LimitsChanged')
        ORDER BY kafka_offset""")
    kafka, throttle, release_ms = [], [], []
    now = {"kafka": None, "throttle": DEFAULT_THROTTLE_RATE, "release_ms": DEFAULT_LIMITS.throttle_release_ms,
           "margin_pct": DEFAULT_LIMITS.throttle_margin_pct}
    margins, i = set(), 0
    def change(c: dict) -> None:
        if c["event_type"] == "ThrottlesApplied" and c["rate"] is not None:
            now["kafka"] = c["rate"]
        elif c["event_type"] == "ThrottleRateChanged":
            now["throttle"] = c["rate"]
            if c["rate"] is None:
                now["kafka"] = None  # unthrottled: the rates are removed
        elif c["event_type"] == "LimitsChanged" and c["release_ms"] is not None:
            now["release_ms"], now["margin_pct"] = c["release_ms"], c["margin_pct"]
        margins.add(now["margin_pct"])

    for k in range(n):
        # the highest of each in force at any moment of the bucket: what was at its start (set at its start
        # included) and every value set within it (a bucket's bytes are an average over copies that may have
        # run at the higher rate)
        start, end = t0 + k * bucket_ms, t0 + (k + 1) * bucket_ms
        while i < len(changes) and changes[i]["t"] <= start:
            change(changes[i])
            i += 1
        high = dict(now)
        while i < len(changes) and changes[i]["t"] < end:
            change(changes[i])
            i += 1
            high = {"kafka": max((r for r in (high["kafka"], now["kafka"]) if r is not None), default=None),
                    # unthrottled for a moment (None) is the highest throttle of all: the bucket has no bound
                    "throttle": None if None in (high["throttle"], now["throttle"])
                    else max(high["throttle"], now["throttle"]),
                    "release_ms": max(high["release_ms"], now["release_ms"]), "margin_pct": now["margin_pct"]}
        kafka.append(high["kafka"])
        throttle.append(high["throttle"])
        release_ms.append(high["release_ms"])
        margins.add(now["margin_pct"])
    allowance = [None if t is None else t * (u / 1000 + RELEASE_REFILL * bucket) / bucket for t, u in zip(throttle, release_ms)]
    moved = {}
    for r in totals:
        moved.setdefault(r["broker"], {"in": 0, "out": 0, "released_in": 0, "released_out": 0})
        moved[r["broker"]][r["direction"]] = r["bytes"] or 0
        moved[r["broker"]][f"released_{r['direction']}"] = r["released"] or 0
    busiest = sorted(moved, key=lambda b: (-(moved[b]["in"] + moved[b]["out"]), b))[:MAX_BROKERS]
    brokers = []
    for b in sorted(busiest):
        per = series.get(b) or {key: zeros() for key in (
            "in", "out", "released_in", "released_out", "receivers_in", "receivers_out")}
        bound = {d: [None if a is None else (q or 0) + a * per[f"receivers_{d}"][k]
                     for k, (q, a) in enumerate(zip(kafka, allowance))] for d in ("in", "out")}
        over = [per[d][k] / bound[d][k] for d in ("in", "out") for k in range(n)
                if per[d][k] > 0 and bound[d][k]]
        brokers.append({
            "broker": b, "bytes_in": moved[b]["in"], "bytes_out": moved[b]["out"],
            "released_in": moved[b]["released_in"], "released_out": moved[b]["released_out"],
            "rate_in": per["in"], "rate_out": per["out"],
            "released_rate_in": per["released_in"], "released_rate_out": per["released_out"],
            "bound_in": bound["in"], "bound_out": bound["out"],
            "peak_in": max(per["in"]), "peak_out": max(per["out"]),
            "peak_over_bound": max(over) if over else None})
    rate_changes = [{"at": _iso(c["recorded_at"]), "rate": c["rate"], "reason": c["reason"]}
                    for c in changes if c["event_type"] == "ThrottleRateChanged"]
    kafka_rates: list[int] = []  # every rate Kafka was given, in order (a bucket's value, its highest, may hide a lower one)
    for c in changes:
        if c["event_type"] == "ThrottlesApplied" and c["rate"] is not None and kafka_rates[-1:] != [c["rate"]]:
            kafka_rates.append(c["rate"])
    return {"brokers": brokers, "brokers_total": len(moved), "throttle_rate": throttle, "kafka_rate": kafka,
            "throttle_release_ms": release_ms, "release_allowance": allowance,
            "throttle_changes": rate_changes, "kafka_rates": kafka_rates,
            "margin_pct": sorted(m for m in margins if m is not None),
            "released_copies": copies["n"], "released_at_start": copies["at_start"],
            "released_nothing": copies["nothing"],
            "released_bytes_in": sum(m["released_in"] for m in moved.values())}


def _in_flight(sql, t0, bucket_ms, n) -> dict:
    """Average steps in flight per bucket (planned to ended), per request."""
    spans = """
        SELECT request_id, unix_millis(planned) AS s, greatest(unix_millis(ended), unix_millis(planned) + 1) AS e
        FROM steps"""
    rows = sql(f"SELECT k, request_id, sum(share) AS ms FROM ({_spread(spans, t0, bucket_ms, '(e - s)')}) "
               "GROUP BY k, request_id")
    by_request: dict[str, list[float]] = {}
    for r in rows:
        if 0 <= r["k"] < n:
            by_request.setdefault(r["request_id"], [0.0] * n)[r["k"]] += r["ms"] / bucket_ms
    return {"by_request": by_request}


def _waits(sql, scale) -> list[dict]:
    """Partition-time per reason of waiting (cluster seconds): each partition's time from one of its
    events to its next, named by the first (``wait_label``)."""
    events = ", ".join(f"'{e}'" for e in PARTITION_EVENTS)
    label = "CASE event_type " + " ".join(
        f"WHEN '{e}' THEN '{wait_label(e, None).replace(chr(39), chr(39) * 2)}'"
        for e in ("PartitionReady", "StepCompleted", "StepAborted", "PartitionQueued")
    ) + (" WHEN 'PartitionWaiting' THEN reason"
         " WHEN 'StepFailed' THEN concat('the cluster refused a step: ', reason) END")
    rows = sql(f"""
        WITH e AS (
            SELECT topic, partition, kafka_offset, recorded_at, event_type, reason,
                   lead(recorded_at) OVER (PARTITION BY topic, partition ORDER BY kafka_offset) AS next_at
            FROM audit WHERE topic IS NOT NULL AND partition IS NOT NULL AND event_type IN ({events})),
        w AS (
            SELECT {label} AS why, topic, partition,
                   CAST(sum(unix_millis(next_at) - unix_millis(recorded_at)) AS DOUBLE) / 1000 AS seconds
            FROM e WHERE next_at IS NOT NULL GROUP BY 1, topic, partition)
        SELECT why, count(*) AS partitions, sum(seconds) AS total, percentile(seconds, 0.5) AS p50,
               max(seconds) AS max
        FROM w WHERE why IS NOT NULL AND seconds > 0 GROUP BY why ORDER BY total DESC, why""")
    return [{"reason": r["why"], "partitions": r["partitions"], "total_s": r["total"] * scale,
             "p50_s": r["p50"] * scale, "max_s": r["max"] * scale} for r in rows]


def _durations(sql, scale, poll) -> dict:
    rows = sql("SELECT request_id, copy_seconds FROM steps WHERE outcome = 'completed' "
               "AND copy_seconds IS NOT NULL AND size(new_replicas) > 0")
    values = [r["copy_seconds"] * scale for r in rows]
    per: dict[str, list[float]] = {}
    for r in rows:
        per.setdefault(r["request_id"], []).append(r["copy_seconds"] * scale)
    return {"values_s": values, "resolution_s": poll * scale if poll else None,
            "by_request": [{"request": rid, "steps": len(v), "p50_s": _pct(v, 0.5), "p95_s": _pct(v, 0.95),
                            "max_s": max(v)} for rid, v in sorted(per.items())]}


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    k = q * (len(v) - 1)
    lo = int(k)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (k - lo)


def _rolled_back(sql) -> list[dict]:
    rows = sql(f"""
        SELECT r.topic, r.partition, r.request_id, r.recorded_at AS reverted_at, q.original, q.target,
               c.cancelled_at
        FROM (SELECT * FROM audit WHERE event_type = 'PartitionReverted') r
        LEFT JOIN (SELECT topic, partition, request_id, max(get_json_object(payload, '$.original')) AS original,
                          max(get_json_object(payload, '$.target')) AS target
                   FROM audit WHERE event_type = 'PartitionQueued' GROUP BY topic, partition, request_id) q
          USING (topic, partition, request_id)
        LEFT JOIN (SELECT topic, partition, request_id, min(recorded_at) AS cancelled_at
                   FROM audit WHERE event_type = 'PartitionCancelled' GROUP BY topic, partition, request_id) c
          USING (topic, partition, request_id)
        ORDER BY reverted_at, topic, partition LIMIT {ROLLED_BACK_ROWS}""")
    return [{"partition": f"{r['topic']}-{r['partition']}", "request": r["request_id"],
             "original": r["original"], "target": r["target"],
             "cancelled_at": _iso(r["cancelled_at"]) if r["cancelled_at"] else None,
             "reverted_at": _iso(r["reverted_at"])} for r in rows]


# --- the figures ------------------------------------------------------------------------------------------


def _figure(path: Path, draw, rows: int = 1, cols: int = 1, height: float = 3.6) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(10, height * rows), dpi=100, squeeze=False)
    if not draw(fig, [ax for row in axes for ax in row]):
        fig.clear()
        fig.text(0.5, 0.5, "no data", ha="center", va="center")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _clock(doc: dict) -> str:
    scale = doc["time_scale"]
    return "" if scale == 1 else f", cluster time ({scale:g}x the wall clock)"


def _axis(doc: dict) -> tuple[list[float], str]:
    unit, per = time_unit(doc["span_cluster_s"])
    xs = [k * doc["bucket_s"] / per for k in range(doc["buckets"] + 1)]
    return xs, f"{unit} since the first event{_clock(doc)}; buckets of {doc['bucket_s']:g} s"


def draw_makespan(doc: dict, path: Path) -> None:
    reqs = [r for r in doc["requests"] if r["makespan_s"] is not None]

    def draw(fig, axes):
        ax = axes[0]
        if not reqs:
            return False
        unit, per = time_unit(max(max(r["makespan_s"], r["lower_bound_s"] or 0) for r in reqs))
        names = [r["request"][:13] for r in reqs][::-1]
        ax.barh(names, [r["makespan_s"] / per for r in reqs][::-1], color="C0", label="makespan")
        bounds = [(i, r["lower_bound_s"] / per) for i, r in enumerate(reqs[::-1]) if r["lower_bound_s"]]
        if bounds:
            ax.scatter([b for _i, b in bounds], [i for i, _b in bounds], marker="|", s=600, color="C3", zorder=3,
                       label="lower bound")
        for i, r in enumerate(reqs[::-1]):
            if r["makespan_over_bound"]:
                ax.annotate(f"{r['makespan_over_bound']:.2f}x the bound", (r["makespan_s"] / per, i),
                            xytext=(4, 0), textcoords="offset points", va="center", fontsize="small")
            elif r["note"]:
                ax.annotate(r["note"], (r["makespan_s"] / per, i), xytext=(4, 0), textcoords="offset points",
                            va="center", fontsize="x-small", color="0.4")
        ax.set_xlim(0, max(max(r["makespan_s"], r["lower_bound_s"] or 0) for r in reqs) / per * 1.6)
        ax.set_xlabel(f"{unit}{_clock(doc)}")
        ax.set_title("Makespan per request (accepted to completed) against its lower bound")
        ax.legend(fontsize="small", loc="upper right")
        return True

    _figure(path, draw, height=max(1.6, 0.6 * len(reqs) + 1.2))


def draw_throttle(doc: dict, path: Path) -> None:
    brokers = doc["throttle"]["brokers"]
    cols = 2
    rows = max(1, -(-len(brokers) // cols))
    xs, label = _axis(doc)

    def draw(fig, axes):
        if not brokers:
            return False
        t = doc["throttle"]
        mb = lambda values: [float("nan") if v is None else v / 1e6 for v in values]  # noqa: E731
        kafka, throttle = mb(t["kafka_rate"]), mb(t["throttle_rate"])
        lines = [x for x in kafka + throttle if x == x]
        top = max([max(b["peak_in"], b["peak_out"]) / 1e6 for b in brokers] + lines + [1])
        drawn = top
        for ax, b in zip(axes, brokers):
            if any(b["released_rate_in"]):
                ax.stairs(mb(b["released_rate_in"]), xs, fill=True, color="C0", alpha=0.25, linewidth=0,
                          label="in: released from the throttle (release bucket)")
            ax.stairs(mb(b["rate_in"]), xs, color="C0", baseline=None, label="in (follower: copies to it)")
            ax.stairs(mb(b["rate_out"]), xs, color="C1", linestyle="--", baseline=None,
                      label="out (leader: copies from it)")
            ax.stairs(throttle, xs, color="0.45", linewidth=0.9, baseline=None, label="the throttle")
            if any(x == x for x in kafka):
                ax.stairs(kafka, xs, color="C3", linestyle=":", baseline=None, label="Kafka's rate (throttle + margin)")
            # the bound where released bytes flowed in, drawn when it is on the scale of the rest (in a short
            # bucket it is far above: throttle_release_ms of the rate in a fraction of a second; table below)
            bound = [x if r > 0 else float("nan") for x, r in zip(mb(b["bound_in"]), b["released_rate_in"])]
            highest = max((x for x in bound if x == x), default=None)
            if highest is not None and highest <= 2 * top:
                drawn = max(drawn, highest)
                ax.stairs(bound, xs, color="C3", linestyle="-.", linewidth=0.9, baseline=None,
                          label="bound in with released bytes (Kafka's rate + bucket)")
        for ax in axes[:len(brokers)]:
            ax.set_ylim(0, drawn * 1.15)
        for ax, b in zip(axes, brokers):
            ax.set_title(f"broker {b['broker']}", fontsize="small")
            ax.set_ylabel("MB/s")
        for ax in axes[len(brokers):]:
            ax.axis("off")
        seen = {}
        for ax in axes[:len(brokers)]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        axes[0].legend(seen.values(), seen.keys(), fontsize="x-small", loc="upper right")
        fig.suptitle("Copy rate per broker against the throttle (each copy's bytes spread over its copy time)",
                     fontsize="medium")
        fig.supxlabel(label, fontsize="small")
        return True

    _figure(path, draw, rows, cols, height=2.2)


def draw_in_flight(doc: dict, path: Path) -> None:
    by_request = doc["in_flight"]["by_request"]
    xs, label = _axis(doc)

    def draw(fig, axes):
        ax = axes[0]
        if not by_request:
            return False
        bottom = [0.0] * doc["buckets"]
        for i, (rid, values) in enumerate(sorted(by_request.items())):
            top = [a + b for a, b in zip(bottom, values)]
            ax.fill_between(xs[:-1], bottom, top, step="post", color=f"C{i}", alpha=0.7, label=rid[:13])
            bottom = top
        ax.set_ylabel("steps in flight (average)")
        ax.set_xlabel(label)
        ax.set_title("Moves running at once, per request")
        ax.legend(fontsize="x-small", title="request", title_fontsize="x-small")
        return True

    _figure(path, draw)


def draw_waits(doc: dict, path: Path) -> None:
    """Partition-time per reason on a log scale: the reasons differ by orders of magnitude (hours ready
    under the limits, seconds waiting for an election), and a linear axis hides all but the largest.
    Every bar says its value; labels are wrapped, never cut (the table below gives each in full)."""
    waits = doc["waits"][:WAIT_REASONS]
    rest = doc["waits"][WAIT_REASONS:]
    if rest:
        waits = waits + [{"reason": f"{len(rest)} other reasons (table below)", "total_s": sum(w["total_s"] for w in rest),
                          "partitions": sum(w["partitions"] for w in rest)}]

    def draw(fig, axes):
        ax = axes[0]
        if not waits:
            return False
        unit, per = time_unit(max(w["total_s"] for w in waits))
        values = [w["total_s"] / per for w in waits][::-1]
        floor = 10 ** math.floor(math.log10(min(values)) - 0.5)  # every bar starts below the smallest value
        rows = range(len(values))
        ax.barh(rows, [v - floor for v in values], left=floor, color="C1")
        ax.set_yticks(rows, [_wrap(w["reason"]) for w in waits][::-1])
        ax.set_xscale("log")
        ax.set_xlim(floor, max(values) * 25)  # room for each bar's words
        for i, (v, w) in enumerate(zip(values, waits[::-1])):
            ax.annotate(f"{_dur(w['total_s'])}, {w['partitions']} partition{'s' if w['partitions'] != 1 else ''}", (v, i),
                        xytext=(4, 0), textcoords="offset points", va="center", fontsize="x-small")
        ax.set_xlabel(f"partition-{unit} (summed over partitions; log scale){_clock(doc)}")
        ax.set_title("Why partitions waited: time spent per reason")
        ax.tick_params(axis="y", labelsize="x-small")
        return True

    lines = sum(_wrap(w["reason"]).count("\n") + 1 for w in waits)
    _figure(path, draw, height=max(1.8, 0.22 * lines + 0.25 * len(waits) + 1.4))


def _wrap(text: str, width: int = 48) -> str:
    """A label on as many lines as it needs, none longer than ``width`` characters."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def draw_durations(doc: dict, path: Path) -> None:
    d = doc["durations"]
    values = d["values_s"]

    def draw(fig, axes):
        ax = axes[0]
        if not values:
            return False
        unit, per = time_unit(max(values))
        width = max(d["resolution_s"] or 0, bucket_seconds(max(values) - min(values), 30))
        lo = math.floor(min(values) / width) * width
        edges = [(lo + i * width) / per for i in range(int((max(values) - lo) // width) + 2)]
        ax.hist([v / per for v in values], bins=edges, color="C2")
        ax.set_xlabel(f"{unit} from the cluster's start of copying to completion{_clock(doc)}")
        ax.set_ylabel("copies")
        res = d["resolution_s"]
        ax.set_title("How long copies took" + (f" (observed every {res:g} s: bins are at least that wide)"
                                               if res else ""))
        return True

    _figure(path, draw)


def draw_outcomes(doc: dict, path: Path) -> None:
    reqs = [r for r in doc["requests"] if r["completed_at"]]

    def draw(fig, axes):
        ax = axes[0]
        if not reqs:
            return False
        names = [r["request"][:13] for r in reqs][::-1]
        left = [0] * len(reqs)
        for key, word, colour in (("completed", "completed", "#1b7f3b"), ("rolled_back", "rolled back", "#d08a00"),
                                  ("cancelled", "cancelled", "#8a8f98")):
            values = [r[key] or 0 for r in reqs][::-1]
            ax.barh(names, values, left=left, color=colour, label=word)
            left = [a + b for a, b in zip(left, values)]
        ax.set_xlabel("partitions")
        ax.set_title("How each request ended, per partition")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return True

    _figure(path, draw, height=max(1.6, 0.5 * len(reqs) + 1.2))


# --- the page -----------------------------------------------------------------------------------------------

FIGURES = {
    "makespan.png": draw_makespan, "throttle_per_broker.png": draw_throttle, "steps_in_flight.png": draw_in_flight,
    "waits.png": draw_waits, "copy_durations.png": draw_durations, "outcomes.png": draw_outcomes,
}


def write(spark, warehouse: str, out: Path, lower_bounds: dict[str | None, float] | None = None,
          time_scale: float = 1.0, poll_interval: float | None = None) -> Path:
    """Write ``out/index.html``, its PNGs and ``report.json``; the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    wh.register(spark, warehouse)
    doc = collect(spark, lower_bounds, time_scale, poll_interval)
    (out / "report.json").write_text(json.dumps(doc, indent=1, default=str))
    page = out / "index.html"
    if doc.get("empty"):
        page.write_text(_html_page(warehouse, "<p>The warehouse holds no events yet.</p>"))
        return page
    for name, draw in FIGURES.items():
        draw(doc, out / name)
    page.write_text(_html_page(warehouse, _body(doc)))
    return page


def _html_page(warehouse: str, body: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kreassign analytics report</title>
<style>body{{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1060px;color:#1d2433;padding:0 1em}}
table{{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}}td,th{{border:1px solid #d5d9e0;padding:3px 7px;
text-align:right;font-variant-numeric:tabular-nums}}td:first-child{{white-space:nowrap}}th{{background:#f0f2f6}}td.l,th.l{{text-align:left}}img{{max-width:100%}}
.clock{{background:#fff6d6;border:1px solid #e8d48a;border-radius:6px;padding:.5em .9em}}.muted{{color:#677}}
h2{{margin-top:1.8em;font-size:19px}}</style>
</head><body>
<h1>kreassign analytics report</h1>
<p class="muted">Warehouse <code>{html.escape(warehouse)}</code>. Written from the event log by
<code>kreassign analytics report</code>; the data behind every figure is in <code>report.json</code>.</p>
{body}
</body></html>
"""


def _body(doc: dict) -> str:
    scale = doc["time_scale"]
    unit_note = "cluster time" if scale != 1 else "seconds"
    clock = (f'<p class="clock"><b>Simulated cluster at {scale:g}x the wall clock.</b> Every duration and rate below '
             f"is in cluster time (simulated seconds): {doc['span_wall_s']:.0f} s of wall-clock time were "
             f"{_dur(doc['span_cluster_s'])} on the cluster.</p>" if scale != 1 else
             f'<p class="clock">Cluster time is the wall clock (a real cluster). The run spans '
             f"{_dur(doc['span_cluster_s'])}.</p>")
    first, last = (_instant(doc[k]).strftime("%Y-%m-%d %H:%M:%S") for k in ("first_event", "last_event"))
    parts = [clock, f"<p class='muted'>Events from {first} to {last} UTC. Buckets over time: "
                    f"{doc['bucket_s']:g} s of {unit_note}, chosen from the run's length.</p>"]
    reqs = doc["requests"]
    parts.append("<h2>1. Did each request reach its target, and how long did it take against the bound?</h2>")
    parts.append(_table(
        ["request", "partitions", "completed", "rolled back", "cancelled", "bytes moved", "accepted (UTC)",
         "makespan", "lower bound", "makespan / bound", "note"],
        [(r["request"], r["partitions"], r["completed"], r["rolled_back"], r["cancelled"], _size(r["bytes_moved"]),
          _utc_clock(r["accepted_at"]), _dur(r["makespan_s"]), _dur(r["lower_bound_s"]),
          None if r["makespan_over_bound"] is None else f"{r['makespan_over_bound']:.2f}", r["note"])
         for r in reqs], left=(0, 10)))
    if scale != 1:
        poll = doc.get("poll_interval_s")
        parts.append(
            f"<p>The lower bound assumes decisions in no time. At {scale:g}x every wall-clock second the engine "
            f"spends (writing a decision to its log, asking the cluster) is {scale:g} s of cluster time"
            + (f", and it looks at the cluster every {poll:g} s of wall clock, {poll * scale:g} s of cluster time"
               if poll else "")
            + ": a makespan here is longer against its bound than on a real cluster or in "
              "<code>kreassign simulate</code>, whose core decides in no time.</p>")
    parts.append('<img src="makespan.png" alt="makespan per request against its lower bound">')
    t = doc["throttle"]
    parts.append("<h2>2. Is the throttle held per broker?</h2>")
    parts.extend(_throttle_text(doc))
    parts.append('<img src="throttle_per_broker.png" alt="copy rate per broker against the throttle">')
    parts.append(_table(["broker", "bytes in", "of which released", "bytes out", "of which released",
                         "peak in MB/s", "peak out MB/s", "peak / bound"],
                        [(b["broker"], _size(b["bytes_in"]), _size(b["released_in"]), _size(b["bytes_out"]),
                          _size(b["released_out"]), b["peak_in"] / 1e6, b["peak_out"] / 1e6, b["peak_over_bound"])
                         for b in t["brokers"]]))
    parts.append("<h2>3. How many moves ran at once?</h2>")
    parts.append('<img src="steps_in_flight.png" alt="steps in flight over time, per request">')
    parts.append("<h2>4. How long did partitions wait, and why?</h2>")
    parts.append("<p>Each partition's time between its own events, named by what it was waiting for; summed over "
                 "partitions. Time with a step in flight is not waiting and is not counted.</p>")
    parts.append('<img src="waits.png" alt="time partitions waited, per reason">')
    parts.append(_table(["reason", "partitions", "total s", "median per partition s", "max s"],
                        [(w["reason"], w["partitions"], w["total_s"], w["p50_s"], w["max_s"]) for w in doc["waits"]],
                        left=(0,)))
    d = doc["durations"]
    parts.append("<h2>5. How long did a copy take?</h2>")
    parts.append("<p>From the cluster's start of copying (the step accepted by the cluster, <code>StepStarted</code>) "
                 "to its completion as observed (<code>StepCompleted</code>)"
                 + (f"; the engine observes every {d['resolution_s']:g} s{_clock(doc)}, so a copy shorter than that "
                    "shows as one observation" if d["resolution_s"] else "") + ".</p>")
    parts.append('<img src="copy_durations.png" alt="distribution of copy durations">')
    parts.append(_table(["request", "copies", "p50 s", "p95 s", "max s"],
                        [(r["request"], r["steps"], r["p50_s"], r["p95_s"], r["max_s"]) for r in d["by_request"]]))
    parts.append("<h2>6. What was rolled back, cancelled or rejected?</h2>")
    parts.append('<img src="outcomes.png" alt="how each request ended, per partition">')
    rb = doc["rolled_back"]
    parts.append(f"<p>Partitions rolled back to their original replicas (KIP-236){': none' if not rb else ''}"
                 f"{f' (the first {ROLLED_BACK_ROWS})' if len(rb) >= ROLLED_BACK_ROWS else ''}.</p>")
    if rb:
        parts.append(_table(["partition", "request", "original replicas", "target", "cancelled (UTC)",
                             "back at original (UTC)"],
                            [(r["partition"], r["request"], r["original"], r["target"],
                              _utc_clock(r["cancelled_at"], ms=True), _utc_clock(r["reverted_at"], ms=True)) for r in rb],
                            left=(0, 1, 2, 3)))
    parts.append("<p>Cancellations, skipped cancels and rejected commands, by reason:</p>")
    parts.append(_table(["kind", "reason", "count"], [(r["kind"], r["reason"], r["n"]) for r in doc["rejections"]],
                        left=(0, 1)))
    return "\n".join(parts)


def _throttle_text(doc: dict) -> list[str]:
    """Section 2's words: the throttle the engine ran with, Kafka's rate, what went released and its bound."""
    from engine.core.units import format_rate

    t = doc["throttle"]
    rate = lambda r: "none (unthrottled)" if r is None else format_rate(r)  # noqa: E731
    changes = t["throttle_changes"]
    ran = ", then ".join(f"{rate(c['rate'])} ({c['reason'] or 'no reason given'}, from {_utc_clock(c['at'])} UTC)"
                         for c in changes)
    if not changes or _instant(changes[0]["at"]) > _instant(doc["first_event"]):
        default = f"{rate(DEFAULT_THROTTLE_RATE)} (the engine's default"
        ran = (f"{default}) until {_utc_clock(changes[0]['at'])} UTC, then {ran}" if changes
               else f"{default}: no <code>ThrottleRateChanged</code> in the log)")
    kafka = t["kafka_rates"]
    margin = "/".join(f"{m} %" for m in t["margin_pct"])
    words = [f"<p><b>The throttle</b> the engine ran with: {ran}. <b>Kafka's rate</b> (the throttle plus "
             f"<code>throttle_margin_pct</code>, {margin}, set for throttled copies: <code>ThrottlesApplied</code>): "
             + (", then ".join(format_rate(r) for r in kafka) if kafka else "<b>never set</b>, no copy ran throttled")
             + ".</p>"]
    if t["released_copies"]:
        allowance = max((a for a in t["release_allowance"] if a is not None), default=None)
        ms = "/".join(f"{u:g}" for u in dict.fromkeys(t["throttle_release_ms"]))
        at_start, n = t["released_at_start"], t["released_copies"]
        how = [f"{at_start} from their start (<code>release_at_start</code>)" if at_start else "",
               f"{n - at_start} near their end" if n - at_start else ""]
        once = max((v for v in t["throttle_rate"] if v is not None), default=0) * max(t["throttle_release_ms"]) / 1000
        words.append(
            f"<p><b>Released copies</b> (shaded): {n} cop{'y' if n == 1 else 'ies'} ({_size(t['released_bytes_in'])} "
            f"received) went unthrottled (<code>ThrottleReleased</code>), {' and '.join(h for h in how if h)}"
            f"{_released_nothing(t, 'more ')}. "
            f"The release bucket bounds them per receiving broker: at most <code>throttle_release_ms</code> "
            f"({ms} ms) of the throttle at once ({_size(once)}), paid back at a quarter of it, so on average at "
            "most 25 % over the throttle"
            + (f"; in a {doc['bucket_s']:g} s bucket, at most {format_rate(allowance)} above Kafka's rate"
               if allowance is not None else "")
            + ". A line over the throttle where bytes were released is this, not a failed throttle.</p>")
    elif t.get("released_nothing"):
        words.append(f"<p><b>Released copies</b>: none{_released_nothing(t)}.</p>")
    words.append("<p><b>peak / bound</b>: each broker's busiest bucket against the highest Kafka rate in force at "
                 "any moment of the bucket plus, where released bytes flowed, the bucket's allowance (of the highest "
                 "throttle in force in it; a leader's: once per broker it sent them to); above 1 is more than both "
                 "allow. A bucket in which the throttle was off for a moment has no bound; the lines drawn for the "
                 "throttle and Kafka's rate are these highest values. <i>In</i> is KIP-73's follower side, "
                 "<i>out</i> the leader side. A copy's bytes are spread evenly from its start of copying (a released part: from its release) to its "
                 "completion as the engine observed it, so a bucket shows the average, not the peak within it"
                 + (f"; the {t['brokers_total']} brokers' busiest {len(t['brokers'])} are shown"
                    if t["brokers_total"] > len(t["brokers"]) else "") + ".</p>")
    return words


def _released_nothing(t: dict, more: str = "") -> str:
    """The words for the releases of copies with nothing left to copy (``remaining`` 0), which count as none."""
    k = t.get("released_nothing") or 0
    return (f"; {k} {more}{'was' if k == 1 else 'were'} released with nothing left to copy (0 bytes) and "
            f"{'is' if k == 1 else 'are'} not counted") if k else ""


def _dur(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    unit, per = time_unit(seconds)
    return f"{seconds / per:.1f} {unit}" if unit != "s" else f"{seconds:.0f} s"


def _size(n: int | None) -> str | None:
    from engine.core.units import format_size

    return None if n is None else format_size(n)


def _table(columns: list[str], rows: list, left: tuple[int, ...] = ()) -> str:
    head = "".join(f"<th{' class=l' if i in left else ''}>{html.escape(c)}</th>" for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i in left else ''}>{html.escape(_cell(v))}</td>"
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body or '<tr><td colspan=99>none</td></tr>'}</table>"


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
