"""The simulator against records of real Kafka runs (docs/simulator.md, "Calibration").

A record (``tests/data/measurements/``, a copy of ``../shared/measurements/``; its
README has the fields) is one reassignment run on a real Apache Kafka 4.0 cluster
with an acks=all probe producer. ``twin(record)`` is the same run on the
simulated cluster: the record's brokers, partitions (replicas, sizes), target,
throttle and probe, the same driver (Kafka's tool: ``all-at-once``; kreassign:
its core loop at its cadence, ``engine.whatif.strategies``) with the settings the
file name states, on a machine whose fitted parameters (``MACHINES``) say what
the records cannot: how long a broker takes to create a log, one round trip of
the engine's requests, and how many of them a broker absorbs.

``compare(record)`` sets the twin's result beside the record the way the
record's harness saw its run: it read the replicas every 0.5 s, so a partition
counts done at the first of those reads after it completed, and the run at the
last. ``python -m engine.whatif.calibration DIR`` prints the comparison of every
record in ``DIR`` (``--svg DIR`` also draws each probe timeline; ``--turns`` plays
the receiving broker's fetchers of Kafka's tool's records by Kafka's rule fetch by
fetch over seeded draws of their timing, ``engine.whatif.turns``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from engine.core.commands import PartitionTarget
from engine.core.partition import TopicInfo, TopicPartition
from engine.sim.scenario import BrokerSpec, PartitionSpec, Scenario
from engine.whatif import turns
from engine.whatif.strategies import RunResult, run

HARNESS_POLL = 0.5  # seconds between the record's harness reads of the replicas (its README: 0.5 s)
PROBE_BYTES = 170  # bytes a probe message (100 B of value, one record per batch) adds to the partition's log
TOLERANCE = 0.20  # the simulated figures must land within 20 % of the measured ones


@dataclass(frozen=True)
class Machine:
    """What a record does not tell about the machine it ran on (each value fitted, docs/simulator.md)."""

    name: str
    replica_creation_time: float  # seconds a broker takes to create a new replica's log
    request_time: float  # one round trip of the engine's requests (a log append takes three)
    broker_request_capacity: float | None  # engine requests a broker absorbs per second beside its load


MACHINES = {
    # the records of 2026-11-26 before 15:15: the machine busy with the cluster, the probe and one driver
    "quiet": Machine("quiet", 0.1, 0.03, 10.85),
    # the records marked "loaded": the probe's baseline p50 was 2.7 s and 5.9 s (its README)
    "loaded": Machine("loaded", 0.15, 0.06, None),
}


@dataclass(frozen=True)
class Engine:
    """The engine a twin runs: its step mode, limits beyond the defaults, how it appends and which
    requests its Kafka adapter sends (``engine.whatif.strategies.APPENDS``, ``ADAPTERS``)."""

    name: str
    steps: str = "incremental"
    limits: Mapping[str, int] = dataclasses.field(default_factory=dict)
    appends: str = "round"
    adapter: str = "today"


AS_MEASURED = Engine("as measured (2026-11-26)", steps="kip-435",
                     limits={"creation_window_ms": 1, "keep_throttle_rates": 0, "throttle_margin_pct": 0,
                             "throttle_release_ms": 500, "release_at_start": 0, "pin_dominant_source": 0},
                     appends="input", adapter="as-measured")
"""The engine the records ran: KIP-435's leader-first steps (the new preferred leader added alone, then
elected), two new replicas per broker at once (``creation_window_ms`` 1 ms keeps the fixed cap), a
broker's throttle rate deleted with its last step in flight (``keep_throttle_rates`` 0), Kafka's rate
the throttle itself (``throttle_margin_pct`` 0), a copy released with 500 ms of its share left
(``throttle_release_ms``), every copy started throttled (``release_at_start`` 0), no dominant source
pinned (``pin_dominant_source`` 0), one
append per input, four requests a look (DescribeCluster, ListPartitionReassignments, Metadata,
DescribeConfigs). The twins reproduce the records with it."""

TODAY = Engine("today's defaults")
"""The engine of this tree with its defaults: what it would do on the record's cluster."""


