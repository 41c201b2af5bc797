"""What the engine's looks cost a cluster: requests per second per broker and bytes of responses,
counted where they arrive (the simulated cluster's Kafka front, ``KafkaFront.counts``), and the CPU the
engine and the embedded broker use while the engine idles.

    python -m benchmarks.looks [--partitions 24] [--moving 18] [--size "16 MB"] [--throttle 4000000]
                               [--idle 30] [--profile kafka|embedded] [--engine-root DIR] [--request-budget N]
    python -m benchmarks.looks log [--idle 60] [--profile kafka|embedded] [--engine-root DIR]
    python -m benchmarks.looks inprocess [--fast-interval 0.1]
    python -m benchmarks.looks logdirs [--partitions 4000]

* default: the real engine (``kreassign engine --cluster kafka://<front>``, its event log on the embedded
  broker) against a ``kreassign sim-cluster`` process at speed 1 (4 brokers; one topic of
  ``--partitions`` partitions, RF 3 on brokers 1, 2, 3; ``--moving`` of them move one replica to
  broker 4, as in the real-cluster records of ``shared/measurements``). Three phases, each counted
  anew: ``idle-before`` (the engine active, nothing submitted, ``--idle`` seconds), ``move`` (from
  the submit to ``RequestCompleted``), ``idle-after`` (``--idle`` seconds after it). For each: seconds,
  requests/s per broker and API, response bytes/s, and in the idle phases the CPU (share of one
  core, from /proc) of the engine process and of the embedded broker. ``--engine-root`` runs the
  engine from another checkout (the code before a change: ``git archive <commit> | tar -x -C DIR``);
  the sim-cluster is always this one (it counts). ``--request-budget N`` is passed to the engine (its
  ``--request-budget``; not given: the engine's default). During the move the front's counts are read
  (and reset) every ``SAMPLE`` seconds (``Windows``): the ``windows`` line gives, per broker, the most
  requests in any window of consecutive reads spanning at most 1 s, with and without the actions
  (``ACTIONS``), and how many windows held more than the budget.
* ``log``: what an idle engine (active, nothing submitted) asks of the cluster holding its event log,
  here the embedded broker behind a recording proxy (``tests/kafka_recorder.py``): requests per second
  by API and client over ``--idle`` seconds, and the CPU of the engine and of the embedded broker.
  ``--cluster sim`` (the default here) keeps the reassigned cluster out of the count.
* ``inprocess``: the decider alone on the simulated cluster's virtual clock (no Kafka): the same move,
  driven as the worker drives it (the timer every ``--fast-interval``, a tick when one is due; the code
  before this change: a tick every 0.1 s), counting the calls to the cluster; and an idle minute. Run
  the code before with this file copied into its checkout: ``cp benchmarks/looks.py OLD/benchmarks/ &&
  cd OLD && python -m benchmarks.looks inprocess``.
* ``logdirs``: what one broker hosting ``--partitions`` partitions answers to DescribeLogDirs
  through kafka-python, with and without a partition filter (the bytes of the response, counted
  by the front), and to the Metadata of the whole topic (librdkafka's ``describe_topics``).

Prints one JSON line per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from engine.core import events as ev
from engine.core.commands import PartitionTarget
from engine.core.step import DEFAULT_STEP_MODE, STEP_MODES
from engine.kafka.embedded import EmbeddedBroker, free_port
from engine.kafka.topics import Topics, create
from engine.log.eventlog import Publisher
from engine.kafka.broker_profile import profile as broker_profile
from tests.engine_harness import EventTail, Process, get_json, wait_for

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def scenario(partitions: int, size: str, moving: int) -> tuple[dict, list[PartitionTarget]]:
    doc = {
        "name": "looks", "seed": 3,
        "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
        "topics": [{"name": "t", "min_insync_replicas": 2, "produce_rate": "20 kB/s",
                    "assignment": [{"replicas": [1 + (p + i) % 3 for i in range(3)], "size": size}
                                   for p in range(partitions)]}],
    }
    targets = []
    for p in range(min(moving, partitions)):
        replicas = [1 + (p + i) % 3 for i in range(3)]
        replicas[1 + p % 2] = 4  # one follower replica to broker 4, the leader stays
        targets.append(PartitionTarget("t", p, tuple(replicas)))
    return doc, targets


class Spawned(Process):
    """A process of ours, run from ``root`` (another checkout: the engine before a change)."""

    def __init__(self, args: list[str], name: str, root: Path):
        fd, self.log_path = tempfile.mkstemp(prefix=f"kreassign-{name}-", suffix=".log")
        self.tmp = tempfile.mkdtemp(prefix=f"kreassign-{name}-")
        self.name = name
        env = {**os.environ, "TMPDIR": self.tmp, "PYTHONPATH": str(root)}
        self.p = subprocess.Popen(args, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True, cwd=root, env=env)
        os.close(fd)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rates(counts: dict, seconds: float) -> dict:
    per_broker = {}
    for b, apis in sorted(counts["brokers"].items(), key=lambda kv: int(kv[0])):
        n = sum(a["requests"] for a in apis.values())
        size = sum(a["response_bytes"] for a in apis.values())
        per_broker[b] = {"requests_per_s": round(n / seconds, 2), "response_bytes_per_s": round(size / seconds),
                         "apis": {k: round(v["requests"] / seconds, 2) for k, v in sorted(apis.items())}}
    total = counts["total"]
    return {"seconds": round(seconds, 1), "requests_per_s": round(total["requests"] / seconds, 2),
            "response_bytes_per_s": round(total["response_bytes"] / seconds),
            "max_requests_per_s_of_a_broker": max((v["requests_per_s"] for v in per_broker.values()), default=0.0),
            "brokers": per_broker}


SAMPLE = 0.25
"""Seconds between two reads of the front's counts while moving (``Windows``)."""
ACTIONS = frozenset({"AlterPartitionReassignments", "IncrementalAlterConfigs", "ElectLeaders"})
"""The front's API names of the engine's actions (never deferred by the request budget)."""


