"""Authorization and authentication errors named (``engine.kafka.access``), for every code, from each client library.

The libraries' own error objects: confluent-kafka's ``KafkaError`` (and ``KafkaException``
wrapping one), kafka-python's and aiokafka's error classes and instances. Through real
protocol peers (the simulated cluster's secured Kafka front) see tests/test_security.py.
"""

from __future__ import annotations

import shlex

import aiokafka.errors as aio
import kafka.errors as kp
import pytest
from confluent_kafka import KafkaError, KafkaException

from engine.kafka import access
from engine.kafka.access import THE_CLUSTER, Need, group, topic
from engine.kafka.client_config import ClientConfig
from engine.cluster.kafka import _confluent_result, _kafka_python_result
from engine.core.outcomes import Refused
from engine.sim.security import parse_acl_command

AUTHORIZATION_CASES = [
    # (Kafka code, its name, confluent constant, kafka-python class, aiokafka class, the resource a request needed)
    (29, "TOPIC_AUTHORIZATION_FAILED", KafkaError.TOPIC_AUTHORIZATION_FAILED, kp.TopicAuthorizationFailedError,
     aio.TopicAuthorizationFailedError, topic("orders")),
    (30, "GROUP_AUTHORIZATION_FAILED", KafkaError.GROUP_AUTHORIZATION_FAILED, kp.GroupAuthorizationFailedError,
     aio.GroupAuthorizationFailedError, group("kreassign.reader")),
    (31, "CLUSTER_AUTHORIZATION_FAILED", KafkaError.CLUSTER_AUTHORIZATION_FAILED, kp.ClusterAuthorizationFailedError,
     aio.ClusterAuthorizationFailedError, THE_CLUSTER),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
     kp.TransactionalIdAuthorizationFailedError, aio.TransactionalIdAuthorizationFailed,
     access.Resource(access.TRANSACTIONAL_ID, "tx")),
]


@pytest.mark.parametrize("code,name,confluent_code,kp_class,aio_class,resource", AUTHORIZATION_CASES,
                         ids=[c[1] for c in AUTHORIZATION_CASES])
def test_every_authorization_code_from_every_library_names_the_operation_the_resource_and_the_grant(
        code, name, confluent_code, kp_class, aio_class, resource):
    first = {access.TOPIC: "Write", access.GROUP: "Read", access.CLUSTER: "Alter"}.get(resource.kind, "Write")
    need = Need((first, "Describe"), resource)
    errors = [KafkaError(confluent_code), KafkaException(KafkaError(confluent_code)), kp_class, kp_class("denied"),
              aio_class, aio_class()]
    for err in errors:
        text = access.explain(err, need, "User:ops", "broker:9092")
        assert text is not None, err
        assert text.startswith(f"User:ops is not authorized to {first} and Describe on {resource} ({name})")
        command = text.split("grant it with: ", 1)[1]
        assert command == access.grant("User:ops", need, "broker:9092")
        # the printed grant is a kafka-acls.sh command that adds exactly what was needed
        if resource.kind != access.TRANSACTIONAL_ID:
            acls = parse_acl_command(command)
            assert {(a.principal, a.operation, a.resource_type) for a in acls} == {
                ("User:ops", first.upper(), resource.kind.upper()), ("User:ops", "DESCRIBE", resource.kind.upper())}


@pytest.mark.parametrize("err", [
    KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed: Invalid username or password"),
    KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password"),
    kp.SaslAuthenticationFailedError("Authentication failed: Invalid username or password"),
    aio.SaslAuthenticationFailed("Authentication failed: Invalid username or password"),
], ids=["librdkafka _AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "kafka-python", "aiokafka"])
def test_authentication_failures_name_the_user(err):
    text = access.explain(err, Need(("Read",), topic("t")), "User:eng", "b:1", user="eng")
    assert text.startswith("authentication failed for user eng: ") and "Invalid username or password" in text


def test_other_errors_are_not_explained_as_access_problems():
    for err in (KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), KafkaError(KafkaError._TRANSPORT),
                kp.NotControllerError, ValueError("x"), None):
        assert access.explain(err, Need(("Read",), topic("t"))) is None


def test_authorization_refusals_are_refused_never_retried_as_unavailable():
    for code, name, confluent_code, kp_class, _aio, _r in AUTHORIZATION_CASES:
        assert _confluent_result(KafkaError(confluent_code)) == Refused(name, KafkaError(confluent_code).str())
        assert isinstance(_kafka_python_result(kp_class("denied")), Refused)
    assert isinstance(_confluent_result(KafkaError(KafkaError._AUTHENTICATION)), Refused)


def test_the_printed_grant_is_one_shell_command_with_wildcards_and_prefixes_quoted():
    text = access.grant("User:engine", Need(("Describe", "AlterConfigs"), topic("*")), "b:9092")
    assert shlex.split(text)[-2:] == ["--topic", "*"] and "'*'" in text
    text = access.grant(None, Need(("Create",), topic("kreassign.engine-", prefixed=True)))
    assert text.endswith("--topic kreassign.engine- --resource-pattern-type prefixed")
    assert "--allow-principal User:PRINCIPAL" in text and "--bootstrap-server BROKER:PORT" in text


def test_who_a_client_is():
    sasl = ClientConfig({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                         "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                             'username="engine" password="x";'})
    assert access.principal_of(sasl) == "User:engine" and access.user_of(sasl) == "engine"
    assert access.principal_of(ClientConfig()) == "User:ANONYMOUS"
    assert access.principal_of(ClientConfig({"security.protocol": "SSL"})) is None  # the certificate's name


def test_the_auth_watch_keeps_authentication_failures_only_and_reports_each_once():
    watch = access.AuthWatch()
    watch(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert watch.failure() is None
    watch(KafkaError(KafkaError._AUTHENTICATION, "bad password"))
    assert watch.failure() == "bad password" and watch.failure() is None
