"""Broker profiles: client settings that depend on which broker kreassign talks to.

``kafka`` (the default) is Apache Kafka: librdkafka's defaults; the engine's
workers use a 6 s group session (Kafka's minimum by default) with 0.5 s heartbeats.
``embedded`` is the tansu broker of ``kreassign broker`` and the tests; every
setting it needs lives in ``engine.kafka.embedded`` and nowhere else, so the code
paths used against real Kafka carry none of them. Select one with
``--broker-profile kafka|embedded``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple


class BrokerProfile(NamedTuple):
    name: str
    consumer: Mapping[str, object] = {}  # every consumer (librdkafka keys)
    group: Mapping[str, object] = {}  # consumers that join a group
    producer: Mapping[str, object] = {}  # every producer
    exact_end_offsets: Mapping[str, object] = {}  # producers whose readers trust the high watermark
    faust: Mapping[str, object] = {}  # faust.App settings of the engine's workers (engine.runtime.worker)
    faust_consumer: Mapping[str, object] = {}  # aiokafka consumer settings Faust does not expose
    validate_only: bool = True  # CreateTopics(validate_only) creates nothing (the engine's start-up check uses it)


KAFKA = BrokerProfile(
    "kafka",
    # the engine's group: a dead decider's session ends after 6 s (Kafka's group.min.session.timeout.ms,
    # the least a broker accepts by default), heartbeats every half second (a standby learns of the
    # rebalance that follows at its next heartbeat), so a standby takes over within seconds (Faust's
    # own 60 s session and 3 s heartbeats made failover take a minute)
    faust={"broker_session_timeout": 6.0, "broker_heartbeat_interval": 0.5},
    # a broker answers one request of a connection at a time: after a rebalance, Faust's offset
    # requests wait behind the fetch it holds at the end of quiet partitions (Faust gives aiokafka
    # 1.5 s), which delayed every takeover by a second or more
    faust_consumer={"fetch_max_wait_ms": 100},
)
NAMES = ("kafka", "embedded")


def profile(name: str) -> BrokerProfile:
    if name == "kafka":
        return KAFKA
    if name == "embedded":
        from engine.kafka.embedded import EMBEDDED

        return EMBEDDED
    raise ValueError(f"unknown broker profile {name!r} (choose from {', '.join(NAMES)})")
