"""``kreassign analytics run|query|report``: the Spark analytics of the event log (issue 7).

A thin shell over the ``spark`` package (docs/analytics.md): ``run`` is the
streaming job (also ``spark-submit spark/audit_job.py``; ``run --report DIR``
then writes the report in the same Spark session, one JVM start for both, as
the demo does), ``query`` runs Spark SQL over the warehouse's tables and views,
``report`` writes an HTML page with PNG plots. Needs the ``analytics`` extra (pyspark, pyarrow, pandas,
matplotlib) and Java 17. Problems are one line, exit status 2: a missing
warehouse, bad SQL (Spark's message), an unreachable cluster, a missing topic.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from engine.cli import CliError

FORMATS = ("table", "json", "csv")


def add_parser(sub) -> None:
    from spark.audit_job import add_arguments

    p = sub.add_parser("analytics", help="Spark analytics of the event log: run the job, query, report")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    run_p = actions.add_parser("run", help="read the events topic into the warehouse (audit table, aggregates)")
    add_arguments(run_p)
    g = run_p.add_argument_group("report", "then write the report with the same Spark session (no second start)")
    g.add_argument("--report", metavar="DIR", help="after the job, write the report there (as 'analytics report "
                                                    "--out DIR'); available-now trigger only")
    _report_options(g)
    run_p.set_defaults(func=run)
    q = actions.add_parser("query", help="run Spark SQL over the warehouse's tables (docs/analytics.md)")
    q.add_argument("sql", metavar="SQL", help="one Spark SQL statement, or @FILE to read it from a file")
    _warehouse_options(q)
    q.add_argument("--format", choices=FORMATS, default="table", help="table (default), json (one object a line), csv")
    q.set_defaults(func=query)
    r = actions.add_parser("report", help="write an HTML report with PNG plots")
    _warehouse_options(r)
    r.add_argument("--out", required=True, metavar="DIR", help="directory for index.html and the plots")
    _report_options(r)
    r.set_defaults(func=report)


def _report_options(p) -> None:
    p.add_argument("--lower-bound", action="append", default=[], metavar="[REQUEST=]SECONDS",
                   help="a request's makespan lower bound in cluster-time seconds (every request's without "
                        "REQUEST=; kreassign simulate prints one); repeatable")
    p.add_argument("--time-scale", type=_positive, default=1.0, metavar="X",
                   help="the cluster's clock ran X times the wall clock (a simulated cluster, e.g. the demo's "
                        "--speed): durations and rates are shown in cluster time, labelled (default 1)")
    p.add_argument("--poll-interval", type=_positive, metavar="S",
                   help="the engine's --poll-interval (wall-clock seconds): the resolution of observed durations, "
                        "stated on the page")


def _warehouse_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warehouse", required=True, metavar="DIR", help="the warehouse 'analytics run' wrote")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*])")


def run(args) -> int:
    from spark.audit_job import AVAILABLE_NOW, JobError, execute, print_summary

    out = None
    if args.report is not None:
        if args.trigger != [AVAILABLE_NOW]:
            raise CliError("--report: only with the available-now trigger (a repeating job never ends; "
                           "run 'kreassign analytics report' beside it)")
        out = _report_dir(args.report, "--report")
        bounds = parse_lower_bounds(args.lower_bound)
    try:
        runs = execute(args)
    except JobError as e:
        raise CliError(str(e)) from None
    print_summary(runs, args.warehouse)
    if out is not None:  # the job's session is still the active one: session() returns it
        from spark.report import write

        print(write(_open_warehouse(args), args.warehouse, out, bounds, args.time_scale, args.poll_interval))
    return 0


def _report_dir(given: str, option: str) -> Path:
    out = Path(given)
    if out.exists() and not out.is_dir():
        raise CliError(f"{option} {given}: not a directory")
    return out


def _open_warehouse(args):
    from spark import warehouse as wh
    from spark.session import session

    if not wh.exists(args.warehouse):
        raise CliError(f"--warehouse {args.warehouse}: no analytics warehouse there (run: kreassign analytics run)")
    spark = session(args.master, app="kreassign-analytics")
    wh.register(spark, args.warehouse)
    return spark


def run_sql(spark, text: str):
    """(columns, rows) of one statement; Spark's own message, as one line, on a bad one."""
    from pyspark.errors import PySparkException

    from spark.audit_job import one_line

    try:
        df = spark.sql(text)
        return df.columns, [tuple(_utc(v) for v in r) for r in df.collect()]
    except PySparkException as e:
        raise CliError(one_line(e)) from None


def _utc(value):
    """A TIMESTAMP as PySpark collects it (a naive ``datetime`` in the Python process's local time zone,
    whatever the session's) as the UTC instant it is, printed with its offset: the warehouse's times are UTC
    (docs/analytics.md), and a machine outside UTC printed them in its own time, unmarked. Within a struct
    (a ``Row``), an array or a map too (``window(...)``, ``collect_list(recorded_at)``)."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    if hasattr(value, "asDict"):  # a struct: pyspark's Row, rebuilt with its fields in order
        return type(value)(**{k: _utc(v) for k, v in value.asDict().items()})
    if isinstance(value, list):
        return [_utc(v) for v in value]
    if isinstance(value, dict):
        return {_utc(k): _utc(v) for k, v in value.items()}
    return value


def query(args) -> int:
    text = args.sql
    if text.startswith("@"):
        from engine.cli import read_text

        text = read_text(text[1:])
    if not text.strip():
        raise CliError("the SQL statement is empty")
    columns, rows = run_sql(_open_warehouse(args), text)
    write_rows(columns, rows, args.format, sys.stdout)
    return 0


def write_rows(columns: list[str], rows: list[tuple], fmt: str, out) -> None:
    if fmt == "json":
        for r in rows:
            out.write(json.dumps(dict(zip(columns, r)), default=str) + "\n")
    elif fmt == "csv":
        w = csv.writer(out)
        w.writerow(columns)
        w.writerows(["" if v is None else v for v in r] for r in rows)
    else:
        cells = [columns] + [["NULL" if v is None else str(v) for v in r] for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
        for i, row in enumerate(cells):
            out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
            if i == 0:
                out.write("  ".join("-" * w for w in widths) + "\n")
        out.write(f"({len(rows)} rows)\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def parse_lower_bounds(items: list[str]) -> dict[str | None, float]:
    bounds: dict[str | None, float] = {}
    for item in items:
        request, sep, seconds = item.rpartition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = -1
        if value <= 0 or (sep and not request):
            raise CliError(f"--lower-bound {item!r}: expected [REQUEST=]SECONDS with SECONDS > 0")
        bounds[request or None] = value
    return bounds


def report(args) -> int:
    from spark.report import write

    bounds = parse_lower_bounds(args.lower_bound)
    out = _report_dir(args.out, "--out")
    page = write(_open_warehouse(args), args.warehouse, out, bounds, args.time_scale, args.poll_interval)
    print(page)
    return 0