class Windows:
    """The front's counts read and reset every ``SAMPLE`` seconds in a thread of its own, each read kept
    with the monotonic time it came back: ``worst()`` sums consecutive reads into windows of at most 1 s.
    Requests between two reads fall in the later one; a window's span is measured, not assumed."""

    def __init__(self, url: str):
        import threading

        self.url = url
        self.samples: list[tuple[float, dict]] = []  # (when the read came back, broker -> api -> requests)
        self.stop_ = threading.Event()
        get_json(url + "/v1/requests?reset=1")
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        k = 1
        while not self.stop_.is_set():
            time.sleep(max(0.0, self.started + k * SAMPLE - time.monotonic()))
            counts = get_json(self.url + "/v1/requests?reset=1")
            at = time.monotonic()
            self.samples.append((at, {int(b): {api: v["requests"] for api, v in apis.items()}
                                      for b, apis in counts["brokers"].items()}))
            k = max(k + 1, int((at - self.started) / SAMPLE) + 1)

    def stop(self) -> dict:
        """The counts since the start, in the shape of ``KafkaFront.counts`` (requests only)."""
        self.stop_.set()
        self.thread.join()
        brokers: dict = {}
        for _at, per in self.samples:
            for b, apis in per.items():
                for api, n in apis.items():
                    entry = brokers.setdefault(str(b), {}).setdefault(api, {"requests": 0, "response_bytes": 0})
                    entry["requests"] += n
        total = sum(v["requests"] for apis in brokers.values() for v in apis.values())
        return {"brokers": brokers, "total": {"requests": total, "response_bytes": 0}}

    def worst(self, budget: float | None = None, actions: bool = True, leave_out: tuple[str, ...] = ()) -> dict:
        """Per broker, the most requests in a window of consecutive reads spanning at most 1 s (from the
        read before its first), and how many such windows (at each read, the longest run of reads ending
        there within 1 s) held more than ``budget`` at some broker; ``leave_out``: APIs not counted."""
        times = [self.started] + [at for at, _ in self.samples]
        most: dict[int, int] = {}
        over = 0
        for end in range(1, len(times)):
            start = end
            while start - 1 >= 0 and times[end] - times[start - 1] <= 1.0:
                start -= 1
            if start == end:
                continue
            counts: dict[int, int] = {}
            for _at, per in self.samples[start:end]:
                for b, apis in per.items():
                    counts[b] = counts.get(b, 0) + sum(n for api, n in apis.items()
                                                       if (actions or api not in ACTIONS) and api not in leave_out)
            for b, n in counts.items():
                most[b] = max(most.get(b, 0), n)
            if budget is not None and max(counts.values(), default=0) > budget:
                over += 1
        return {"most_in_a_window": dict(sorted(most.items())), "windows_over_budget": over,
                "windows": len(times) - 1}


