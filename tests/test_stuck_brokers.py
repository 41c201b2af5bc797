"""Issue 27, defect 9: what waits on a broker that does not answer, said in status (``engine.views.brokers``
through ``engine.views.attention``), and the decider's cluster calls under a deadline
(``engine.runtime.calls``)."""

from __future__ import annotations

import threading
import time

from engine.core.commands import PartitionTarget, Submit
from engine.core.outcomes import Unavailable
from engine.core.partition import TopicPartition
from engine.runtime.calls import Bounded
from engine.views.attention import attention
from tests.fake_cluster import Driver, FakeCluster


def tp(i):
    return TopicPartition("t", i)


def incident():
    """The real run's shape: ten partitions at (1,2,3) to (4,1,2,3); the incoming cap of 2 lets two steps
    into broker 4 start, eight wait behind it."""
    c = FakeCluster({tp(i): (1, 2, 3) for i in range(10)}, range(1, 6))
    d = Driver(c)
    d.feed(Submit("r", tuple(PartitionTarget("t", i, (4, 1, 2, 3)) for i in range(10))))
    d.tick()
    assert len(d.state.steps) == 2 and len(list(d.state.ready)) == 8
    return c, d


def test_status_says_which_steps_need_a_broker_that_does_not_answer_and_which_limit_holds_the_queue():
    _c, d = incident()
    entries = attention(d.state, brokers={3: {"seconds": 12.4, "waiting": ["DescribeConfigs (its throttle rate read back)"],
                                              "calls_waiting": [{"call": "observe", "seconds": 11.0}]}})
    (entry,) = [e for e in entries if e["kind"] == "broker"]
    assert entry["title"] == "broker 3 does not answer (for 12 s): 2 steps in flight cannot finish"
    assert entry["severity"] == "error" and entry is entries[0]
    lines = entry["lines"]
    assert lines[0] == "waiting on it: DescribeConfigs (its throttle rate read back)"
    assert "observe (11 s)" in lines[1]
    steps = next(line for line in lines if "in flight need" in line)
    assert "2 steps in flight need it" in steps and "[4, 1, 2, 3]" in steps
    held = next(line for line in lines if "queued behind" in line)
    assert held.startswith("8 partitions queued behind the incoming cap of broker 4 "
                           "(max_incoming_moves_per_broker 2: 2 taken")
    assert "2 of 2 taken by the steps that need broker 3" in held
    assert lines[-1] == "moves that do not need it go on"


def test_a_broker_that_is_down_is_named_only_while_a_step_in_flight_needs_it():
    c, d = incident()
    c.brokers[5] = c.brokers[5]._replace(alive=False)  # nothing needs broker 5
    d.observe()
    assert not [e for e in attention(d.state) if e["kind"] == "broker"]
    c.brokers[3] = c.brokers[3]._replace(alive=False)
    d.observe()
    (entry,) = [e for e in attention(d.state) if e["kind"] == "broker"]
    assert entry["title"] == "broker 3 is down: 2 steps in flight cannot finish"
    assert "until it is back and is in the ISR again" in entry["lines"][0]


def test_no_broker_entry_when_every_broker_answers():
    _c, d = incident()
    assert not [e for e in attention(d.state, brokers={}) if e["kind"] == "broker"]


# --- calls under a deadline ----------------------------------------------------------------------------


class Stuck:
    """A cluster whose calls block until released (what a client does while a broker does not answer)."""

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0

    def observe(self, partitions=None):
        self.calls += 1
        self.release.wait(30)
        return "observed"

    def alter_reassignments(self, targets):
        self.calls += 1
        self.release.wait(30)
        return {tp: "ok" for tp in targets}

    def unresponsive(self):
        return {3: {"seconds": 4.2, "waiting": []}}

    def close(self):
        self.release.set()


def test_a_call_that_does_not_answer_is_left_behind_after_the_deadline_and_says_why():
    stuck = Stuck()
    bounded = Bounded(stuck, deadline=0.2, limit=2)
    t = time.monotonic()
    result = bounded.observe([tp(0)])
    assert 0.2 <= time.monotonic() - t < 2
    assert isinstance(result, Unavailable)
    assert str(result) == "observe: no answer within 0.2 s (left to finish in the background); brokers not answering: 3"
    other = Stuck()
    again = Bounded(other, deadline=0.05)
    assert str(again.observe()) == str(again.observe())  # the same cause, the same reason: recorded once
    other.release.set()
    alters = bounded.alter_reassignments({tp(0): (1, 2, 3), tp(1): (1, 2, 3)})
    assert set(alters) == {tp(0), tp(1)} and all(isinstance(r, Unavailable) for r in alters.values())
    assert [w["call"] for w in bounded.waiting()] == ["observe", "alter_reassignments"]
    t = time.monotonic()
    refused = bounded.observe()  # two left waiting, the limit: not even sent
    assert time.monotonic() - t < 0.2 and isinstance(refused, Unavailable) and stuck.calls == 2
    assert str(refused) == ("observe not sent: 2 cluster calls are still unanswered (the oldest: observe); brokers not "
                            "answering: 3")
    stuck.release.set()
    deadline = time.monotonic() + 5
    while bounded.waiting() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bounded.waiting() == []
    assert bounded.observe() == "observed"  # answered within the deadline: its result as it is


