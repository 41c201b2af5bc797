"""What the simulated engine charges the brokers (``engine.whatif.strategies._Engine``, ``_Today``), against
what the real engine's adapter sends (``engine/cluster/kafka.py``), counted by the Kafka front
(docs/simulator.md, "What the engine's looks cost")."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.looks import scenario as looks_scenario
from engine.core.partition import TopicPartition
from engine.sim import scenario as S
from engine.sim.cluster import SimulatedCluster
from engine.whatif import strategies as W


def _cluster(partitions: int = 24) -> SimulatedCluster:
    doc = {"name": "requests", "seed": 1, "brokers": [{"id": b} for b in (1, 2, 3, 4)],
           "topics": [{"name": "t", "min_insync_replicas": 2,
                       "assignment": [{"replicas": [1 + (p + i) % 3 for i in range(3)], "size": "1 MB"}
                                      for p in range(partitions)]}]}
    return SimulatedCluster.from_scenario(S.from_document(doc))


def _look(engine: W._Engine, tps) -> list[tuple[int, str]]:
    before = len(engine.requests)
    engine.observe(tps)
    return [(b, api) for _t, b, api in engine.requests[before:]]


def test_the_restated_constants_are_the_adapters():
    """``engine.whatif`` may not import ``engine.cluster``: the adapter's settings are restated there."""
    from engine.cluster import kafka
    from engine.cluster.watch import BrokerWatch
    from engine.runtime.worker import Settings

    assert (W.BROKERS_MAX_AGE, W.BROKERS_MIN_AGE, W.MIN_ISR_MAX_AGE) == (
        kafka.BROKERS_MAX_AGE, kafka.BROKERS_MIN_AGE, kafka.MIN_ISR_MAX_AGE)
    assert (W.SMALL_TOPIC, W.SLICES, W.PAGE) == (kafka.SMALL_TOPIC, kafka.SLICES, kafka.PAGE)
    assert W.runs is kafka.runs  # one rule for the adapter's slices and the simulator's count of them
    assert W.runs([0, 1, 2, 50, 51, 90, 120], 3) == [(0, 2), (50, 51), (90, 120)]  # split at the widest gaps
    deadline = Settings.__dataclass_fields__["broker_deadline"].default
    assert W.PROBE_INTERVAL == BrokerWatch(lambda: {}, deadline).busy_interval


def test_as_measured_a_look_is_four_requests_to_the_lowest_live_broker():
    engine = W._Engine(_cluster(), 0.03)
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    for _ in range(3):
        assert _look(engine, tps) == [(1, "Metadata"), (1, "ListPartitionReassignments"), (1, "Metadata"),
                                      (1, "DescribeConfigs")]
        engine.cluster.advance(1.0)


def test_today_a_look_reuses_the_brokers_for_10_s_and_min_isr_for_30_s():
    cluster = _cluster()
    engine = W._Today(cluster, 0.03)
    tps = [TopicPartition("t", 0), TopicPartition("t", 5)]
    # the first look: DescribeCluster (a Metadata request), the reading, the topic whole (its count), its configs
    assert _look(engine, tps) == [(1, "Metadata"), (1, "ListPartitionReassignments"), (1, "Metadata"),
                                  (1, "DescribeConfigs")]
    start = engine.requests[0][0]
    looks = []
    for k in range(1, 32):  # a look every second from the first
        cluster.advance(start + k - cluster.time)
        looks.append((k, _look(engine, tps)))
    plain = [(1, "ListPartitionReassignments"), (1, "DescribeTopicPartitions")]
    assert looks[0] == (1, plain)  # a small topic's partitions: one DescribeTopicPartitions, the least loaded broker
    with_brokers = [(t, r) for t, r in looks if (1, "Metadata") in r]
    assert [t for t, _r in with_brokers] == [10, 20, 30]  # ages measured from each request's send
    with_configs = [t for t, r in looks if (1, "DescribeConfigs") in r]
    assert with_configs == [30]
    # DescribeTopicPartitions goes round the live brokers (kafka-python's least loaded node)
    assert {b for _t, r in looks for b, api in r if api == "DescribeTopicPartitions"} == {1, 2, 3, 4}
    # a throttle read-back refreshes min.insync.replicas: no DescribeConfigs of the topic for 30 s after it
    engine.throttles(["t"], [])
    cluster.advance(29.0)
    assert (1, "DescribeConfigs") not in _look(engine, tps)


def test_today_a_large_topic_is_asked_in_at_most_three_runs():
    engine = W._Today(_cluster(partitions=200), 0.03)
    tps = [TopicPartition("t", p) for p in (0, 1, 2, 40, 41, 120, 121, 199)]
    engine.observe(tps)  # the first look counts the topic's partitions (Metadata)
    engine.cluster.advance(1.0)
    assert [api for _b, api in _look(engine, tps)] == ["ListPartitionReassignments"] + ["DescribeTopicPartitions"] * 3


