"""Kafka client settings from a Java client properties file (``--command-config``).

Operators already have a ``client.properties`` for Kafka's own tools (SASL,
SSL, timeouts). kreassign reads the same file and hands it to both of its
clients: confluent-kafka (librdkafka) for producing, consuming and most admin
calls, and kafka-python for the KIP-455 reassignment and log-dir calls that
confluent-kafka lacks. ``TRANSLATIONS`` is the whole mapping; a property that
cannot be honoured is an error naming it, never silently dropped.

The file is parsed with ``jproperties`` (comments, ``=``/``:`` separators and
line continuations, as Java reads it).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

import jproperties

LIBRDKAFKA = logging.getLogger("kreassign.librdkafka")
"""Where librdkafka's own log lines go (``logged``), instead of raw ``%3|...|FAIL|`` lines on stderr."""


class _LastLines(logging.Handler):
    """Keeps librdkafka's latest log lines, to name the cause in an error message."""

    def __init__(self, n: int = 20):
        super().__init__(logging.INFO)
        self.lines: deque[str] = deque(maxlen=n)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


_LAST = _LastLines()
LIBRDKAFKA.addHandler(_LAST)
LIBRDKAFKA.propagate = False  # a command line prints its own one-line error; the engine turns this on for its log


def logged(conf: Mapping[str, object]) -> dict[str, object]:
    """A confluent-kafka configuration whose client logs to ``LIBRDKAFKA`` (served by the client's poll)."""
    return {**conf, "logger": LIBRDKAFKA}


def last_failure() -> str | None:
    """librdkafka's latest error line (a refused or failed connection), without its client and
    broker prefixes: "Connect to ipv4#127.0.0.1:1 failed: Connection refused (...)"."""
    for line in reversed(_LAST.lines):
        if line.startswith(("FAIL", "ERROR")):
            return _PREFIX.sub("", line)
    return None


_PREFIX = re.compile(r"^\w+ \[[^]]*\] \[[^]]*\]: (\S+/\S+: )?")


class ClientConfigError(ValueError):
    """A property kreassign cannot pass on; the message names it and says why."""


# Java property -> (librdkafka key or None, kafka-python kwarg or None).
# None means: handled specially below, or not applicable to that client.
TRANSLATIONS: dict[str, tuple[str | None, str | None]] = {
    "bootstrap.servers": ("bootstrap.servers", "bootstrap_servers"),
    "client.id": ("client.id", "client_id"),
    "security.protocol": ("security.protocol", "security_protocol"),
    "sasl.mechanism": ("sasl.mechanism", "sasl_mechanism"),
    "sasl.username": ("sasl.username", "sasl_plain_username"),
    "sasl.password": ("sasl.password", "sasl_plain_password"),
    "sasl.kerberos.service.name": ("sasl.kerberos.service.name", "sasl_kerberos_service_name"),
    "sasl.jaas.config": (None, None),  # username/password extracted, see _jaas
    "ssl.ca.location": ("ssl.ca.location", "ssl_cafile"),
    "ssl.certificate.location": ("ssl.certificate.location", "ssl_certfile"),
    "ssl.key.location": ("ssl.key.location", "ssl_keyfile"),
    "ssl.key.password": ("ssl.key.password", "ssl_password"),
    "ssl.truststore.location": (None, None),  # PEM only, see below
    "ssl.truststore.type": (None, None),
    "ssl.keystore.location": (None, None),  # PEM only, see below
    "ssl.keystore.type": (None, None),
    "ssl.endpoint.identification.algorithm": (None, None),
    "request.timeout.ms": (None, "request_timeout_ms"),
    "retry.backoff.ms": ("retry.backoff.ms", "retry_backoff_ms"),
    "reconnect.backoff.ms": ("reconnect.backoff.ms", "reconnect_backoff_ms"),
    "metadata.max.age.ms": ("metadata.max.age.ms", "metadata_max_age_ms"),
    "socket.connection.setup.timeout.ms": ("socket.connection.setup.timeout.ms", None),
}

