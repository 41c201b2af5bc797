"""The running engine (a Faust worker) on the embedded broker: events per second, recovery after a kill.

    python -m benchmarks.engine throughput --partitions 3000 [--via http|kafka]
    python -m benchmarks.engine recovery --partitions 100000
    python -m benchmarks.engine kills --kills 100
    python -m benchmarks.engine failover --profile kafka --runs 5
    python -m benchmarks.engine cycle [--partitions 300] [--steps incremental]

* ``throughput``: a worker against a sim-cluster process (fast clock, high
  limits) reassigns N partitions; events appended per second from the submit
  to RequestCompleted, and bad commands rejected per second (the command path
  alone: commands topic -> router -> decisions -> decider -> events).
* ``recovery``: the events topic holds a state of N partitions (a submit of
  all of them, queued, ready, the first batch of steps in flight, built by
  the core in process and appended with ``EventWriter``); the cluster is a
  ``sim-cluster`` process reached through its Kafka front. A worker recovers
  the log (cold start, from offset 0) and writes a snapshot; once it is on
  the topic the worker is killed with SIGKILL and a new worker process takes
  over: seconds from the kill to its web server, to its assignment of the
  decisions partition, and to ``/status`` active. ``--keep-logs DIR`` keeps
  both workers' logs.
* ``kills``: the fault-injection run of tests/test_engine.py with more kills.
* ``failover``: two workers (``--profile``: the engine's broker profile, whose
  group session and heartbeat set how soon a dead decider's partition moves)
  and a sim-cluster process reassign a topic; the active worker is SIGKILLed
  with steps in flight: seconds from the kill to the standby's ``/status``
  active (claimed, snapshot read, tail folded), and to the first event it
  appends (after the fencing lease). ``--runs`` kills in a row, a new standby
  started after each.

* ``cycle`` (issue 26, item 3): a worker with its default cadence, its log on
  the embedded broker, reassigns P partitions of 1 MiB onto a new broker at
  50 MB/s (the measured 300 x 1 MiB runs) on a sim-cluster process at speed 1
  (its brokers create a log in 0.1 s), reached through its Kafka front by the
  real adapter. The step cycle: for every completion on the cluster (the
  controller's Phase B, ``GET /v1/completions``), the seconds until the next
  alter reaches it (``GET /v1/alters``), as a distribution; and the makespan
  against Kafka's tool's in the simulator (all 225 at once: the broker
  creates their logs one at a time).

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path

import yaml

from engine.core import events as ev
from confluent_kafka import Producer

from engine.log.codec import codec_for
from engine.core.commands import Resume, Submit
from engine.log.envelope import CommandEnvelope, new_id, now
from engine.runtime.decider import Decider, MemoryLog
from engine.kafka.embedded import EMBEDDED, EmbeddedBroker
from engine.log.eventlog import EventWriter, Publisher
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster
from engine.kafka.topics import Topics, create
from tests.engine_harness import EventTail, SimCluster, Worker, wait_for


class _Broker:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap


def _scenario(partitions: int, brokers: int, size: str = "20 MB") -> dict:
    topics = max(1, partitions // 1000)
    return {
        "name": f"bench-{partitions}", "seed": 3, "brokers": {"count": brokers},
        "topics": [{"name": f"t{i}", "partitions": partitions // topics, "replication_factor": 3,
                    "min_insync_replicas": 2, "size": size, "produce_rate": "100 B/s"} for i in range(topics)],
        "reassignment": {"kind": "decommission", "brokers": [brokers]}, "throttle": "50 MB/s",
    }


def throughput(partitions: int, via: str = "http") -> None:
    """``via``: how the engine reaches the sim-cluster: ``http`` (RemoteCluster) or ``kafka`` (its real
    Kafka adapter through the sim's Kafka protocol front)."""
    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        prefix = "bench."
        create({"bootstrap.servers": b.bootstrap}, prefix)
        topics = Topics.named(prefix)
        doc = _scenario(int(partitions * 4 / 3), 4)
        sc = S.from_document(doc)
        sim = SimCluster(doc, speed=200, tmp_path=Path(tmp))
        worker = Worker(b, prefix, sim.kafka if via == "kafka" else f"sim+{sim.url}", poll=0.2)
        try:
            worker.wait_active()
            tail = EventTail(b, topics.events)
            with Publisher(b.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
                p.change_limits({"max_partitions_in_flight": 500, "max_replica_additions_in_flight": 500,
                                 "max_incoming_moves_per_broker": 200, "max_outgoing_moves_per_broker": 200})
                start_events = len(tail.poll())
                t0 = time.monotonic()
                p.submit(tuple(sc.targets), request_id="bench")
                wait_for(lambda: tail.payloads(ev.RequestCompleted), 1800, "the request to complete", interval=0.2)
                seconds = time.monotonic() - t0
                n = len(tail.events) - start_events
                print(json.dumps({"benchmark": "engine reassignment", "via": via, "partitions": len(sc.targets),
                                  "events": n,
                                  "seconds": round(seconds, 1), "events_per_second": round(n / seconds)}), flush=True)
                # the command path alone: commands the core rejects (resume while running)
                before = len(tail.payloads(ev.CommandRejected))
                count = 2000
                t0 = time.monotonic()
                producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
                codec = codec_for(CommandEnvelope)
                for _ in range(count):
                    producer.produce(topics.commands, key=b"control", value=codec.encode(_envelope(Resume())))
                producer.flush(30)
                wait_for(lambda: len(tail.payloads(ev.CommandRejected)) >= before + count, 600,
                         "every command decided", interval=0.2)
                seconds = time.monotonic() - t0
                print(json.dumps({"benchmark": "engine commands", "commands": count, "seconds": round(seconds, 1),
                                  "commands_per_second": round(count / seconds)}), flush=True)
            tail.close()
        finally:
            worker.cleanup()
            sim.cleanup()


def cycle(partitions: int, steps: str, fast: float, logs: str | None = None) -> None:
    """The engine's step cycle on many small moves (module doc)."""
    doc = {
        "name": f"cycle-{partitions}", "seed": 1, "network": {"in": "125 MB/s", "out": "125 MB/s"},
        "brokers": {"count": 4},
        "topics": [{"name": "probe", "partitions": partitions, "replication_factor": 3, "min_insync_replicas": 2,
                    "brokers": [1, 2, 3], "size": "1 MiB", "produce_rate": "113 B/s"}],
        "reassignment": {"kind": "add-broker", "brokers": [4], "threshold_percentage": 0},
        "throttle": "50 MB/s", "replica_creation_time": "100 ms",
    }
    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        prefix = "cycle."
        create({"bootstrap.servers": b.bootstrap}, prefix)
        topics = Topics.named(prefix)
        sc = S.from_document(doc)
        sim = SimCluster(doc, speed=1, tmp_path=Path(tmp))
        worker = Worker(b, prefix, sim.kafka, poll=1.0, extra=("--fast-interval", str(fast)))
        try:
            worker.wait_active()
            tail = EventTail(b, topics.events)
            with Publisher(b.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
                t0 = time.monotonic()
                p.submit(tuple(sc.targets), throttle_rate=50_000_000, request_id="cycle", steps=steps)
                wait_for(lambda: tail.payloads(ev.RequestCompleted), 1800, "the request to complete", interval=0.2)
                wall = time.monotonic() - t0
            tail.close()
            alters = sorted(a["time"] for a in sim.alters())
            done = sorted(c["time"] for c in sim.completions())
            gaps = []
            for t in done:
                later = [a for a in alters if a > t]
                if later:
                    gaps.append(later[0] - t)
            gaps.sort()

            def q(x):
                return round(gaps[min(len(gaps) - 1, int(x * len(gaps)))], 3) if gaps else None

            from engine.whatif.strategies import run as simulate
            tool = simulate(sc, "all-at-once")
            print(json.dumps({
                "benchmark": "engine step cycle", "partitions": partitions, "moves": len(sc.targets), "steps": steps,
                "fast_interval": fast, "alters": len(alters), "completions": len(done),
                "cycle_s": {"median": q(0.5), "p90": q(0.9), "max": q(1.0), "n": len(gaps)},
                "makespan_s": round(done[-1] - alters[0], 2) if done and alters else None,
                "wall_s": round(wall, 1),
                "kafka_tool_simulated_s": round(tool.makespan - (tool.first_alter or 0.0), 2),
            }), flush=True)
            _keep(worker, logs, "cycle")
        finally:
            worker.cleanup()
            sim.cleanup()


def _envelope(command):
    command = dataclasses.replace(command, command_id=new_id())
    return CommandEnvelope(command.command_id, now(), "bench", command)


def _keep(worker, logs: str | None, name: str) -> None:
    """A copy of a worker's log in ``logs`` (``--keep-logs``), to read where its seconds went."""
    if logs:
        Path(logs).mkdir(parents=True, exist_ok=True)
        (Path(logs) / f"{name}.log").write_text(worker.output())


def recovery(partitions: int, logs: str | None = None) -> None:
    """The cluster is a ``sim-cluster`` process reached through its Kafka front (the engine's real
    adapter), as a real cluster outlives the engine's processes: a new worker loads nothing of it."""
    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        prefix = "bench."
        create({"bootstrap.servers": b.bootstrap}, prefix)
        doc = _scenario(int(partitions * 4 / 3 * 1.02) // 1000 * 1000, 4)  # 3 in 4 partitions move
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(doc))
        t0 = time.monotonic()
        sc = S.load(str(path))
        targets = tuple(sc.targets)[:partitions]
        log = MemoryLog()
        d = Decider(log, SimulatedCluster.from_scenario(sc))
        d.recover(None)
        d.decide(Submit("big", targets))
        d.tick()
        built = time.monotonic() - t0
        with EventWriter(b.bootstrap, prefix=prefix, profile=EMBEDDED) as w:
            w.write(log.records)
        print(json.dumps({"benchmark": "recovery log", "partitions": len(targets), "events": len(log.records),
                          "steps_in_flight": len(d.state.steps), "built_seconds": round(built, 1)}), flush=True)
        del d, log
        broker = _Broker(b.bootstrap)
        sim = SimCluster(doc, speed=1, tmp_path=Path(tmp), start_timeout=600)
        info = ("--log-level", "info")
        first = Worker(broker, prefix, sim.kafka, poll=1.0, extra=info)
        try:
            t0 = time.monotonic()
            status = first.wait_active(1800)
            cold = time.monotonic() - t0
            print(json.dumps({"benchmark": "recovery cold start", "partitions": len(targets),
                              "seconds_to_active": round(cold, 1), "recovery": status.get("recovery")}), flush=True)
            # the cold start folded the whole log: it writes a snapshot of it at once (docs/engine.md); the
            # kill comes once that snapshot is on the topic, so the next worker starts from it
            written = wait_for(lambda: ((first.status() or {}).get("snapshots") or {}).get("last"), 600,
                               "the first worker's snapshot")
            print(json.dumps({"benchmark": "recovery snapshot written", "snapshot": written}), flush=True)
            first.kill()
            t0, killed_wall = time.monotonic(), time.time()
            second = Worker(broker, prefix, sim.kafka, poll=1.0, extra=info)
            try:
                wait_for(lambda: second._check() or second.status(), 120, "the new worker's web server", interval=0.05)
                web = time.monotonic() - t0
                status = second.wait_active(1800)
                after = time.monotonic() - t0
                print(json.dumps({"benchmark": "recovery after SIGKILL", "partitions": len(targets),
                                  "seconds_kill_to_active": round(after, 2),
                                  "seconds_kill_to_web_server": round(web, 2),
                                  "seconds_kill_to_assigned": _logged_after(second.output(),
                                                                            "owns the decisions partition", killed_wall),
                                  "recovery": status.get("recovery"),
                                  "partitions_remaining": status.get("partitions_remaining")}), flush=True)
            finally:
                _keep(second, logs, "recovery-second")
                second.cleanup()
        finally:
            _keep(first, logs, "recovery-first")
            first.cleanup()
            sim.cleanup()


def kills(count: int, seed: int) -> None:
    """tests/test_engine.py's SIGKILL run, with ``count`` kills (the test does 20)."""
    from tests import test_engine as T

    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        prefix = "kills."
        create({"bootstrap.servers": b.bootstrap}, prefix)
        topics = Topics.named(prefix)
        doc = T.scenario_doc(670)
        sc = S.from_document(doc)
        targets = tuple(sc.targets)
        sim = SimCluster(doc, speed=20, tmp_path=Path(tmp))
        procs = [sim]
        try:
            worker = Worker(b, prefix, f"sim+{sim.url}")
            procs.append(worker)
            worker.wait_active()
            t0 = time.monotonic()
            with Publisher(b.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
                p.change_limits({"max_partitions_in_flight": 20, "max_incoming_moves_per_broker": 20,
                                 "max_outgoing_moves_per_broker": 20})
                p.submit(targets, request_id="r1")
            tail = EventTail(b, topics.events)
            thresholds = sorted(random.Random(seed).sample(range(100, 4000), count))
            mid_run = 0
            for threshold in thresholds:
                wait_for(lambda: len(tail.poll()) >= threshold, 300, f"{threshold} events")
                mid_run += not tail.payloads(ev.RequestCompleted)
                worker.kill()
                worker = Worker(b, prefix, f"sim+{sim.url}")
                procs.append(worker)
                worker.wait_active(120)
            wait_for(lambda: tail.payloads(ev.RequestCompleted), 600, "the request to complete")
            T.check_run(tail, sim, "r1", targets)
            print(json.dumps({"benchmark": "kills", "partitions": len(targets), "kills": count,
                              "kills_before_completion": mid_run, "events": len(tail.events),
                              "seconds": round(time.monotonic() - t0, 1), "converged": True}), flush=True)
            tail.close()
        finally:
            for p in procs:
                p.cleanup()


def failover(runs: int, profile: str, logs: str | None = None) -> None:
    from tests import test_engine as T
    from tests.engine_harness import get_json

    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        prefix = "failover."
        create({"bootstrap.servers": b.bootstrap}, prefix)
        topics = Topics.named(prefix)
        doc = T.scenario_doc(400, size="400 MB")
        sc = S.from_document(doc)
        sim = SimCluster(doc, speed=5, tmp_path=Path(tmp))
        procs = [sim]
        try:
            info = ("--log-level", "info")
            workers = [Worker(b, prefix, sim.kafka, broker_profile=profile, extra=info) for _ in range(2)]
            procs += workers
            active = wait_for(lambda: next((w for w in workers if w.active()), None), 120, "one decider")
            with Publisher(b.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
                p.submit(tuple(sc.targets), request_id="r1")
            tail = EventTail(b, topics.events)
            wait_for(lambda: len(tail.payloads(ev.StepStarted)) >= 3, 120, "steps started")
            writers = _Writers(b.bootstrap, topics.events)
            figures = []
            for run in range(runs):
                standby = next(w for w in workers if w is not active and w.alive())
                wait_for(lambda: standby.status() is not None, 60, "the standby's web server")
                # a standby that has run a while: its own joining rebalance is over (Faust is ready)
                # and the active worker decides again after it, as in a cluster running for days
                wait_for(lambda: "[^Worker]: Ready" in standby.output(), 120, "the standby's first assignment")
                wait_for(lambda: active.active(), 120, "the active worker after the standby joined")
                new_id = get_json(standby.web + "/status")["worker"]
                active.kill()
                killed, killed_wall = time.monotonic(), time.time()
                status = standby.wait_active(120)
                to_active = time.monotonic() - killed
                wait_for(lambda: writers.poll(new_id), 120, "the standby's first event")
                to_event = time.monotonic() - killed
                figures.append({"seconds_to_active": round(to_active, 2), "seconds_to_first_event": round(to_event, 2),
                                "seconds_to_assigned": _logged_after(standby.output(), "owns the decisions partition",
                                                                     killed_wall),
                                "recovery": status.get("recovery")})
                print(json.dumps({"benchmark": "failover", "profile": profile, "run": run + 1, **figures[-1]}),
                      flush=True)
                _keep(standby, logs, f"failover-{profile}-run{run + 1}-standby")
                _keep(active, logs, f"failover-{profile}-run{run + 1}-killed")
                active = standby
                workers = [active, Worker(b, prefix, sim.kafka, broker_profile=profile, extra=info)]
                procs.append(workers[1])
            ordered = sorted(f["seconds_to_active"] for f in figures)
            print(json.dumps({"benchmark": "failover summary", "profile": profile, "runs": runs,
                              "median_seconds_to_active": ordered[len(ordered) // 2],
                              "max_seconds_to_active": ordered[-1],
                              "median_seconds_to_first_event": sorted(f["seconds_to_first_event"]
                                                                      for f in figures)[len(figures) // 2]}),
                  flush=True)
            tail.close()
            writers.close()
        finally:
            for p in procs:
                p.cleanup()


def _logged_after(log: str, phrase: str, since: float) -> float | None:
    """Seconds from ``since`` (wall clock) to the first log line with ``phrase`` logged after it."""
    from datetime import datetime

    for line in log.splitlines():
        if phrase in line and line.startswith("["):
            at = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if at >= since:
                return round(at - since, 2)
    return None


class _Writers:
    """Who appended each committed event (the ``writer`` header), as the events topic grows."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-bench",
                                  "enable.auto.commit": False, **EMBEDDED.consumer})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.seen: set[str] = set()

    def poll(self, writer: str) -> bool:
        from engine.log.eventlog import WRITER_HEADER

        for m in self.consumer.consume(1000, 0.05):
            if m.error() is None:
                self.seen.add(dict(m.headers() or []).get(WRITER_HEADER, b"").decode())
        return writer in self.seen

    def close(self) -> None:
        self.consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--partitions", type=int, default=3000)
    t.add_argument("--via", choices=["http", "kafka"], default="http",
                   help="the engine's cluster: the sim-cluster over HTTP, or over the Kafka protocol (real adapter)")
    r = sub.add_parser("recovery")
    r.add_argument("--partitions", type=int, default=100_000)
    r.add_argument("--keep-logs", metavar="DIR", help="copy the workers' logs into DIR")
    k = sub.add_parser("kills")
    k.add_argument("--kills", type=int, default=100)
    k.add_argument("--seed", type=int, default=1)
    f = sub.add_parser("failover")
    f.add_argument("--runs", type=int, default=5)
    f.add_argument("--profile", choices=["kafka", "embedded"], default="kafka",
                   help="the workers' broker profile (its group session and heartbeat)")
    f.add_argument("--keep-logs", metavar="DIR", help="copy each run's workers' logs into DIR")
    c = sub.add_parser("cycle")
    c.add_argument("--partitions", type=int, default=300)
    c.add_argument("--steps", choices=["incremental", "kip-435", "whole"], default="incremental")
    c.add_argument("--fast-interval", type=float, default=0.1, help="the engine's --fast-interval (default 0.1)")
    c.add_argument("--keep-logs", metavar="DIR", help="copy the worker's log into DIR")
    args = ap.parse_args()
    if args.what == "cycle":
        cycle(args.partitions, args.steps, args.fast_interval, args.keep_logs)
    elif args.what == "throughput":
        throughput(args.partitions, args.via)
    elif args.what == "recovery":
        recovery(args.partitions, args.keep_logs)
    elif args.what == "failover":
        failover(args.runs, args.profile, args.keep_logs)
    else:
        kills(args.kills, args.seed)


if __name__ == "__main__":
    main()
