"""Security of the simulated cluster's Kafka front: SASL/PLAIN users and Kafka's ACL authorizer.

A scenario's ``security`` section (``docs/simulator.md``)::

    security:
      users: {admin: admin-secret, engine: engine-secret}   # SASL/PLAIN; the listeners become SASL_PLAINTEXT
      super_users: [User:admin]
      allow_everyone_if_no_acl_found: false                 # Kafka's default
      acls:                                                 # kafka-acls.sh arguments, one command a line
        - --add --allow-principal User:engine --operation Alter --cluster
        - --add --allow-principal User:engine --operation Describe --topic orders

Without ``users`` the listeners stay PLAINTEXT and every connection is ``User:ANONYMOUS``;
without a ``security`` section nothing is authorized or authenticated (as a broker
without ``authorizer.class.name``). ``POST /v1/acls`` adds or removes ACLs while it runs.

The authorizer follows Kafka's ``StandardAuthorizer`` (KRaft), read from its source:

* super users may do anything;
* an ACL matches a resource of its type whose name equals it (LITERAL), starts with
  it (PREFIXED), or any name (LITERAL ``*``); its principal is the session's or ``User:*``,
  its host ``*`` or the client's address;
* a matching DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER
  also allows DESCRIBE, and ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS (DENY
  implies nothing); ``All`` is every operation;
* no ACL on the resource at all: ``allow.everyone.if.no.acl.found`` decides (default false).

``authorized_operations`` is what KIP-430 returns (Describe* with
``include_authorized_operations``): every operation Kafka supports on the resource
type that ``authorize`` allows.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Iterable

ANONYMOUS = "User:ANONYMOUS"

# Kafka's AclOperation codes (the bits of authorized-operations fields)
OPERATION_CODES = {
    "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12, "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14,
}
# AclEntry.supportedOperations
SUPPORTED_OPERATIONS = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "CLUSTER": ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE"),
}
IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})
IMPLIES_DESCRIBE_CONFIGS = frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS"})
CLUSTER_NAME = "kafka-cluster"


class SecurityError(ValueError):
    """A security section or an ACL command that cannot be used; the message says why."""


def operation_name(text: str) -> str:
    """``DescribeConfigs``, ``describe_configs`` or ``DESCRIBE_CONFIGS`` -> ``DESCRIBE_CONFIGS``."""
    key = text.replace("_", "").replace("-", "").upper()
    for name in OPERATION_CODES:
        if name.replace("_", "") == key:
            return name
    raise SecurityError(f"unknown operation {text!r} (Kafka's: {', '.join(_camel(n) for n in OPERATION_CODES)})")


def _camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


@dataclass(frozen=True)
class Acl:
    principal: str  # User:NAME or User:*
    operation: str  # OPERATION_CODES key
    resource_type: str  # TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID
    name: str  # the resource name; kafka-cluster for the cluster
    pattern: str = "LITERAL"  # LITERAL | PREFIXED
    allow: bool = True
    host: str = "*"

    def matches_resource(self, resource_type: str, name: str) -> bool:
        if resource_type != self.resource_type:
            return False
        if self.pattern == "PREFIXED":
            return name.startswith(self.name)
        return self.name == "*" or self.name == name

    def decides(self, principal: str, host: str, operation: str) -> bool:
        """Whether this ACL (of a matching resource) applies to the action (StandardAuthorizerData.findResult)."""
        if self.principal not in (principal, "User:*"):
            return False
        if self.host not in ("*", host):
            return False
        if self.operation == "ALL":
            return True
        if self.allow and operation == "DESCRIBE":
            return self.operation in IMPLIES_DESCRIBE
        if self.allow and operation == "DESCRIBE_CONFIGS":
            return self.operation in IMPLIES_DESCRIBE_CONFIGS
        return self.operation == operation


@dataclass
class Authorizer:
    acls: list[Acl] = field(default_factory=list)
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def authorize(self, principal: str, operation: str, resource_type: str, name: str, host: str = "*") -> bool:
        if principal in self.super_users:
            return True
        found = allowed = False
        for acl in self.acls:
            if not acl.matches_resource(resource_type, name):
                continue
            found = True
            if acl.decides(principal, host, operation):
                if not acl.allow:
                    return False
                allowed = True
        return allowed if found else self.allow_everyone_if_no_acl_found

    def authorized_operations(self, principal: str, resource_type: str, name: str, host: str = "*") -> set[int]:
        return {OPERATION_CODES[op] for op in SUPPORTED_OPERATIONS[resource_type]
                if self.authorize(principal, op, resource_type, name, host)}

    def add(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            if acl not in self.acls:
                self.acls.append(acl)

    def remove(self, acls: Iterable[Acl]) -> None:
        gone = set(acls)
        self.acls = [a for a in self.acls if a not in gone]


@dataclass
class Security:
    """The front's security: users (SASL/PLAIN when any) and the authorizer."""

    users: dict[str, str] = field(default_factory=dict)
    authorizer: Authorizer = field(default_factory=Authorizer)

    @property
    def sasl(self) -> bool:
        return bool(self.users)

    def authenticate(self, username: str, password: str) -> bool:
        return username in self.users and self.users[username] == password