_JAAS_MODULE = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ClientConfig:
    """Client properties, translated on demand for each client library."""

    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | None) -> "ClientConfig":
        if path is None:
            return cls()
        p = jproperties.Properties()
        try:
            with open(path, "rb") as f:
                p.load(f, "utf-8")
        except OSError as e:
            raise ClientConfigError(f"{path}: {e.strerror}") from None
        config = cls({k: v.data for k, v in p.items()})
        config.confluent()  # fail early, naming the property
        config.kafka_python()
        return config

    def with_bootstrap(self, bootstrap: str | None) -> "ClientConfig":
        if bootstrap is None:
            return self
        return ClientConfig({**self.properties, "bootstrap.servers": bootstrap})

    @property
    def bootstrap(self) -> str | None:
        return self.properties.get("bootstrap.servers")

    def confluent(self, **extra: object) -> dict[str, object]:
        """librdkafka configuration for confluent-kafka clients."""
        out: dict[str, object] = {}
        for key, value in self.properties.items():
            if key not in TRANSLATIONS:
                out[key] = value  # librdkafka shares most names; it rejects unknown ones by name
                continue
            rd, _kp = TRANSLATIONS[key]
            if rd is not None:
                out[rd] = value
        out.update(self._derived(rdkafka=True))
        out.update(extra)
        return out

    def kafka_python(self, **extra: object) -> dict[str, object]:
        """Keyword arguments for kafka-python clients (``KafkaAdminClient``)."""
        out: dict[str, object] = {}
        for key, value in self.properties.items():
            if key not in TRANSLATIONS:
                continue  # librdkafka-only tuning has no kafka-python equivalent
            _rd, kp = TRANSLATIONS[key]
            if kp is None:
                continue
            out[kp] = int(value) if kp.endswith("_ms") else value
        if "bootstrap_servers" in out:
            out["bootstrap_servers"] = [s.strip() for s in str(out["bootstrap_servers"]).split(",") if s.strip()]
        out.update(self._derived(rdkafka=False))
        out.update(extra)
        return out

    def _derived(self, rdkafka: bool) -> dict[str, object]:
        """Settings that need more than a rename: JAAS, trust/key stores, hostname checks."""
        props = self.properties
        out: dict[str, object] = {}
        jaas = props.get("sasl.jaas.config")
        if jaas:
            module, options = _jaas(jaas)
            if module.endswith(("PlainLoginModule", "ScramLoginModule")):
                if "username" in options:
                    out["sasl.username" if rdkafka else "sasl_plain_username"] = options["username"]
                if "password" in options:
                    out["sasl.password" if rdkafka else "sasl_plain_password"] = options["password"]
            else:
                raise ClientConfigError(
                    f"sasl.jaas.config: login module {module} is not supported; "
                    "use PLAIN or SCRAM, or set librdkafka's sasl.oauthbearer.* properties"
                )
        for store, rd_key, kp_key in (
            ("truststore", "ssl.ca.location", "ssl_cafile"),
            ("keystore", "ssl.certificate.location", "ssl_certfile"),
        ):
            location = props.get(f"ssl.{store}.location")
            if location:
                kind = props.get(f"ssl.{store}.type", "JKS").upper()
                if kind != "PEM":
                    raise ClientConfigError(
                        f"ssl.{store}.location: {kind} stores are Java-only; convert it to PEM "
                        f"and set ssl.{store}.type=PEM"
                    )
                out[rd_key if rdkafka else kp_key] = location
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            if rdkafka:
                out["ssl.endpoint.identification.algorithm"] = "none"
            else:
                out["ssl_check_hostname"] = False
        return out


def _jaas(text: str) -> tuple[str, dict[str, str]]:
    m = _JAAS_MODULE.match(text)
    if not m:
        raise ClientConfigError(f"sasl.jaas.config: cannot read {text!r}")
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(m.group(3))}
    return m.group(1), options
