"""``kreassign demo``, the README's main job: a whole run, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from engine.cli.demo import (
    CANCEL_MARGIN, DEFAULT_SCENARIO, DEFAULT_SPEED, POLL_INTERVAL, QUOTA_WINDOW_SECONDS, cancel_outcome,
    copies_to_cancel, exact_rebalance,
)
from engine.core import events as ev
from engine.core.partition import PartitionState, TopicPartition
from engine.core.state import EMPTY, InFlightStep
from engine.core.step import Step
from engine.sim.scenario import from_document, load

SPEED = 20  # the story's timing does not depend on it (the cancelled copies crawl at 1 MB/s): a shorter run

TINY = {
    "name": "tiny-demo",
    "description": "Four brokers on two racks, 24 small partitions, more of them on broker 1; broker 4 is decommissioned.",
    "seed": 5,
    "brokers": {"count": 4, "racks": ["a", "b"]},
    "topics": [{"name": "events", "partitions": 24, "replication_factor": 2, "min_insync_replicas": 1,
                "size": {"distribution": "uniform", "min": "200 MB", "max": "800 MB"}, "produce_rate": "10 kB/s",
                "placement": "random", "weights": {1: 2}}],
    "reassignment": {"kind": "decommission", "brokers": [4]},
}


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (children started in sessions of their own included)."""
    rows = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout.split("\n")
    children: dict[int, list[int]] = {}
    for row in rows:
        if row.strip():
            p, pp = map(int, row.split())
            children.setdefault(pp, []).append(p)
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def alive(pids: set[int]) -> set[int]:
    out = set()
    for p in pids:
        try:
            os.kill(p, 0)
        except ProcessLookupError:
            continue
        out.add(p)
    return out


def start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path, Path]:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "demo-out"
    log = tmp_path / "demo.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "demo", "--scenario", str(scenario), "--speed", str(SPEED), "--out", str(out),
         *extra],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    return proc, out, log


def wait_for_text(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} within {timeout}s:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


@pytest.mark.parametrize("doc", [TINY, yaml.safe_load(DEFAULT_SCENARIO.read_text())], ids=["tiny", "default"])
def test_the_decommission_leaves_work_for_the_exact_rebalance_and_never_refills_the_drained_broker(doc):
    scenario = from_document(doc)
    after = {tp: p.replicas for tp, p in scenario.partitions.items()}
    after.update({t.tp: t.replicas for t in scenario.targets})
    drained = set(doc["reassignment"]["brokers"])
    second = exact_rebalance(after, {b.id: b.rack for b in scenario.brokers}, [b.id for b in scenario.brokers])
    assert second.proposed and second.balanced  # the story's KIP-236 cancel has something to cancel
    assert not drained & {b for r in second.proposed.values() for b in r}


