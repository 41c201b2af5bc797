"""``kreassign demo``: a whole reassignment, from a fresh clone, in a few minutes.

It starts everything on this machine (the embedded broker holding the event
log, a simulated cluster as its own process speaking the Kafka protocol, an
engine worker reassigning it through its real Kafka adapter, as it would a
production cluster), then:

1. submits the scenario's reassignment (the default scenario decommissions
   broker 6 of a six-broker, three-rack cluster), shows its progress live, and
   its makespan against the lower bound, with what the engine's own time adds
   at this speed;
2. submits a second request, the balancer's exact rebalance of the result, at
   a trickle of a throttle (1 MB/s per broker, KIP-73), so that its copies are
   still in flight when it cancels the largest of them with rollback (KIP-236):
   at that rate none of them can finish before the cancel is decided, so the
   moves are aborted and those partitions go back where they were (the
   engine's verdict says what it did); then it raises the throttle to the
   scenario's and the rest of the rebalance completes;
3. verifies both requests on the cluster (targets reached, throttles cleared),
   runs the analytics job over the event log and writes the HTML report, both
   in one Spark session (``kreassign analytics run --report``);
4. prints where everything is, and stops every process it started (unless
   ``--keep-running``), the engine first, then the simulated cluster, then the
   broker they both use (the event log lives in its memory: the warehouse's
   audit table keeps every event). Ctrl-C at any moment stops them too.

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
from datetime import datetime
from pathlib import Path

from engine.bundled import SCENARIO_DIR
from engine.cli import CliError

DEFAULT_SCENARIO = SCENARIO_DIR / "demo.yaml"
KREASSIGN = [sys.executable, "-m", "engine.cli"]
DEFAULT_SPEED = 30.0


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="run a whole reassignment on this machine: broker, simulated cluster, engine")
    p.add_argument("--scenario", default=str(DEFAULT_SCENARIO), metavar="FILE",
                   help="the cluster and its reassignment (default ops/scenarios/demo.yaml)")
    p.add_argument("--speed", type=float, default=DEFAULT_SPEED, metavar="X",
                   help=f"simulated time runs X times the wall clock (default {DEFAULT_SPEED:g})")
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
FAST_INTERVAL = 0.1
"""The engine's --fast-interval (its default), in wall-clock seconds."""
TRICKLE = 1_000_000
"""The rebalance's throttle until the cancel is decided (bytes/s per broker): its copies crawl."""
CANCEL_COPIES = 3
"""How many of the rebalance's copies in flight the demo cancels with rollback (the largest)."""
CANCEL_MARGIN = 5.0
"""Wall-clock seconds a copy chosen for the cancel cannot finish within, from the moment it is chosen:
far more than the engine takes to decide a cancel (well under a second), so the moves are still in
flight when it is decided (and the verdict says so, or says what happened instead)."""
QUOTA_WINDOW_SECONDS = 11.0
"""Kafka's replication quota measures the rate over replication.quota.window.num (11) windows of
replication.quota.window.size.seconds (1): a copy may get up to that many seconds of the throttled
rate through ahead of it."""


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
    except ScenarioError as e:  # it names the file
        raise CliError(str(e)) from None
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
    from argparse import Namespace

    from engine.cli import console_for

    from engine.cli.status import Follower
    from engine.kafka.embedded import EMBEDDED, EmbeddedBroker, free_port
    from engine.kafka.topics import create
    from engine.log.eventlog import Publisher

    console = console_for(sys.stdout)  # into a pipe or a file: lines are not wrapped at 80 columns
    say = console.print
    say(f"[bold]kreassign demo[/bold]: {scenario.name}: {scenario.description.strip()}")
    say(f"writing to {out}")
    prefix = "demo."
    phases: list[tuple[str, float]] = []
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
            "--fast-interval", str(FAST_INTERVAL), "--time-scale", f"{args.speed:g}",
            # no request budget: it counts requests per wall-clock second, and the simulated cluster runs --speed
            # times faster (at 30x, 20 a second would be two-thirds of a request per second of cluster time)
            "--request-budget", "0"])
        page = f"http://127.0.0.1:{port}/"
        wait_for("the engine to become active", lambda: (_status(page) or {}).get("active")
                 and not (_status(page) or {}).get("recovering"), 90, engine, engine_log)
        say(f"engine worker up: status page {page} (JSON at {page}status, Prometheus at {page}metrics)")
        phases.append(("start-up", time.monotonic() - started))

        follower = Follower(Namespace(bootstrap_server=broker.bootstrap, command_config=None, prefix=prefix,
                                      broker_profile="embedded", schema_registry_url=None, timeout=30.0))
        common = dict(prefix=prefix, profile=EMBEDDED)
        with Publisher(broker.bootstrap, **common) as publisher:
            from engine.sim.bound import lower_bound

            bounds = {}
            bound = lower_bound(scenario)
            cadence = cadence_makespan(scenario, args.speed)  # before the submit: the engine is idle now
            began = time.monotonic()
            say(f"\n[bold]1.[/bold] {scenario.kind} ({len(scenario.targets)} partitions, "
                f"{_size(scenario.moved_bytes())} to copy; lower bound {bound.seconds:.0f} s of cluster time, set by "
                f"{bound.binding}): submitted")
            first = publisher.submit(scenario.targets, scenario.throttle)
            bounds[first] = bound.seconds
            _follow(console, follower, first, engine, engine_log, args.speed)
            say("\n" + makespan_note(scenario.kind, follower.progress.requests[first], bound.seconds, cadence, args.speed))
            phases.append((f"1. {scenario.kind}", time.monotonic() - began))

            began = time.monotonic()
            snap = _snapshot(cluster)
            proposal = exact_rebalance(snap.assignment(), snap.racks(), [b.id for b in snap.brokers if b.alive])
            if proposal.proposed:
                from engine.core.commands import PartitionTarget

                targets = tuple(PartitionTarget(tp.topic, tp.partition, r) for tp, r in sorted(proposal.proposed.items()))
                say(f"\n[bold]2.[/bold] exact rebalance ({len(targets)} partitions, {proposal.replicas_moved} "
                    f"replicas to move): submitted at a throttle of {_size(TRICKLE)}/s per broker, so that its copies "
                    "are still in flight when some are cancelled")
                second = publisher.submit(targets, TRICKLE)
                bounds[second] = second_bound(scenario, targets).seconds
                cancel_in_flight(console, follower, publisher, broker.bootstrap, prefix, second, began, args.speed,
                                 engine, engine_log)
                rate = scenario.throttle
                publisher.change_throttle(rate)
                say(f"throttle raised to {_size(rate) + '/s' if rate else 'none'} (KIP-73): the copies in flight "
                    "speed up with the engine's next decision, the rest of the rebalance follows")
                _follow(console, follower, second, engine, engine_log, args.speed)
            else:
                second = None
                say("\n[bold]2.[/bold] the cluster is already balanced exactly: no second request")
            phases.append(("2. rebalance and cancel", time.monotonic() - began))

        began = time.monotonic()
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
        phases.append(("3. verify", time.monotonic() - began))

        report_dir = out / "report"
        warehouse = out / "warehouse"
        if not args.no_analytics:
            began = time.monotonic()
            say("\n[bold]4.[/bold] analytics: the Spark job over the event log, then the report (one Spark session)")
            analytics, alog = procs.start("analytics", KREASSIGN + [
                "analytics", "run", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded",
                "--prefix", prefix, "--warehouse", str(warehouse), "--trigger", "available-now",
                "--report", str(report_dir), "--time-scale", f"{args.speed:g}", "--poll-interval", str(POLL_INTERVAL),
                *[f"--lower-bound={rid}={seconds:.3f}" for rid, seconds in bounds.items()]])
            wait_for("the analytics job and the report", lambda: analytics.poll() is not None, 900)
            if analytics.returncode != 0:
                raise CliError(f"the analytics job or the report failed; see {alog}")
            phases.append(("4. analytics and report", time.monotonic() - began))

        elapsed = time.monotonic() - started
        say(f"\n[bold]done[/bold] in {elapsed:.0f} s ({', '.join(f'{name} {s:.0f} s' for name, s in phases)}). "
            "Where everything is:")
        if not args.no_analytics:
            say(f"  report:     {report_dir / 'index.html'}")
            say(f"  warehouse:  {warehouse}  (every event of the log in its audit table: kreassign analytics query "
                f"--warehouse {warehouse} \"SELECT ...\")", soft_wrap=True)
        say(f"  logs:       {logs}")
        if args.keep_running:
            say(f"  event log:  {prefix}events on {broker.bootstrap} (in the broker's memory: gone when it stops)")
            say(f"  status page {page}; kreassign status --bootstrap-server {broker.bootstrap} "
                f"--broker-profile embedded --prefix {prefix} --time-scale {args.speed:g} --watch", soft_wrap=True)
            say("everything stays up until Ctrl-C")
            while True:
                time.sleep(1)
        say("  event log:  it was in the embedded broker's memory, which stops with the demo"
            + (" (the warehouse's audit table keeps every event)" if not args.no_analytics else
               " (--keep-running keeps it up)"))
    return 0


