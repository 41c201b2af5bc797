"""``kreassign analytics report``: an HTML page with PNG plots from the warehouse.

Plots (matplotlib, Agg backend): bytes moved per broker over time (in and
out), steps in flight over time, the distribution of step durations, and each
request's makespan against its lower bound when one is given
(``--lower-bound [REQUEST=]SECONDS``, e.g. from ``kreassign simulate``).
Tables: the requests, step-duration percentiles, cancellations and
rejections by reason. Everything is read through the warehouse's views.
"""

from __future__ import annotations

import html
from datetime import timedelta
from pathlib import Path

from spark import warehouse as wh

ALL = None  # key of a lower bound that applies to every request


def steps_in_flight(per_minute: list[tuple]) -> list[tuple]:
    """(minute, planned, completed, aborted, failed) rows -> (minute, steps in flight at its end)."""
    level, out = 0, []
    for minute, planned, completed, aborted, failed in sorted(per_minute):
        level += planned - completed - aborted - failed
        out.append((minute, level))
    return out


MAX_BROKERS = 8
ONE_MINUTE = timedelta(minutes=1)


def per_broker_series(rows: list[tuple]) -> tuple[list, dict[tuple[int, str], list[int]]]:
    """(minute, broker, bytes_in, bytes_out) rows -> every minute from the first to the last, and
    for the brokers that moved the most, bytes in and out per minute (0 where none)."""
    if not rows:
        return [], {}

    first, last = min(r[0] for r in rows), max(r[0] for r in rows)
    minutes = [first + timedelta(minutes=i) for i in range(int((last - first).total_seconds() // 60) + 1)]
    totals: dict[int, int] = {}
    cells: dict[tuple, int] = {}
    for minute, broker, bytes_in, bytes_out in rows:
        totals[broker] = totals.get(broker, 0) + bytes_in + bytes_out
        cells[(minute, broker, "in")] = bytes_in
        cells[(minute, broker, "out")] = bytes_out
    top = sorted(sorted(totals), key=lambda b: -totals[b])[:MAX_BROKERS]
    return minutes, {(b, d): [cells.get((m, b, d), 0) for m in minutes] for b in sorted(top) for d in ("in", "out")}


def _plot(path: Path, draw) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=100)
    if not draw(ax):
        ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _table(columns: list[str], rows: list) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body or '<tr><td colspan=99>none</td></tr>'}</table>"


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def write(spark, warehouse: str, out: Path, lower_bounds: dict[str | None, float] | None = None) -> Path:
    """Write ``out/index.html`` and its PNGs; the page's path."""
    lower_bounds = lower_bounds or {}
    out.mkdir(parents=True, exist_ok=True)
    wh.register(spark, warehouse)
    sql = lambda q: [tuple(r) for r in spark.sql(q).collect()]  # noqa: E731

    bytes_rows = sql("SELECT minute, broker, bytes_in, bytes_out FROM bytes_per_broker_minute ORDER BY minute, broker")
    minutes, series = per_broker_series(bytes_rows)

    def draw_bytes(ax) -> bool:
        brokers = sorted({b for b, _ in series})
        edges = minutes + [minutes[-1] + (minutes[1] - minutes[0] if len(minutes) > 1 else ONE_MINUTE)] if minutes else []
        for (broker, direction), values in series.items():
            ax.step(edges, [v / 1e6 for v in values + values[-1:]], where="post", color=f"C{brokers.index(broker)}",
                    linestyle="-" if direction == "in" else "--", label=f"{broker} {direction}")
        ax.set_ylabel("MB per minute")
        ax.set_title(f"Bytes moved per broker (solid: in, dashed: out; top {MAX_BROKERS} brokers)"
                     if len({b for b, _ in series}) >= MAX_BROKERS else "Bytes moved per broker (solid: in, dashed: out)")
        if series:
            ax.legend(fontsize="x-small", ncol=6, title="broker", title_fontsize="x-small")
        return bool(series)

    _plot(out / "bytes_per_broker.png", draw_bytes)

    flight = steps_in_flight(sql(
        "SELECT minute, planned, completed, aborted, failed FROM steps_per_minute ORDER BY minute"))

    def draw_flight(ax) -> bool:
        ax.step([m for m, _ in flight], [n for _, n in flight], where="post")
        ax.set_ylabel("steps in flight")
        ax.set_title("Steps in flight (end of each minute)")
        return bool(flight)

    _plot(out / "steps_in_flight.png", draw_flight)

    durations = [r[0] for r in sql("SELECT duration_seconds FROM steps WHERE outcome = 'completed'")]

    def draw_durations(ax) -> bool:
        ax.hist(durations, bins=min(50, max(5, len(durations) // 5 or 1)))
        ax.set_xlabel("seconds from StepPlanned to StepCompleted")
        ax.set_ylabel("steps")
        ax.set_title("Step duration distribution")
        return bool(durations)

    _plot(out / "step_durations.png", draw_durations)

    requests = sql("SELECT request_id, partitions, steps_completed, bytes_moved, accepted_at, completed_at, "
                   "makespan_seconds FROM requests ORDER BY accepted_at")
    finished = [r for r in requests if r[6] is not None]

    def bound(request_id):
        return lower_bounds.get(request_id, lower_bounds.get(ALL))

    def draw_makespan(ax) -> bool:
        names = [r[0][:12] for r in finished]
        ax.bar(names, [r[6] for r in finished], label="makespan")
        known = [(i, bound(r[0])) for i, r in enumerate(finished) if bound(r[0]) is not None]
        if known:
            ax.scatter([i for i, _ in known], [b for _, b in known], color="red", marker="_", s=900, zorder=3,
                       label="lower bound")
        ax.set_ylabel("seconds")
        ax.set_title("Makespan per request" + (" vs lower bound" if known else " (no lower bound given)"))
        if finished:
            ax.legend(fontsize="small")
        return bool(finished)

    _plot(out / "makespan.png", draw_makespan)

    request_rows = [(*r[:6], r[6], bound(r[0]), (r[6] / bound(r[0])) if r[6] and bound(r[0]) else None)
                    for r in requests]
    percentiles = sql("SELECT request_id, steps, p50, p95, p99, max FROM step_duration_by_request ORDER BY request_id")
    reasons = sql("SELECT kind, reason, sum(n) AS n FROM cancellations_per_minute GROUP BY kind, reason "
                  "ORDER BY n DESC, kind, reason LIMIT 50")
    page = out / "index.html"
    page.write_text(f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kreassign analytics report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#eee}}img{{max-width:100%}}</style>
</head><body>
<h1>kreassign analytics report</h1>
<p>Warehouse: <code>{html.escape(warehouse)}</code>. Bytes are attributed when a step completes
(docs/analytics.md).</p>
<h2>Requests</h2>
{_table(["request", "partitions", "steps completed", "bytes moved", "accepted", "completed", "makespan s",
         "lower bound s", "makespan / bound"], request_rows)}
<img src="makespan.png" alt="makespan per request">
<h2>Bytes moved per broker</h2><img src="bytes_per_broker.png" alt="bytes moved per broker over time">
<h2>Steps in flight</h2><img src="steps_in_flight.png" alt="steps in flight over time">
<h2>Step durations</h2><img src="step_durations.png" alt="step duration distribution">
{_table(["request", "steps", "p50 s", "p95 s", "p99 s", "max s"], percentiles)}
<h2>Cancellations and rejections</h2>
{_table(["kind", "reason", "count"], reasons)}
</body></html>
""")
    return page