def test_a_call_that_raises_raises_in_the_caller():
    class Broken:
        def observe(self, partitions=None):
            raise RuntimeError("a defect of the adapter")

    try:
        Bounded(Broken(), deadline=1).observe()
    except RuntimeError as e:
        assert "a defect" in str(e)
    else:
        raise AssertionError("the adapter's exception was swallowed")


def test_sizes_are_waited_for_while_every_broker_answers_and_given_up_once_one_does_not():
    class Slow:
        def __init__(self):
            self.silent = {}

        def sizes(self, partitions):
            time.sleep(0.5)
            return {tp: 1 for tp in partitions}

        def unresponsive(self):
            return self.silent

    slow = Slow()
    bounded = Bounded(slow, deadline=0.1, patience=5)
    assert bounded.sizes([tp(0)]) == {tp(0): 1}  # slow, yet every broker answers: waited for
    slow.silent = {2: {"seconds": 1.5, "waiting": []}}
    t = time.monotonic()
    assert isinstance(bounded.sizes([tp(0)]), Unavailable) and time.monotonic() - t < 0.4
    assert isinstance(Bounded(Slow(), deadline=0.1, patience=0.2).sizes([tp(0)]), Unavailable)  # patience ends it


# --- the Kafka adapter against a broker that does not answer -------------------------------------------


