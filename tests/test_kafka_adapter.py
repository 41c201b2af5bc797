"""The Kafka adapter's mapping of client answers and errors to results.

The client objects are substituted at the Python level (the adapter takes
them as arguments); the values they return and raise are the libraries' own
(confluent-kafka ``KafkaError``/``KafkaException``, kafka-python error classes),
in the shapes measured in the admin spike.
"""

import threading
from concurrent.futures import Future
from types import SimpleNamespace

import kafka.errors as KE
from confluent_kafka import KafkaError, KafkaException
from kafka.structs import TopicPartition as KTP

from engine.kafka.client_config import ClientConfig
from engine.cluster import Ok, Refused, Unavailable
from engine.cluster.kafka import BROKERS_MAX_AGE, MIN_ISR_MAX_AGE, KafkaCluster, result_of_code
from engine.core.partition import TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet

T0, T1, T2 = (TopicPartition("t", i) for i in range(3))


def done(value=None, error=None) -> Future:
    f = Future()
    f.set_exception(error) if error is not None else f.set_result(value)
    return f


def node(i, rack=None):
    return SimpleNamespace(id=i, rack=rack)


class Admin:
    """confluent-kafka AdminClient's methods, answering what the test sets."""

    def __init__(self):
        self.nodes = [node(1, "a"), node(2, "b"), node(3, "a")]
        self.topics = {"t": [(0, [1, 2], [1, 2], 1), (1, [2, 3], [2], 2), (2, [3, 1], [3, 1], 3)]}
        self.calls = []
        self.elect_answer = {}
        self.config_errors = {}

    def describe_cluster(self, request_timeout):
        return done(SimpleNamespace(nodes=self.nodes))

    def list_topics(self, timeout):
        return SimpleNamespace(topics={t: None for t in self.topics} | {"__consumer_offsets": None})

    def describe_topics(self, collection, request_timeout):
        out = {}
        for t in collection.topic_names:
            if t not in self.topics:
                out[t] = done(error=KafkaException(KafkaError(3)))
                continue
            parts = [SimpleNamespace(id=p, replicas=[node(b) for b in r], isr=[node(b) for b in isr],
                                     leader=node(leader) if leader is not None else None)
                     for p, r, isr, leader in self.topics[t]]
            out[t] = done(SimpleNamespace(partitions=parts))
        return out

    @staticmethod
    def _one_broker_per_call(resources):
        """librdkafka refuses a call with several BROKER resources before sending anything."""
        if sum(1 for r in resources if r.restype.name == "BROKER") > 1:
            raise KafkaException(KafkaError(KafkaError._CONFLICT, "Only one ConfigResource of type BROKER is allowed per call"))

    def describe_configs(self, resources, request_timeout):
        self._one_broker_per_call(resources)
        return {r: done({"min.insync.replicas": SimpleNamespace(value="2")}) for r in resources}

    def incremental_alter_configs(self, resources, request_timeout):
        self._one_broker_per_call(resources)
        self.calls.append(resources)
        return {r: done(error=self.config_errors.get(r.name)) if r.name in self.config_errors else done(None)
                for r in resources}

    def elect_leaders(self, election_type, partitions, *args, **kwargs):
        if args or kwargs:  # confluent-kafka 2.16's binding: "function takes at most 4 arguments (5 given)"
            raise TypeError("function takes at most 4 arguments (5 given)")
        self.calls.append(("elect", election_type, partitions))
        if isinstance(self.elect_answer, Exception):
            return done(error=self.elect_answer)
        return done({p: self.elect_answer.get(p.partition) for p in partitions})


