"""``kreassign demo``: a whole reassignment, from a fresh clone, in a few minutes.

It starts everything on this machine (the embedded broker holding the event
log, a simulated cluster as its own process speaking the Kafka protocol, an
engine worker reassigning it through its real Kafka adapter, as it would a
production cluster), then:

1. submits the scenario's reassignment (the default scenario decommissions
   broker 6 of a six-broker, three-rack cluster) and shows its progress live;
2. submits a second request, the balancer's exact rebalance of the result, and
   as soon as its copies are in flight cancels some of them with rollback
   (KIP-236): the moves are aborted and those partitions go back where they were;
3. verifies both requests on the cluster (targets reached, throttles cleared),
   runs the analytics job over the event log and writes the HTML report;
4. prints where everything is, and stops every process it started (unless
   ``--keep-running``), the engine first, then the simulated cluster, then the
   broker they both use. Ctrl-C at any moment stops them too.

Before anything starts it checks what the analytics step needs (pyspark and
Java 17 or later), unless ``--no-analytics``. Its folder (logs, warehouse,
report) goes under the user's cache directory unless ``--out`` says where.
The simulated cluster runs ``--speed`` times faster than the wall clock: the
live status, the engine's status page and the report show rates and durations
in cluster time and say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from engine.bundled import SCENARIO_DIR
from engine.cli import CliError

DEFAULT_SCENARIO = SCENARIO_DIR / "demo.yaml"
KREASSIGN = [sys.executable, "-m", "engine.cli"]


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="run a whole reassignment on this machine: broker, simulated cluster, engine")
    p.add_argument("--scenario", default=str(DEFAULT_SCENARIO), metavar="FILE",
                   help="the cluster and its reassignment (default ops/scenarios/demo.yaml)")
    p.add_argument("--speed", type=float, default=30.0, metavar="X",
                   help="simulated time runs X times the wall clock (default 30)")
    p.add_argument("--out", metavar="DIR",
                   help="a new folder for the warehouse, the report and the logs (default: one per run under "
                        "$XDG_CACHE_HOME/kreassign/demo, ~/.cache when unset)")
    p.add_argument("--web-port", type=int, default=0, metavar="N", help="engine status page port (default: a free one)")
    p.add_argument("--keep-running", action="store_true",
                   help="leave the broker, the simulated cluster and the engine (status page) up until Ctrl-C")
    p.add_argument("--no-analytics", action="store_true", help="skip the Spark job and the report")
    p.set_defaults(func=run)


POLL_INTERVAL = 0.2
"""The engine's, in wall-clock seconds: at the default speed (30x) that is 6 s of cluster time, the
resolution of every duration the engine observes (at 0.5 s, copies of 6 s all showed as 15 s)."""


class Processes:
    """Every process the demo starts, each in a session of its own: stop() ends them all, the last
    started first, each gone before the next is asked (the engine before the cluster it acts on)."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
        log = self.logs / f"{name}.log"
        proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(proc)
        return proc, log

    def stop(self) -> None:
        for proc in reversed(self.started):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)


def wait_for(what: str, condition, timeout: float, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-2000:] if log is not None else ""
            raise CliError(f"{what}: the process exited ({proc.returncode}); its log ends:\n{tail}")
        if time.monotonic() > deadline:
            raise CliError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def _first_line(log: Path, marker: str) -> str | None:
    try:
        for line in log.read_text().splitlines():
            if marker in line:
                return line
    except FileNotFoundError:
        pass
    return None


def run(args) -> int:
    from engine.sim.scenario import ScenarioError, load

    try:
        scenario = load(args.scenario)
    except ScenarioError as e:
        raise CliError(f"{args.scenario}: {e}") from None
    if not scenario.targets:
        raise CliError(f"{args.scenario}: the scenario moves nothing")
    if not args.speed > 0:
        raise CliError(f"--speed must be above 0, got {args.speed:g}")
    if not args.no_analytics:
        problem = analytics_problem()
        if problem:
            raise CliError(f"the analytics step needs pyspark and Java 17 or later: {problem}; install it, or run "
                           "kreassign demo --no-analytics")
    out = output_folder(args.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    procs = Processes(logs)

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop_on_term)
    started = time.monotonic()
    try:
        return _story(args, scenario, out, logs, procs, started)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything the demo started", file=sys.stderr)
        return 130
    finally:
        procs.stop()
        signal.signal(signal.SIGTERM, previous)


