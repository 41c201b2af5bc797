"""Asking Kafka what this client may do, before doing it: topics, groups, the cluster.

Each check sends what Kafka answers authorization questions with (KIP-430): a
topic's or group's description with its authorized operations, the cluster's
authorized operations, or a ``validate_only`` CreateTopics (which creates
nothing on Kafka). A check that finds something missing raises ``ProbeError``
with the whole explanation (``engine.kafka.access``): the topic is missing, the
principal is not authorized (with the kafka-acls.sh grant), authentication
failed, or the cluster cannot be reached. Brokers that report no authorized
operations (the embedded broker) are trusted: only an answer that names a
missing operation fails a check.
"""

from __future__ import annotations

from typing import Any, Sequence

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from engine.kafka.access import (
    AUTHORIZATION, THE_CLUSTER, AuthWatch, Need, Resource, authentication_failed, denied, explain, group, principal_of,
    topic, user_of,
)
from engine.kafka.client_config import ClientConfig, last_failure, logged
from engine.kafka.topics import create_command

MISSING, DENIED, UNREACHABLE, AUTHENTICATION = "missing", "denied", "unreachable", "authentication"


class ProbeError(RuntimeError):
    """What a check found; ``kind`` is missing | denied | unreachable | authentication."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def enum_name(operation: str) -> str:
    """``DescribeConfigs`` -> ``DESCRIBE_CONFIGS`` (confluent-kafka's ``AclOperation`` names)."""
    out = ""
    for ch in operation:
        if ch.isupper() and out:
            out += "_"
        out += ch.upper()
    return out


class Prober:
    """One admin client (with an ``AuthWatch``) for a series of checks."""

    def __init__(self, config: ClientConfig, timeout: float = 30.0, admin: Any = None):
        self.config = config
        self.timeout = timeout
        self.watch = AuthWatch()
        self.admin = admin or AdminClient(logged(config.confluent(**self.watch.config())))
        self.principal = principal_of(config)
        self.bootstrap = config.bootstrap

    # -- failures ------------------------------------------------------------------------

    def _result(self, future: Any) -> Any:
        """The future's result; a failed authentication (reported on librdkafka's error callback while the
        request keeps waiting for a broker) ends the wait at once instead of after the timeout."""
        import concurrent.futures
        import time

        deadline = time.monotonic() + self.timeout + 5
        while True:
            try:
                return future.result(timeout=0.25)
            except concurrent.futures.TimeoutError:
                auth = self.watch.failure(self.admin)
                if auth is not None:
                    raise ProbeError(AUTHENTICATION, authentication_failed(user_of(self.config), auth)) from None
                if time.monotonic() > deadline:
                    raise

    def failure(self, e: Exception, need: Need | None) -> ProbeError:
        """The ``ProbeError`` for a client exception raised by a request that needed ``need``."""
        err = e.args[0] if isinstance(e, KafkaException) and e.args else e
        text = explain(err, need, self.principal, self.bootstrap, user_of(self.config))
        if text is not None:
            code = err.code() if hasattr(err, "code") and callable(err.code) else None
            return ProbeError(DENIED if code in AUTHORIZATION else AUTHENTICATION, text)
        auth = self.watch.failure(self.admin)
        if auth is not None:
            return ProbeError(AUTHENTICATION, authentication_failed(user_of(self.config), auth))
        detail = err.str() if isinstance(err, KafkaError) else f"{type(e).__name__}: {e}"
        self.admin.poll(0)  # serves the client's log lines: librdkafka's cause, when it logged one
        cause = last_failure()
        return ProbeError(UNREACHABLE, f"cannot reach the cluster at {self.bootstrap}: {detail}"
                          + (f" ({cause})" if cause else ""))

    def _missing(self, need: Need, granted: Sequence[Any] | None) -> Need | None:
        """The operations of ``need`` absent from ``granted`` (None: not reported, nothing known missing)."""
        if granted is None:
            return None
        names = {getattr(op, "name", str(op)) for op in granted}
        lacking = tuple(op for op in need.operations if enum_name(op) not in names)
        return Need(lacking, need.resource, need.why) if lacking else None

    # -- checks --------------------------------------------------------------------------

    def topic(self, name: str, operations: Sequence[str], why: str = "", grant_on: Resource | None = None) -> Any:
        """The topic's description (``TopicDescription``) if it exists and ``operations`` are allowed on it.
        ``grant_on``: the resource a missing grant names (e.g. the prefix of a family of topics)."""
        need = Need(tuple(operations), grant_on or topic(name), why)
        try:
            future = self.admin.describe_topics(TopicCollection([name]), include_authorized_operations=True,
                                                request_timeout=self.timeout)[name]
            desc = self._result(future)
        except KafkaException as e:
            err = e.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                command = create_command(name)  # kreassign's own topics: how to create them (with --prefix)
                raise ProbeError(MISSING, f"topic {name} does not exist on {self.bootstrap}"
                                          + (f" (run: {command})" if command else "")) from None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                # Kafka does not say whether a topic exists to whom may not describe it, nor anything else
                raise ProbeError(DENIED, denied(need, err.name(), self.principal, self.bootstrap)) from None
            raise self.failure(e, need) from None
        except ProbeError:
            raise
        except Exception as e:  # noqa: BLE001 - a timeout, a closed client
            raise self.failure(e, need) from None
        lacking = self._missing(need, desc.authorized_operations)
        if lacking is not None:
            raise ProbeError(DENIED, denied(lacking, "not among the operations Kafka says it may do", self.principal, self.bootstrap))
        return desc

    def group(self, name: str, operations: Sequence[str], why: str = "") -> None:
        """FindCoordinator and DescribeGroups for ``name`` (both need Describe); its authorized operations
        when Kafka reports them (an unknown group may have none: only Describe is then known)."""
        need = Need(tuple(operations), group(name), why)
        try:
            future = self.admin.describe_consumer_groups([name], include_authorized_operations=True,
                                                         request_timeout=self.timeout)[name]
            desc = self._result(future)
        except KafkaException as e:
            err = e.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return  # described (Describe is allowed), no operations reported for a group nobody joined yet
            raise self.failure(e, need) from None
        except ProbeError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self.failure(e, need) from None
        lacking = self._missing(need, getattr(desc, "authorized_operations", None))
        if lacking is not None:
            raise ProbeError(DENIED, denied(lacking, "not among the operations Kafka says it may do", self.principal, self.bootstrap))

    def cluster(self, operations: Sequence[str], why: str = "") -> None:
        """The cluster's authorized operations (DescribeCluster). Kafka reports none unless Describe on
        the cluster is allowed, and librdkafka reads "none" as "not reported": then Describe is tried
        with a request that needs it."""
        need = Need(tuple(operations), THE_CLUSTER, why)
        try:
            desc = self._result(self.admin.describe_cluster(include_authorized_operations=True,
                                                            request_timeout=self.timeout))
        except ProbeError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self.failure(e, need) from None
        granted = desc.authorized_operations
        if granted is None and self.reports_operations():
            granted = []  # Kafka answered, and gave this principal nothing on the cluster
        lacking = self._missing(need, granted)
        if lacking is not None:
            raise ProbeError(DENIED, denied(lacking, "CLUSTER_AUTHORIZATION_FAILED" if not granted
                                            else "not among the operations Kafka says it may do", self.principal, self.bootstrap))

    def reports_operations(self) -> bool:
        """Whether this broker reports authorized operations at all: does a visible topic come with them?"""
        try:
            md = self.admin.list_topics(timeout=self.timeout)
            names = sorted(t for t in md.topics if not t.startswith("__"))[:1]
            if not names:
                return False
            desc = self.admin.describe_topics(TopicCollection(names), include_authorized_operations=True,
                                              request_timeout=self.timeout)[names[0]].result(self.timeout + 5)
        except Exception:  # noqa: BLE001 - cannot tell: trust the broker
            return False
        return desc.authorized_operations is not None

    def create(self, name: str, why: str = "", grant_on: Resource | None = None) -> None:
        """CREATE on topic ``name``: a validate_only CreateTopics (nothing is created on Kafka; the
        embedded broker ignores validate_only, so never call this against it)."""
        need = Need(("Create",), grant_on or topic(name), why)
        try:
            future = self.admin.create_topics([NewTopic(name, 1, -1)], validate_only=True,
                                              request_timeout=self.timeout)[name]
            self._result(future)
        except KafkaException as e:
            err = e.args[0]
            if isinstance(err, KafkaError) and err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                               KafkaError.CLUSTER_AUTHORIZATION_FAILED):
                raise ProbeError(DENIED, denied(need, err.name(), self.principal, self.bootstrap)) from None
            if isinstance(err, KafkaError) and not err.code() < 0:
                return  # TOPIC_ALREADY_EXISTS, a policy, a replication factor: Create itself was allowed
            raise self.failure(e, need) from None
        except ProbeError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self.failure(e, need) from None