class KafkaPython:
    """kafka-python KafkaAdminClient's methods."""

    def __init__(self):
        self.ongoing = {}
        self.alter_answer = {}
        self.raise_on_alter = None
        self.requests = []

    def list_partition_reassignments(self, tps=None):
        return {k: v for k, v in self.ongoing.items() if tps is None or k in tps}

    def alter_partition_reassignments(self, request, timeout_ms=None):
        self.requests.append(request)
        if self.raise_on_alter:
            raise self.raise_on_alter
        return {k: self.alter_answer.get(k.partition) for k in request}

    def describe_log_dirs(self, topic_partitions=None, brokers=None):
        if brokers == [2]:
            raise KE.KafkaConnectionError("socket disconnected")
        return [{"broker": brokers[0], "log_dirs": [{"error_code": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "partition_size": 1000 * brokers[0], "is_future_key": False},
            {"partition_index": 1, "partition_size": 99999, "is_future_key": True}]}]}]}]

    def close(self):
        pass


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def adapter(admin=None, kp=None, timeout=5.0, clock=None):
    kp = kp or KafkaPython()
    return KafkaCluster(ClientConfig({"bootstrap.servers": "x:9092"}), timeout=timeout, admin=admin or Admin(),
                        kafka_python=lambda: kp, clock=clock or Clock()), kp


def test_observe_builds_the_core_values_and_marks_vanished_brokers_dead():
    admin = Admin()
    clock = Clock()
    cluster, kp = adapter(admin, clock=clock)
    kp.ongoing = {KTP("t", 1): {"replicas": [2, 3], "adding_replicas": [3], "removing_replicas": []},
                  KTP("t", 2): {"replicas": [3, 1], "adding_replicas": [], "removing_replicas": []}}  # tansu-style
    obs = cluster.observe([T0, T1, T2, TopicPartition("gone", 0)])
    assert obs.topics["t"].partitions == 3 and obs.topics["t"].min_insync_replicas == 2
    assert obs.topics["gone"] is None
    assert obs.partitions[T1].adding == (3,) and obs.partitions[T1].reassignment_in_progress
    assert not obs.partitions[T2].reassignment_in_progress
    assert obs.partitions[T0].isr == {1, 2} and obs.partitions[T0].leader == 1
    admin.nodes = admin.nodes[:2]  # broker 3 is fenced / gone
    clock.now += BROKERS_MAX_AGE  # seen at the next DescribeCluster
    obs = cluster.observe([T0])
    assert {(b.id, b.rack, b.alive) for b in obs.brokers} == {(1, "a", True), (2, "b", True), (3, "a", False)}
    assert sorted(cluster.observe(None).topics) == ["t"]  # internal topics left out


def test_a_reassignment_completing_between_the_reads_looks_in_progress_never_torn():
    """Kafka completes partition t-1's move from [2, 3] + adding 1 (RS [1, 2, 3]) to [1, 2] while the
    adapter observes. Read in the other order (replicas, then reassignments) the look would be RS
    with nothing in progress, which the core takes for a change by another tool; read reassignments
    first, it is in progress (the next look settles it) or already done."""
    admin = Admin()
    admin.topics = {"t": [(1, [1, 2, 3], [2, 3], 2)]}
    cluster, kp = adapter(admin)
    kp.ongoing = {KTP("t", 1): {"replicas": [1, 2, 3], "adding_replicas": [1], "removing_replicas": [3]}}
    real_list, real_describe = kp.list_partition_reassignments, admin.describe_topics
    order = []

    def listing(tps=None):
        order.append("list")
        return real_list(tps)

    def describing(collection, request_timeout):
        order.append("describe")
        answer = real_describe(collection, request_timeout)
        kp.ongoing, admin.topics = {}, {"t": [(1, [1, 2], [1, 2], 2)]}  # Kafka completes it right after
        return answer

    kp.list_partition_reassignments, admin.describe_topics = listing, describing
    obs = cluster.observe([T1])
    p = obs.partitions[T1]
    assert order == ["list", "describe"]
    assert p.reassignment_in_progress and set(p.replicas) == {1, 2, 3}  # in progress: inconclusive
    p = cluster.observe([T1]).partitions[T1]
    assert not p.reassignment_in_progress and p.replicas == (1, 2)


