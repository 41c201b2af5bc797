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
from engine.sim.model import REPLICA_FETCH_BACKOFF, linked, refused_epoch_stall
from engine.whatif import turns
from engine.whatif.calibration import RUNS, TOLERANCE, TURNS, compare_all, load, scenario

RECORDS = Path(__file__).resolve().parent / "data" / "measurements" / "kafka-4.0-2026-11-26"
NAMES = sorted(p.stem for p in RECORDS.glob("*.json"))
# Kafka's tool on the small cluster: when each source broker's moves end and how long its followers then wait
# for a turn are decided by millisecond timings of the receiving broker's fetchers that the record does not
# hold (engine.whatif.turns; docs/simulator.md, "Calibration"); the simulator's twin is Kafka's rule in step
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


@pytest.mark.xfail(strict=True, reason="Kafka's rule makes these figures a lottery of the receiving broker's "
                                       "fetchers' millisecond timings, not in the record: in step (the twin) no "
                                       "wave ends early and no follower waits for a turn; out of step, at most "
                                       "3 of 40 seeded draws land within 20 % of the record on both "
                                       "(engine.whatif.turns, the two tests below)")
def test_kafkas_tool_p99_and_max_on_the_small_cluster(comparisons):
    f = comparisons[TOOL_LOTTERY].figures()
    assert within(f["p99_ms"][1], f["p99_ms"][0]) and within(f["max_ms"][1], f["max_ms"][0])


@pytest.fixture(scope="module")
def tool_record():
    return load(RECORDS / f"{TOOL_LOTTERY}.json")


def test_kafkas_rule_with_the_fetchers_in_step_is_what_the_twin_shows(comparisons, tool_record):
    # Kafka's rule fetch by fetch, every source answering within 5 ms of the others and every ask exactly
    # a backoff apart: the fetchers take turns in rotation, every source's moves end within a read of the
    # others, and no follower waits for a turn while others copy: the only stall is the refused fetch at
    # the new epoch. The simulator's fluid twin (even shares) shows exactly that.
    stall = refused_epoch_stall(REPLICA_FETCH_BACKOFF)
    for d in turns.lottery(tool_record, turns.TIMINGS[0]):
        assert d.waves[-1] - d.waves[0] <= 1.0, d
        assert d.p99 == 0 and d.max <= stall + 1e-9, d
    twin = comparisons[TOOL_LOTTERY]
    assert len({x for x in twin.done if x > 0}) == 1
    assert twin.figures()["p99_ms"][1] == 0
    assert twin.figures()["max_ms"][1] == pytest.approx(stall * 1000, rel=0.01)


def test_out_of_step_kafkas_tools_figures_are_a_lottery_and_the_record_one_draw(tool_record):
    # Fetchers whose responses take tens of ms more or less and whose asks drift: the turns go unevenly and
    # the sources' moves end seconds apart (measured: 69.6 s, then 86.1 and 88.1 s), and a follower of a
    # source done early waits until its fetcher's ask finds the quota open. Over 40 seeded draws the
    # figures spread over a range that holds the record's, but few draws land within 20 % of both, and how
    # likely the record is depends on how long a completion takes to reach the brokers (50 or 150 ms):
    # nothing the record holds. A deterministic twin would match it only with a draw chosen for it.
    m = tool_record["probe_move"]
    ranks = []
    for timing in turns.TIMINGS[2:]:
        draws = turns.lottery(tool_record, timing)
        assert sum(1 for d in draws if d.waves[-1] - d.waves[0] >= 10) >= len(draws) / 4
        assert min(d.p99 for d in draws) * 1000 <= m["p99_ms"] <= max(d.p99 for d in draws) * 1000
        assert min(d.max for d in draws) * 1000 <= m["max_ms"] <= max(d.max for d in draws) * 1000
        s = turns.summary(tool_record, timing)
        assert s.within <= 0.1 * s.draws, s
        ranks.append(s.max_rank)
    assert abs(ranks[0] - ranks[1]) >= 0.3, ranks


def test_docs_show_what_kafkas_rule_fetch_by_fetch_gives(tool_record):
    doc = (Path(__file__).resolve().parent.parent / "docs" / "simulator.md").read_text(encoding="utf-8")
    assert TURNS == (TOOL_LOTTERY,)
    table = turns.markdown(tool_record, [turns.summary(tool_record, t) for t in turns.TIMINGS])
    for line in table.splitlines():
        assert line in doc, line


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
    # a partition is done when it holds its target: its last completion (kip-435's last step, a drop, is
    # completed by Kafka at its alter), seen at the harness's next read
    first = min(c.result.done_times().values())
    assert 0 <= min(d for d in done if d > 0) - first < 0.5 + 1e-9
    assert first > min(t for t, _tp in linked(c.result.stats.done_log))  # the leader-first step's Phase B
    assert c.result.first_alter == pytest.approx(c.record["first_move_seen_s"] - 0.25, abs=1e-6)


def test_docs_show_what_the_comparison_computes(comparisons):
    from engine.whatif.calibration import markdown
    doc = (Path(__file__).resolve().parent.parent / "docs" / "simulator.md").read_text(encoding="utf-8")
    for c in comparisons.values():
        for line in markdown(c).splitlines():
            assert line in doc, line
        assert f"calibration/{c.name}.svg" in doc


def test_the_measured_stalls_alone_give_kafkas_tools_max_and_most_of_its_p99(tool_record):
    # What the twin misses first is the stalls: each moved partition blocked from its completion (half a
    # read before the harness saw it) for as long as its worst message waited (probe_move_max_ms_by_partition),
    # or as long as the worst on its leader's connection (head-of-line), gives through the simulator's probe
    # the record's max and 70 to 90 % of its p99; the rest is the writes' slower recovery after a stall (the
    # measured per-second maxima fell about 0.6 s a second after 69 s), which the probe does not model
    from engine.sim.probe import probe
    r = tool_record
    n = r["partitions"]
    tps = [TopicPartition(r["topic"], p) for p in range(n)]
    worst_on: dict[int, float] = {}
    for p in range(n):
        leader = r["current"][p][0]
        worst_on[leader] = max(worst_on.get(leader, 0.0), r["probe_move_max_ms_by_partition"][p] / 1000)
    for stall in (lambda p: r["probe_move_max_ms_by_partition"][p] / 1000, lambda p: worst_on[r["current"][p][0]]):
        blocked, leaders = [], [(0.0, tps[p], r["current"][p][0]) for p in range(n)]
        for p, done in enumerate(r["partition_done_s"]):
            if done > 0:
                at = done - 0.25
                blocked.append((tps[p], at, at + stall(p)))
                if r["target"][p][0] not in r["current"][p]:
                    leaders.append((at, tps[p], r["target"][p][0]))
        felt = probe(tps, r["probe_rate"], r["makespan_s"], blocked, sorted(leaders, key=lambda x: x[0]))
        assert felt.max * 1000 == pytest.approx(r["probe_move"]["max_ms"], rel=0.01)
        assert 0.7 <= felt.p99 * 1000 / r["probe_move"]["p99_ms"] <= 0.9, felt.p99