def run(args) -> None:
    root = Path(args.engine_root).resolve() if args.engine_root else ROOT
    python = [sys.executable, "-m", "engine.cli"]
    doc, targets = scenario(args.partitions, args.size, args.moving)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        prefix = "looks."
        create({"bootstrap.servers": broker.bootstrap}, prefix)
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(doc))
        procs = []
        try:
            sim = Spawned(python + ["sim-cluster", "--scenario", str(path), "--speed", "1", "--kafka-port", "0"],
                          "sim", ROOT)
            procs.append(sim)

            def addresses():
                first = sim.output().split("\n", 1)[0]
                if " at http://" in first and "Kafka bootstrap " in first:
                    return first.split(" at ", 1)[1].split(" ", 1)[0], first.split("Kafka bootstrap ", 1)[1].split()[0]
                assert sim.alive(), sim.output()
                return None

            url, bootstrap = wait_for(addresses, 30, "the sim-cluster")
            port = free_port()
            budget_args = [] if args.request_budget is None else ["--request-budget", f"{args.request_budget:g}"]
            engine = Spawned(python + ["engine", "--bootstrap-server", broker.bootstrap, "--broker-profile",
                                       args.profile, "--prefix", prefix, "--cluster", f"kafka://{bootstrap}",
                                       "--web-port", str(port), *budget_args, *args.engine_args], "engine", root)
            procs.append(engine)
            web = f"http://127.0.0.1:{port}"

            def active():
                assert engine.alive(), engine.output()[-3000:]
                s = get_json(web + "/status")
                return s if s and s.get("active") and not s.get("recovering") else None

            wait_for(active, 120, "the engine to become the decider")
            time.sleep(3)  # its start-up looks and group settle
            machine = {"load": os.getloadavg(), "cores": os.cpu_count(), "engine_root": str(root),
                       "profile": args.profile, "partitions": args.partitions, "moving": len(targets)}
            print(json.dumps({"phase": "setup", **machine}), flush=True)
            tansu = broker.process.pid

            def idle(name: str) -> None:
                get_json(url + "/v1/requests?reset=1")
                e0, b0, t0 = cpu_seconds(engine.p.pid), cpu_seconds(tansu), time.monotonic()
                time.sleep(args.idle)
                e1, b1, t1 = cpu_seconds(engine.p.pid), cpu_seconds(tansu), time.monotonic()
                counts = get_json(url + "/v1/requests")
                seconds = t1 - t0
                print(json.dumps({"phase": name, **rates(counts, seconds),
                                  "engine_cpu_percent": round(100 * (e1 - e0) / seconds, 1),
                                  "embedded_broker_cpu_percent": round(100 * (b1 - b0) / seconds, 1),
                                  "load": os.getloadavg()}), flush=True)

            idle("idle-before")
            tail = EventTail(broker, Topics.named(prefix).events)
            with Publisher(broker.bootstrap, prefix=prefix, profile=broker_profile("embedded")) as p:
                p.change_throttle(args.throttle)
                sampler = Windows(url)
                e0, t0 = cpu_seconds(engine.p.pid), time.monotonic()
                p.submit(targets, request_id="looks", steps=args.steps)
                wait_for(lambda: active() and any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()),
                         args.timeout, "the move to complete", interval=0.2)
                t1 = time.monotonic()
                counts = sampler.stop()
                done = [e for e in tail.payloads() if isinstance(e, ev.PartitionCompleted)]
                print(json.dumps({"phase": "move", **rates(counts, t1 - t0), "partitions_completed": len(done),
                                  "engine_cpu_percent": round(100 * (cpu_seconds(engine.p.pid) - e0) / (t1 - t0), 1),
                                  "load": os.getloadavg()}), flush=True)
                budget = ((get_json(web + "/status") or {}).get("request_budget") or {})
                print(json.dumps({"phase": "windows", "request_budget": budget.get("budget", args.request_budget),
                                  "deferred_looks": budget.get("deferred_looks"),
                                  "all": sampler.worst(budget.get("budget", args.request_budget)),
                                  "without_actions": sampler.worst(budget.get("budget", args.request_budget), False)}),
                      flush=True)
            tail.close()
            time.sleep(2)  # the last throttle removal and read-back
            idle("idle-after")
            engine.stop()
        finally:
            for proc in procs:
                proc.cleanup()