def test_today_a_broker_back_in_an_isr_is_asked_again_at_most_once_a_second():
    cluster = _cluster()
    engine = W._Today(cluster, 0.03)
    tps = [TopicPartition("t", 0)]
    engine.observe(tps)
    engine.known[2] = False  # seen dead at the last DescribeCluster, in partition 0's ISR now
    cluster.advance(0.5)
    assert (1, "Metadata") not in _look(engine, tps)  # asked 0.5 s ago
    cluster.advance(0.6)
    assert _look(engine, tps)[-1] == (1, "Metadata")
    assert engine.known[2] is True


# --- the same move through the Kafka front and in the simulator ---------------------------------------------

FRONT = {
    # ``python -m benchmarks.looks --size "8 MB" --idle 5 --profile kafka`` with this adapter and this decider
    # (copies measured 1 s after they start and halfway to their release, decide.next_measures; released with
    # 1000 ms of their share left, throttle_release_ms), the move phase (submit to RequestCompleted), two runs on
    # the shared 2-core machine (load 4.0-4.4: two other sessions' tests beside it), 2026-11-27: requests per
    # second per broker and API, as KafkaFront.counts gave them. (With 500 ms and no first measure, 2026-11-26,
    # load 0.1-0.7: 34.9 and 33.8 s, DescribeLogDirs 5.9-6.0 a second in all, the busiest broker 5.3-5.9.
    # Before next_measures, at 78f3423: DescribeLogDirs 3.0-3.1 a second, 13.0-13.4 in all, the busiest broker
    # 5.1-5.8.)
    "seconds": (28.9, 28.6),
    "brokers": ({
        1: {"ApiVersions": 0.59, "DescribeConfigs": 0.21, "DescribeLogDirs": 0.87, "DescribeTopicPartitions": 0.52, "IncrementalAlterConfigs": 1.25, "Metadata": 0.1},
        2: {"ApiVersions": 0.55, "DescribeConfigs": 0.14, "DescribeLogDirs": 1.14, "DescribeTopicPartitions": 0.59, "IncrementalAlterConfigs": 0.1, "Metadata": 0.07},
        3: {"ApiVersions": 0.62, "DescribeConfigs": 0.1, "DescribeLogDirs": 1.32, "DescribeTopicPartitions": 0.59, "IncrementalAlterConfigs": 0.07, "Metadata": 0.03},
        4: {"AlterPartitionReassignments": 0.59, "ApiVersions": 0.59, "DescribeConfigs": 0.1, "DescribeLogDirs": 2.91, "DescribeTopicPartitions": 0.66, "IncrementalAlterConfigs": 0.07, "ListPartitionReassignments": 2.39, "Metadata": 0.03},
    }, {
        1: {"ApiVersions": 0.56, "DescribeConfigs": 0.14, "DescribeLogDirs": 0.95, "DescribeTopicPartitions": 0.53, "IncrementalAlterConfigs": 0.11, "Metadata": 0.11},
        2: {"AlterPartitionReassignments": 0.6, "ApiVersions": 0.56, "DescribeConfigs": 0.11, "DescribeLogDirs": 1.16, "DescribeTopicPartitions": 0.77, "IncrementalAlterConfigs": 0.07, "ListPartitionReassignments": 2.45, "Metadata": 0.04},
        3: {"ApiVersions": 0.56, "DescribeConfigs": 0.21, "DescribeLogDirs": 1.65, "DescribeTopicPartitions": 0.67, "IncrementalAlterConfigs": 1.26, "Metadata": 0.11},
        4: {"ApiVersions": 0.56, "DescribeConfigs": 0.11, "DescribeLogDirs": 3.26, "DescribeTopicPartitions": 0.46, "IncrementalAlterConfigs": 0.07},
    }),
}