@dataclass(frozen=True)
class Run:
    """How a record was run: its driver, the machine, the engine settings its file name states, and
    which of its figures mean something (an overloaded machine's latencies do not)."""

    strategy: str
    machine: str
    fast_interval: float = 0.1  # the engine's --fast-interval (default 0.1 s)
    latency: bool = True  # compare the probe's p99 and max (not on an overloaded machine)
    note: str = ""


RUNS: Mapping[str, Run] = {
    "24x16MiB-4MBs-kafka-tool": Run("all-at-once", "quiet"),
    "24x16MiB-4MBs-kreassign": Run("kreassign", "quiet"),
    "24x16MiB-4MBs-kreassign-log-on-another-broker": Run(
        "kreassign", "quiet", note="the engine's own topics are not modelled: the same twin as the default run"),
    "24x16MiB-4MBs-kreassign-fast-interval-1s": Run("kreassign", "quiet", fast_interval=1.0),
    "300x1MiB-50MBs-kafka-tool-loaded": Run("all-at-once", "loaded", latency=False),
    "300x1MiB-50MBs-kreassign-loaded": Run("kreassign", "loaded", latency=False),
}


TURNS = ("24x16MiB-4MBs-kafka-tool",)
"""The records of Kafka's tool whose latency is compared: ``--turns`` plays their receiving broker's fetchers
by Kafka's rule fetch by fetch (``engine.whatif.turns``; docs/simulator.md, "Calibration")."""