def parse_acl_command(command: str) -> list[Acl]:
    """The ACLs a ``kafka-acls.sh --add ...`` command adds (also without the script name,
    ``--bootstrap-server`` or ``--command-config``)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as e:
        raise SecurityError(f"{command!r}: {e}") from None
    if words and words[0].endswith("kafka-acls.sh"):
        words = words[1:]
    allow: list[str] = []
    deny: list[str] = []
    hosts_allow: list[str] = []
    hosts_deny: list[str] = []
    operations: list[str] = []
    resources: list[tuple[str, str]] = []
    pattern = "LITERAL"
    i = 0

    def value() -> str:
        nonlocal i
        if i + 1 >= len(words):
            raise SecurityError(f"{command!r}: {words[i]} needs a value")
        i += 1
        return words[i]

    while i < len(words):
        w = words[i]
        if w in ("--add", "--remove", "--force"):
            pass
        elif w in ("--bootstrap-server", "--command-config", "--bootstrap-controller"):
            value()
        elif w == "--allow-principal":
            allow.append(_principal(value(), command))
        elif w == "--deny-principal":
            deny.append(_principal(value(), command))
        elif w == "--allow-host":
            hosts_allow.append(value())
        elif w == "--deny-host":
            hosts_deny.append(value())
        elif w == "--operation":
            operations.append(operation_name(value()))
        elif w == "--topic":
            resources.append(("TOPIC", value()))
        elif w == "--group":
            resources.append(("GROUP", value()))
        elif w == "--transactional-id":
            resources.append(("TRANSACTIONAL_ID", value()))
        elif w == "--cluster":
            resources.append(("CLUSTER", CLUSTER_NAME))
        elif w == "--resource-pattern-type":
            pattern = value().upper()
            if pattern not in ("LITERAL", "PREFIXED"):
                raise SecurityError(f"{command!r}: --resource-pattern-type must be literal or prefixed to add ACLs")
        else:
            raise SecurityError(f"{command!r}: option {w} is not supported by the simulated cluster")
        i += 1
    if not (allow or deny):
        raise SecurityError(f"{command!r}: needs --allow-principal or --deny-principal")
    if not operations:
        raise SecurityError(f"{command!r}: needs --operation")
    if not resources:
        raise SecurityError(f"{command!r}: needs --topic, --group, --cluster or --transactional-id")
    out = []
    for rtype, name in resources:
        for op in operations:
            if op != "ALL" and op not in SUPPORTED_OPERATIONS[rtype]:
                raise SecurityError(f"{command!r}: {_camel(op)} is not an operation of a {rtype.lower()} "
                                    f"(Kafka's for it: {', '.join(_camel(o) for o in SUPPORTED_OPERATIONS[rtype])})")
            p = "LITERAL" if rtype == "CLUSTER" else pattern
            out += [Acl(pr, op, rtype, name, p, True, h) for pr in allow for h in (hosts_allow or ["*"])]
            out += [Acl(pr, op, rtype, name, p, False, h) for pr in deny for h in (hosts_deny or ["*"])]
    return out


def _principal(text: str, command: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise SecurityError(f"{command!r}: principal {text!r} is not TYPE:NAME (e.g. User:alice)")
    return text


def from_document(doc: object) -> Security:
    """The ``security`` section of a scenario."""
    if not isinstance(doc, dict):
        raise SecurityError(f"security: expected a mapping, got {type(doc).__name__}")
    unknown = sorted(set(doc) - {"users", "super_users", "allow_everyone_if_no_acl_found", "acls"})
    if unknown:
        raise SecurityError(f"security: unknown keys {unknown}")
    users = doc.get("users") or {}
    if not isinstance(users, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
        raise SecurityError("security.users: expected a mapping of user name to password")
    supers = doc.get("super_users") or []
    if not isinstance(supers, list):
        raise SecurityError("security.super_users: expected a list of principals (User:NAME)")
    everyone = doc.get("allow_everyone_if_no_acl_found", False)
    if not isinstance(everyone, bool):
        raise SecurityError("security.allow_everyone_if_no_acl_found: expected true or false")
    commands = doc.get("acls") or []
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise SecurityError("security.acls: expected a list of kafka-acls.sh commands (strings)")
    acls: list[Acl] = []
    for c in commands:
        acls += parse_acl_command(c)
    return Security(dict(users), Authorizer(acls, frozenset(_principal(s, "super_users") for s in supers), everyone))
