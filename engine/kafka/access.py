"""Kafka's authentication and authorization failures, named: what was denied, and the grant that allows it.

The one place that maps Kafka's codes to an explanation. Every client call site
knows what its request needed (a ``Need``: operations on a resource, as Kafka's
authorizer checks them); when Kafka answers an authorization error the call site
turns it into one sentence through ``denied``::

    not authorized to AlterConfigs on topic orders (TOPIC_AUTHORIZATION_FAILED): grant it with:
    kafka-acls.sh --bootstrap-server B --command-config admin.properties --add
    --allow-principal User:engine --operation AlterConfigs --topic orders

Authorization errors are Kafka's codes 29 TOPIC_AUTHORIZATION_FAILED, 30
GROUP_AUTHORIZATION_FAILED, 31 CLUSTER_AUTHORIZATION_FAILED and 53
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (``AUTHORIZATION``). Authentication
failures are Kafka's 58 SASL_AUTHENTICATION_FAILED and librdkafka's local
``_AUTHENTICATION`` (-169): librdkafka reports the second only through its error
callback (a request then fails with "Broker transport failure"), so every
confluent-kafka client kreassign makes carries an ``AuthWatch`` (``error_cb``),
and kafka-python's (which logs it and then times out bootstrapping) a
``KafkaPythonAuthLog``. Both become "authentication failed for user U: ...".

The grants each principal needs, and why, are ``engine.kafka.acls``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "topic", "group", "cluster", "transactional-id"

AUTHORIZATION = {
    29: ("TOPIC_AUTHORIZATION_FAILED", TOPIC),
    30: ("GROUP_AUTHORIZATION_FAILED", GROUP),
    31: ("CLUSTER_AUTHORIZATION_FAILED", CLUSTER),
    53: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", TRANSACTIONAL_ID),
}
AUTHORIZATION_NAMES = {name: kind for name, kind in AUTHORIZATION.values()}
SASL_AUTHENTICATION_FAILED = 58
LOCAL_AUTHENTICATION = -169  # librdkafka's _AUTHENTICATION
AUTHENTICATION_NAMES = {"SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"}

# Kafka's ACL operations as kafka-acls.sh spells them, by the names librdkafka and Kafka's enums use
OPERATIONS = {
    "READ": "Read", "WRITE": "Write", "CREATE": "Create", "DELETE": "Delete", "ALTER": "Alter",
    "DESCRIBE": "Describe", "CLUSTER_ACTION": "ClusterAction", "DESCRIBE_CONFIGS": "DescribeConfigs",
    "ALTER_CONFIGS": "AlterConfigs", "IDEMPOTENT_WRITE": "IdempotentWrite", "ALL": "All",
}
ADMIN_CONFIG = "admin.properties"  # placeholder of the admin's client settings in printed grants
ANY_PRINCIPAL = "User:PRINCIPAL"  # placeholder when kreassign cannot tell who it runs as


@dataclass(frozen=True)
class Resource:
    """An ACL resource pattern: a topic, group or transactional id (a name, or a prefix), or the cluster."""

    kind: str  # TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID
    name: str = ""
    prefixed: bool = False

    def options(self) -> str:
        """The kafka-acls.sh options naming it."""
        if self.kind == CLUSTER:
            return "--cluster"
        flag = "--transactional-id" if self.kind == TRANSACTIONAL_ID else f"--{self.kind}"
        return f"{flag} {_quote(self.name)}" + (" --resource-pattern-type prefixed" if self.prefixed else "")

    def __str__(self) -> str:
        if self.kind == CLUSTER:
            return "the cluster"
        return f"{self.kind}s prefixed {self.name}" if self.prefixed else f"{self.kind} {self.name}"


def topic(name: str, prefixed: bool = False) -> Resource:
    return Resource(TOPIC, name, prefixed)


def group(name: str, prefixed: bool = False) -> Resource:
    return Resource(GROUP, name, prefixed)


THE_CLUSTER = Resource(CLUSTER)


@dataclass(frozen=True)
class Need:
    """Operations (kafka-acls.sh names: Read, Describe, AlterConfigs ...) on a resource, and why."""

    operations: tuple[str, ...]
    resource: Resource
    why: str = ""

    def __str__(self) -> str:
        ops = list(self.operations)
        names = ops[0] if len(ops) == 1 else ", ".join(ops[:-1]) + " and " + ops[-1]
        return f"{names} on {self.resource}"


def grant(principal: str | None, need: Need, bootstrap: str | None = None) -> str:
    """The kafka-acls.sh command an administrator runs to allow ``need`` to ``principal``."""
    ops = " ".join(f"--operation {op}" for op in need.operations)
    return (f"kafka-acls.sh --bootstrap-server {bootstrap or 'BROKER:PORT'} --command-config {ADMIN_CONFIG} "
            f"--add --allow-principal {principal or ANY_PRINCIPAL} {ops} {need.resource.options()}")


def denied(need: Need, code: str, principal: str | None = None, bootstrap: str | None = None) -> str:
    """The sentence for an authorization error ``code`` (Kafka's name) answered to a request that needed ``need``."""
    who = f"{principal} is " if principal else ""
    return f"{who}not authorized to {need} ({code}): grant it with: {grant(principal, need, bootstrap)}"


def authentication_failed(user: str | None, detail: str) -> str:
    who = f"user {user}" if user else "this client (check --command-config: sasl.* / ssl.* settings)"
    return f"authentication failed for {who}: {detail}"


class AccessError(RuntimeError):
    """An authorization or authentication failure, named (the message is the whole explanation)."""


def is_authorization(code: int | str) -> bool:
    return code in AUTHORIZATION or code in AUTHORIZATION_NAMES


def is_authentication(code: int | str) -> bool:
    return code in (SASL_AUTHENTICATION_FAILED, LOCAL_AUTHENTICATION) or code in AUTHENTICATION_NAMES


def code_name(code: int) -> str:
    """Kafka's name of an authorization or authentication code."""
    if code in AUTHORIZATION:
        return AUTHORIZATION[code][0]
    return {SASL_AUTHENTICATION_FAILED: "SASL_AUTHENTICATION_FAILED", LOCAL_AUTHENTICATION: "_AUTHENTICATION"}.get(
        code, str(code))


# --- who a client is -----------------------------------------------------------------------------


def user_of(config: Any) -> str | None:
    """The SASL user name a ``ClientConfig`` authenticates as, if any."""
    if config is None:
        return None
    settings = config.confluent()
    return settings.get("sasl.username") or None


def principal_of(config: Any) -> str | None:
    """``User:NAME`` for a SASL user (Kafka's default principal builder); ``None`` when unknown
    (PLAINTEXT is ``User:ANONYMOUS``, but SSL principals are the certificate's name)."""
    user = user_of(config)
    if user:
        return f"User:{user}"
    settings = config.confluent() if config is not None else {}
    if str(settings.get("security.protocol", "plaintext")).lower() == "plaintext":
        return "User:ANONYMOUS"
    return None


# --- authentication failures the client libraries hide ------------------------------------------


class AuthWatch:
    """librdkafka's error callback (``error_cb``): keeps the last authentication failure it reports.

    librdkafka reports a failed SASL exchange as ``_AUTHENTICATION`` on this callback and retries;
    a request meanwhile fails with ``_TRANSPORT`` ("Broker transport failure"). The callback is
    served by ``poll()``: ``failure(client)`` polls once, then answers what it saw."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, err: Any) -> None:
        try:
            code = err.code()
        except AttributeError:
            return
        if code == LOCAL_AUTHENTICATION or code == SASL_AUTHENTICATION_FAILED:
            self.last = err.str()

    def config(self) -> dict[str, object]:
        return {"error_cb": self}

    def failure(self, client: Any = None) -> str | None:
        """The authentication failure reported since the last call, if any (polling ``client`` first)."""
        if self.last is None and client is not None:
            try:
                client.poll(0)
            except Exception:  # noqa: BLE001 - a closed client: nothing more to learn
                pass
        last, self.last = self.last, None
        return last


class KafkaPythonAuthLog(logging.Handler):
    """kafka-python logs a failed SASL exchange (``SaslAuthenticationFailedError``) and then fails to
    bootstrap with a timeout; this handler, attached to its ``kafka`` logger while a client connects,
    keeps the failure."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:  # logging.Handler.handle holds the handler's lock
        text = record.getMessage()
        marker = "SaslAuthenticationFailedError"
        if marker in text:
            self.last = text[text.rfind(marker) + len(marker):].lstrip(": ").strip() or text

    def __enter__(self) -> "KafkaPythonAuthLog":
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger("kafka").removeHandler(self)


# --- client library errors -> explanations ---------------------------------------------------------


def explain(err: Any, need: Need | None, principal: str | None = None, bootstrap: str | None = None,
            user: str | None = None) -> str | None:
    """The explanation of a client library error if it is an authorization or authentication failure,
    else ``None``. ``err``: a confluent-kafka ``KafkaError`` (or ``KafkaException``), a kafka-python
    error (class or instance), or an aiokafka error. ``need``: what the request needed."""
    code, text = _code_and_text(err)
    if code is None:
        return None
    if code in AUTHORIZATION:
        name = AUTHORIZATION[code][0]
        if need is None:
            return f"not authorized ({name}): {text}"
        return denied(need, name, principal, bootstrap)
    if code in (SASL_AUTHENTICATION_FAILED, LOCAL_AUTHENTICATION):
        return authentication_failed(user, text)
    return None


def _code_and_text(err: Any) -> tuple[int | None, str]:
    if err is None:
        return None, ""
    if isinstance(err, BaseException) and not hasattr(err, "code") and err.args and hasattr(err.args[0], "code"):
        err = err.args[0]  # KafkaException wrapping a KafkaError
    code = getattr(err, "code", None)
    if callable(code):  # confluent-kafka KafkaError
        try:
            return int(code()), err.str()
        except Exception:  # noqa: BLE001
            return None, ""
    cls = err if isinstance(err, type) else type(err)
    errno = getattr(cls, "errno", None)
    if isinstance(errno, int):  # kafka-python / aiokafka broker errors
        message = "" if isinstance(err, type) else str(err)
        return errno, message or getattr(cls, "description", "") or cls.__name__
    return None, ""


def _quote(name: str) -> str:
    """A shell word: a name of letters, digits, '.', '_' and '-' as it is, anything else ('*') quoted."""
    return name if name and all(ch.isalnum() or ch in "._-" for ch in name) else "'" + name.replace("'", "'\\''") + "'"
