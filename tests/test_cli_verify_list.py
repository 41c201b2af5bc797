"""``kreassign verify`` and ``kreassign list`` against a sim-cluster process and a real event log."""

import time

import pytest

from engine.cli import main
from engine.cluster.remote import RemoteCluster
from engine.core.commands import Cancel, ChangeLimits, PartitionTarget, Pause, Submit, Tick
from engine.core.decide import handle, watched
from engine.log.eventlog import EventWriter
from engine.runtime.executor import Executor
from engine.core.partition import TopicPartition
from engine.core.state import EMPTY
from engine.core.throttles import ThrottledReplica, ThrottleSet
from tests.engine_harness import SimCluster

SCENARIO = {
    "name": "verify",
    "brokers": [{"id": b, "rack": "a" if b < 3 else "b"} for b in range(1, 5)],
    "topics": [{"name": "v", "min_insync_replicas": 1, "assignment": [
        {"replicas": [1, 2], "size": "2 MB"}, {"replicas": [2, 3], "size": "2 MB"}]}],
}
P0, P1 = TopicPartition("v", 0), TopicPartition("v", 1)


@pytest.fixture
def sim_url(tmp_path):
    sim = SimCluster(SCENARIO, speed=50, tmp_path=tmp_path)
    try:
        yield sim.url
    finally:
        sim.cleanup()


def run_request(url, targets, deadline=60.0, cancel=()):
    """The core loop against the sim-cluster process until the request completes; the events."""
    cluster = RemoteCluster(url)
    executor = Executor(cluster)
    state, log = EMPTY, []

    def feed(inp):
        nonlocal state
        pending = [inp]
        while pending:
            state, evs = handle(state, pending.pop(0))
            log.extend(evs)
            pending.extend(executor.execute_events(evs))

    feed(cluster.observe())
    feed(Submit("req-1", tuple(PartitionTarget(tp.topic, tp.partition, r) for tp, r in targets.items())))
    if cancel:  # decided while the steps the submit started are in flight: aborted and reverted
        feed(Cancel("req-1", tuple(cancel), rollback=True))
    end = time.monotonic() + deadline
    while not (state.requests["req-1"].status == "completed" and state.throttles.is_empty()):
        assert time.monotonic() < end, "request did not complete"
        feed(cluster.observe(watched(state)))
        feed(Tick())
        time.sleep(0.05)
    return log


def logged_request(sim_url, broker, topics, cancel=(), written=None) -> list[str]:
    """Run req-1 (v-0 to 3,4 and v-1 to 2,4) on the sim-cluster, write its events to the log (and to
    ``written``); the CLI's options."""
    prefix = topics.events[: -len("events")]
    log = run_request(sim_url, {P0: (3, 4), P1: (2, 4)}, cancel=cancel)
    if written is not None:
        written.extend(log)
    assert not cancel or any(type(e).__name__ == "PartitionReverted" for e in log)
    with EventWriter(broker.bootstrap, prefix=prefix) as w:
        w.append(log)
    return ["--bootstrap-server", broker.bootstrap, "--prefix", prefix, "--broker-profile", "embedded",
            "--cluster", "sim+" + sim_url]


def test_verify_and_list(sim_url, broker, topics, capsys):
    common = logged_request(sim_url, broker, topics)
    assert main(["verify", "--request", "req-1", *common]) == 0
    out = capsys.readouterr().out
    assert "Reassignment of partition v-0 is completed." in out and "Reassignment of partition v-1 is completed." in out
    assert "Throttles are cleared" in out

    # a throttle another tool left behind, and a partition moved away from its target
    cluster = RemoteCluster(sim_url)
    left = ThrottleSet(frozenset({ThrottledReplica("v", 0, 3)}), frozenset(), frozenset({3}), frozenset(), 1_000_000)
    cluster.apply_throttles(left)
    cluster.alter_reassignments({P1: (2, 1)})
    assert main(["verify", "--request", "req-1", *common]) == 1
    out = capsys.readouterr().out
    assert "Throttled replicas still set on topic v: leader 0:3" in out
    assert "Brokers [3] still have a leader.replication.throttled.rate" in out
    assert "v-1" in out and "Reassignment of partition v-1 is completed." not in out

    assert main(["list", *common]) == 0
    out = capsys.readouterr().out
    assert "req-1: completed (of 2 partitions)" in out  # the words of status and replay

    assert main(["verify", "--request", "nope", *common]) == 2
    assert "unknown request 'nope'" in capsys.readouterr().err
    cluster.remove_throttles(left)


def test_verify_and_status_name_a_rolled_back_partition(sim_url, broker, topics, capsys):
    common = logged_request(sim_url, broker, topics, cancel=[P1])
    assert main(["verify", "--request", "req-1", *common]) == 0
    out = capsys.readouterr().out
    assert "Reassignment of partition v-0 is completed." in out
    assert "Reassignment of partition v-1 was rolled back: it is at its original replicas [2,3]." in out
    assert main(["status", "--request", "req-1", *common[:-2]]) == 0
    out = capsys.readouterr().out
    assert "request req-1  ended: 1 completed, 1 rolled back" in out
    assert "partitions: 1 completed, 1 rolled back (of 2)" in out


