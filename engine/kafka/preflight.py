"""The engine's start-up check: may this principal do what the engine will do? Asked once, before anything.

``kreassign engine`` runs it before its Faust worker starts, so before anything
is decided: a missing permission is a clear error at start-up (exit 2, one
paragraph naming every missing grant with its kafka-acls.sh command), not an
endless retry. It asks Kafka what it would answer the engine (``engine.kafka.probe``):

* its own topics (``engine.kafka.acls.engine_needs``): Read on commands; Read and Write
  on decisions, events and snapshots; Write on dead-letters;
* Faust's internal topics ``<prefix>engine-...``: Read and Write on those that
  exist; Create (a ``validate_only`` CreateTopics, which creates nothing on Kafka)
  if any is still to be created;
* its groups: Read on ``<prefix>engine`` (when Kafka reports the group's authorized
  operations; Describe at least), Describe on ``<prefix>reader``;
* the cluster it reassigns (``--cluster kafka`` or ``kafka://...``): Alter and
  AlterConfigs (which imply the Describe and DescribeConfigs it also needs).

Write on the transactional id ``<prefix>decider`` is not asked (Kafka has no
describe of a transactional id's operations): the decider's writer claims it
when it takes over, and a refusal there names that grant.

A failed authentication or an unreachable cluster stops the check at once. The
topics a request names are checked when it arrives (``engine.core.decide``: a topic
the engine may not describe rejects the request; a refused throttle change or
step is a visible wait naming the grant).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.kafka import acls
from engine.kafka.access import denied
from engine.kafka.broker_profile import BrokerProfile
from engine.kafka.client_config import ClientConfig
from engine.kafka.probe import AUTHENTICATION, MISSING, UNREACHABLE, Prober, ProbeError
from engine.kafka.topics import Topics, engine_group, reader_group

FAUST_TABLES = ("executor",)  # engine.runtime.worker's Faust table (the views are computed from the state)


def faust_topics(prefix: str) -> list[str]:
    """The topics Faust creates for the engine (its table's changelog and the leader assignor's topic)."""
    app = engine_group(prefix)
    return [f"{app}-{t}-changelog" for t in FAUST_TABLES] + [f"{app}-__assignor-__leader"]


@dataclass
class Findings:
    missing_topics: list[str]  # kreassign's own topics that do not exist
    problems: list[str]  # each a sentence naming what is missing and the grant


def check_log(config: ClientConfig, prefix: str, profile: BrokerProfile, timeout: float = 30.0,
              prober: Prober | None = None) -> Findings:
    """Everything the engine does on the cluster holding kreassign's topics."""
    p = prober or Prober(config, timeout)
    t = Topics.named(prefix)
    found = Findings([], [])
    needs = {n.resource: n for n in acls.engine_needs(prefix, acls.TopicScope())}
    own = (t.commands, t.decisions, t.events, t.dead_letters, t.snapshots)
    for name in own:
        need = needs[acls.topic(name)]
        try:
            p.topic(name, need.operations, need.why)
        except ProbeError as e:
            if e.kind in (AUTHENTICATION, UNREACHABLE):
                raise
            if e.kind == MISSING:
                found.missing_topics.append(name)
            else:
                found.problems.append(str(e))
    internal = needs[acls.topic(f"{engine_group(prefix)}-", prefixed=True)]
    to_create = []
    faust_denied = False
    for name in faust_topics(prefix):
        try:
            p.topic(name, tuple(op for op in internal.operations if op != "Create"), internal.why, internal.resource)
        except ProbeError as e:
            if e.kind in (AUTHENTICATION, UNREACHABLE):
                raise
            if e.kind == MISSING:
                to_create.append(name)
            else:
                faust_denied = True
    if faust_denied:  # one line for the family, with everything the engine does on it (Faust creates what it cannot see)
        found.problems.append(denied(internal, "TOPIC_AUTHORIZATION_FAILED", p.principal, p.bootstrap))
    elif to_create and profile.validate_only:
        try:
            p.create(to_create[0], internal.why, internal.resource)
        except ProbeError as e:
            if e.kind in (AUTHENTICATION, UNREACHABLE):
                raise
            found.problems.append(str(e))
    for name in (engine_group(prefix), reader_group(prefix)):
        need = needs[acls.group(name)]
        try:
            p.group(name, need.operations, need.why)
        except ProbeError as e:
            if e.kind in (AUTHENTICATION, UNREACHABLE):
                raise
            found.problems.append(str(e))
    return found


def check_cluster(config: ClientConfig, timeout: float = 30.0, prober: Prober | None = None) -> list[str]:
    """What the engine does on the cluster it reassigns (the cluster resource; topics come with requests)."""
    p = prober or Prober(config, timeout)
    need = next(n for n in acls.engine_needs("", acls.TopicScope()) if n.resource.kind == "cluster")
    try:
        p.cluster(need.operations, need.why)
    except ProbeError as e:
        if e.kind in (AUTHENTICATION, UNREACHABLE):
            raise
        return [str(e)]
    return []


def paragraph(principal: str | None, bootstrap: str | None, problems: list[str]) -> str:
    problems = list(dict.fromkeys(problems))  # each once
    who = f" as {principal}" if principal else ""
    head = (f"the engine may not do what it needs{who} on {bootstrap} (docs/engine.md, Security; "
            f"kreassign acls prints every grant):")
    return "\n".join([head] + [f"  - {p}" for p in problems])
