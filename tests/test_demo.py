"""``kreassign demo``, the README's main job: a whole run, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from engine.cli.demo import DEFAULT_SCENARIO, POLL_INTERVAL, exact_rebalance
from engine.sim.scenario import from_document

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
        [sys.executable, "-m", "engine.cli", "demo", "--scenario", str(scenario), "--speed", "5", "--out", str(out),
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
    proc, out, log = start(tmp_path)
    wait_for_text(log, "engine worker up", proc, 120)
    seen = descendants(proc.pid)
    assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    text = " ".join(log.read_text().split())  # the console wraps long lines wherever their counts put the edge
    assert "1. decommission" in text and "submitted" in text
    assert "speaking the Kafka protocol at 127.0.0.1:" in text  # the engine's real Kafka adapter on the sim
    assert "2. exact rebalance" in text and "whose copies were in flight, with rollback (KIP-236)" in text
    assert "rolled back to their original replicas" in text
    assert text.count("(exit 0)") == 2 and "(exit 1)" not in text
    assert "Throttles are cleared" in text
    assert (out / "report" / "index.html").is_file()
    # the drained broker stays drained: no step of any request adds a replica on broker 4
    query = subprocess.run(
        [sys.executable, "-m", "engine.cli", "analytics", "query", "--warehouse", str(out / "warehouse"), "--format",
         "json", "SELECT payload FROM audit WHERE event_type = 'StepPlanned'"],
        capture_output=True, text=True, timeout=300)
    assert query.returncode == 0, query.stderr
    steps = [json.loads(json.loads(line)["payload"])["step"] for line in query.stdout.splitlines() if line.strip()]
    assert steps and not [s for s in steps if 4 in s["nr"]]
    assert any((out / "report").glob("*.png"))
    assert "done in" in text
    assert len(seen) >= 3 and alive(seen) == set()  # broker, sim-cluster, engine (and Spark): all gone
    # stopped in order (the engine before the broker it reads), and no terminal codes in any log
    logs = {p.name: p.read_text(errors="replace") for p in (out / "logs").iterdir()}
    assert {"engine.log", "sim-cluster.log", "analytics.log", "report.log"} <= set(logs)
    assert "Unable connect to node" not in logs["engine.log"] and "Connection refused" not in logs["engine.log"]
    assert not [name for name, body in logs.items() if "\x1b" in body]
    # the clock and the bound reach the report
    assert "its clock runs 5x the wall clock" in text and "lower bound" in text
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["time_scale"] == 5 and report["poll_interval_s"] == POLL_INTERVAL
    first = report["requests"][0]
    # the bound reaches the report; Kafka's quota window (which the sim models) lets about 10 s of throttle through
    # early, so a makespan can come in a little under bytes / rate: 0.998 was seen on a loaded machine
    assert first["lower_bound_s"] > 0 and first["makespan_over_bound"] > 0.8
    assert "Simulated cluster at 5x the wall clock" in (out / "report" / "index.html").read_text()


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
