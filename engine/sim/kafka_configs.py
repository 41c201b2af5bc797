"""Topic and broker configs as the simulated cluster's Kafka protocol front describes and alters them.

Pure rules over values (no I/O); ``engine.sim.kafka_api`` applies them. Kafka's
semantics, read from its source (``ConfigAdminManager``, ``ConfigHelper``,
``ConfigurationControlManager``, ``ControllerConfigurationValidator``, Kafka 4.0):

* IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (the last two only
  on LIST configs); a null value for anything but DELETE, a resource named twice
  or a key named twice in one resource is INVALID_REQUEST; a BROKER resource must
  name the broker the request is sent to (or be "" for the cluster default),
  else INVALID_REQUEST "Unexpected broker id"; a topic config Kafka does not
  know, or a value of the wrong type, is INVALID_CONFIG; a broker config that
  cannot change while the broker runs, or a value of the wrong type (a throttle
  rate must be a long), is INVALID_REQUEST (KAFKA-13609: Kafka wraps a broker's
  ConfigException so); APPEND/SUBTRACT of a config that is not a LIST is
  INVALID_CONFIG. Each resource changes all or nothing.
* AlterConfigs (legacy): the resource's dynamic configs become exactly the ones
  given (the others are deleted).
* DescribeConfigs: every config with its value, source (TOPIC_CONFIG,
  DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG), read-only flag,
  type and, on request, synonyms (a topic config's broker-level defaults, as
  ``kafka-configs.sh --describe --all`` prints them) and documentation.

What the simulation acts on: ``leader/follower.replication.throttled.replicas``
(topics), ``leader/follower.replication.throttled.rate`` (brokers) and
``min.insync.replicas`` (topics). Other dynamic configs are kept and read back
but change nothing in the simulation.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple

from engine.core import throttles

LONG_MAX = 2**63 - 1

# DescribeConfigsResponse.ConfigSource
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5
# DescribeConfigsResponse.ConfigType
TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9}
# AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
MIN_INSYNC = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"
MAX_REQUEST_PARTITIONS = "max.request.partition.size.limit"
LOG_DIRS_RATE = throttles.LOG_DIRS_RATE  # kept and read back (no log directories to move between)


class ConfigDef(NamedTuple):
    name: str
    type: str  # a key of TYPE_IDS
    default: str | None
    doc: str
    synonym: str | None = None  # topic config: the broker config that gives its default
    dynamic: bool = True  # broker config: may change while the broker runs


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


THROTTLED_REPLICAS_DOC = ("A list of replicas whose log replication should be throttled on the {side} side, "
                          "[PartitionId]:[BrokerId],... or the wildcard '*' (KIP-73).")
THROTTLED_RATE_DOC = ("The {side} side's limit on replication traffic of the replicas listed in "
                      "{side}.replication.throttled.replicas, in bytes/s (KIP-73).")

TOPIC_CONFIGS = _defs(
    ConfigDef("cleanup.policy", "list", "delete", "The retention policy of old log segments.", "log.cleanup.policy"),
    ConfigDef("compression.type", "string", "producer", "The final compression type of the topic.", "compression.type"),
    ConfigDef(FOLLOWER_REPLICAS, "list", "", THROTTLED_REPLICAS_DOC.format(side="follower")),
    ConfigDef(LEADER_REPLICAS, "list", "", THROTTLED_REPLICAS_DOC.format(side="leader")),
    ConfigDef("max.message.bytes", "int", "1048588", "The largest record batch size allowed.", "message.max.bytes"),
    ConfigDef("message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
              "log.message.timestamp.type"),
    ConfigDef(MIN_INSYNC, "int", "1", "The minimum number of in-sync replicas for acks=all writes to succeed.",
              "min.insync.replicas"),
    ConfigDef("retention.bytes", "long", "-1", "The most bytes a partition keeps.", "log.retention.bytes"),
    ConfigDef("retention.ms", "long", "604800000", "How long a log is kept.", "log.retention.ms"),
    ConfigDef("segment.bytes", "int", "1073741824", "The segment file size of the log.", "log.segment.bytes"),
    ConfigDef("unclean.leader.election.enable", "boolean", "false",
              "Whether a replica out of the ISR may be elected leader.", "unclean.leader.election.enable"),
)

# (name, type, default, doc, dynamic); broker.id, broker.rack and log.dirs are filled in per broker.
BROKER_CONFIGS = _defs(
    ConfigDef("auto.leader.rebalance.enable", "boolean", "false",
              "Automatic preferred leader balancing (off in the simulation: elections are on request only).",
              dynamic=False),
    ConfigDef("broker.id", "int", None, "The broker's id.", dynamic=False),
    ConfigDef("broker.rack", "string", None, "The broker's rack.", dynamic=False),
    ConfigDef("compression.type", "string", "producer", "Compression codec for topics without their own."),
    ConfigDef("default.replication.factor", "int", "1", "Replication factor of automatically created topics.",
              dynamic=False),
    ConfigDef(FOLLOWER_RATE, "long", str(LONG_MAX), THROTTLED_RATE_DOC.format(side="follower")),
    ConfigDef(LEADER_RATE, "long", str(LONG_MAX), THROTTLED_RATE_DOC.format(side="leader")),
    ConfigDef("log.cleanup.policy", "list", "delete", "Default cleanup policy for topics."),
    ConfigDef("log.dirs", "list", None, "Where the broker keeps its logs.", dynamic=False),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime", "Default timestamp type of topics."),
    ConfigDef("log.retention.bytes", "long", "-1", "Default retention in bytes."),
    ConfigDef("log.retention.ms", "long", "604800000", "Default retention in milliseconds."),
    ConfigDef("log.segment.bytes", "int", "1073741824", "Default segment size."),
    ConfigDef(MAX_REQUEST_PARTITIONS, "int", "2000", "The maximum number of partitions can be served in one request "
              "(DescribeTopicPartitions).", dynamic=False),
    ConfigDef("message.max.bytes", "int", "1048588", "Default largest record batch size."),
    ConfigDef(MIN_INSYNC, "int", "1", "Default min.insync.replicas of topics."),
    ConfigDef("node.id", "int", None, "The node's id (KRaft).", dynamic=False),
    ConfigDef("process.roles", "list", "broker", "The node's roles (KRaft).", dynamic=False),
    ConfigDef(LOG_DIRS_RATE, "long", str(LONG_MAX),
              "Limit on moving replicas between log directories of one broker, in bytes/s."),
    ConfigDef("replica.lag.time.max.ms", "long", "30000",
              "A follower behind this long leaves the ISR (fixed in the simulation).", dynamic=False),
    ConfigDef("unclean.leader.election.enable", "boolean", "false", "Default unclean leader election of topics."),
)

_THROTTLED_ENTRY = re.compile(r"^\d+:\d+$")
_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


class ConfigError(Exception):
    """A change Kafka refuses: ``code`` is Kafka's error name (INVALID_CONFIG, INVALID_REQUEST)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def check_value(d: ConfigDef, value: str) -> str | None:
    """Why ``value`` is not a valid value of ``d`` (Kafka's ConfigDef message), or None."""
    bad = f"Invalid value {value} for configuration {d.name}"
    v = value.strip()
    if d.type in _INT_RANGE:
        try:
            n = int(v)
        except ValueError:
            return f"{bad}: Not a number of type {d.type.upper()}"
        lo, hi = _INT_RANGE[d.type]
        if not lo <= n <= hi:
            return f"{bad}: Not a number of type {d.type.upper()}"
        if d.name == MIN_INSYNC and n < 1:
            return f"{bad}: Value must be at least 1"
        if d.name in (LEADER_RATE, FOLLOWER_RATE) and n < 0:
            return f"{bad}: Value must be at least 0"
    elif d.type == "boolean" and v.lower() not in ("true", "false"):
        return f"{bad}: Expected value to be either true or false"
    elif d.name in (LEADER_REPLICAS, FOLLOWER_REPLICAS) and v:
        items = [i.strip() for i in v.split(",")]
        if not (items == ["*"] or all(_THROTTLED_ENTRY.match(i) for i in items)):
            return (f"{bad}: must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return None


def incremental(current: Mapping[str, str], ops: list[tuple[str, int, str | None]], defs: Mapping[str, ConfigDef],
                kind: str) -> dict[str, str]:
    """The resource's overrides after IncrementalAlterConfigs ``ops`` (name, op, value), or ConfigError.

    ``kind`` is "topic" or "broker": unknown names are INVALID_CONFIG for topics (LogConfig knows
    every topic config); a broker keeps unknown (custom) names, as Kafka does, but cannot
    APPEND/SUBTRACT them."""
    names = [n for n, _op, _v in ops]
    if len(set(names)) != len(names):
        raise ConfigError("INVALID_REQUEST", "Error due to duplicate config keys")
    nulls = [n for n, op, v in ops if op != DELETE and v is None]
    if nulls:
        raise ConfigError("INVALID_REQUEST", "Null value not supported for : " + ", ".join(nulls))
    out = dict(current)
    for name, op, value in ops:
        if op not in OP_NAMES:
            raise ConfigError("INVALID_REQUEST", f"Unknown operations type {op}")
        d = defs.get(name)
        if op in (APPEND, SUBTRACT):
            if d is None and kind == "broker":
                raise ConfigError("INVALID_CONFIG", f"Unknown config name: {name}")
            if d is None or d.type != "list":
                if kind == "broker":
                    verb = "append" if op == APPEND else "subtract"
                    raise ConfigError("INVALID_CONFIG", f"Config value {verb} is not allowed for config key: {name}")
                raise ConfigError("INVALID_CONFIG",
                                  f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.")
            parts = [x for x in out.get(name, d.default or "").split(",") if x]
            for item in (value or "").split(","):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            out[name] = ",".join(parts)
        elif op == SET:
            out[name] = value
        else:
            out.pop(name, None)
    validate(out, current, defs, kind)
    return out


def replace(current: Mapping[str, str], configs: list[tuple[str, str | None]], defs: Mapping[str, ConfigDef],
            kind: str) -> dict[str, str]:
    """The resource's overrides after a legacy AlterConfigs (exactly ``configs``), or ConfigError."""
    names = [n for n, _v in configs]
    if len(set(names)) != len(names):
        raise ConfigError("INVALID_REQUEST", "Error due to duplicate config keys")
    nulls = [n for n, v in configs if v is None]
    if nulls:
        raise ConfigError("INVALID_REQUEST", "Null value not supported for : " + ", ".join(nulls))
    out = dict(configs)
    validate(out, current, defs, kind)
    return out


def validate(new: Mapping[str, str], old: Mapping[str, str], defs: Mapping[str, ConfigDef], kind: str) -> None:
    for name, value in sorted(new.items()):
        d = defs.get(name)
        if d is None:
            if kind == "topic":
                raise ConfigError("INVALID_CONFIG", f"Unknown topic config name: {name}")
            continue  # a broker keeps custom configs
        problem = check_value(d, value)
        if problem:
            raise ConfigError("INVALID_CONFIG" if kind == "topic" else "INVALID_REQUEST", problem)
    if kind == "broker":
        frozen = sorted(n for n in set(new) | set(old) if n in defs and not defs[n].dynamic
                        and new.get(n) != old.get(n))
        if frozen:
            raise ConfigError("INVALID_REQUEST", "Cannot update these configs dynamically: Set("
                              + ", ".join(frozen) + ")")


def throttled_entries(value: str | None) -> frozenset:
    """A throttled-replicas value as the simulation holds it: (partition, broker) pairs, or {"*"}."""
    items = [i.strip() for i in (value or "").split(",") if i.strip()]
    if items == ["*"]:
        return frozenset({"*"})
    return frozenset((int(p), int(b)) for p, _, b in (i.partition(":") for i in items))


def throttled_value(entries) -> str:
    if not entries:
        return ""
    if "*" in entries:
        return "*"
    return ",".join(f"{p}:{b}" for p, b in sorted(entries))