def test_the_adapter_names_a_hung_broker_sends_it_nothing_new_and_leaves_the_clients_stuck_on_it():
    """Both clients bootstrapped from the broker that hangs (librdkafka's controller, kafka-python's
    controller id): the decider's calls are left behind at the deadline, the watch names the broker, and
    new clients bootstrapped from the others serve the next calls, alters included."""
    from engine.cluster.kafka import KafkaCluster
    from engine.core.commands import Observation
    from engine.core.outcomes import Ok
    from engine.core.throttles import ThrottleSet
    from engine.kafka.client_config import ClientConfig
    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer
    from tests.engine_harness import wait_for

    sim = SimServer(S.from_document({
        "name": "hang", "brokers": [{"id": b} for b in (1, 2, 3, 4, 5)],
        "topics": [{"name": "t", "min_insync_replicas": 1, "assignment": [{"replicas": [1, 2], "size": "1 MB"}]}]}),
        speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    adapter = KafkaCluster(ClientConfig({"bootstrap.servers": f"127.0.0.1:{front.ports[3]}"}), timeout=30)
    cluster = Bounded(adapter, deadline=1.0)
    try:
        assert isinstance(cluster.observe([tp(0)]), Observation)
        adapter.watch_brokers(1.0)
        with sim.lock:
            sim.cluster.inject(3, "hang")
        hung = time.monotonic()
        looks = wait_for(lambda: isinstance(o := cluster.observe([tp(0)]), Observation) and 3 in adapter.unresponsive()
                         and o, 15, "an observation while broker 3 hangs")
        print(f"observed again {time.monotonic() - hung:.2f} s after broker 3 hung")
        assert time.monotonic() - hung < 6 and looks.partitions[tp(0)].replicas == (1, 2)
        t = time.monotonic()
        rate = cluster.apply_throttles(ThrottleSet(follower_brokers=frozenset({3}), rate=1_000_000))
        assert isinstance(rate, Unavailable) and "broker 3 has not answered" in str(rate)
        assert time.monotonic() - t < 0.5  # nothing was sent to it
        assert cluster.alter_reassignments({tp(0): (1, 4)}) == {tp(0): Ok()}  # the controller, through a new client
        with sim.lock:
            assert sim.cluster.state.partitions[tp(0)].reassigning or sim.cluster.state.partitions[tp(0)].replicas == (1, 4)
    finally:
        with sim.lock:
            sim.cluster.inject(3, "resume")
        adapter.close()
        front.shutdown()
        sim.shutdown()


def test_the_watch_names_a_broker_that_stops_answering_and_forgets_it_when_it_answers_again():
    from engine.cluster.watch import BrokerWatch
    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer
    from tests.engine_harness import wait_for

    sim = SimServer(S.from_document({"name": "watch", "brokers": [{"id": b} for b in (1, 2, 3)],
                                     "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}]}), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    changes = []
    addresses = {b: f"127.0.0.1:{p}" for b, p in front.ports.items()}
    watch = BrokerWatch(lambda: addresses, deadline=0.4, interval=0.1, on_change=changes.append)
    watch.start()
    try:
        time.sleep(0.6)  # a few rounds of probes, all answered
        assert watch.unresponsive() == {} and changes == []
        with sim.lock:
            sim.cluster.inject(2, "hang")
        wait_for(lambda: set(watch.unresponsive()) == {2}, 5, "broker 2 named")
        assert changes[-1] == frozenset({2}) and 0.4 <= watch.unresponsive()[2] < 3
        with sim.lock:
            sim.cluster.inject(2, "resume")
        wait_for(lambda: watch.unresponsive() == {}, 5, "broker 2 answering again")
        assert changes[-1] == frozenset()
        with sim.lock:
            sim.cluster.inject(3, "down")  # its listener closes; while it is still listed, it does not answer
        wait_for(lambda: set(watch.unresponsive()) == {3}, 5, "broker 3 named")
        del addresses[3]  # fenced: no longer listed, no longer named
        wait_for(lambda: watch.unresponsive() == {}, 5, "broker 3 forgotten once it is not listed")
    finally:
        watch.stop()
        front.shutdown()
        sim.shutdown()


def test_the_watch_probes_only_as_often_as_the_engines_work_asks_and_still_names_a_hung_broker():
    """Issue 26/28: an idle engine sends the brokers no probe; with steps in flight each broker is probed every
    ``busy_interval``; while a call waits every broker every ``interval``. Counted where the probes arrive (the
    front's ApiVersions per broker). The old watch probed every broker every ``interval`` whatever the engine did.

    The rounds run on a clock the test moves (a round each ``interval``, its answers in before the next), so the
    counts are exact whatever the machine's load; the probes themselves are real requests to the front. (Run on
    the wall clock, it failed once in CI with {1: 5, 2: 2, 3: 2} for a 1.6 s sleep: five probes 0.8 s apart
    need 3.2 s, so the machine's load stretched the sleep.)"""
    from engine.cluster.watch import BrokerWatch
    from engine.sim import scenario as S
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer
    from tests.engine_harness import wait_for

    sim = SimServer(S.from_document({"name": "watch", "brokers": [{"id": b} for b in (1, 2, 3)],
                                     "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}]}), speed=1)
    sim.start()
    front = KafkaFront(sim)
    front.start()
    demand = ["idle"]
    now = [0.0]
    addresses = {b: f"127.0.0.1:{p}" for b, p in front.ports.items()}
    # binary fractions: a round every 1/8 s, a busy probe every 1 s, named after 1/2 s unanswered
    watch = BrokerWatch(lambda: addresses, deadline=0.5, interval=0.125, busy_interval=1.0,
                        demand=lambda: demand[0], clock=lambda: now[0])

    def probes() -> dict:
        return {b: per.get("ApiVersions", {}).get("requests", 0) for b, per in front.counts()["brokers"].items()}

    def rounds(until: float, hung=()) -> None:
        """Rounds every 1/8 s up to ``until``; after each, every probe to a broker not ``hung`` answered."""
        while now[0] < until:
            now[0] += 0.125
            watch.probe_once()
            wait_for(lambda: all(f.done() for b, f in watch._pending.items() if b not in hung), 10,
                     "the probes of the round answered")

    try:
        front.counts(reset=True)
        rounds(1.25)
        assert probes() == {} and watch.probes == 0  # idle: nothing sent
        demand[0] = "busy"
        rounds(3.125)  # busy from 1.375: probes at 1.375 and 2.375, the next due at 3.375
        assert probes() == {1: 2, 2: 2, 3: 2} and watch.probes == 6
        with sim.lock:
            sim.cluster.inject(2, "hang")
        rounds(3.375, hung=(2,))  # the busy probe at 3.375 goes unanswered on 2
        assert watch.unresponsive() == {}
        rounds(3.75, hung=(2,))
        assert watch.unresponsive() == {}  # 0.375 s unanswered: under the deadline
        rounds(3.875, hung=(2,))
        assert watch.unresponsive() == {2: 0.5}  # named at the deadline, since the probe was sent
        assert watch.probes == 9  # no second probe to 2 while the first waits
        with sim.lock:
            sim.cluster.inject(2, "resume")
        wait_for(lambda: watch._pending[2].done(), 10, "the held probe answered once broker 2 resumes")
        assert probes() == {1: 3, 2: 3, 3: 3}  # the front counts a held request once it reads it
        rounds(4.0)
        assert watch.unresponsive() == {}
        demand[0] = "urgent"
        front.counts(reset=True)
        rounds(5.0)
        assert probes() == {1: 8, 2: 8, 3: 8}  # every interval: 8 rounds in a second
    finally:
        watch.stop()
        front.shutdown()
        sim.shutdown()