def test_verify_of_a_finished_request_names_the_throttles_the_engine_keeps_for_a_running_one(
        sim_url, broker, topics, capsys):
    """The engine keeps the rates and throttled replicas a running request's steps need: verifying an
    earlier request that has ended names them with that request and does not fail on them; a throttle
    the log does not say the engine set still fails it."""
    from engine.core.state import fold

    written = []
    common = logged_request(sim_url, broker, topics, written=written)
    prefix = topics.events[: -len("events")]
    cluster = RemoteCluster(sim_url)
    executor = Executor(cluster)
    state = fold(written)
    events = []
    for inp in (cluster.observe(), Submit("req-2", (PartitionTarget("v", 1, (2, 4, 3)),)), Tick()):
        pending = [inp]
        while pending:
            state, evs = handle(state, pending.pop(0))
            events.extend(evs)
            pending.extend(executor.execute_events(evs))
    assert not state.throttles.is_empty() and state.requests["req-2"].open, events  # throttled, running
    with EventWriter(broker.bootstrap, prefix=prefix) as w:
        w.append(events)

    assert main(["verify", "--request", "req-1", *common]) == 0
    out = capsys.readouterr().out
    assert "Reassignment of partition v-1 is completed." not in out  # req-2 took it over
    assert "Partition v-1: taken over by request req-2" in out
    assert "but those kept for other running requests" in out
    assert "Throttled replicas kept on topic v for request req-2 (running): leader 1:2,1:4; follower 1:3" in out
    assert "Brokers [2,4] keep a leader.replication.throttled.rate for request req-2 (running)" in out
    assert "still" not in out, out

    stray = ThrottleSet(frozenset(), frozenset(), frozenset({1}), frozenset(), 1_000_000)  # not the engine's
    cluster.apply_throttles(stray)
    assert main(["verify", "--request", "req-1", *common]) == 1
    out = capsys.readouterr().out
    assert "Brokers [1] still have a leader.replication.throttled.rate" in out
    cluster.remove_throttles(stray)


def test_a_rate_the_engine_fails_to_remove_is_left_not_kept_for_another_request():
    """req-1 ends while req-2 runs; the removal of req-1's follower rate on broker 3 is refused and is
    being retried. The rate is in force by the log, but the engine does not want it: verifying req-1
    counts it as left, not as kept for req-2, whose partitions never name broker 3. req-2's own rates
    (brokers 1, 2 and 4) are kept for it."""
    from engine.cli.verify import kept_for_others
    from tests.fake_cluster import Driver, FakeCluster

    c = FakeCluster({P0: (1, 2), P1: (1, 2)}, brokers=range(1, 6))
    d = Driver(c)
    d.now = 100.0  # a refused removal is retried later, not at once
    d.feed(Submit("req-1", (PartitionTarget("v", 0, (1, 3)),)))
    d.tick()
    d.feed(Submit("req-2", (PartitionTarget("v", 1, (1, 4)),)))
    d.tick()
    c.refuse("remove", "POLICY_VIOLATION", "refused", times=50)
    c.finish(P0)
    d.observe()
    d.tick()
    assert d.state.requests["req-1"].status == "completed" and d.state.requests["req-2"].open
    assert 3 in d.state.throttles.follower_brokers and 3 in d.state.throttle_failed.follower_brokers
    found = ThrottleSet(frozenset(), frozenset(), frozenset({1, 2}), frozenset({3, 4}), 1)  # rates alone
    left, kept = kept_for_others(d.state, "req-1", found)
    assert left.follower_brokers == {3} and not left.leader_brokers
    assert set(kept) == {"req-2"}
    assert kept["req-2"].leader_brokers == {1, 2} and kept["req-2"].follower_brokers == {4}


def test_a_rate_two_running_requests_need_is_kept_for_each():
    """A rate is named with every running request whose partitions name its broker, not with the oldest
    running request whatever it moves."""
    from engine.cli.verify import kept_for_others
    from tests.fake_cluster import Driver, FakeCluster

    p2 = TopicPartition("v", 2)
    c = FakeCluster({P0: (1, 2), P1: (4, 5), p2: (4, 7)}, brokers=range(1, 10))
    d = Driver(c)
    # broker 4 leads two of the three moves: dominant, its copies would go into 6 and 8 one after the other
    # (docs/algorithm.md, "A dominant source"); this test needs both running at once
    d.feed(ChangeLimits({"pin_dominant_source": 0}))
    d.feed(Submit("req-1", (PartitionTarget("v", 0, (1, 3)),)))
    d.feed(Submit("req-2", (PartitionTarget("v", 1, (4, 6)),)))
    d.feed(Submit("req-3", (PartitionTarget("v", 2, (4, 8)),)))
    d.tick()
    assert set(d.state.steps) == {P0, P1, p2}  # all three copy
    found = d.state.throttles._replace(leader=frozenset(), follower=frozenset())  # the rates
    left, kept = kept_for_others(d.state, "req-1", found)
    assert left.leader_brokers == {1, 2} and left.follower_brokers == {3}  # req-1's own
    assert kept["req-2"].leader_brokers == {4, 5} and kept["req-2"].follower_brokers == {6}
    assert kept["req-3"].leader_brokers == {4, 7} and kept["req-3"].follower_brokers == {8}


def test_verify_of_a_request_not_finished_says_where_each_partition_stands(sim_url, broker, topics, capsys):
    """Paused before it was submitted, no partition of req-1 has started: verify says each is not at
    its target yet and why, in the words of ``kreassign status``, and exits 1."""
    prefix = topics.events[: -len("events")]
    cluster = RemoteCluster(sim_url)
    state, log = EMPTY, []
    for inp in (cluster.observe(), Pause(), Submit("req-1", (PartitionTarget("v", 0, (3, 4)),))):
        state, evs = handle(state, inp)
        log.extend(evs)
    with EventWriter(broker.bootstrap, prefix=prefix) as w:
        w.append(log)
    common = ["--bootstrap-server", broker.bootstrap, "--prefix", prefix, "--broker-profile", "embedded",
              "--cluster", "sim+" + sim_url]
    assert main(["verify", "--request", "req-1", *common]) == 1
    out = capsys.readouterr().out
    assert "Partition v-0 is not at its target yet (queued): replicas [1,2], target [3,4]." in out
