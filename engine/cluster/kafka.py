"""``KafkaCluster``: the ``engine.cluster`` interface on a real Apache Kafka cluster.

Two client libraries behind one adapter (measured in the admin spike):

* confluent-kafka's ``AdminClient``: ``describe_cluster`` (brokers, racks),
  ``describe_topics`` (replicas, ISR, leader), ``describe_configs``
  (min.insync.replicas), ``incremental_alter_configs`` (KIP-73 throttles:
  APPEND/SUBTRACT on the topic lists so other tools' entries stay, a list that
  is ``*`` left alone as already holding them; SET/DELETE of the broker rates)
  and ``elect_leaders`` (PREFERRED).
* kafka-python's ``KafkaAdminClient`` for what librdkafka lacks (KIP-455):
  ``alter_partition_reassignments`` (a target, or None to cancel),
  ``list_partition_reassignments`` (adding/removing; an entry with both empty
  is not in progress: tansu lists every partition that way) and
  ``describe_log_dirs`` (partition sizes, one broker at a time so a dead
  broker costs only its own sizes). Its constructor connects at once and can
  hang on a stalled TLS handshake, so it is built in a thread with a deadline.

Settings come from ``ClientConfig`` (``--command-config``, SASL/SSL).
Errors become results (``engine.core.outcomes``): cancelling nothing (85) and
an election that is not needed (84) are ``Ok``; a refusal of the request
(39 INVALID_REPLICA_ASSIGNMENT, 3 UNKNOWN_TOPIC_OR_PARTITION,
80 PREFERRED_LEADER_NOT_AVAILABLE ...) is ``Refused``; timeouts, transport
errors and retriable codes are ``Unavailable``. Nothing raises.

Authorization errors (TOPIC/CLUSTER_AUTHORIZATION_FAILED) are ``Refused`` whose
message names what the request needed and the kafka-acls.sh grant
(``engine.kafka.access``): every call here knows its ``Need`` (Alter on the cluster for
AlterPartitionReassignments and ElectLeaders, AlterConfigs on a topic for its
throttled-replica lists ...). A failed SASL authentication, which the client
libraries report only in their logs while the request fails with a transport
error or a timeout, is ``Refused`` with code ``_AUTHENTICATION``: "authentication
failed for user U". ``observe`` reports a topic it may not describe (or whose
configs it may not describe) in ``Observation.denied`` with the explanation,
and goes on with the other topics.

Brokers: Kafka reports only the brokers that are registered and unfenced. A
broker seen before, or named in a replica list, that is not among them is
reported with ``alive=False``.

A broker that stops answering (``watch_brokers``: ``engine.cluster.watch`` probes every live broker)
is named by ``unresponsive()`` with what waits on it, and nothing new waits on it: a broker's own
config change or read-back for it is ``Unavailable`` at once ("broker 3 has not answered for 4 s"),
its DescribeLogDirs is skipped (its sizes stay unknown), and both clients are replaced by new ones
bootstrapped from the brokers that answer (librdkafka keeps sending an admin client's requests to the
broker it chose, kafka-python its controller requests to the controller id it was given, until their
request timeout). The old clients' calls end at their own timeouts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable, Collection, Iterable, Mapping

from engine.kafka import access
from engine.kafka.access import THE_CLUSTER, Need
from engine.kafka.client_config import ClientConfig, logged
from engine.core.outcomes import OK, Ok, Refused, Result, Unavailable, first_failure
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import Observation
from engine.core.partition import Broker, PartitionState, Replicas, TopicInfo, TopicPartition, runs
from engine.core.throttles import (LOG_DIRS_RATE, RateRead, ThrottleConfigs, ThrottleSet, parse_config_entries, rate_value,
                                   read_back)
from engine.cluster.requests import ANY, RequestCounter
from engine.core.budget import RequestsSent

log = logging.getLogger("kreassign.cluster.kafka")

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"

# Kafka's protocol names for the codes the engine decides on (the libraries spell some differently).
CODE_NAMES = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG",
    41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST",
    58: "SASL_AUTHENTICATION_FAILED",
    60: "REASSIGNMENT_IN_PROGRESS",
    80: "PREFERRED_LEADER_NOT_AVAILABLE",
    84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS",
}
NO_OP_CODES = {84, 85}  # the action's effect is already there
PERMANENT_CODES = {3, 39, 80}  # refused whatever the libraries say about retrying
# librdkafka's local (negative) codes that say "the cluster could not be reached or did not answer in
# time". Every other local code is the client refusing the call before anything was sent (a defect of
# the call, like _CONFLICT "Only one ConfigResource of type BROKER is allowed per call", or settings that
# cannot work, like _AUTHENTICATION or _SSL): a refusal the engine reports, never a silent "try later".
TRANSIENT_LOCAL_CODES = {
    -195,  # _TRANSPORT
    -193,  # _RESOLVE
    -192,  # _MSG_TIMED_OUT
    -187,  # _ALL_BROKERS_DOWN
    -185,  # _TIMED_OUT
    -182,  # _NODE_UPDATE
    -180,  # _WAIT_COORD
    -178,  # _IN_PROGRESS
    -177,  # _PREV_IN_PROGRESS
    -166,  # _TIMED_OUT_QUEUE
    -163,  # _INTR
    -153,  # _RETRY
}
BROKERS_MAX_AGE = 10.0
"""Seconds the brokers (DescribeCluster) are reused before they are asked again. Sooner when the broker
watch finds one that stops or starts answering, or when a look names a broker not known to be alive."""
BROKERS_MIN_AGE = 1.0
"""... but at most once a second for that (a replica on a broker that is gone for good names it at every look)."""
MIN_ISR_MAX_AGE = 30.0
"""Seconds a topic's min.insync.replicas (DescribeConfigs) is reused before it is asked again; every
throttle read-back (``throttles``, every --verify-interval) refreshes it on the topics it reads."""
SMALL_TOPIC = 64
"""A topic of at most this many partitions is described whole (several in one request); of a larger one a
look asks only the partitions it is about (DescribeTopicPartitions from a cursor)."""
SLICES = 3
"""At most this many DescribeTopicPartitions requests per large topic and look (runs of the partitions
wanted, split at the widest gaps)."""
PAGE = 2000
"""Partitions asked per DescribeTopicPartitions request at most: Kafka's default max.request.partition.size.limit
(a broker set lower answers fewer and a cursor to the rest, which is followed)."""
BROKER_TIMEOUT = 5.0  # seconds for a config change sent to one broker (see _send_alter_configs)
CLIENT_ERROR = "CLIENT_ERROR"  # the client library raised (TypeError, ValueError ...): a defect of the call


class KafkaClusterError(ValueError):
    """Client settings that cannot work (a bad property value); not a cluster answer."""


def result_of_code(code: int, name: str, message: str, retriable: bool) -> Result:
    """One Kafka error code (or a librdkafka local code, negative) as a result."""
    if code == 0:
        return OK
    name = CODE_NAMES.get(code, name)
    if code in NO_OP_CODES:
        return Ok(name.lower().replace("_", " "))
    if code < 0:
        if code in TRANSIENT_LOCAL_CODES:
            return Unavailable(f"{name}: {message}" if message else name)
        return Refused(name, message)
    if code in PERMANENT_CODES or not retriable:
        return Refused(name, message)
    return Unavailable(f"{name}: {message}" if message else name)


def _confluent_result(err: Any) -> Result:
    """A confluent-kafka ``KafkaError`` (or ``KafkaException`` wrapping one) as a result.

    Anything else the binding raises (``TypeError``, ``ValueError``: the call itself is wrong) is
    a ``Refused`` with code ``CLIENT_ERROR``: retrying it can never succeed, and it must be seen."""
    if err is None:
        return OK
    if not hasattr(err, "code") and getattr(err, "args", None) and hasattr(err.args[0], "code"):
        err = err.args[0]
    if not hasattr(err, "code"):
        if isinstance(err, (TimeoutError, OSError)):
            return Unavailable(f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)
        return Refused(CLIENT_ERROR, f"{type(err).__name__}: {err}")
    return result_of_code(err.code(), err.name(), err.str(), err.retriable())


def _kafka_python_result(err: Any) -> Result:
    """A kafka-python error (class or instance) as a result."""
    if err is None:
        return OK
    cls = err if isinstance(err, type) else type(err)
    code = getattr(cls, "errno", None)
    if code is None:  # client-side: connection, timeout, incompatible broker
        # a broker missing from kafka-python's cached metadata (UnknownBrokerIdError): nothing was sent, and
        # the broker may be known at the next try (a new broker, a controller id to ask anew): not a refusal
        retriable = (getattr(cls, "retriable", False) or isinstance(err, (OSError, TimeoutError))
                     or cls.__name__ == "UnknownBrokerIdError")
        text = f"{cls.__name__}: {err}" if not isinstance(err, type) else cls.__name__
        return Unavailable(text) if retriable else Refused(cls.__name__, str(err))
    message = "" if isinstance(err, type) else str(err)
    return result_of_code(code, getattr(cls, "message", cls.__name__), message or cls.description,
                          bool(getattr(cls, "retriable", False)))


class KafkaCluster:
    def __init__(
        self,
        config: ClientConfig,
        timeout: float = 30.0,
        admin: Any = None,
        kafka_python: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``admin`` and ``kafka_python`` (a factory) replace the real clients in tests."""
        self._clock = clock
        self._brokers_at: float | None = None  # when DescribeCluster last answered (``BROKERS_MAX_AGE``)
        self._last_brokers: dict[int, Broker] = {}  # its answer: every broker known, alive or not
        self._min_isr: dict[str, tuple[int | None, float]] = {}  # topic -> (min.insync.replicas, when read)
        self._unclean: dict[str, bool] = {}  # topic -> unclean.leader.election.enable, read with min.insync.replicas
        self._counts: dict[str, tuple[int, float]] = {}  # topic -> (partitions, when counted: a whole Metadata)
        self._covered: dict[tuple[str, str], frozenset] = {}  # (topic, list) that is '*' -> kreassign's entries it covers
        self._slicing = True  # DescribeTopicPartitions answers (False once a broker or the client lacks it)
        self.timeout = timeout
        self.principal = access.principal_of(config)
        self.user = access.user_of(config)
        self.bootstrap = config.bootstrap
        self._config = config
        self._watch = access.AuthWatch()
        self._kp_auth: str | None = None  # kafka-python's authentication failure, when it could not connect
        self._bootstrap: str | None = None  # brokers the clients bootstrap from, once rebuilt (None: the configured)
        if admin is None:
            admin = self._new_admin(None)
        self._admin = admin
        if kafka_python is None:
            ms = int(timeout * 1000)

            def kafka_python(bootstrap: str | None = None):
                from kafka.admin import KafkaAdminClient

                settings = config if bootstrap is None else config.with_bootstrap(bootstrap)
                return KafkaAdminClient(**settings.kafka_python(
                    client_id=config.properties.get("client.id", "kreassign"),
                    request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                ))
            self._kp_rebuildable = True
        else:
            self._kp_rebuildable = False  # a test's factory: called without arguments
        self._kp_factory = kafka_python
        self._kp: Any = None
        self._kp_lock = threading.Lock()
        self._known: dict[int, Broker] = {}
        self._addresses: dict[int, str] = {}  # broker -> host:port, as DescribeCluster gives it
        self._brokers_watch: Any = None  # engine.cluster.watch.BrokerWatch, once watch_brokers is called
        self._silent: frozenset = frozenset()  # the unresponsive brokers the clients were last rebuilt for
        self._retired: list[tuple[float, Any]] = []  # (when, client) replaced while calls may still use them
        self._targeted: dict[int, dict[int, str]] = {}  # broker -> {call id: what} sent to that broker and unanswered
        self._calls = 0
        self._requests = RequestCounter()  # every request sent, by broker (the request budget)

    def requests_sent(self) -> RequestsSent:
        """Every request this adapter sent (the broker watch's probes included), by broker where it knows the
        broker, ``ANY`` where the client library chooses it (``engine.cluster.requests``; the module doc)."""
        return self._requests.sent()

    def _count_controller(self, kp: Any) -> None:
        """A request kafka-python sends to its controller: to the id it cached, or, none cached yet, a Metadata
        request to a broker it chooses for the id and then the request (both charged to ``ANY``)."""
        controller = getattr(kp, "_controller_id", None)
        if isinstance(controller, int) and controller >= 0:
            self._requests.count(controller)
        else:
            self._requests.count(ANY, 2)

    def _new_admin(self, bootstrap: str | None) -> Any:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        config = self._config if bootstrap is None else self._config.with_bootstrap(bootstrap)
        try:
            return AdminClient(logged(config.confluent(**{"client.id": config.properties.get("client.id", "kreassign"),
                                                          **self._watch.config()})))
        except (KafkaException, ValueError, TypeError) as e:
            raise KafkaClusterError(f"confluent-kafka client settings: {e}") from None

    # -- brokers that do not answer ---------------------------------------------------------------

    def watch_brokers(self, deadline: float, interval: float | None = None, demand=None) -> None:
        """Probe every live broker from now on (``engine.cluster.watch``; ``demand``: how often, as the
        engine's work asks): one that has not answered for ``deadline`` seconds is named by
        ``unresponsive`` and nothing new waits on it (the module doc)."""
        from engine.cluster.watch import BrokerWatch

        if self._brokers_watch is not None:
            return
        protocol = str(self._config.kafka_python().get("security_protocol", "PLAINTEXT")).upper()
        self._brokers_watch = BrokerWatch(self._live_addresses, deadline, interval, on_change=self._silence,
                                          connect=self._probe_connection, demand=demand,
                                          counted=lambda b: self._requests.count(b, probe=True),
                                          reuse=not protocol.startswith("SASL"))  # Kafka: one ApiVersions before SASL
        self._brokers_watch.start()

    def _live_addresses(self) -> dict[int, str]:
        known, addresses = dict(self._known), dict(self._addresses)
        return {b: addresses[b] for b, k in known.items() if k.alive and b in addresses}

    def _probe_connection(self, address: str, timeout: float):
        """A connection to one broker for the watch's probe, with TLS where the client settings ask for
        it (the probe, ApiVersions, needs no authentication; on a SASL listener, one probe per connection)."""
        import socket
        import ssl

        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        kp = self._config.kafka_python()
        if str(kp.get("security_protocol", "PLAINTEXT")).upper() not in ("SSL", "SASL_SSL"):
            return sock
        context = ssl.create_default_context(cafile=kp.get("ssl_cafile"))
        if kp.get("ssl_certfile"):
            context.load_cert_chain(kp["ssl_certfile"], kp.get("ssl_keyfile"), kp.get("ssl_password"))
        if kp.get("ssl_check_hostname") is False:
            context.check_hostname = False
        try:
            return context.wrap_socket(sock, server_hostname=host.strip("[]"))
        except BaseException:
            sock.close()
            raise

    def unresponsive(self) -> dict[int, dict]:
        """Broker -> {"seconds": how long it has not answered, "waiting": [the calls sent to it and not
        answered]}, for every broker that does not answer (empty without ``watch_brokers``)."""
        watch = self._brokers_watch
        if watch is None:
            return {}
        out = {}
        for b, seconds in sorted(watch.unresponsive().items()):
            waiting = sorted(set(self._targeted.get(b, {}).values()))
            out[b] = {"seconds": round(seconds, 1), "waiting": waiting}
        return out

    def _silent_now(self) -> dict[int, float]:
        return {} if self._brokers_watch is None else self._brokers_watch.unresponsive()

    def _not_answering(self, broker: int) -> Unavailable | None:
        seconds = self._silent_now().get(broker)
        if seconds is None:
            return None
        return Unavailable(f"broker {broker} has not answered for {seconds:.0f} s (nothing more is sent to it "
                           f"until it answers again)")

    def _silence(self, silent: frozenset) -> None:
        """The watch's news (its own thread): brokers stopped answering, or answer again. When one more
        stops, the clients are replaced by new ones bootstrapped from the brokers that answer."""
        self._brokers_at = None  # a broker stopped or started answering: the next look asks who is alive
        if not silent - self._silent:
            self._silent = silent
            return
        self._silent = silent
        known = dict(self._known)
        answering = [a for b, a in sorted(dict(self._addresses).items()) if b not in silent and known.get(b, Broker(b)).alive]
        if not answering:
            return
        bootstrap = ",".join(answering)
        log.warning("broker(s) %s do not answer: new clients bootstrap from %s (the old ones' calls end at their "
                    "%g s timeout)", ", ".join(map(str, sorted(silent))), bootstrap, self.timeout)
        self._bootstrap = bootstrap
        now = time.monotonic()
        try:
            admin = self._new_admin(bootstrap)
        except KafkaClusterError as e:
            log.warning("cannot make a new client: %s", e)
            return
        self._retired = [(t, c) for t, c in self._retired if now - t < 4 * self.timeout] + [(now, self._admin)]
        self._admin = admin
        if self._kp_rebuildable:
            old, self._kp = self._kp, None  # not under the lock: a build under way may hold it for a timeout
            if old is not None:
                threading.Thread(target=_close_quietly, args=(old,), name="kreassign-kafka-python-close",
                                 daemon=True).start()  # its waiting calls fail now instead of at their timeout

    @contextlib.contextmanager
    def _sent_to(self, broker: int, what: str):
        """Record a call sent to ``broker`` until it returns: what waits on it, if it stops answering."""
        self._calls += 1
        call = self._calls
        self._targeted.setdefault(broker, {})[call] = what
        try:
            yield
        finally:
            self._targeted.get(broker, {}).pop(call, None)

    # -- what went wrong ----------------------------------------------------------------

    def _named(self, result: Result, need: Need | None = None) -> Result:
        """``result`` with an authorization refusal explained (what ``need`` asked, the grant), and an
        authentication failure the client library hid behind a transport error named."""
        if isinstance(result, Refused) and access.is_authorization(result.code) and need is not None:
            return Refused(result.code, access.denied(need, result.code, self.principal, self.bootstrap))
        if isinstance(result, Refused) and access.is_authentication(result.code):
            return Refused(result.code, access.authentication_failed(self.user, result.message or result.code))
        if isinstance(result, Unavailable):
            auth = self._watch.failure(self._admin)
            if auth is not None:
                return Refused("_AUTHENTICATION", access.authentication_failed(self.user, auth))
        return result

    def _confluent(self, err: Any, need: Need | None = None) -> Result:
        return self._named(_confluent_result(err), need)

    def _kafka_python_error(self, err: Any, need: Need | None = None) -> Result:
        return self._named(_kafka_python_result(err), need)

    # -- clients -------------------------------------------------------------------------

    def _kafka_python(self) -> Any:
        """The kafka-python client, or ``Unavailable`` (built under a deadline: it connects at once)."""
        with self._kp_lock:  # calls run in threads of their own (engine.runtime.calls): one client for all
            return self._kafka_python_locked()

    def _kafka_python_locked(self) -> Any:
        if self._kp is not None:
            return self._kp
        box: dict[str, Any] = {}
        bootstrap = self._bootstrap

        def build() -> None:
            try:
                box["client"] = self._kp_factory(bootstrap) if self._kp_rebuildable else self._kp_factory()
            except Exception as e:  # noqa: BLE001 - every failure becomes a result
                box["error"] = e

        thread = threading.Thread(target=build, name="kreassign-kafka-python-connect", daemon=True)
        with access.KafkaPythonAuthLog() as auth:  # kafka-python only logs a failed authentication
            thread.start()
            deadline = time.monotonic() + self.timeout
            while thread.is_alive() and auth.last is None and time.monotonic() < deadline:
                thread.join(0.25)
        if auth.last is not None and "client" not in box:
            return Refused("SASL_AUTHENTICATION_FAILED", access.authentication_failed(self.user, auth.last))
        if thread.is_alive():
            return Unavailable(f"kafka-python client did not connect within {self.timeout:g}s "
                               "(a stalled TLS handshake never times out by itself)")
        if "error" in box:
            return self._kafka_python_error(box["error"])
        self._kp = box["client"]
        return self._kp

    def _to_controller(self, kp: Any, api: str, call: Callable[[], Any]) -> Any:
        """``call()``: a request kafka-python sends to the controller id it cached, once, from Metadata. KRaft
        answers a random live broker there (``KRaftMetadataCache.getControllerId``), and kafka-python asks again
        only on NOT_CONTROLLER: once that broker stops (a rolling restart, a decommission: fenced, gone from
        Metadata, so the broker watch never names it) every such call fails (UnknownBrokerIdError, a refused
        connection) until it is back, if ever. So on such a failure the cached id is forgotten and the call
        made once more: kafka-python asks Metadata for a live one. Nothing of the first call reached a broker
        but maybe its bytes on a connection that then broke: the calls are idempotent (the same target again,
        a cancel of nothing is NO_REASSIGNMENT_IN_PROGRESS)."""
        import kafka.errors as KE

        try:
            self._count_controller(kp)
            return call()
        except (KE.UnknownBrokerIdError, KE.NodeNotReadyError, KE.KafkaConnectionError) as e:
            if not hasattr(kp, "_controller_id"):
                raise
            gone, kp._controller_id = kp._controller_id, None
            self._count_controller(kp)
            log.warning("%s: kafka-python's controller, broker %s, cannot be reached (%s: %s): asking a live broker "
                        "for the controller and sending it again", api, gone, type(e).__name__, e)
            return call()

    def _wait(self, future: Any, timeout: float | None = None, need: Need | None = None) -> tuple[Any, Result | None]:
        """The future's result, or the failure as a result. A failed SASL authentication (librdkafka
        reports it on its error callback and keeps the request waiting) ends the wait at once."""
        import concurrent.futures

        deadline = time.monotonic() + (self.timeout if timeout is None else timeout) + 5
        while True:
            try:
                return future.result(timeout=min(0.25, max(0.0, deadline - time.monotonic()))), None
            except concurrent.futures.TimeoutError as e:
                auth = self._watch.failure(self._admin)
                if auth is not None:
                    return None, Refused("_AUTHENTICATION", access.authentication_failed(self.user, auth))
                if time.monotonic() >= deadline:
                    return None, self._confluent(e, need)
            except Exception as e:  # noqa: BLE001 - KafkaException ...
                return None, self._confluent(e, need)

    # -- observe ---------------------------------------------------------------------------------

    def _brokers(self, fresh: bool = False) -> dict[int, Broker] | Result:
        """Every broker known, alive or not: DescribeCluster at most every ``BROKERS_MAX_AGE`` seconds
        (``fresh``: now), else the last answer."""
        at = self._brokers_at
        if not fresh and at is not None and 0 <= self._clock() - at < BROKERS_MAX_AGE:
            return dict(self._last_brokers)
        asked = self._clock()
        try:
            self._requests.count(ANY)
            future = self._admin.describe_cluster(request_timeout=self.timeout)
        except Exception as e:  # noqa: BLE001
            return self._confluent(e)
        desc, err = self._wait(future)
        if err is not None:
            return err
        live = {n.id: Broker(n.id, n.rack, True) for n in desc.nodes}
        self._addresses.update({n.id: f"{n.host}:{n.port}" for n in desc.nodes if getattr(n, "host", None)})
        known = {**self._known, **live}
        self._known = known  # replaced, never changed: calls run in threads of their own (engine.runtime.calls)
        self._last_brokers = {b: live.get(b) or known[b]._replace(alive=False) for b in known}
        self._brokers_at = asked
        return dict(self._last_brokers)

    def _all_topics(self) -> list[str] | Result:
        try:
            self._requests.count(ANY)
            md = self._admin.list_topics(timeout=self.timeout)
        except Exception as e:  # noqa: BLE001
            return self._confluent(e)
        return sorted(t for t in md.topics if not t.startswith("__"))  # Kafka leaves out those it may not describe

    def _describe(self, topics: Iterable[str], wanted: Collection[TopicPartition] | None = None
                  ) -> tuple[dict, dict, dict] | Result:
        """topic -> TopicInfo or None, (topic, p) -> (replicas, isr, leader, leader epoch or None), and topic -> why it may not
        be described (Describe, or DescribeConfigs for min.insync.replicas, refused).

        With ``wanted`` (the partitions a look is about), a topic whose partition count is known (above every
        partition wanted: a count only grows, and a partition below it that is missing makes the topic asked
        whole again) is asked only for those partitions
        (``_slices``: DescribeTopicPartitions, KIP-966, from a cursor, up to a limit); the others, and every
        topic on a broker without that API, whole (Metadata, through librdkafka's ``describe_topics``)."""
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import ConfigResource, ResourceType

        topics = sorted(set(topics))
        if not topics:
            return {}, {}, {}
        infos: dict[str, TopicInfo | None] = {}
        parts: dict[TopicPartition, tuple] = {}
        denied: dict[str, str] = {}
        existing = []
        whole = topics
        if wanted is not None and self._slicing:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            counts = dict(self._counts)
            known = {t: counts[t][0] for t in topics if t in counts and max(by_topic.get(t, [0])) < counts[t][0]}
            if known:
                sliced = self._slices({t: sorted(set(by_topic.get(t, []))) for t in known}, known)
                if isinstance(sliced, tuple):
                    s_infos, s_parts, s_denied = sliced
                    # a partition below the count the topic had that is not there: the topic was deleted and
                    # made again, or shrank: asked whole, which counts its partitions anew
                    again = {t for t in known if s_infos.get(t) is not None and t not in s_denied
                             and any(TopicPartition(t, p) not in s_parts for p in by_topic.get(t, ()))}
                    infos.update({t: i for t, i in s_infos.items() if t not in again})
                    parts.update({tp: v for tp, v in s_parts.items() if tp.topic not in again})
                    denied.update(s_denied)
                    existing += [t for t, i in s_infos.items() if i is not None and t not in again]
                    # a topic in no answer (a broker that left it out) is asked whole: never taken for absent
                    whole = [t for t in topics if t not in known or t in again or (t not in s_infos and t not in s_denied)]
                elif sliced is not None:
                    return sliced
        futures = {}
        if whole:
            try:
                self._requests.count(ANY)  # one Metadata request for them all
                futures = self._admin.describe_topics(TopicCollection(whole), request_timeout=self.timeout)
            except Exception as e:  # noqa: BLE001
                return self._confluent(e)
        for topic in whole:
            desc, err = self._wait(futures[topic], need=Need(("Describe",), access.topic(topic)))
            if isinstance(err, Refused) and err.code == "UNKNOWN_TOPIC_OR_PARTITION":
                infos[topic] = None
                continue
            if isinstance(err, Refused) and err.code == "TOPIC_AUTHORIZATION_FAILED":
                denied[topic] = err.message  # Kafka does not say whether it exists
                continue
            if err is not None:
                return err
            existing.append(topic)
            infos[topic] = TopicInfo(len(desc.partitions), topic_id=_topic_id(getattr(desc, "topic_id", None)))
            self._counts = {**self._counts, topic: (len(desc.partitions), self._clock())}
            for p in desc.partitions:
                leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
                parts[TopicPartition(topic, p.id)] = (  # librdkafka exposes no leader epoch
                    tuple(n.id for n in p.replicas), frozenset(n.id for n in p.isr), leader, None,
                )
        now = self._clock()
        stale = [t for t in existing if t not in self._min_isr or not 0 <= now - self._min_isr[t][1] < MIN_ISR_MAX_AGE]
        if stale:  # min.insync.replicas changes rarely: asked every MIN_ISR_MAX_AGE (and at every read-back)
            resources = [ConfigResource(ResourceType.TOPIC, t) for t in stale]
            for resource, (configs, err) in self._describe_configs(resources).items():
                if isinstance(err, Refused) and err.code == "TOPIC_AUTHORIZATION_FAILED":
                    denied[resource.name] = err.message  # partitions known, min.insync.replicas not
                    del infos[resource.name]
                    self._min_isr.pop(resource.name, None)
                    continue
                if err is not None:
                    return _about(resource, err)
                self._remember_min_isr(resource.name, configs, now)
        for t in existing:
            if t in infos and t in self._min_isr and self._min_isr[t][0] is not None:
                infos[t] = infos[t]._replace(min_insync_replicas=self._min_isr[t][0])
            if t in infos and self._unclean.get(t):
                infos[t] = infos[t]._replace(unclean_leader_election=True)
        return infos, parts, denied

    def _slices(self, wanted: dict[str, list[int]], counts: dict[str, int]) -> tuple[dict, dict, dict] | Result | None:
        """The partitions ``wanted`` of topics of known partition ``counts``, through DescribeTopicPartitions:
        the topics of at most ``SMALL_TOPIC`` partitions together, whole (their partition counts are counted
        anew); each larger topic from a cursor, in at most ``SLICES`` runs of its wanted partitions (split at
        the widest gaps). ``None``: the API is missing (kafka-python too old, or a broker older than Kafka
        3.7): the caller asks Metadata instead, from now on.

        Kafka pages the answer (``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``): at most
        max(min(``max.request.partition.size.limit``, the request's limit), 1) partitions (the broker's
        setting: 2,000 by default, it can be lower), topics in name order; the topic the limit cuts, or the
        next one once it is used up, gets the cursor, and every later topic is left out, with no error. So
        every request's cursor is followed, to its end for the small topics, and for a run as long as it
        points at or before the run's last partition. A topic named and in no answer is left out of the
        result: the caller asks it whole (Metadata), never takes it for absent."""
        kp = self._kafka_python()
        if isinstance(kp, (Unavailable, Refused)):
            return kp
        if not hasattr(kp, "describe_topic_partitions"):
            self._slicing = False
            log.info("this kafka-python has no DescribeTopicPartitions: every look asks whole topics (Metadata)")
            return None
        small = [t for t in sorted(wanted) if counts[t] <= SMALL_TOPIC]
        # (topics, partitions asked, first cursor, last partition wanted: the cursor is followed up to it;
        # None: to its end)
        calls: list[tuple[list[str], int, dict | None, tuple[str, int] | None]] = []
        batch: list[str] = []
        for t in small:
            if batch and sum(counts[x] for x in batch) + counts[t] > PAGE:
                calls.append((batch, sum(counts[x] for x in batch), None, None))
                batch = []
            batch.append(t)
        if batch:
            calls.append((batch, sum(counts[x] for x in batch), None, None))
        for t in sorted(wanted):
            if counts[t] > SMALL_TOPIC and wanted[t]:
                for lo, hi in runs(wanted[t], SLICES):
                    calls.append(([t], hi + 1 - lo, {"topic_name": t, "partition_index": lo}, (t, hi)))
        infos: dict[str, TopicInfo | None] = {}
        parts: dict[TopicPartition, tuple] = {}
        denied: dict[str, str] = {}
        seen: dict[str, int] = {}  # small topic -> partitions answered, once its call was paged to the end
        for names, limit, cursor, last in calls:
            answered: dict[str, int] = {}
            while True:
                try:
                    self._requests.count(ANY)  # kafka-python's least loaded node
                    answer = kp.describe_topic_partitions(names, response_partition_limit=max(1, min(limit, PAGE)),
                                                          cursor=cursor)
                except Exception as e:  # noqa: BLE001
                    if type(e).__name__ in ("IncompatibleBrokerVersion", "UnsupportedVersionError"):
                        log.info("no DescribeTopicPartitions on this cluster (%s): looks ask Metadata of whole topics", e)
                        self._slicing = False
                        return None
                    return self._kafka_python_error(e, Need(("Describe",), access.topic(names[0])))
                for topic in answer.get("topics", ()):
                    name, code = topic["name"], topic.get("error_code", 0)
                    if code == 3:
                        infos[name] = None
                        self._counts = {t: c for t, c in self._counts.items() if t != name}
                        continue
                    if code:
                        result = self._kafka_python_error(_kafka_python_error_class(code),
                                                          Need(("Describe",), access.topic(name)))
                        if isinstance(result, Refused) and result.code == "TOPIC_AUTHORIZATION_FAILED":
                            denied[name] = result.message
                            continue
                        return result
                    infos.setdefault(name, TopicInfo(counts[name], topic_id=_topic_id(topic.get("topic_id"))))
                    for p in topic.get("partitions", ()):
                        leader = p["leader_id"] if p.get("leader_id", -1) >= 0 else None
                        epoch = p.get("leader_epoch")
                        parts[TopicPartition(name, p["partition_index"])] = (
                            tuple(p["replica_nodes"]), frozenset(p["isr_nodes"]), leader,
                            epoch if epoch is not None and epoch >= 0 else None)
                        answered[name] = answered.get(name, 0) + 1
                following = answer.get("next_cursor")
                if following is None:
                    if last is None:  # every topic of the call answered whole: their counts
                        seen.update(answered)
                    break
                at = (following["topic_name"], following["partition_index"])
                if last is not None and (at[0] != last[0] or at[1] > last[1]):
                    break  # past the run's last partition
                if cursor is not None and at <= (cursor["topic_name"], cursor["partition_index"]):
                    log.warning("DescribeTopicPartitions answered a cursor %s not after the one asked %s: the topics "
                                "not answered are asked whole", at, cursor)
                    break
                cursor = following
                limit = last[1] + 1 - at[1] if last is not None else PAGE
        for name, n in seen.items():  # a small topic answered whole: its partitions counted anew (it may have grown)
            if infos.get(name) is not None:
                infos[name] = infos[name]._replace(partitions=n)
                self._counts = {**self._counts, name: (n, self._clock())}
        return infos, parts, denied

    def _remember_min_isr(self, topic: str, configs: Mapping, at: float) -> None:
        entry = configs.get("min.insync.replicas")
        value = int(entry.value) if entry is not None and entry.value is not None else None
        unclean = configs.get("unclean.leader.election.enable")  # a cancel reverts uncleanly where true
        self._unclean = {**self._unclean, topic: unclean is not None and str(unclean.value).lower() == "true"}
        self._min_isr = {**self._min_isr, topic: (value, at)}  # replaced, never changed (threads read it)

    def _reassignments(self, tps: Collection[TopicPartition] | None) -> dict | Result:
        from kafka.structs import TopicPartition as KafkaTopicPartition

        kp = self._kafka_python()
        if isinstance(kp, (Unavailable, Refused)):
            return kp
        asked = None if tps is None else [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps]
        try:
            listed = self._to_controller(kp, "ListPartitionReassignments", lambda: kp.list_partition_reassignments(asked))
        except Exception as e:  # noqa: BLE001
            return self._kafka_python_error(e, Need(("Describe",), THE_CLUSTER, "ListPartitionReassignments"))
        out = {}
        for ktp, r in listed.items():
            adding, removing = tuple(r.get("adding_replicas") or ()), tuple(r.get("removing_replicas") or ())
            if adding or removing:  # tansu lists every partition with both empty
                out[TopicPartition(ktp.topic, ktp.partition)] = (adding, removing)
        return out

    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation | Unavailable:
        brokers = self._brokers()
        if not isinstance(brokers, dict):
            return _unavailable(brokers)
        # The reassignments come from the controller, the replicas from a broker's metadata, which lags
        # it: reading the reassignments first does not order the two. A look may be torn (a step's whole
        # RS with nothing in progress, seen on Kafka 4.0 0.64 s before the broker showed its TR); the
        # core judges a contradicting look only once a later one confirms it (decide.METADATA_SETTLE).
        # (KRaft's ListPartitionReassignments leaves out partitions it does not know.)
        asked = None if partitions is None else list(partitions)
        moving = self._reassignments(asked) if asked is None or asked else {}
        if not isinstance(moving, dict):
            return _unavailable(moving)
        topics = self._all_topics() if partitions is None else sorted({tp.topic for tp in partitions})
        if not isinstance(topics, list):
            return _unavailable(topics)
        described = self._describe(topics, None if partitions is None else asked)
        if not isinstance(described, tuple):
            return _unavailable(described)
        infos, parts, denied = described
        parts = {tp: v for tp, v in parts.items() if tp.topic not in denied}  # no partition without its topic's info
        named = {b for replicas, *_ in parts.values() for b in replicas}
        in_isr = {b for _replicas, isr, *_ in parts.values() for b in isr}
        recent = self._brokers_at is not None and 0 <= self._clock() - self._brokers_at < BROKERS_MIN_AGE
        if not recent and (any(b not in brokers for b in named) or any(b in brokers and not brokers[b].alive
                                                                       for b in in_isr)):
            fresh = self._brokers(fresh=True)  # a broker new, or back in an ISR: who is alive is asked again
            if isinstance(fresh, dict):
                brokers = fresh
            else:
                log.warning("who is alive could not be asked again (%s): this look uses the brokers last seen", fresh)
        wanted = list(parts) if partitions is None else [tp for tp in partitions if tp in parts]
        states = {}
        for tp in wanted:
            replicas, isr, leader, epoch = parts[tp]
            adding, removing = moving.get(tp, ((), ()))
            states[tp] = PartitionState(replicas, isr, leader, None, adding, removing, epoch)
            for b in replicas:
                if b not in brokers:
                    brokers[b] = Broker(b, None, False)
        return Observation(tuple(sorted(brokers.values())), infos, states, denied=denied)

    def snapshot(self) -> ClusterSnapshot | Unavailable:
        obs = self.observe(None)
        if isinstance(obs, Unavailable):
            return obs
        sizes = self.partition_sizes([b.id for b in obs.brokers if b.alive], obs.partitions)
        return ClusterSnapshot(
            obs.brokers, {t: i for t, i in obs.topics.items() if i is not None},
            {tp: p._replace(size_bytes=sizes.get(tp)) for tp, p in obs.partitions.items()},
        )

    def sizes(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int] | Unavailable:
        brokers = self._brokers()
        if not isinstance(brokers, dict):
            return _unavailable(brokers)
        return self.partition_sizes([b.id for b in brokers.values() if b.alive], partitions)

    def partition_sizes(self, brokers: Iterable[int], partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Largest replica size of each partition (DescribeLogDirs), asking one broker at a time;
        a broker that fails or lacks the API only loses its own answers."""
        sizes: dict[TopicPartition, int] = {}
        for replicas in self._log_sizes(brokers, partitions).values():
            for tp, size in replicas.items():
                sizes[tp] = max(sizes.get(tp, 0), size)
        return sizes

    def catch_up(self, steps: Mapping[TopicPartition, tuple[int | None, Replicas]]) -> dict[TopicPartition, int] | Unavailable:
        """What the new replicas of each step still miss: the leader's log size minus the smallest of
        theirs (DescribeLogDirs of the leader and of the new replicas' brokers); with none, the leader's
        log size (what a new replica would copy). A partition whose sizes are not all known is left out."""
        brokers = {b for leader, nr in steps.values() for b in ((leader,) if leader is not None else ()) + tuple(nr)}
        sizes = self._log_sizes(sorted(brokers), list(steps))
        out: dict[TopicPartition, int] = {}
        for tp, (leader, nr) in steps.items():
            lead = sizes.get(leader, {}).get(tp)
            theirs = [sizes.get(b, {}).get(tp) for b in nr]
            if lead is None or any(x is None for x in theirs):
                continue
            out[tp] = max(0, lead - min(theirs, default=0))
        return out

    def _log_sizes(self, brokers: Iterable[int], partitions: Collection[TopicPartition]) -> dict[int, dict[TopicPartition, int]]:
        """broker -> {tp: size of its replica} from DescribeLogDirs, one broker at a time (future logs
        left out); a broker that fails or lacks the API only loses its own answers, with a warning."""
        kp = self._kafka_python()
        if isinstance(kp, (Unavailable, Refused)):
            return {}
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        out: dict[int, dict[TopicPartition, int]] = {}
        answered = returned = False
        silent = self._silent_now()
        for b in brokers:
            if b in silent:
                continue  # it does not answer: its sizes stay unknown (status names it)
            try:
                with self._sent_to(b, "DescribeLogDirs (partition sizes)"):
                    answers = self._to_broker(kp, b, lambda: self._requests.count(b) or kp.describe_log_dirs(
                        topic_partitions=topics, brokers=[b]))
            except Exception as e:  # noqa: BLE001 - that broker's sizes stay unknown
                log.warning("no partition sizes from broker %s (DescribeLogDirs): %s", b, self._kafka_python_error(
                    e, Need(("Describe",), THE_CLUSTER, "DescribeLogDirs")))
                continue
            returned = True
            mine = out.setdefault(b, {})
            for answer in answers:
                answered = answered or bool(answer.get("log_dirs"))
                for log_dir in answer.get("log_dirs", ()):
                    if log_dir.get("error_code", 0):
                        continue
                    for t in log_dir.get("topics", ()):
                        for p in t.get("partitions", ()):
                            if p.get("is_future_key"):
                                continue
                            tp = TopicPartition(t["name"], p["partition_index"])
                            mine[tp] = max(mine.get(tp, 0), int(p["partition_size"]))
        if partitions and returned and not answered and not silent:  # kafka-python drops DescribeLogDirs' top-level error code
            log.warning("no partition sizes: no broker described its log directories (DescribeLogDirs needs %s)",
                        Need(("Describe",), THE_CLUSTER))
        return out

    def _to_broker(self, kp: Any, broker: int, call: Callable[[], Any]) -> Any:
        """``call()``: a request kafka-python sends to ``broker``. kafka-python knows only the brokers of its
        cached cluster metadata (refreshed every ``metadata.max.age.ms``, 5 minutes): a broker that registered
        since (the new broker a move goes to) is UnknownBrokerIdError at once. So then its metadata is
        refreshed (one Metadata request) and the call made once more; if the broker is still unknown to it, the
        error says so (not an ACL: the request never left)."""
        import kafka.errors as KE

        try:
            return call()
        except KE.UnknownBrokerIdError as e:
            manager = getattr(kp, "_manager", None)
            metadata = getattr(manager, "cluster", None)
            if metadata is None or not hasattr(metadata, "refresh_metadata"):
                raise
            log.info("broker %s is not in kafka-python's cluster metadata (it registered after the client last "
                     "refreshed it): refreshing it", broker)
            self._requests.count(ANY)
            manager.run(metadata.refresh_metadata)
            try:
                return call()
            except KE.UnknownBrokerIdError:
                raise KE.UnknownBrokerIdError(f"broker {broker} is not in kafka-python's cluster metadata, even "
                                              f"refreshed (not registered, or fenced): nothing was sent to it") from e

    # -- act ---------------------------------------------------------------------------------------

    def _alter(self, targets: Mapping[TopicPartition, Replicas | None]) -> dict[TopicPartition, Result]:
        from kafka.structs import TopicPartition as KafkaTopicPartition

        if not targets:
            return {}
        kp = self._kafka_python()
        if isinstance(kp, (Unavailable, Refused)):
            return {tp: kp for tp in targets}
        request = {KafkaTopicPartition(tp.topic, tp.partition): None if r is None else list(r)
                   for tp, r in targets.items()}
        need = Need(("Alter",), THE_CLUSTER, "AlterPartitionReassignments")
        try:
            answers = self._to_controller(kp, "AlterPartitionReassignments", lambda: kp.alter_partition_reassignments(
                request, timeout_ms=int(self.timeout * 1000)))
        except Exception as e:  # noqa: BLE001
            failure = self._kafka_python_error(e, need)
            return {tp: failure for tp in targets}
        out = {}
        for tp in targets:
            key = KafkaTopicPartition(tp.topic, tp.partition)
            out[tp] = (self._kafka_python_error(answers[key], need) if key in answers
                       else Unavailable(f"no answer for {tp}"))
        return out

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas]) -> dict[TopicPartition, Result]:
        return self._alter({tp: tuple(r) for tp, r in targets.items()})

    def cancel_reassignments(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._alter({tp: None for tp in partitions})

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        from confluent_kafka import ElectionType, TopicPartition as ConfluentTopicPartition

        tps = list(partitions)
        if not tps:
            return {}
        need = Need(("Alter",), THE_CLUSTER, "ElectLeaders")
        try:
            # No timeout keywords: confluent-kafka 2.16's binding raises TypeError for request_timeout /
            # operation_timeout although its docstring lists them; _wait bounds the wait instead.
            self._requests.count(ANY)  # librdkafka sends it to the controller it chose
            future = self._admin.elect_leaders(
                ElectionType.PREFERRED, [ConfluentTopicPartition(tp.topic, tp.partition) for tp in tps])
        except Exception as e:  # noqa: BLE001
            failure = self._confluent(e, need)
            return {tp: failure for tp in tps}
        answers, err = self._wait(future, need=need)
        if err is not None:
            return {tp: err for tp in tps}
        by_key = {(k.topic, k.partition): v for k, v in answers.items()}
        return {tp: self._confluent(by_key[(tp.topic, tp.partition)], need) if (tp.topic, tp.partition) in by_key
                else Unavailable(f"no answer for {tp}") for tp in tps}

    def apply_throttles(self, throttles: ThrottleSet) -> Result:
        return self._throttles(throttles, remove=False)

    def remove_throttles(self, throttles: ThrottleSet) -> Result:
        return self._throttles(throttles, remove=True)

    def _throttles(self, delta: ThrottleSet, remove: bool) -> Result:
        """One call for every topic resource, then one call per broker (librdkafka allows a single BROKER
        ``ConfigResource`` per call and sends it to that broker). Every call is made even if one fails
        (each is idempotent); the result is the first failure, naming its resource."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        lists_op = AlterConfigOpType.SUBTRACT if remove else AlterConfigOpType.APPEND
        topics = []
        for topic, (leader, follower) in sorted(delta.by_topic().items()):
            entries = [ConfigEntry(name, ",".join(values), incremental_operation=lists_op)
                       for name, values in ((LEADER_REPLICAS, leader), (FOLLOWER_REPLICAS, follower)) if values]
            topics.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
        brokers = []
        if remove or delta.rate is not None:
            for b in sorted(delta.leader_brokers | delta.follower_brokers):
                entries = []
                for name, side in ((LEADER_RATE, delta.leader_brokers), (FOLLOWER_RATE, delta.follower_brokers)):
                    if b in side:
                        entries.append(ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) if remove
                                       else ConfigEntry(name, str(delta.rate), incremental_operation=AlterConfigOpType.SET))
                brokers.append(ConfigResource(ResourceType.BROKER, str(b), incremental_configs=entries))
        # every request is handed to librdkafka before any answer is awaited: they leave together,
        # right after the decider's lease check (``KafkaEventLog.guard``), not each after the
        # previous one's answer (up to a timeout later). A broker that does not answer is not asked.
        results = []
        asked = []
        for r in brokers:
            silent = self._not_answering(int(r.name))
            if silent is None:
                asked.append(r)
            else:
                results.append(_about(r, Unavailable(f"{silent.message}: its rate is set when it answers")))
        sent = [self._send_alter_configs(call) for call in ([topics] if topics else []) + [[r] for r in asked]]
        for call in sent:
            for resource, result in self._answers(call).items():
                if remove and isinstance(result, Refused) and result.code == "UNKNOWN_TOPIC_OR_PARTITION":
                    result = OK  # a deleted topic has no throttle left to remove
                if (not remove and resource.restype == ResourceType.TOPIC and isinstance(result, Refused)
                        and result.code == "INVALID_CONFIG"):
                    result = self._past_wildcards(resource.name, delta) or result
                results.append(_about(resource, result))
        if remove:
            self._uncover(delta)
        return first_failure(results)

    def _past_wildcards(self, topic: str, delta: ThrottleSet) -> Result | None:
        """After Kafka refused to APPEND to ``topic``'s throttled-replicas lists (INVALID_CONFIG): if a list
        is the wildcard ``*`` (every replica throttled, set by an operator or another tool), Kafka refuses
        anything added to it (ThrottledReplicaListValidator: ``*`` must be alone), and what kreassign would
        add is already throttled: that side is left as it is (its entries remembered as covered, for the
        read-back), the other side appended alone. None: no list is ``*`` (the refusal stands)."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        resource = ConfigResource(ResourceType.TOPIC, topic)
        configs, err = self._describe_configs([resource])[resource]
        if err is not None:
            return None
        self._remember_min_isr(topic, configs, self._clock())
        mine = {LEADER_REPLICAS: {e for e in delta.leader if e.topic == topic},
                FOLLOWER_REPLICAS: {e for e in delta.follower if e.topic == topic}}
        wild = {name for name in mine if mine[name] and _wildcard(_value(configs, name))}
        if not wild:
            return None
        covered = dict(self._covered)
        for name in wild:
            covered[(topic, name)] = frozenset(covered.get((topic, name), frozenset()) | mine[name])
        self._covered = covered  # replaced, never changed (threads read it)
        log.info("topic %s: %s is '*' (every replica throttled, set outside kreassign): kreassign's entries there "
                 "are already in force and are not added", topic, " and ".join(sorted(wild)))
        rest = [ConfigEntry(name, ",".join(sorted(e.config_entry() for e in mine[name])),
                            incremental_operation=AlterConfigOpType.APPEND)
                for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS) if mine[name] and name not in wild]
        if not rest:
            return OK
        again = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=rest)
        return self._answers(self._send_alter_configs([again]))[again]

    def _uncover(self, delta: ThrottleSet) -> None:
        """Removed entries are no longer kreassign's under a ``*`` list (``_past_wildcards``); the ``*`` itself,
        the operator's, is never subtracted."""
        if not self._covered:
            return
        gone = {LEADER_REPLICAS: delta.leader, FOLLOWER_REPLICAS: delta.follower}
        self._covered = {(t, name): left for (t, name), entries in self._covered.items()
                         if (left := entries - gone[name])}

    def wildcard_throttles(self, topics: Collection[str]) -> dict[str, frozenset[str]] | Unavailable:
        """Topic -> its sides ("leader", "follower") whose throttled-replicas list is the wildcard ``*`` (every
        replica throttled), from one DescribeConfigs of the topics. kreassign never writes ``*``
        (``_past_wildcards`` leaves one as it is), so each was set outside it; ``throttles`` reads a ``*`` as the
        entries of kreassign's this adapter found it covering, none in a new process (``verify``'s). A topic
        that does not exist has none."""
        read = self.throttle_configs(topics, ())
        return read if isinstance(read, Unavailable) else dict(read.wildcards)

    def _send_alter_configs(self, resources: list) -> tuple[float, dict[Any, Any]]:
        """One IncrementalAlterConfigs call, not awaited: its timeout and each resource's future (or
        its failure, if the call could not be made)."""
        from confluent_kafka.admin import ResourceType

        # A broker's config goes to that broker: if it just died, librdkafka waits for it until the
        # timeout. A live broker answers in milliseconds, so waiting long only holds the engine up.
        timeout = self.timeout if resources[0].restype == ResourceType.TOPIC else min(self.timeout, BROKER_TIMEOUT)
        self._count_configs(resources)
        try:
            return timeout, self._admin.incremental_alter_configs(resources, request_timeout=timeout)
        except Exception as e:  # noqa: BLE001
            return timeout, {r: self._confluent(e, _config_need(r, "AlterConfigs")) for r in resources}

    def _answers(self, sent: tuple[float, dict[Any, Any]]) -> dict[Any, Result]:
        timeout, futures = sent
        out = {}
        for resource, future in futures.items():
            if isinstance(future, Result):
                out[resource] = future
                continue
            with self._sent_to_resource(resource, "IncrementalAlterConfigs (its throttle rate)"):
                out[resource] = self._wait(future, timeout, _config_need(resource, "AlterConfigs"))[1] or OK
        return out

    def _count_configs(self, resources: list) -> None:
        """One config request (Describe or IncrementalAlter): a broker's goes to that broker, topics' to one
        librdkafka chooses."""
        from confluent_kafka.admin import ResourceType

        first = resources[0]
        self._requests.count(int(first.name) if first.restype == ResourceType.BROKER and first.name.isdigit() else ANY)

    def _sent_to_resource(self, resource: Any, what: str):
        """``_sent_to`` for a BROKER config resource (librdkafka sends it to that broker); nothing for a topic."""
        from confluent_kafka.admin import ResourceType

        if resource.restype == ResourceType.BROKER and resource.name.isdigit():
            return self._sent_to(int(resource.name), what)
        return contextlib.nullcontext()

    def _describe_configs(self, resources: list) -> dict[Any, tuple[Any, Result | None]]:
        """Configs of each resource: topics in one call, each broker in its own (librdkafka's limit)."""
        from confluent_kafka.admin import ResourceType

        topics = [r for r in resources if r.restype == ResourceType.TOPIC]
        calls = ([topics] if topics else []) + [[r] for r in resources if r.restype != ResourceType.TOPIC]
        out: dict[Any, tuple[Any, Result | None]] = {}
        for call in calls:
            try:
                self._count_configs(call)
                futures = self._admin.describe_configs(call, request_timeout=self.timeout)
            except Exception as e:  # noqa: BLE001
                out.update({r: (None, self._confluent(e, _config_need(r, "DescribeConfigs"))) for r in call})
                continue
            for resource, future in futures.items():
                with self._sent_to_resource(resource, "DescribeConfigs (its throttle rate read back)"):
                    out[resource] = self._wait(future, need=_config_need(resource, "DescribeConfigs"))
        return out

    def throttles(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleSet | Unavailable:
        """Throttle configs in force (describe_configs on the topics and brokers). A list that is the wildcard
        ``*`` reads as the entries kreassign found it covering (``_past_wildcards``), not as every replica."""
        read = self.throttle_configs(topics, brokers)
        return read if isinstance(read, Unavailable) else read.throttles

    def throttle_configs(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleConfigs | Unavailable:
        """``throttles`` and ``wildcard_throttles`` from one DescribeConfigs of the topics (which also refreshes
        their min.insync.replicas) and one of each broker (which also gives its ``LOG_DIRS_RATE``)."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        for b in sorted(set(brokers)):
            silent = self._not_answering(b)
            if silent is not None:  # never read as "no rate there": that would be set again as missing
                return Unavailable(f"BROKER {b}: {silent.message}")
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        resources += [ConfigResource(ResourceType.BROKER, str(b)) for b in sorted(set(brokers))]
        if not resources:
            return ThrottleConfigs(ThrottleSet(), {}, {})
        leader, follower, rates, wild, log_dirs = set(), set(), [], {}, {}
        for resource, (configs, err) in self._describe_configs(resources).items():
            if isinstance(err, Refused) and err.code == "UNKNOWN_TOPIC_OR_PARTITION":
                continue
            if err is not None:
                return _unavailable(_about(resource, err))

            if resource.restype == ResourceType.TOPIC:
                self._remember_min_isr(resource.name, configs, self._clock())
                sides = set()
                for name, side, entries in (("leader", LEADER_REPLICAS, leader), ("follower", FOLLOWER_REPLICAS, follower)):
                    text = _value(configs, side)
                    if _wildcard(text):  # every replica: kreassign's entries it covers are in force
                        sides.add(name)
                        entries.update(self._covered.get((resource.name, side), ()))
                    else:
                        self._covered = {k: v for k, v in self._covered.items() if k != (resource.name, side)}
                        entries.update(parse_config_entries(resource.name, text))
                if sides:
                    wild[resource.name] = frozenset(sides)
            else:  # each broker's rates as read: the core compares them with the rate it has in force
                rates.append(RateRead(int(resource.name), rate_value(_value(configs, LEADER_RATE)),
                                      rate_value(_value(configs, FOLLOWER_RATE))))  # unset: Long.MAX_VALUE
                log_dir = rate_value(_value(configs, LOG_DIRS_RATE))
                if log_dir is not None:
                    log_dirs[int(resource.name)] = log_dir
        return ThrottleConfigs(read_back(leader, follower, rates), wild, log_dirs)

    def close(self) -> None:
        if self._brokers_watch is not None:
            self._brokers_watch.stop()
        if self._kp is not None:
            try:
                self._kp.close()
            except Exception:  # noqa: BLE001
                pass
            self._kp = None


def _topic_id(value: Any) -> str | None:
    """A topic id as Kafka writes it (``Uuid.toString``: URL-safe base64 of its 16 bytes, unpadded), from
    kafka-python's ``uuid.UUID`` or confluent-kafka's ``Uuid``; None for none or the zero id (Kafka's "not
    given", e.g. beside TOPIC_AUTHORIZATION_FAILED)."""
    import base64
    import uuid

    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        raw = value.bytes
    elif hasattr(value, "get_most_significant_bits"):
        raw = (value.get_most_significant_bits().to_bytes(8, "big", signed=True)
               + value.get_least_significant_bits().to_bytes(8, "big", signed=True))
    else:
        return None
    if raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _value(configs: Mapping, name: str) -> str | None:
    entry = configs.get(name)
    return None if entry is None else entry.value


def _wildcard(value: str | None) -> bool:
    """Whether a throttled-replicas value is Kafka's ``*`` (every replica; ThrottledReplicaListValidator trims it)."""
    return value is not None and value.strip() == "*"


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - a client being replaced: nothing to report
        pass


def _config_need(resource: Any, operation: str) -> Need:
    """What a config request on ``resource`` needs: ``operation`` on the topic, or on the cluster for a broker."""
    from confluent_kafka.admin import ResourceType

    if resource.restype == ResourceType.TOPIC:
        return Need((operation,), access.topic(resource.name))
    return Need((operation,), THE_CLUSTER, f"broker {resource.name}'s configs")


def _about(resource: Any, result: Result) -> Result:
    """``result`` with the config resource it concerns named in its message (an explanation of a
    denial already names it)."""
    kind = getattr(resource.restype, "name", str(resource.restype))
    where = f"{kind} {resource.name}"
    if isinstance(result, Refused) and access.is_authorization(result.code):
        return result
    if isinstance(result, Refused):
        return Refused(result.code, f"{where}: {result.message}" if result.message else where)
    if isinstance(result, Unavailable):
        return Unavailable(f"{where}: {result.message}")
    return result


def _unavailable(r: Result) -> Unavailable:
    return r if isinstance(r, Unavailable) else Unavailable(str(r))


def _kafka_python_error_class(code: int):
    import kafka.errors as KE

    return KE.for_code(code)