def test_snapshot_sizes_from_log_dirs_skip_future_logs_and_a_failing_broker():
    cluster, _kp = adapter()
    snap = cluster.snapshot()
    assert snap.partitions[T0].size_bytes == 3000  # the largest replica, broker 2 failed
    assert snap.partitions[T1].size_bytes is None  # only a future log: unknown


def test_alter_and_cancel_results():
    cluster, kp = adapter()
    kp.alter_answer = {0: None, 1: KE.InvalidReplicationAssignmentError, 2: KE.UnknownTopicOrPartitionError}
    r = cluster.alter_reassignments({T0: (1, 3), T1: (9, 9), T2: (1,)})
    assert r[T0] == Ok() and r[T1].code == "INVALID_REPLICA_ASSIGNMENT" and r[T2].code == "UNKNOWN_TOPIC_OR_PARTITION"
    assert kp.requests[-1][KTP("t", 0)] == [1, 3]
    kp.alter_answer = {0: KE.NoReassignmentInProgressError}
    assert isinstance(cluster.cancel_reassignments([T0])[T0], Ok)
    assert kp.requests[-1] == {KTP("t", 0): None}
    kp.raise_on_alter = KE.RequestTimedOutError("slow")
    assert all(isinstance(x, Unavailable) for x in cluster.alter_reassignments({T0: (1,), T1: (2,)}).values())
    kp.raise_on_alter = KE.KafkaConnectionError("111 ECONNREFUSED")
    assert isinstance(cluster.cancel_reassignments([T0])[T0], Unavailable)


def test_a_hanging_kafka_python_constructor_is_unavailable_not_a_hang():
    release = threading.Event()

    def hang():
        release.wait(30)
        return KafkaPython()

    cluster = KafkaCluster(ClientConfig({}), timeout=0.2, admin=Admin(), kafka_python=hang)
    try:
        r = cluster.alter_reassignments({T0: (1, 2)})[T0]
        assert isinstance(r, Unavailable) and "did not connect" in r.message
    finally:
        release.set()


def test_elections_map_84_to_ok_and_a_failed_call_to_unavailable():
    admin = Admin()
    cluster, _ = adapter(admin)
    admin.elect_answer = {0: None, 1: KafkaError(84), 2: KafkaError(80)}
    r = cluster.elect_preferred_leaders([T0, T1, T2])
    assert r[T0] == Ok() and isinstance(r[T1], Ok) and r[T2].code == "PREFERRED_LEADER_NOT_AVAILABLE"
    admin.elect_answer = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out"))
    assert all(isinstance(x, Unavailable) for x in cluster.elect_preferred_leaders([T0]).values())