def test_the_demo_runs_the_story_and_stops_everything(tmp_path):
    import pyarrow.dataset as ds

    proc, out, log = start(tmp_path)
    wait_for_text(log, "engine worker up", proc, 120)
    seen = descendants(proc.pid)
    assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    text = " ".join(log.read_text().split())  # the console wraps long lines wherever their counts put the edge
    assert "1. decommission" in text and "submitted" in text
    assert "speaking the Kafka protocol at 127.0.0.1:" in text  # the engine's real Kafka adapter on the sim
    # the makespan against the bound, and why the engine's is longer than simulate's, on screen
    assert re.search(r"the decommission took \d+ s of cluster time \(\d+ s of wall clock\), [\d.]+x its lower bound\. "
                     r"kreassign simulate, whose core decides in no time, takes [\d.]+x", text)
    # the cancel: copies that cannot have finished when it is decided; the words say what happened, and the
    # same number of partitions is cancelled, aborted, rolled back and verified back at their original replicas
    assert "2. exact rebalance" in text and "cancel with rollback (KIP-236): the largest cop" in text
    named = re.search(r"cancel with rollback \(KIP-236\): the (?:(\d+) largest copies|largest copy) in flight", text)
    n = int(named.group(1) or 1)
    assert f"the engine's verdict: {n} cop{'y' if n == 1 else 'ies'} in flight aborted" in text
    assert "had completed before the cancel" not in text and "skipped" not in text
    second = len(second_targets())  # when every partition rolls back (one alone), no "ended:" line: the frame's
    assert f"partitions: {second - n} completed, {n} rolled back (of {second})" in text
    assert f"{n} rolled back to their original replicas" in text
    assert text.count("(exit 0)") == 2 and "(exit 1)" not in text
    assert "Throttles are cleared" in text
    # into a file the request's frames keep their lines whole (a live redraw cropped them at 80 columns)
    assert re.search(r"limits: max_replicas_per_step=1, .*creation_window_ms=\d+", text)
    assert re.search(r"\d+ of \d+ partitions rolled back to their original replicas", text)
    assert (out / "report" / "index.html").is_file()
    # the drained broker stays drained: no step of any request adds a replica on broker 4 (the audit table,
    # read with pyarrow: a third Spark start for one query would cost more than the rest of the check)
    planned = ds.dataset(out / "warehouse" / "audit", format="parquet", partitioning="hive").to_table(
        filter=ds.field("event_type") == "StepPlanned", columns=["payload"]).column("payload").to_pylist()
    steps = [json.loads(p)["step"] for p in planned]
    assert steps and not [s for s in steps if 4 in s["nr"]]
    assert any((out / "report").glob("*.png"))
    assert "done in" in text and "4. analytics and report" in text
    assert len(seen) >= 3 and alive(seen) == set()  # broker, sim-cluster, engine (and Spark): all gone
    # stopped in order (the engine before the broker it reads), and no terminal codes in any log
    logs = {p.name: p.read_text(errors="replace") for p in (out / "logs").iterdir()}
    assert {"engine.log", "sim-cluster.log", "analytics.log"} <= set(logs)
    assert "Unable connect to node" not in logs["engine.log"] and "Connection refused" not in logs["engine.log"]
    assert not [name for name, body in logs.items() if "\x1b" in body]
    # one Spark start for the job and the report
    assert logs["analytics.log"].count("Using incubator modules") <= 1 and "report/index.html" in logs["analytics.log"]
    # the end summary names no event log on the broker it stopped
    assert "event log: it was in the embedded broker's memory, which stops with the demo" in text
    assert "events on 127.0.0.1:" not in text
    # the clock and the bound reach the report
    assert f"its clock runs {SPEED}x the wall clock" in text and "lower bound" in text
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["time_scale"] == SPEED and report["poll_interval_s"] == POLL_INTERVAL
    first = report["requests"][0]
    # the bound reaches the report; Kafka's quota window (which the sim models) lets about 10 s of throttle through
    # early, so a makespan can come in a little under bytes / rate: 0.998 was seen on a loaded machine
    assert first["lower_bound_s"] > 0 and first["makespan_over_bound"] > 0.8
    assert f"Simulated cluster at {SPEED}x the wall clock" in (out / "report" / "index.html").read_text()


def second_targets() -> dict:
    """The tiny demo's second request: the exact rebalance after the decommission."""
    scenario = from_document(TINY)
    after = {tp: p.replicas for tp, p in scenario.partitions.items()}
    after.update({t.tp: t.replicas for t in scenario.targets})
    alive = sorted({b for r in after.values() for b in r})
    return exact_rebalance(after, {b.id: b.rack for b in scenario.brokers}, alive).proposed


def test_the_scenario_text_names_the_speed_the_demo_runs_at():
    text = " ".join(load(DEFAULT_SCENARIO).description.split())
    speeds = re.findall(r"--speed (\d+)|(\d+) times faster", text)
    assert speeds and all(float(a or b) == DEFAULT_SPEED for a, b in speeds), text


MB = 1_000_000
TP = [TopicPartition("t", i) for i in range(6)]


def _copying(sizes: dict, request="r2", adding=True):
    """A state with one step in flight per partition of ``sizes`` (MB), each copying one new replica."""
    state = EMPTY
    steps, observed = state.steps, state.observed
    for tp, mb in sizes.items():
        steps = steps.set(tp, InFlightStep(request, 1, Step((1, 2), (1, 2, 3), (3,), (), 1, False), started=True))
        observed = observed.set(tp, PartitionState((1, 2, 3), frozenset({1, 2}), 1, None if mb is None else mb * MB,
                                                   adding=(3,) if adding else ()))
    return state._replace(steps=steps, observed=observed)