def cadence_makespan(scenario, speed: float) -> float:
    """``kreassign simulate``'s makespan of the scenario (cluster seconds), the core deciding in no time
    but looking only as often as the demo's engine does in cluster time (its poll and fast intervals are
    wall-clock seconds: at ``speed`` x they are ``speed`` times as long on the cluster's clock)."""
    import dataclasses

    from engine.whatif.strategies import run as simulate

    return simulate(dataclasses.replace(scenario, poll_interval=POLL_INTERVAL * speed,
                                        fast_interval=FAST_INTERVAL * speed), "kreassign").makespan


def makespan_note(what: str, progress, bound: float, cadence: float, speed: float) -> str:
    """The request's makespan against its lower bound, and what makes it longer than simulate's."""
    wall = (progress.completed_at - progress.accepted_at).total_seconds()
    cluster = wall * speed
    return (f"the {what} took {cluster:.0f} s of cluster time ({wall:.0f} s of wall clock), {cluster / bound:.2f}x its lower "
            f"bound. kreassign simulate, whose core decides in no time, takes {cadence / bound:.2f}x looking as "
            f"often as this engine: every {POLL_INTERVAL:g} s of wall clock, {POLL_INTERVAL * speed:g} s of cluster "
            f"time at {speed:g}x. The rest is the engine's own time (writing each decision to the log, asking the "
            f"cluster), every wall-clock second of which is {speed:g} s of cluster time here; a lower --speed shows "
            "less of it.")