def test_throttles_append_subtract_set_delete():
    admin = Admin()
    cluster, _ = adapter(admin)
    delta = ThrottleSet(frozenset({ThrottledReplica("t", 0, 1), ThrottledReplica("t", 0, 2)}),
                        frozenset({ThrottledReplica("t", 0, 3)}), frozenset({1, 2}), frozenset({3}), 50_000_000)
    assert cluster.apply_throttles(delta) == Ok()
    calls = admin.calls[-4:]  # topics together, then one call per broker
    assert [[(r.restype.name, r.name) for r in call] for call in calls] == [
        [("TOPIC", "t")], [("BROKER", "1")], [("BROKER", "2")], [("BROKER", "3")]]
    sent = {(r.restype.name, r.name): [(e.name, e.value, e.incremental_operation.name) for e in r.incremental_configs]
            for call in calls for r in call}
    assert sent[("TOPIC", "t")] == [("leader.replication.throttled.replicas", "0:1,0:2", "APPEND"),
                                    ("follower.replication.throttled.replicas", "0:3", "APPEND")]
    assert sent[("BROKER", "1")] == [("leader.replication.throttled.rate", "50000000", "SET")]
    assert sent[("BROKER", "3")] == [("follower.replication.throttled.rate", "50000000", "SET")]
    assert cluster.remove_throttles(delta) == Ok()
    sent = {r.name: [(e.name, e.incremental_operation.name) for e in r.incremental_configs]
            for call in admin.calls[-4:] for r in call}
    assert sent["t"] == [("leader.replication.throttled.replicas", "SUBTRACT"),
                         ("follower.replication.throttled.replicas", "SUBTRACT")]
    assert sent["1"] == [("leader.replication.throttled.rate", "DELETE")]
    admin.config_errors = {"t": KafkaException(KafkaError(3))}
    assert cluster.remove_throttles(delta) == Ok()  # a deleted topic has nothing left to remove
    assert cluster.apply_throttles(delta).code == "UNKNOWN_TOPIC_OR_PARTITION"
    admin.config_errors = {"1": KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))}
    failed = cluster.apply_throttles(delta)
    assert isinstance(failed, Unavailable) and failed.message.startswith("BROKER 1: _TRANSPORT")
    assert [r.name for r in admin.calls[-1]] == ["3"]  # the brokers after the failing one are still asked


def test_a_throttle_changes_requests_all_leave_before_any_answer_is_awaited():
    """The decider's lease is checked once before a throttle change (KafkaEventLog.guard): its
    requests (topics, then one per broker) must all be sent then, not each after the previous
    answer, which may come a timeout later, when the lease has run out."""
    order = []

    class Answer(Future):
        def result(self, timeout=None):
            order.append("await")
            return super().result(timeout)

    class Recording(Admin):
        def incremental_alter_configs(self, resources, request_timeout):
            self._one_broker_per_call(resources)
            order.append("send")
            answers = {r: Answer() for r in resources}
            for f in answers.values():
                f.set_result(None)
            return answers

    cluster, _ = adapter(Recording())
    delta = ThrottleSet(frozenset({ThrottledReplica("t", 0, 1)}), frozenset({ThrottledReplica("t", 0, 3)}),
                        frozenset({1, 2}), frozenset({3}), 50_000_000)
    assert cluster.apply_throttles(delta) == Ok()
    assert order == ["send"] * 4 + ["await"] * 4


def test_client_side_refusals_are_refused_not_unavailable():
    """A call the client library refuses before sending anything can never succeed by waiting."""
    conflict = KafkaException(KafkaError(KafkaError._CONFLICT, "Only one ConfigResource of type BROKER is allowed per call"))
    from engine.cluster.kafka import _confluent_result

    assert _confluent_result(conflict) == Refused("_CONFLICT", "Only one ConfigResource of type BROKER is allowed per call")
    assert _confluent_result(TypeError("function takes at most 4 arguments (5 given)")).code == "CLIENT_ERROR"
    assert isinstance(_confluent_result(KafkaException(KafkaError(KafkaError._TRANSPORT, "x"))), Unavailable)
    assert isinstance(_confluent_result(TimeoutError()), Unavailable)


def test_error_codes():
    assert isinstance(result_of_code(85, "X", "", False), Ok)
    assert result_of_code(39, "INVALID_REPLICATION_ASSIGNMENT", "m", False) == Refused("INVALID_REPLICA_ASSIGNMENT", "m")
    assert isinstance(result_of_code(3, "UNKNOWN", "", True), Refused)  # retriable per the library, final here
    assert isinstance(result_of_code(41, "NOT_CONTROLLER", "", True), Unavailable)
    assert isinstance(result_of_code(-185, "_TIMED_OUT", "", False), Unavailable)
    assert result_of_code(-173, "_CONFLICT", "m", False) == Refused("_CONFLICT", "m")
    assert result_of_code(29, "TOPIC_AUTHORIZATION_FAILED", "", False).code == "TOPIC_AUTHORIZATION_FAILED"