def test_the_cancel_takes_the_largest_copies_in_flight_that_cannot_finish_before_it_is_decided():
    rate, speed, elapsed = 1 * MB, 20, 0.5
    least = rate * ((elapsed + CANCEL_MARGIN) * speed + QUOTA_WINDOW_SECONDS)  # 121 MB
    state = _copying({TP[0]: 300, TP[1]: 120, TP[2]: 500, TP[3]: 130, TP[4]: None})
    assert least == 121 * MB
    assert copies_to_cancel(state, "r2", rate, speed, elapsed, 3) == [TP[2], TP[0], TP[3]]
    assert copies_to_cancel(state, "r2", rate, speed, elapsed, 5) == [TP[2], TP[0], TP[3]]  # 120 MB may finish
    assert copies_to_cancel(state, "r2", rate, speed, elapsed + 5, 3) == [TP[2], TP[0]]  # later: 221 MB at least
    assert copies_to_cancel(state, "other", rate, speed, elapsed, 3) == []
    # a step planned or sent but not seen copying on the cluster is no copy in flight
    assert copies_to_cancel(_copying({TP[0]: 300}, adding=False), "r2", rate, speed, elapsed, 3) == []


def test_the_cancel_outcome_says_what_the_engine_did_with_each_named_partition():
    cancel = ev.CancelRequested("r2", tuple(TP[:4]), True, "c1")
    decision = [cancel, ev.PartitionCancelled("r2", TP[0], True, 1), ev.PartitionCancelled("r2", TP[1], True, 1),
                ev.PartitionCancelled("r2", TP[2], True, None),
                ev.CancelSkipped("r2", TP[5], "not named"), ev.PartitionCancelled("r9", TP[3], True, 1)]
    words = cancel_outcome(decision, list(TP[:4]))
    assert words == ("the engine's verdict: 2 copies in flight aborted: t-0, t-1 go back to their original replicas; "
                     "1 partition cancelled with no copy in flight: t-2; 1 partition had completed before the cancel "
                     "was decided and stays at its target: t-3")
    one = cancel_outcome([cancel, ev.PartitionCancelled("r2", TP[0], True, 1)], [TP[0]])
    assert one == "the engine's verdict: 1 copy in flight aborted: t-0 goes back to its original replicas"
    skipped = cancel_outcome([cancel, ev.CancelSkipped("r2", TP[0], "cannot abort step 1: no replica in sync")],
                             [TP[0]])
    assert skipped == ("the engine's verdict: 1 cancel skipped until the step in flight ends: "
                       "t-0 (cannot abort step 1: no replica in sync)")
    rejected = cancel_outcome([ev.CommandRejected("cancel", ("unknown request 'r2'",), "r2", "c1")], [TP[0]])
    assert rejected == "the engine rejected the cancel: unknown request 'r2'"


def test_ctrl_c_at_any_moment_leaves_nothing_running(tmp_path):
    proc, _out, log = start(tmp_path, "--no-analytics")
    wait_for_text(log, "engine worker up", proc, 120)
    seen = descendants(proc.pid)
    assert len(seen) >= 3, "the broker, the sim-cluster and the engine should be running now"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    assert proc.wait(timeout=60) == 130
    deadline = time.monotonic() + 20
    while alive(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(seen) == set()
    assert "interrupted: stopping everything" in log.read_text()


def test_without_java_the_demo_says_so_before_it_starts_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "empty")  # no java on it
    out = tmp_path / "out"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "engine.cli", "demo", "--out", str(out)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and time.monotonic() - started < 60
    assert result.stderr.count("\n") == 1
    assert "the analytics step needs pyspark and Java 17 or later: java is not on the PATH" in result.stderr
    assert "kreassign demo --no-analytics" in result.stderr
    assert not out.exists()  # nothing was started, nothing written


def test_a_scenario_that_cannot_be_read_is_named_once(tmp_path, capsys):
    from engine.cli import main

    missing = str(tmp_path / "nosuch.yaml")
    assert main(["demo", "--scenario", missing, "--no-analytics", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"kreassign demo: error: {missing}: No such file or directory\n"
    assert not (tmp_path / "out").exists()


def test_the_demo_folder_is_a_new_one_under_the_cache_directory(tmp_path, monkeypatch):
    from engine.cli import CliError
    from engine.cli.demo import output_folder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = output_folder(None)
    assert first.parent == tmp_path / "cache" / "kreassign" / "demo"
    first.mkdir(parents=True)
    assert output_folder(None) != first
    (tmp_path / "old" / "warehouse").mkdir(parents=True)
    with pytest.raises(CliError, match="holds an earlier run"):
        output_folder(str(tmp_path / "old"))