def _per_api(brokers: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for apis in brokers.values():
        for api, rate in apis.items():
            out[api] = out.get(api, 0.0) + rate
    return out


def _simulated(adapter: str) -> tuple[W.RunResult, dict[int, dict[str, float]]]:
    doc, targets = looks_scenario(24, "8 MB", 18)
    # FRONT was recorded by a decider without the dominant-source rule (docs/algorithm.md, section 2): with it
    # this move sends 15 alters in 30.5 s instead of 16 in 30.4 s (one batch fewer), below the alters' band;
    # the decider that made the record is compared until the front's move is recorded again
    sc = dataclasses.replace(S.from_document(doc), targets=tuple(targets), throttle=4_000_000,
                             limits={"pin_dominant_source": 0})
    r = W.run(sc, "kreassign", adapter=adapter)
    return r, {b: {api: n / r.makespan for api, n in apis.items()} for b, apis in r.apis.items()}


@pytest.mark.parametrize("adapter", ["today", pytest.param("as-measured", marks=pytest.mark.xfail(
    strict=True, reason="the adapter of 2026-11-26 sent a Metadata and a DescribeConfigs with every look"))])
def test_the_simulated_move_charges_what_the_front_counted(adapter):
    """The front's move, in the simulator with today's adapter and today's decider (its cadence: when it looks,
    measures and reads back): what a look costs within 10 %, the busiest broker within 10 %, how often it looks
    and measures within the bands below (docs/simulator.md, "What the engine's looks cost", has the table and
    where they differ)."""
    r, sim = _simulated(adapter)
    got = _per_api(sim)
    total = sum(got.values())
    busiest = max(sum(a.values()) for a in sim.values())
    compared = 0
    for run in FRONT["brokers"]:
        front = _per_api(run)
        # a look's cost: one DescribeTopicPartitions of the small topic per ListPartitionReassignments
        assert got["DescribeTopicPartitions"] / got["ListPartitionReassignments"] == pytest.approx(
            front["DescribeTopicPartitions"] / front["ListPartitionReassignments"], rel=0.1)
        # the caches: DescribeCluster every 10 s and one topic Metadata (the front also counts the clients'
        # own Metadata: bootstrap, a new connection's), min.insync.replicas folded into the read-backs
        assert front["Metadata"] / 3 <= got["Metadata"] <= front["Metadata"]
        assert got["DescribeConfigs"] == pytest.approx(front["DescribeConfigs"], rel=0.15)
        # the broker watch: every broker about every 2 s (the front also counts each new connection's ApiVersions:
        # 0.62 a second at broker 3 in a 28.9 s run is the watch's 0.5 and three or four connections)
        for b in (1, 2, 3, 4):
            assert 0.75 * run[b]["ApiVersions"] <= sim[b]["ApiVersions"] <= run[b]["ApiVersions"]
        # the decider's cadence: how often it looks, measures the copies' catch-up and starts steps. Since copies
        # are measured 1 s after they start and halfway to their release (decide.next_measures) the simulated
        # decider looks 0.89-0.91 times as often as the real one and measures 0.68-0.77 times as often (halfway
        # alone: 0.80-0.82 and 0.62-0.65; before that 0.85 and 0.80-0.82); not explained (the real engine's ticks also wait for its own CPU; a new replica whose log does not exist
        # yet is left out of the real catch-up answer, and measured again)
        assert 0.75 <= got["ListPartitionReassignments"] / front["ListPartitionReassignments"] <= 1.05
        assert 0.55 <= got["DescribeLogDirs"] / front["DescribeLogDirs"] <= 1.05
        assert got["AlterPartitionReassignments"] == pytest.approx(front["AlterPartitionReassignments"], rel=0.15)
        assert 0.7 <= total / sum(front.values()) <= 1.05
        # what the model charges producers for: the busiest broker's rate, within 10 %, where the front's
        # controller (KRaft answers a random live broker) was not also the receiving broker: the simulator's
        # is broker 1, a source (2026-11-27's first run had them on broker 4: 7.35 a second, the second 5.74)
        controller = next(b for b in run if "ListPartitionReassignments" in run[b])
        if controller != max(run, key=lambda b: run[b].get("DescribeLogDirs", 0)):
            compared += 1
            assert busiest == pytest.approx(max(sum(a.values()) for a in run.values()), rel=0.1)
    assert compared
    # the throttles: no gap between steps in which every throttle is removed and set again (the simulated loop
    # of the records' cadence set each broker's rate 0.44 times a second); the simulated decider sets and
    # removes a broker's rate 0.07 times a second, the real one 0.07-0.11 (2026-11-26: 0.16 and 0.06-0.09; before
    # next_measures: 0.12-0.26)
    # (the topics' go to librdkafka's broker, the one with the most of them: the front's broker 2 or 1, the
    # simulator's lowest live broker, 1)
    measured = [run[b]["IncrementalAlterConfigs"] for run in FRONT["brokers"] for b in run
                if b != max(run, key=lambda x: run[x]["IncrementalAlterConfigs"])]
    for b in (2, 3, 4):
        assert 0.9 * min(measured) <= sim[b]["IncrementalAlterConfigs"] <= 2 * max(measured)
    alters = [_per_api(run)["IncrementalAlterConfigs"] for run in FRONT["brokers"]]
    assert 0.9 * min(alters) <= got["IncrementalAlterConfigs"] <= 1.3 * max(alters)
    assert r.finished and r.makespan == pytest.approx(sum(FRONT["seconds"]) / 2, rel=0.1)