class CountingAdmin(Admin):
    def __init__(self):
        super().__init__()
        self.asked = []

    def describe_cluster(self, request_timeout):
        self.asked.append("DescribeCluster")
        return super().describe_cluster(request_timeout)

    def describe_configs(self, resources, request_timeout):
        self.asked.append(("DescribeConfigs", tuple(r.name for r in resources)))
        return super().describe_configs(resources, request_timeout)


def test_a_look_asks_the_brokers_and_min_insync_replicas_only_when_their_answers_are_old():
    """Issue 26: the brokers and min.insync.replicas change rarely; a look reuses them for BROKERS_MAX_AGE and
    MIN_ISR_MAX_AGE (the old adapter asked DescribeCluster and DescribeConfigs at every look), sooner when a look
    names a broker not known alive or the broker watch says one stopped answering."""
    admin = CountingAdmin()
    clock = Clock()
    cluster, _kp = adapter(admin, clock=clock)
    for _ in range(5):
        obs = cluster.observe([T0, T1])
        clock.now += 1.0
    assert obs.topics["t"].min_insync_replicas == 2
    assert admin.asked == ["DescribeCluster", ("DescribeConfigs", ("t",))], admin.asked
    clock.now += BROKERS_MAX_AGE
    cluster.observe([T0])
    assert admin.asked.count("DescribeCluster") == 2
    clock.now += MIN_ISR_MAX_AGE
    cluster.observe([T0])
    assert admin.asked.count(("DescribeConfigs", ("t",))) == 2
    assert admin.asked.count("DescribeCluster") == 3
    clock.now += 1.0
    admin.topics["t"][0] = (0, [1, 2, 7], [1, 2], 1)  # a broker never seen: who is alive is asked at once
    cluster.observe([T0])
    assert admin.asked.count("DescribeCluster") == 4
    cluster.observe([T0])  # ... but not at every look (broker 7 may be gone for good)
    assert admin.asked.count("DescribeCluster") == 4
    cluster._silence(frozenset({2}))  # the watch: broker 2 stopped answering
    cluster.observe([T1])
    assert admin.asked.count("DescribeCluster") == 5


class SlicingKafkaPython(KafkaPython):
    """kafka-python with DescribeTopicPartitions (KIP-966), answering from ``topics`` as a KRaft broker pages it
    (DescribeTopicPartitionsRequestHandler, KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse, Kafka
    trunk): the topics named from the cursor's topic on, in name order; at most max(min(``broker_limit`` (the
    broker's max.request.partition.size.limit), the request's limit), 1) partitions; a topic the limit cuts gets
    the cursor at its next partition, and once the limit is used up the next topic gets the cursor (topic, 0),
    known or not, and every later one is left out; an unknown topic named before that is an error entry; a cursor
    topic not named or a negative cursor partition is INVALID_REQUEST for every topic."""

    def __init__(self, topics, broker_limit=2000):
        super().__init__()
        self.topics = topics  # name -> {partition: (replicas, isr, leader)}
        self.broker_limit = broker_limit
        self.slices = []

    def describe_topic_partitions(self, topics, response_partition_limit=2000, cursor=None):
        self.slices.append((tuple(topics), response_partition_limit, cursor and cursor["partition_index"]))
        first = cursor["topic_name"] if cursor else ""
        names = sorted({t for t in topics if t >= first})
        if cursor and (cursor["topic_name"] not in names or cursor["partition_index"] < 0):
            return {"topics": [{"name": t, "error_code": 42, "partitions": []} for t in topics], "next_cursor": None}
        remaining = max(min(self.broker_limit, response_partition_limit), 1)
        out, following = [], None
        for name in names:
            if remaining == 0:
                following = {"topic_name": name, "partition_index": 0}
                break
            if name not in self.topics:
                out.append({"name": name, "error_code": 3, "partitions": []})
                continue
            start = cursor["partition_index"] if cursor and name == cursor["topic_name"] else 0
            count = len(self.topics[name])
            upper = min(count, start + remaining)
            ps = list(range(start, upper))
            out.append({"name": name, "error_code": 0, "partitions": [
                {"partition_index": p, "replica_nodes": list(self.topics[name][p][0]),
                 "isr_nodes": list(self.topics[name][p][1]), "leader_id": self.topics[name][p][2]} for p in ps]})
            if upper < count:
                following = {"topic_name": name, "partition_index": upper}
                break
            remaining -= len(ps)
        return {"topics": out, "next_cursor": following}