def analytics_problem() -> str | None:
    """Why the analytics step could not run here, or ``None``: pyspark missing, or no Java 17+ where
    Spark looks for it ($JAVA_HOME/bin/java, else java on the PATH)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[analytics]')"
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        return (f"JAVA_HOME={home} has no bin/java" if home else "java is not on the PATH") + \
            " (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"
    try:
        answer = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{java} -version failed: {e}"
    found = re.search(r'version "(\d+)(?:\.(\d+))?', answer.stderr + answer.stdout)
    major = None if found is None else int(found.group(2) if found.group(1) == "1" and found.group(2) else
                                            found.group(1))
    if major is None or major < 17:
        return f"{java} is Java {major if major is not None else '(version unknown)'}"
    return None


def output_folder(given: str | None) -> Path:
    """The run's folder: ``--out`` (which must not hold an earlier run: its warehouse would resume from
    offsets of a broker that is gone), or a new one under the cache directory."""
    if given is not None:
        out = Path(given).resolve()
        if (out / "warehouse").exists():
            raise CliError(f"--out {given}: it holds an earlier run (warehouse/); give a new folder or remove it")
        return out
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = cache / "kreassign" / "demo" / datetime.now().strftime("%Y%m%d-%H%M%S")
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


@contextlib.contextmanager
def stopped_first(procs: Processes):
    """Stops ``procs`` on the way out: inside the broker's ``with``, so the engine and the simulated
    cluster are gone before the broker they use stops (else the engine logs its connection errors)."""
    try:
        yield
    finally:
        procs.stop()


def _story(args, scenario, out: Path, logs: Path, procs: Processes, started: float) -> int:
    from engine.cli import console_for

    from engine.kafka.embedded import EMBEDDED, EmbeddedBroker, free_port
    from engine.log.eventlog import Publisher
    from engine.kafka.topics import create

    console = console_for(sys.stdout)  # into a pipe or a file: lines are not wrapped at 80 columns
    say = console.print
    say(f"[bold]kreassign demo[/bold]: {scenario.name}: {scenario.description.strip()}")
    say(f"writing to {out}")
    prefix = "demo."
    with EmbeddedBroker() as broker, stopped_first(procs):  # the engine and the sim stop before the broker
        create({"bootstrap.servers": broker.bootstrap}, prefix)
        say(f"embedded broker (tansu, memory storage) at {broker.bootstrap}; topics {prefix}*")

        sim, sim_log = procs.start("sim-cluster", KREASSIGN + [
            "sim-cluster", "--scenario", args.scenario, "--speed", str(args.speed), "--kafka-port", "0"])
        line = wait_for("the simulated cluster", lambda: _first_line(sim_log, "Kafka bootstrap "), 30, sim, sim_log)
        sim_url = line.split(" at ", 1)[1].split()[0]
        cluster = "kafka://" + line.split("Kafka bootstrap ", 1)[1].split()[0]
        say(f"simulated cluster ({len(scenario.brokers)} brokers, {len(scenario.partitions)} partitions, "
            f"{args.speed:g}x real time) speaking the Kafka protocol at {cluster[len('kafka://'):]}; "
            f"faults and clock at {sim_url}", soft_wrap=True)  # one line: the addresses are not split
        say(f"its clock runs {args.speed:g}x the wall clock: rates and the throttle below are in cluster time, "
            "ETAs on the wall clock")

        port = args.web_port or free_port()
        engine, engine_log = procs.start("engine", KREASSIGN + [
            "engine", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded", "--prefix", prefix,
            "--cluster", cluster, "--web-port", str(port), "--poll-interval", str(POLL_INTERVAL),
            "--time-scale", f"{args.speed:g}"])
        page = f"http://127.0.0.1:{port}/"
        wait_for("the engine to become active", lambda: (_status(page) or {}).get("active")
                 and not (_status(page) or {}).get("recovering"), 90, engine, engine_log)
        say(f"engine worker up: status page {page} (JSON at {page}status, Prometheus at {page}metrics)")

        common = dict(prefix=prefix, profile=EMBEDDED)
        with Publisher(broker.bootstrap, **common) as publisher:
            from engine.sim.bound import lower_bound

            bounds = {}
            bound = lower_bound(scenario)
            say(f"\n[bold]1.[/bold] {scenario.kind} ({len(scenario.targets)} partitions, "
                f"{_size(scenario.moved_bytes())} to copy; lower bound {bound.seconds:.0f} s of cluster time, set by "
                f"{bound.binding}): submitted")
            first = publisher.submit(scenario.targets, scenario.throttle)
            bounds[first] = bound.seconds
            _follow(console, broker, prefix, first, engine, engine_log, args.speed)

            snap = _snapshot(cluster)
            proposal = exact_rebalance(snap.assignment(), snap.racks(), [b.id for b in snap.brokers if b.alive])
            if proposal.proposed:
                from engine.core.commands import PartitionTarget

                targets = tuple(PartitionTarget(tp.topic, tp.partition, r) for tp, r in sorted(proposal.proposed.items()))
                say(f"\n[bold]2.[/bold] exact rebalance ({len(targets)} partitions, {proposal.replicas_moved} "
                    f"replicas to move): submitted")
                second = publisher.submit(targets, scenario.throttle)
                bounds[second] = second_bound(scenario, targets).seconds
                _follow(console, broker, prefix, second, engine, engine_log, args.speed,
                        cancel=(publisher, max(1, len(targets) // 3)))
            else:
                second = None
                say("\n[bold]2.[/bold] the cluster is already balanced exactly: no second request")

        say("\n[bold]3.[/bold] verify on the cluster:")
        for rid in [r for r in (first, second) if r]:
            result = subprocess.run(KREASSIGN + [
                "verify", "--request", rid, "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded",
                "--prefix", prefix, "--cluster", cluster], capture_output=True, text=True)
            lines = result.stdout.strip().splitlines()
            done = sum("is completed" in l for l in lines)
            reverted = sum("was rolled back" in l for l in lines)
            handed = sum("taken over by request" in l for l in lines)
            stopped = sum(": cancelled;" in l for l in lines)
            parts = [f"{done} partitions at their target"] + [
                text for n, text in ((reverted, f"{reverted} rolled back to their original replicas"),
                                     (handed, f"{handed} handed over to the next request"),
                                     (stopped, f"{stopped} cancelled where they stood")) if n]
            say(f"  request {rid}: {', '.join(parts)}. {lines[-1] if lines else result.stderr.strip()}"
                f" (exit {result.returncode})")
            if result.returncode != 0:  # say why, in verify's own words
                known = ("is completed", "was rolled back", "taken over by request", ": cancelled;", "Status of")
                for line in lines[:-1]:
                    if line.strip() and not any(k in line for k in known):
                        say(f"    {line}")

        report_dir = out / "report"
        warehouse = out / "warehouse"
        if not args.no_analytics:
            say("\n[bold]4.[/bold] analytics: the Spark job over the event log, then the report")
            analytics, alog = procs.start("analytics", KREASSIGN + [
                "analytics", "run", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded",
                "--prefix", prefix, "--warehouse", str(warehouse), "--trigger", "available-now"])
            wait_for("the analytics job", lambda: analytics.poll() is not None, 600)
            if analytics.returncode != 0:
                raise CliError(f"the analytics job failed; see {alog}")
            report, rlog = procs.start("report", KREASSIGN + [
                "analytics", "report", "--warehouse", str(warehouse), "--out", str(report_dir),
                "--time-scale", f"{args.speed:g}", "--poll-interval", str(POLL_INTERVAL),
                *[f"--lower-bound={rid}={seconds:.3f}" for rid, seconds in bounds.items()]])
            wait_for("the report", lambda: report.poll() is not None, 300)
            if report.returncode != 0:
                raise CliError(f"writing the report failed; see {rlog}")

        elapsed = time.monotonic() - started
        say(f"\n[bold]done[/bold] in {elapsed:.0f} s. Where everything is:")
        if not args.no_analytics:
            say(f"  report:     {report_dir / 'index.html'}")
            say(f"  warehouse:  {warehouse}  (kreassign analytics query --warehouse {warehouse} \"SELECT ...\")")
        say(f"  logs:       {logs}")
        say(f"  event log:  {prefix}events on {broker.bootstrap} (memory only: gone when the broker stops)")
        if args.keep_running:
            say(f"  status page {page}; kreassign status --bootstrap-server {broker.bootstrap} "
                f"--broker-profile embedded --prefix {prefix} --time-scale {args.speed:g} --watch")
            say("everything stays up until Ctrl-C")
            while True:
                time.sleep(1)
    return 0


def second_bound(scenario, targets):
    """The lower bound of the second request: its targets, from where the first one left the cluster."""
    import dataclasses

    from engine.sim.bound import lower_bound

    after = scenario.target_assignment()
    partitions = {tp: dataclasses.replace(p, replicas=after[tp]) for tp, p in scenario.partitions.items()}
    return lower_bound(dataclasses.replace(scenario, partitions=partitions, targets=tuple(targets)))


def _snapshot(cluster: str):
    """The simulated cluster as the engine sees it: through the Kafka adapter and the protocol front."""
    from engine.cluster.connect import open_cluster
    from engine.core.outcomes import Unavailable

    c = open_cluster(cluster, timeout=30)
    try:
        snap = c.snapshot()
    finally:
        c.close()
    if isinstance(snap, Unavailable):
        raise CliError(f"cannot read the simulated cluster at {cluster}: {snap}")
    return snap


def exact_rebalance(assignment, racks, alive):
    """The demo's second request: a cluster balance with a zero threshold over the live brokers
    that still hold replicas (the ones the first request drained stay out)."""
    from engine.core.balancer import propose

    in_use = {b for replicas in assignment.values() for b in replicas}
    return propose("cluster-balance", assignment, racks, sorted(b for b in alive if b in in_use), threshold=0.0)


def _status(page: str) -> dict | None:
    import urllib.request

    try:
        with urllib.request.urlopen(page + "status", timeout=2) as r:
            return json.loads(r.read())
    except Exception:  # noqa: BLE001 - not up yet
        return None


def _follow(console, broker, prefix, request_id, engine, engine_log, speed: float, cancel=None) -> None:
    """Show the request's progress live until it completes.

    ``cancel=(publisher, n)``: as soon as copies of the request are in flight, cancel up to ``n`` of
    them with rollback (KIP-236): the engine aborts those moves and the partitions go back to their
    original replicas."""
    from argparse import Namespace

    from rich.live import Live

    from engine.cli.status import Follower, document, render

    follower = Follower(Namespace(bootstrap_server=broker.bootstrap, command_config=None, prefix=prefix,
                                  broker_profile="embedded", schema_registry_url=None, timeout=30.0))
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        while True:
            follower.poll()
            live.update(render(document(follower, request_id, speed), speed))
            r = follower.state.requests.get(request_id)
            if r is not None and r.status == "completed":
                if cancel:
                    console.print("(every copy finished before a cancel could catch one in flight)")
                return
            if cancel:
                state = follower.state
                # copies the engine has seen in progress on the cluster (a step only planned or just
                # sent may not have reached it yet: that would not be a copy in flight)
                copying = sorted((tp for tp, f in state.steps.items() if f.request_id == request_id and f.step.nr
                                  and getattr(state.observed.get(tp), "adding", ())),
                                 key=lambda tp: (-(getattr(state.observed.get(tp), "size_bytes", None) or 0), tp))
                if copying:
                    publisher, n = cancel
                    chosen = copying[:n]
                    publisher.cancel(request_id, chosen, rollback=True)
                    console.print(f"cancelled {len(chosen)} partitions of {request_id} whose copies were in flight, "
                                  "with rollback (KIP-236): the engine aborts the moves and they go back to their "
                                  "original replicas")
                    cancel = None
            if engine.poll() is not None:
                raise CliError(f"the engine stopped ({engine.returncode}); see {engine_log}")
            time.sleep(0.1 if cancel else 0.5)


def _size(n: int) -> str:
    from engine.core.units import format_size

    return format_size(n)
