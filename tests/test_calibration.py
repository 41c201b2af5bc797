"""The simulator against Kafka 4.0 as measured (docs/simulator.md, "Calibration").

``tests/data/measurements/`` is a copy of the records of ``../shared/measurements/`` (not in CI's
clone): six reassignments on a real Kafka 4.0.0 cluster with an acks=all probe producer.
``engine.whatif.calibration`` runs each one's twin on the simulated cluster and sets it beside the
record as the record's harness saw it. Held to 20 %: the makespan everywhere, the probe's p99 and
max where the machine was not overloaded (the records' README).
"""

from pathlib import Path

import pytest

from engine.core.partition import TopicPartition
from engine.sim.model import linked
from engine.whatif.calibration import RUNS, TOLERANCE, compare_all, load, scenario

RECORDS = Path(__file__).resolve().parent / "data" / "measurements" / "kafka-4.0-2026-11-26"
NAMES = sorted(p.stem for p in RECORDS.glob("*.json"))
# Kafka's tool on the small cluster: which source broker's fetcher wins the follower quota's turns is
# chance (docs/simulator.md, "Calibration"); the simulator shares them evenly
TOOL_LOTTERY = "24x16MiB-4MBs-kafka-tool"


@pytest.fixture(scope="module")
def comparisons():
    return {c.name: c for c in compare_all(RECORDS)}


def within(simulated, measured):
    return abs(simulated - measured) <= TOLERANCE * measured


def test_every_record_has_its_twin():
    assert len(NAMES) == 6 and set(NAMES) == set(RUNS)
    record = load(RECORDS / "24x16MiB-4MBs-kreassign.json")
    sc = scenario(record, "24x16MiB-4MBs-kreassign")
    assert len(sc.partitions) == 24 and len(sc.targets) == 18 and sc.throttle == 4_000_000
    assert sc.partitions[TopicPartition(record["topic"], 5)].size == record["partition_bytes"][5]
    assert sc.moved_bytes() == record["bytes_moved"] == pytest.approx(302_114_122)
    assert sc.fast_interval == 0.1 and sc.broker_request_capacity is not None
    assert scenario(load(RECORDS / "24x16MiB-4MBs-kreassign-fast-interval-1s.json"),
                    "24x16MiB-4MBs-kreassign-fast-interval-1s").fast_interval == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_the_makespan_is_reproduced_within_20_percent(comparisons, name):
    measured, simulated = comparisons[name].figures()["makespan_s"]
    assert within(simulated, measured), (measured, simulated)


@pytest.mark.parametrize("name", sorted(n for n in NAMES if RUNS[n].latency and n != TOOL_LOTTERY))
def test_the_probes_p99_and_max_are_reproduced_within_20_percent(comparisons, name):
    f = comparisons[name].figures()
    for key in ("p99_ms", "max_ms"):
        measured, simulated = f[key]
        assert within(simulated, measured), (key, measured, simulated)


@pytest.mark.xfail(strict=True, reason="which fetcher wins the quota's turns is chance; the simulator shares "
                                       "them evenly, so no wave ends early and its followers wait for no turn")
def test_kafkas_tool_p99_and_max_on_the_small_cluster(comparisons):
    f = comparisons[TOOL_LOTTERY].figures()
    assert within(f["p99_ms"][1], f["p99_ms"][0]) and within(f["max_ms"][1], f["max_ms"][0])


@pytest.mark.parametrize("name", NAMES)
def test_as_many_partitions_are_under_replicated_at_once_as_measured(comparisons, name):
    measured, simulated = comparisons[name].figures()["peak_urp"]
    assert simulated == measured


def test_every_completion_holds_acks_all_writes_up_about_a_second(comparisons):
    # With the engine looking once a second the measured spikes (~1 s) line up with the completions:
    # each completion bumps the leader epoch and a follower that applied it first is refused
    c = comparisons["24x16MiB-4MBs-kreassign-fast-interval-1s"]
    per_second = c.result.probe.per_second
    for t in (x for x in c.result.done_times().values()):
        assert max(per_second[int(t)], per_second[min(int(t) + 1, len(per_second) - 1)]) >= 1.0, t
    assert sum(1 for v in per_second if v >= 1.0) <= 3 * len(c.result.done_times())


def test_looking_every_tenth_of_a_second_costs_the_probe_what_was_measured(comparisons):
    default, slow = comparisons["24x16MiB-4MBs-kreassign"], comparisons["24x16MiB-4MBs-kreassign-fast-interval-1s"]
    measured = default.figures()["p99_ms"][0] / slow.figures()["p99_ms"][0]  # 2.15
    simulated = default.figures()["p99_ms"][1] / slow.figures()["p99_ms"][1]
    assert within(simulated, measured), (measured, simulated)
    # the engine's own requests: broker 1 gets every look (the adapter's requests not addressed to a
    # broker), the others a DescribeLogDirs when a copy of theirs is measured; at 0.1 s broker 1 gets
    # more than it absorbs for seconds on end, at 1 s never
    mean = {r.broker: r.mean for r in default.result.request_rates()}
    assert mean[1] > 2 * {r.broker: r.mean for r in slow.result.request_rates()}[1]
    assert mean[1] > 3 * max(mean[b] for b in (2, 3, 4))
    assert max(d for _t, d in default.result.delays[1]) > 1.0
    # at 1 s a broker is never behind by more than a round trip or two of the engine's looks
    assert max((d for points in slow.result.delays.values() for _t, d in points), default=0) < 0.1


def test_the_loaded_runs_have_the_measured_shape(comparisons):
    tool, engine = comparisons["300x1MiB-50MBs-kafka-tool-loaded"], comparisons["300x1MiB-50MBs-kreassign-loaded"]
    # Kafka's tool: all 225 at once; broker 4 creates their logs one at a time, so the first completes
    # only after a while and the last about all the creations later
    assert tool.result.stats.peak_under_replicated == 225
    done = sorted(x for x in tool.done if x > 0)
    assert done[-1] - tool.result.first_alter == pytest.approx(225 * tool.scenario.replica_creation_time, rel=0.2)
    # kreassign: at most 2 moves at a time, completions in pairs, one pair every cycle of the engine
    assert engine.result.stats.peak_under_replicated == 2
    done = sorted(x for x in engine.done if x > 0)
    assert len(done) == 225
    cycle = (done[-1] - done[0]) / (len(done) / 2)
    measured = sorted(x for x in engine.record["partition_done_s"] if x > 0.1)
    assert within(cycle, (measured[-1] - measured[0]) / (len(measured) / 2))


def test_the_records_are_compared_as_their_harness_saw_them(comparisons):
    c = comparisons["24x16MiB-4MBs-kreassign"]
    done = c.done
    assert all(d == pytest.approx(round(d * 2) / 2) for d in done)  # its 0.5 s reads
    first = min(t for t, _tp in linked(c.result.stats.done_log))
    assert min(d for d in done if d > 0) - first < 0.5 + 1e-9
    assert c.result.first_alter == pytest.approx(c.record["first_move_seen_s"] - 0.25, abs=1e-6)


def test_docs_show_what_the_comparison_computes(comparisons):
    from engine.whatif.calibration import markdown
    doc = (Path(__file__).resolve().parent.parent / "docs" / "simulator.md").read_text(encoding="utf-8")
    for c in comparisons.values():
        for line in markdown(c).splitlines():
            assert line in doc, line
        assert f"calibration/{c.name}.svg" in doc