def test_a_large_topic_is_asked_only_for_the_partitions_looked_at_and_whole_again_when_one_is_missing():
    admin = CountingAdmin()
    big = {p: ([1, 2], [1, 2], 1) for p in range(200)}
    admin.topics = {"big": [(p, r, isr, leader) for p, (r, isr, leader) in big.items()]}
    kp = SlicingKafkaPython({"big": big})
    calls = []
    real = admin.describe_topics
    admin.describe_topics = lambda c, request_timeout: calls.append(tuple(c.topic_names)) or real(c, request_timeout)
    cluster, _ = adapter(admin, kp)
    wanted = [TopicPartition("big", 3), TopicPartition("big", 150)]
    assert cluster.observe(wanted).topics["big"].partitions == 200  # first: whole, to count them
    assert calls == [("big",)] and kp.slices == []
    obs = cluster.observe(wanted)
    assert calls == [("big",)] and set(obs.partitions) == set(wanted) and obs.topics["big"].partitions == 200
    assert sorted(kp.slices) == [(("big",), 1, 3), (("big",), 1, 150)]  # two runs of one partition each
    for p in range(100, 200):  # the topic deleted and made again with 100 partitions: 150 is no longer there
        del big[p]
    admin.topics = {"big": [(p, r, isr, leader) for p, (r, isr, leader) in big.items()]}
    obs = cluster.observe(wanted)
    assert calls == [("big",), ("big",)] and obs.topics["big"].partitions == 100
    assert TopicPartition("big", 150) not in obs.partitions
    kp.slices.clear()
    obs = cluster.observe([TopicPartition("big", p) for p in range(100)])  # one run of 100 partitions
    assert len(obs.partitions) == 100 and kp.slices == [(("big",), 100, 0)] and len(calls) == 2


def test_a_run_of_more_than_2000_partitions_is_asked_in_requests_of_2000():
    """Kafka answers at most 2,000 partitions per DescribeTopicPartitions request (the cursor pages the rest)."""
    admin = Admin()
    big = {p: ([1, 2], [1, 2], 1) for p in range(4500)}
    admin.topics = {"big": [(p, r, isr, leader) for p, (r, isr, leader) in big.items()]}
    kp = SlicingKafkaPython({"big": big})
    cluster, _ = adapter(admin, kp)
    every = [TopicPartition("big", p) for p in range(4500)]
    cluster.observe(every[:1])
    obs = cluster.observe(every)
    assert len(obs.partitions) == 4500
    assert kp.slices == [(("big",), 2000, 0), (("big",), 2000, 2000), (("big",), 500, 4000)]


def _sliced(topics: dict, broker_limit=2000):
    """An adapter whose clients answer from ``topics`` (name -> partition count), replicas (1, 2): Metadata
    through the Admin fake, DescribeTopicPartitions paged as Kafka pages it; the Metadata calls recorded."""
    admin = CountingAdmin()
    calls = []

    def set_topics(counts):
        parts = {n: {p: ([1, 2], [1, 2], 1) for p in range(k)} for n, k in counts.items()}
        admin.topics = {n: [(p, r, isr, leader) for p, (r, isr, leader) in ps.items()] for n, ps in parts.items()}
        kp.topics = parts

    kp = SlicingKafkaPython({}, broker_limit)
    set_topics(topics)
    real = admin.describe_topics
    admin.describe_topics = lambda c, request_timeout: calls.append(tuple(c.topic_names)) or real(c, request_timeout)
    cluster, _ = adapter(admin, kp)
    return cluster, kp, calls, set_topics