def copies_to_cancel(state, request_id: str, rate: int, speed: float, elapsed: float, n: int,
                     margin: float = CANCEL_MARGIN) -> list:
    """Up to ``n`` of the request's copies the engine has seen in flight on the cluster that cannot
    finish within ``margin`` wall-clock seconds from now, largest first. Every copy started after
    the submit, ``elapsed`` wall-clock seconds ago, and none goes faster than the throttle ``rate``
    (bytes/s) after Kafka's quota window: a copy of a partition larger than
    ``rate x ((elapsed + margin) x speed + QUOTA_WINDOW_SECONDS)`` is still copying then."""
    least = rate * ((elapsed + margin) * speed + QUOTA_WINDOW_SECONDS)
    found = []
    for tp, f in state.steps.items():
        obs = state.observed.get(tp)
        if f.request_id != request_id or not f.step.nr or obs is None or not obs.adding:
            continue  # a step only planned or just sent may not have reached the cluster: not a copy in flight
        if (obs.size_bytes or 0) > least:
            found.append((-(obs.size_bytes or 0), tp))
    return [tp for _size, tp in sorted(found)[:n]]


def cancel_in_flight(console, follower, publisher, bootstrap: str, prefix: str, request_id: str, submitted: float,
                     speed: float, engine, engine_log) -> None:
    """Cancel ``CANCEL_COPIES`` of the request's copies in flight with rollback (KIP-236), chosen so
    that they cannot have finished when the engine decides the cancel, and say what the engine did,
    from its verdict."""
    from engine.core.units import format_duration
    from engine.kafka.broker_profile import profile
    from engine.kafka.client_config import ClientConfig
    from engine.kafka.topics import Topics, reader_group
    from engine.log.eventlog import end_offset

    chosen: list = []
    steady = [None, 0.0]  # the request's steps in flight as last seen, and since when (wall clock)

    def enough(f) -> bool:
        """Enough copies to cancel, or fewer but no other step starts (each broker's move caps are
        held by copies that crawl: nothing changes for a second)."""
        nonlocal chosen
        chosen = copies_to_cancel(f.state, request_id, TRICKLE, speed, time.monotonic() - submitted, CANCEL_COPIES)
        now = time.monotonic()
        seen = sorted((tp, s.number, bool(getattr(f.state.observed.get(tp), "adding", ())))
                      for tp, s in f.state.steps.items() if s.request_id == request_id)
        if seen != steady[0]:
            steady[:] = [seen, now]
        return len(chosen) >= CANCEL_COPIES or (bool(chosen) and now - steady[1] >= 1.0)

    _follow(console, follower, request_id, engine, engine_log, speed, until=enough, timeout=60, transient=True)
    if not chosen:
        console.print("no copy in flight is large enough to be sure it is still copying when the cancel is "
                      "decided: no cancel")
        return
    config = ClientConfig().with_bootstrap(bootstrap)
    events = Topics.named(prefix).events
    start = end_offset(config, events, group_id=reader_group(prefix), profile=profile("embedded"))
    command_id = publisher.cancel(request_id, chosen, rollback=True)
    sizes = ", ".join(f"{tp} ({_size(follower.state.observed[tp].size_bytes)})" for tp in chosen)
    which = (f"the largest copy in flight, {sizes}: at {_size(TRICKLE)}/s it cannot finish" if len(chosen) == 1 else
             f"the {len(chosen)} largest copies in flight, {sizes}: at {_size(TRICKLE)}/s none can finish")
    console.print(f"cancel with rollback (KIP-236): {which} within {CANCEL_MARGIN:g} s of wall clock "
                  f"({format_duration(CANCEL_MARGIN * speed)} of cluster time)")
    decision = _decision(config, events, prefix, command_id, start)
    console.print(cancel_outcome(decision, chosen) if decision is not None else
                  "no verdict on the cancel within 60 s: see the engine's log")