def log_cluster(args) -> None:
    """What an idle engine asks of the cluster holding its log (module doc, ``log``)."""
    from collections import Counter

    from tests.kafka_recorder import Recorder

    root = Path(args.engine_root).resolve() if args.engine_root else ROOT
    doc, _targets = scenario(args.partitions, args.size, args.moving)
    port = free_port()
    recorder = Recorder(("127.0.0.1", port))
    broker = EmbeddedBroker(port=port, advertised=recorder.address).start()
    procs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prefix = "looks."
            create({"bootstrap.servers": recorder.address}, prefix)
            path = Path(tmp) / "scenario.yaml"
            path.write_text(yaml.safe_dump(doc))
            web_port = free_port()
            engine = Spawned([sys.executable, "-m", "engine.cli", "engine", "--bootstrap-server", recorder.address,
                              "--broker-profile", args.profile, "--prefix", prefix, "--cluster", f"sim:{path}",
                              "--web-port", str(web_port), *args.engine_args], "engine", root)
            procs.append(engine)

            def active():
                assert engine.alive(), engine.output()[-3000:]
                st = get_json(f"http://127.0.0.1:{web_port}/status")
                return st if st and st.get("active") and not st.get("recovering") else None

            wait_for(active, 120, "the engine to become the decider")
            time.sleep(5)
            start = len(recorder.seen)
            e0, b0, t0 = cpu_seconds(engine.p.pid), cpu_seconds(broker.process.pid), time.monotonic()
            time.sleep(args.idle)
            e1, b1, t1 = cpu_seconds(engine.p.pid), cpu_seconds(broker.process.pid), time.monotonic()
            seen = recorder.seen[start:]
            seconds = t1 - t0
            by = Counter((x.api, x.client_id) for x in seen)
            print(json.dumps({"phase": "log-idle", "engine_root": str(root), "profile": args.profile,
                              "seconds": round(seconds, 1), "requests_per_s": round(len(seen) / seconds, 2),
                              "by_api_and_client": {f"{api} ({client})": round(n / seconds, 2)
                                                    for (api, client), n in by.most_common()},
                              "engine_cpu_percent": round(100 * (e1 - e0) / seconds, 1),
                              "embedded_broker_cpu_percent": round(100 * (b1 - b0) / seconds, 1),
                              "load": os.getloadavg()}), flush=True)
            engine.stop()
    finally:
        for proc in procs:
            proc.cleanup()
        broker.stop()
        recorder.close()