def test_a_topic_that_grew_does_not_drop_the_next_topic_from_a_look():
    """The review's finding 1: topics a and b (10 partitions each) asked together with the limit their cached
    counts add up to (20); a grows to 20 and fills it: Kafka leaves b out with a cursor at it. The old adapter
    ignored the cursor: b vanished from every look for good (its partitions silently dropped, a step on it never
    judged again). Now the cursor is followed, and a's new count is learned."""
    cluster, kp, calls, set_topics = _sliced({"a": 10, "b": 10})
    wanted = [TopicPartition("a", 0), TopicPartition("b", 0)]
    cluster.observe(wanted)  # counts both: whole
    assert set(cluster.observe(wanted).partitions) == set(wanted)
    set_topics({"a": 20, "b": 10})  # kafka-topics --alter --partitions 20 on a
    kp.slices.clear()
    for _ in range(2):
        obs = cluster.observe(wanted)
        assert set(obs.partitions) == set(wanted) and obs.topics["b"].partitions == 10, (obs.partitions, obs.topics)
        assert obs.topics["a"].partitions == 20
    assert kp.slices[:2] == [(("a", "b"), 20, None), (("a", "b"), 2000, 0)]  # the cursor (b, 0) followed
    assert kp.slices[2:] == [(("a", "b"), 30, None)]  # a's count learned: one request again
    assert calls == [("a", "b")]  # the first look only: no Metadata since


def test_a_broker_limit_below_2000_is_paged_through_for_small_and_large_topics():
    """max.request.partition.size.limit can be set lower than its 2,000 default: every answer is cut at it and
    its cursor followed; a run of a large topic stops once the cursor is past its last partition."""
    cluster, kp, calls, _ = _sliced({"a": 3, "b": 4, "c": 2, "big": 200}, broker_limit=5)
    small = [TopicPartition(t, 0) for t in ("a", "b", "c")]
    runs = [TopicPartition("big", p) for p in range(10, 22)] + [TopicPartition("big", 150)]
    cluster.observe(small + runs)
    obs = cluster.observe(small + runs)
    assert set(obs.partitions) == set(small + runs) and {t: i.partitions for t, i in obs.topics.items()} == {
        "a": 3, "b": 4, "c": 2, "big": 200}
    assert sorted(kp.slices, key=str) == sorted([
        (("a", "b", "c"), 9, None), (("a", "b", "c"), 2000, 2),  # a, b-0 b-1, cursor (b, 2); then b-2 b-3 c
        (("big",), 12, 10), (("big",), 7, 15), (("big",), 2, 20),  # 10..21 in pages of 5
        (("big",), 1, 150)], key=str), kp.slices
    assert len(calls) == 1  # the first look only


def test_a_topic_a_broker_leaves_out_of_every_answer_is_asked_whole_never_taken_for_absent():
    """A broker (or a client) that drops a topic without a cursor: the topic is asked again (Metadata), its
    partitions observed; the old adapter dropped them and the topic from the look."""
    cluster, kp, calls, _ = _sliced({"a": 10, "b": 10})
    wanted = [TopicPartition("a", 0), TopicPartition("b", 0)]
    cluster.observe(wanted)
    real = kp.describe_topic_partitions

    def lenient(topics, response_partition_limit=2000, cursor=None):
        answer = real(topics, response_partition_limit, cursor)
        return {"topics": [t for t in answer["topics"] if t["name"] != "b"], "next_cursor": None}

    kp.describe_topic_partitions = lenient
    obs = cluster.observe(wanted)
    assert set(obs.partitions) == set(wanted) and obs.topics["b"].partitions == 10
    assert calls == [("a", "b"), ("b",)]