def _decision(config, topic: str, prefix: str, command_id: str, start: int, timeout: float = 60.0):
    """The events of the engine's decision on ``command_id`` (its verdict first), or ``None``."""
    from engine.kafka.broker_profile import profile
    from engine.kafka.topics import reader_group
    from engine.log.envelope import EventEnvelope
    from engine.log.eventlog import decoder_for, follow
    from engine.views.verdict import Watch

    watch = Watch(command_id)
    deadline = time.monotonic() + timeout
    messages = follow(config, topic, decoder_for(EventEnvelope, None, topic), lambda _letter: None,
                      start_offset=start, group_id=reader_group(prefix), profile=profile("embedded"))
    try:
        for m in messages:
            watch.end() if m is None else watch.feed(m.value)
            if watch.verdict is not None:
                return watch.decision
            if time.monotonic() > deadline:
                return None
    finally:
        messages.close()
    return None


def cancel_outcome(decision: list, named: list) -> str:
    """What the engine did with the cancel of ``named``, from its decision's events (KIP-236: a copy
    in flight is aborted and the partition goes back to its original replicas; a cancel that would
    leave no replica in sync is skipped until the step ends; a partition already completed stays)."""
    from engine.core import events as ev
    from engine.views.verdict import count

    first = decision[0]
    if isinstance(first, ev.CommandRejected):
        return "the engine rejected the cancel: " + "; ".join(first.reasons)
    aborted, dropped, skipped = [], [], []
    for e in decision[1:]:
        if getattr(e, "request_id", None) != first.request_id:
            continue
        if isinstance(e, ev.PartitionCancelled) and e.superseded_by is None and e.tp in named:
            (aborted if e.aborting is not None else dropped).append(e.tp)
        elif isinstance(e, ev.CancelSkipped) and e.tp in named:
            skipped.append(f"{e.tp} ({e.reason})")
    ended = [tp for tp in named if tp not in aborted and tp not in dropped
             and not any(s.startswith(f"{tp} (") for s in skipped)]
    def named(tps) -> str:
        return ", ".join(map(str, tps))

    parts = []
    if aborted:
        parts.append(f"{count(len(aborted), 'copy', 'copies')} in flight aborted: {named(aborted)} "
                     + ("goes back to its" if len(aborted) == 1 else "go back to their") + " original replicas")
    if dropped:
        parts.append(f"{count(len(dropped), 'partition')} cancelled with no copy in flight: {named(dropped)}")
    if skipped:
        parts.append(f"{count(len(skipped), 'cancel')} skipped until the step in flight ends: {', '.join(skipped)}")
    if ended:
        parts.append(f"{count(len(ended), 'partition')} had completed before the cancel was decided and "
                     + ("stays at its" if len(ended) == 1 else "stay at their") + f" target: {named(ended)}")
    return "the engine's verdict: " + "; ".join(parts)


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


def _follow(console, follower, request_id, engine, engine_log, speed: float, until=None, timeout: float | None = None,
            transient: bool = False) -> None:
    """Show the request's progress live until it completes, or until ``until(follower)`` is true
    (``timeout`` wall-clock seconds at most)."""
    from rich.live import Live

    deadline = None if timeout is None else time.monotonic() + timeout
    if not console.is_terminal:
        # a pipe or a log file: no live redraw (it would print its last frame cropped to 80 columns),
        # the last frame once, its lines whole
        frame = None
        try:
            frame = _until_done(lambda f: None, follower, request_id, engine, engine_log, speed, until, deadline)
        finally:
            if frame is not None and not transient:
                console.print(frame, soft_wrap=True)
        return
    with Live(console=console, refresh_per_second=4, transient=transient) as live:
        _until_done(live.update, follower, request_id, engine, engine_log, speed, until, deadline)


def _until_done(show, follower, request_id, engine, engine_log, speed, until, deadline):
    """Poll and ``show`` each frame until the request completes, ``until(follower)`` or the deadline;
    the last frame."""
    from engine.cli.status import document, render

    while True:
        follower.poll()
        frame = render(document(follower, request_id, speed), speed)
        show(frame)
        if until is not None and until(follower):
            return frame
        r = follower.state.requests.get(request_id)
        if r is not None and r.status == "completed":
            return frame
        if deadline is not None and time.monotonic() > deadline:
            return frame
        if engine.poll() is not None:
            raise CliError(f"the engine stopped ({engine.returncode}); see {engine_log}")
        time.sleep(0.1 if until is not None else 0.5)


def _size(n: int) -> str:
    from engine.core.units import format_size

    return format_size(n)