def logdirs(args) -> None:
    """DescribeLogDirs and Metadata answers of a broker hosting ``--partitions`` partitions."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer

    doc = {"name": "logdirs", "seed": 3,
           "brokers": [{"id": b} for b in (1, 2, 3, 4)],
           "topics": [{"name": "big", "min_insync_replicas": 2,
                       "assignment": [{"replicas": [1 + (p + i) % 4 for i in range(3)], "size": "1 MB"}
                                      for p in range(args.partitions)]}]}
    sim = SimServer(S.from_document(doc), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    kp = KafkaAdminClient(bootstrap_servers=front.bootstrap, request_timeout_ms=30000)
    admin = AdminClient({"bootstrap.servers": front.bootstrap})
    try:
        hosted = sum(1 for p in range(args.partitions) if 1 in [1 + (p + i) % 4 for i in range(3)])

        def measured(what: str, fn) -> None:
            front.counts(reset=True)
            started = time.monotonic()
            fn()
            seconds = time.monotonic() - started
            c = front.counts()
            print(json.dumps({"phase": "logdirs", "what": what, "partitions": args.partitions,
                              "hosted_by_broker_1": hosted, "requests": c["total"]["requests"],
                              "response_bytes": c["total"]["response_bytes"],
                              "by_api": {api: v for per in c["brokers"].values() for api, v in per.items()},
                              "seconds": round(seconds, 3)}), flush=True)

        kp.describe_log_dirs(topic_partitions={"big": [0]}, brokers=[1])  # connect first: not counted
        measured("DescribeLogDirs broker 1, no filter (kafka-python topic_partitions=None: it first asks "
                 "Metadata of every topic and sends them all)", lambda: kp.describe_log_dirs(brokers=[1]))
        measured("DescribeLogDirs broker 1, filter: every partition (topics=null would be the protocol's "
                 "'all')", lambda: kp.describe_log_dirs(
                     topic_partitions={"big": list(range(args.partitions))}, brokers=[1]))
        measured("DescribeLogDirs broker 1, filter: 2 partitions", lambda: kp.describe_log_dirs(
            topic_partitions={"big": [0, 1]}, brokers=[1]))
        measured("Metadata of the topic (confluent-kafka describe_topics)", lambda: admin.describe_topics(
            TopicCollection(["big"]))["big"].result(30))
        measured("DescribeTopicPartitions of 2 partitions (kafka-python describe_topic_partitions, cursor)",
                 lambda: kp.describe_topic_partitions(["big"], response_partition_limit=2,
                                                      cursor={"topic_name": "big", "partition_index": 0}))
    finally:
        kp.close()
        front.shutdown()
        sim.shutdown()


def inprocess(args) -> None:
    """The decider alone (module doc, ``inprocess``); works with the code before the change too."""
    import inspect
    from collections import Counter

    from engine.core.commands import ChangeThrottle, Submit
    from engine.runtime.decider import Decider, MemoryLog
    from engine.sim import scenario as S
    from engine.sim.cluster import SimulatedCluster

    new = "floor" in inspect.signature(Decider.__init__).parameters

    class Counted:
        def __init__(self, cluster):
            self.cluster, self.calls = cluster, Counter()

        def __getattr__(self, name):
            attr = getattr(self.cluster, name)
            if not callable(attr):
                return attr

            def call(*a, **k):
                self.calls[name] += 1
                return attr(*a, **k)
            return call

    doc, targets = scenario(args.partitions, args.size, args.moving)
    for phase in ("idle", "move"):
        cluster = Counted(SimulatedCluster.from_scenario(S.from_document(doc)))
        kw = {"poll_interval": 1.0, "floor": args.fast_interval} if new else {"poll_interval": 1.0}
        d = Decider(MemoryLog(), cluster, clock=lambda: cluster.cluster.time, **kw)
        d.recover(None)
        step = args.fast_interval if new else 0.1
        if phase == "move":
            d.decide(ChangeThrottle(args.throttle))
            d.decide(Submit("r", tuple(targets)))
        cluster.calls.clear()
        end = cluster.cluster.time + (60.0 if phase == "idle" else args.timeout)
        while cluster.cluster.time < end:
            due = d.due_in() if new else 0.0
            if due is not None and due <= step / 2:
                d.tick()
            if phase == "move" and any(type(e.payload).__name__ == "RequestCompleted" for e in d.log.records[-5:]):
                break
            cluster.cluster.advance(step)
        print(json.dumps({"phase": f"inprocess-{phase}", "code": "after" if new else "before",
                          "interval": step, "seconds": round(cluster.cluster.time, 2),
                          "calls": dict(cluster.calls)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks.looks")
    parser.add_argument("what", nargs="?", default="move", choices=("move", "log", "inprocess", "logdirs"))
    parser.add_argument("--fast-interval", type=float, default=0.1)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--moving", type=int, default=18)
    parser.add_argument("--size", default="16 MB")
    parser.add_argument("--throttle", type=int, default=4_000_000)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--profile", default="kafka", choices=("kafka", "embedded"))
    parser.add_argument("--engine-root", default=None)
    parser.add_argument("--request-budget", type=float, default=None)
    parser.add_argument("--steps", default=DEFAULT_STEP_MODE, choices=STEP_MODES, help="the request's step mode")
    parser.add_argument("--engine-args", nargs=argparse.REMAINDER, default=[])
    args = parser.parse_args()
    {"move": run, "log": log_cluster, "inprocess": inprocess, "logdirs": logdirs}[args.what](args)


if __name__ == "__main__":
    main()
