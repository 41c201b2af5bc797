"""The README's "Without Docker" flow, command by command, as a user runs it.

The three long-running commands are started as written (the sim-cluster
faster, ``--speed 200`` instead of 20, and the engine on a free web port
instead of the default, so the test is quick and never clashes); their
printed addresses replace PORT and SIMPORT in the other commands, which run
in order: ``status`` without ``--watch``, ``verify`` once the request has
ended, with the request id ``execute`` printed.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from engine.kafka.embedded import free_port
from tests.engine_harness import Process, wait_for

ROOT = Path(__file__).resolve().parent.parent
KREASSIGN = [sys.executable, "-m", "engine.cli"]


def without_docker_blocks() -> tuple[list[str], list[str]]:
    text = (ROOT / "README.md").read_text()
    part = text.split("Without Docker, `kreassign broker`", 1)[1].split("\n### ", 1)[0]
    servers, flow = re.findall(r"```\n(.+?)\n```", part, re.S)
    return servers.splitlines(), flow.splitlines()


def run(command: str, cwd, **subst) -> subprocess.CompletedProcess:
    """The README's command, in ``cwd`` (the files it writes, such as drain-6.json, land there)."""
    for key, value in subst.items():
        command = command.replace(key, value)
    return subprocess.run(KREASSIGN + shlex.split(command)[1:], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_readme_flow_without_docker(tmp_path):
    servers, flow = without_docker_blocks()
    assert [s.split()[1] for s in servers] == ["broker", "sim-cluster", "engine"]
    assert [f.split()[1] for f in flow] == ["balance", "execute", "status", "verify", "list", "balance"]
    started = []
    try:
        broker = Process(KREASSIGN + shlex.split(servers[0])[1:], "broker")
        started.append(broker)
        port = wait_for(lambda: re.match(r"127\.0\.0\.1:(\d+)\n", broker.output()), 60, "the broker's address").group(1)
        sim = Process(KREASSIGN + shlex.split(servers[1].replace("--speed 20", "--speed 200"))[1:], "sim")
        started.append(sim)
        simport = wait_for(lambda: re.search(r" at http://127\.0\.0\.1:(\d+) ", sim.output()), 30, "the sim").group(1)
        web = free_port()
        engine = Process(KREASSIGN + shlex.split(servers[2].replace("PORT", port, 1).replace("SIMPORT", simport))[1:]
                         + ["--web-port", str(web)], "engine")
        started.append(engine)
        wait_for(lambda: "kreassign engine: worker" in engine.output() or not engine.alive(), 60, "the engine")
        assert engine.alive(), engine.output()

        subst = {"SIMPORT": simport, "PORT": port, "cwd": tmp_path}
        balance, execute, status, verify, listing, rebalance = flow
        done = run(balance, **subst)
        assert done.returncode == 0 and "179 partitions change" in done.stdout, done.stderr
        done = run(execute, **subst)
        assert done.returncode == 0, done.stderr
        request = re.match(r"accepted: request (\S+): 179 partitions \(", done.stdout).group(1)
        status_json = status.replace(" --watch", "") + " --format json"

        def ended():
            doc = json.loads(run(status_json, **subst).stdout)
            return doc["requests"][0]["outcome"] != "running" and doc

        doc = wait_for(ended, 240, "the request to end", interval=2)
        assert doc["requests"][0]["outcome"] == "completed" and doc["time_scale"] == 20
        done = run(status.replace(" --watch", ""), **subst)
        assert done.returncode == 0 and f"request {request}  completed" in done.stdout
        done = run(verify, REQUEST_ID=request, **subst)
        assert done.returncode == 0 and "Throttles are cleared" in done.stdout, done.stdout + done.stderr
        done = run(listing, **subst)
        assert done.returncode == 0 and f"{request}: completed (of 179 partitions)" in done.stdout
        done = run(rebalance, **subst)  # from the cluster as it is now: broker 6 is empty
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the engine's verdict:" in done.stdout and "accepted: request " in done.stdout
    finally:
        for p in reversed(started):  # the engine, the sim, then the broker
            p.stop()
            p.cleanup()