def load(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_of(name: str) -> Run:
    try:
        return RUNS[name]
    except KeyError:
        raise KeyError(f"no twin for the record {name!r}: add it to engine.whatif.calibration.RUNS") from None


def scenario(record: dict, name: str, launch_delay: float = 0.0, engine: Engine = AS_MEASURED) -> Scenario:
    """The record's cluster and reassignment as a scenario, on its machine, starting ``launch_delay``
    after the launch, for ``engine`` (kreassign's steps and limits)."""
    how = run_of(name)
    machine = MACHINES[how.machine]
    topic = record["topic"]
    n = record["partitions"]
    produce = record["probe_rate"] * PROBE_BYTES / n
    partitions = {
        TopicPartition(topic, p): PartitionSpec(tuple(record["current"][p]), int(record["partition_bytes"][p]),
                                                round(produce))
        for p in range(n)
    }
    targets = tuple(
        PartitionTarget(topic, p, tuple(record["target"][p]))
        for p in range(n) if list(record["target"][p]) != list(record["current"][p])
    )
    brokers = tuple(BrokerSpec(b, rack) for b, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")))
    return Scenario(
        name=name, brokers=brokers, topics={topic: TopicInfo(n, 2)}, partitions=partitions, targets=targets,
        throttle=int(record["throttle"]), poll_interval=1.0, fast_interval=how.fast_interval,
        replica_creation_time=machine.replica_creation_time, probe_rate=float(record["probe_rate"]),
        request_time=machine.request_time, broker_request_capacity=machine.broker_request_capacity,
        launch_delay=launch_delay, description=f"the twin of the record {name}",
        steps=engine.steps, limits=dict(engine.limits),
    )


def twin(record: dict, name: str, engine: Engine = AS_MEASURED) -> tuple[Scenario, str]:
    """The twin scenario and its strategy. It starts so that its first alter reaches the cluster when
    the record's harness first saw a move, less half a read (the tool's JVM start, the engine's
    command path: not simulated). ``engine``: the kreassign it runs (the one measured, or today's)."""
    how = run_of(name)
    dry = run(scenario(record, name, engine=engine), how.strategy, max_time=0.0, appends=engine.appends,
              adapter=engine.adapter)
    start = dry.first_alter or 0.0
    seen = record["first_move_seen_s"] - HARNESS_POLL / 2
    return scenario(record, name, max(0.0, seen - start), engine), how.strategy


def seen(t: float) -> float:
    """When the harness, reading every HARNESS_POLL seconds from the launch, saw what happened at ``t``."""
    return math.ceil(t / HARNESS_POLL - 1e-9) * HARNESS_POLL


@dataclass(frozen=True)
class Comparison:
    name: str
    run: Run
    record: dict
    scenario: Scenario
    result: RunResult

    @property
    def done(self) -> list[float]:
        """Simulated completion of every partition, as the harness saw it (0 for one that does not move)."""
        times = {tp.partition: seen(t) for tp, t in self.result.done_times().items()}
        return [times.get(p, 0.0) for p in range(self.record["partitions"])]

    @property
    def makespan(self) -> float:
        return max(self.done)

    def figures(self) -> dict[str, tuple[float, float]]:
        """(measured, simulated) of what is compared: makespan (s); probe p50, p99, max (ms); peak URP."""
        m = self.record["probe_move"]
        p = self.result.probe
        return {
            "makespan_s": (self.record["makespan_s"], round(self.makespan, 2)),
            "p50_ms": (m["p50_ms"], round(p.p50 * 1000, 1)),
            "p99_ms": (m["p99_ms"], round(p.p99 * 1000, 1)),
            "max_ms": (m["max_ms"], round(p.max * 1000, 1)),
            "peak_urp": (self.record["peak_under_replicated"], self.result.stats.peak_under_replicated),
        }

    def checked(self) -> list[str]:
        """The figures held to TOLERANCE: makespan always, p99 and max unless the machine was overloaded."""
        return ["makespan_s"] + (["p99_ms", "max_ms"] if self.run.latency else [])

    def misses(self) -> dict[str, float]:
        """Checked figures off by more than TOLERANCE: name -> simulated / measured."""
        f = self.figures()
        out = {}
        for k in self.checked():
            measured, simulated = f[k]
            if abs(simulated - measured) > TOLERANCE * measured:
                out[k] = simulated / measured
        return out

    def timeline(self) -> list[tuple[int, float, float]]:
        """Per second from the launch to the makespan: (t, measured max ms, simulated max ms added)."""
        measured = {int(t): mx for t, _n, _e, mx in self.record["probe_timeline"]}
        sim = self.result.probe.per_second
        end = int(math.ceil(max(self.record["makespan_s"], self.makespan)))
        return [(t, measured.get(t, 0.0), round(sim[t] * 1000, 1) if t < len(sim) else 0.0) for t in range(end)]


def compare(record: dict, name: str, engine: Engine = AS_MEASURED) -> Comparison:
    sc, strategy = twin(record, name, engine)
    return Comparison(name, run_of(name), record, sc, run(sc, strategy, appends=engine.appends, adapter=engine.adapter))


def compare_all(directory: str | Path) -> list[Comparison]:
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        out.append(compare(load(path), path.stem))
    return out


# --- today's engine on the records' clusters (issue 26, items 2 and 3) ------------------------------------

SIDE_BY_SIDE = (
    # (label, the kreassign record whose cluster and launch it takes, Kafka's tool's record, machine)
    ("24 x 16 MiB, 4 MB/s, quiet machine", "24x16MiB-4MBs-kreassign", "24x16MiB-4MBs-kafka-tool", "quiet"),
    ("300 x 1 MiB, 50 MB/s, loaded machine", "300x1MiB-50MBs-kreassign-loaded", "300x1MiB-50MBs-kafka-tool-loaded",
     "loaded"),
    ("300 x 1 MiB, 50 MB/s, quiet machine (not measured)", "300x1MiB-50MBs-kreassign-loaded",
     "300x1MiB-50MBs-kafka-tool-loaded", "quiet"),
)
ENGINES = (
    AS_MEASURED,
    Engine("today, --steps kip-435", steps="kip-435"),
    TODAY,
    Engine("today, --steps whole", steps="whole"),
    Engine("today, --steps grouped", steps="grouped"),
)


@dataclass(frozen=True)
class Row:
    label: str
    engine: str
    makespan: float  # from the launch, as the harness would have seen it
    span: float  # from the first alter
    p99: float  # ms
    max: float  # ms
    peak_urp: int
    alters: int  # AlterPartitionReassignments entries
    looks_free: tuple[float, float] | None = None  # p99, max (ms) if the engine's requests cost the brokers nothing


def _row(label: str, engine_name: str, sc: Scenario, strategy: str, appends: str = "round",
         free: bool = False, adapter: str = "today") -> Row:
    r = run(sc, strategy, appends=appends, adapter=adapter)
    done = [seen(t) for t in r.done_times().values()]
    start = r.first_alter or sc.launch_delay
    looks_free = None
    if free and sc.broker_request_capacity is not None:
        f = run(dataclasses.replace(sc, broker_request_capacity=None), strategy, appends=appends, adapter=adapter).probe
        looks_free = (round(f.p99 * 1000), round(f.max * 1000))
    return Row(label, engine_name, max(done), round(max(done) - start, 2), round(r.probe.p99 * 1000),
               round(r.probe.max * 1000), r.stats.peak_under_replicated, r.moves, looks_free)


def _on_machine(sc: Scenario, machine: str) -> Scenario:
    m = MACHINES[machine]
    return dataclasses.replace(sc, replica_creation_time=m.replica_creation_time, request_time=m.request_time,
                               broker_request_capacity=m.broker_request_capacity)


def side_by_side(directory: str | Path) -> list[Row]:
    """Kafka's tool and kreassign (as measured, and today's engine in each step mode) on each record's
    cluster, launched as the record was: the twins of ``compare`` with the engine swapped, and the
    300 x 1 MiB records also on the quiet machine. ``looks_free``: the same run if the engine's looks
    cost the brokers nothing (what the looks of today's engine cost is issue 26's item 1)."""
    directory = Path(directory)
    rows = []
    for label, name, tool, machine in SIDE_BY_SIDE:
        record, tool_record = load(directory / f"{name}.json"), load(directory / f"{tool}.json")
        sc, strategy = twin(tool_record, tool)
        rows.append(_row(label, "Kafka's tool", _on_machine(sc, machine), strategy))
        for engine in ENGINES:
            sc, strategy = twin(record, name, engine)
            rows.append(_row(label, engine.name, _on_machine(sc, machine), strategy, engine.appends,
                             free=engine is not AS_MEASURED, adapter=engine.adapter))
    return rows


def side_by_side_markdown(rows: list[Row]) -> str:
    lines = ["| cluster | driver | makespan from the launch | from the first alter | probe p99 / max | "
             "p99 / max if looks cost nothing | peak under-replicated | alter entries |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        free = f"{r.looks_free[0]:,} / {r.looks_free[1]:,} ms" if r.looks_free else "-"
        lines.append(f"| {r.label} | {r.engine} | {r.makespan:g} s | {r.span:g} s | {r.p99:,} / {r.max:,} ms | "
                     f"{free} | {r.peak_urp} | {r.alters} |")
    return "\n".join(lines)


# --- what docs/simulator.md shows --------------------------------------------------------------------


def markdown(c: Comparison) -> str:
    f = c.figures()
    checked = set(c.checked())

    def row(label, key, unit=""):
        measured, simulated = f[key]
        ratio = f"{simulated / measured:.2f}" if measured else "-"
        mark = ("within 20 %" if key not in c.misses() else "**off**") if key in checked else "not compared"
        return f"| {label} | {measured:g}{unit} | {simulated:g}{unit} | {ratio} | {mark} |"

    m = c.record
    lines = [
        f"**{c.name}** ({m['partitions']} x {m['mb_per_partition']} MiB, {m['throttle'] / 1e6:g} MB/s, "
        f"{c.run.strategy}, fast interval {c.run.fast_interval:g} s, machine {c.run.machine}; "
        f"the twin starts {c.scenario.launch_delay:.2f} s after the launch"
        + (f"; {c.run.note}" if c.run.note else "") + ")",
        "",
        "| | measured | simulated | simulated / measured | |",
        "| --- | --- | --- | --- | --- |",
        row("makespan", "makespan_s", " s"),
        row("probe p50", "p50_ms", " ms"),
        row("probe p99", "p99_ms", " ms"),
        row("probe max", "max_ms", " ms"),
        row("peak under-replicated", "peak_urp"),
        "",
        "Completions (seconds from the launch, as the harness saw them): measured "
        + _completions(sorted(x for x in m["partition_done_s"] if x > 0.1))
        + "; simulated " + _completions(sorted(x for x in c.done if x > 0)) + ".",
    ]
    return "\n".join(lines)


def _completions(times: list[float]) -> str:
    """Every completion time, or for many the first, the last and the median interval between them."""
    if len(times) <= 24:
        return ", ".join(f"{t:g}" for t in times)
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    return (f"{len(times)} from {times[0]:g} to {times[-1]:g} (median interval {gaps[len(gaps) // 2]:.2f} s, "
            f"{sum(1 for g in gaps if g < 0.01)} at the same read as the one before)")


def svg(c: Comparison, width: int = 720, height: int = 220) -> str:
    """The probe's per-second max latency, measured and simulated, with the completions below it."""
    rows = c.timeline()
    end = max(len(rows), 1)
    top = max([r[1] for r in rows] + [r[2] for r in rows] + [1000.0])
    top = math.ceil(top / 1000) * 1000
    left, bottom, plot_h = 50, height - 40, height - 60

    def x(t):
        return left + (width - left - 10) * t / end

    def y(ms):
        return bottom - plot_h * min(ms, top) / top

    def line(points, colour):
        return (f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
                + " ".join(f"{x(t + 0.5):.1f},{y(v):.1f}" for t, v in points) + '"/>')

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    for k in range(0, int(top) + 1, 1000):
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(k):.1f}" y2="{y(k):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 5}" y="{y(k) + 4:.1f}" text-anchor="end">{k // 1000} s</text>')
    for t in range(0, end + 1, 10):
        parts.append(f'<text x="{x(t):.1f}" y="{bottom + 14}" text-anchor="middle">{t}</text>')
    parts.append(line([(t, m) for t, m, _s in rows], "#c0392b"))
    parts.append(line([(t, s) for t, _m, s in rows], "#2c3e50"))
    for t in (d for d in c.record["partition_done_s"] if d > 0.1):
        parts.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom + 18}" y2="{bottom + 24}" stroke="#c0392b"/>')
    for t in (d for d in c.done if d > 0):
        parts.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom + 25}" y2="{bottom + 31}" stroke="#2c3e50"/>')
    parts.append(f'<text x="{left}" y="14">{c.name}: probe max per second (red measured, dark simulated); '
                 f'completions below (seconds from the launch)</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The simulator against real-cluster records, side by side.")
    parser.add_argument("directory", help="a directory of records (e.g. tests/data/measurements/kafka-4.0-2026-11-26)")
    parser.add_argument("--svg", metavar="DIR", help="write each record's probe timeline as DIR/NAME.svg")
    parser.add_argument("--seconds", action="store_true", help="print the per-second comparison too")
    parser.add_argument("--today", action="store_true",
                        help="instead: Kafka's tool and today's engine (each step mode) on each record's cluster")
    parser.add_argument("--turns", action="store_true",
                        help="instead: Kafka's rule fetch by fetch for the records of Kafka's tool whose latency "
                             "is compared, over seeded draws of its fetchers' timing (engine.whatif.turns)")
    args = parser.parse_args(argv)
    if args.today:
        print(side_by_side_markdown(side_by_side(args.directory)))
        return 0
    if args.turns:
        for name in TURNS:
            record = load(Path(args.directory) / f"{name}.json")
            print(f"**{name}**\n")
            print(turns.markdown(record, [turns.summary(record, t) for t in turns.TIMINGS]))
            print()
        return 0
    comparisons = compare_all(args.directory)
    for c in comparisons:
        print(markdown(c))
        print()
        if args.seconds:
            print("t, measured max ms, simulated max ms added")
            for t, m, s in c.timeline():
                print(f"{t}, {m:g}, {s:g}")
            print()
        if args.svg:
            out = Path(args.svg)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{c.name}.svg").write_text(svg(c), encoding="utf-8")
    missed = {c.name: c.misses() for c in comparisons if c.misses()}
    print("every checked figure within 20 %" if not missed else f"off by more than 20 %: {missed}")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
