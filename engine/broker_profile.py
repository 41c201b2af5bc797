"""Broker profiles: client settings that depend on which broker kreassign talks to.

``kafka`` (the default) is Apache Kafka: no overrides, librdkafka's defaults.
``embedded`` is the tansu broker of ``kreassign broker`` and the tests; every
setting it needs lives in ``engine.embedded`` and nowhere else, so the code
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
    faust: Mapping[str, object] = {}  # faust.App settings of the engine's workers (engine.worker)
    faust_consumer: Mapping[str, object] = {}  # aiokafka consumer settings Faust does not expose
    validate_only: bool = True  # CreateTopics(validate_only) creates nothing (the engine's start-up check uses it)


KAFKA = BrokerProfile("kafka")
NAMES = ("kafka", "embedded")


def profile(name: str) -> BrokerProfile:
    if name == "kafka":
        return KAFKA
    if name == "embedded":
        from engine.embedded import EMBEDDED

        return EMBEDDED
    raise ValueError(f"unknown broker profile {name!r} (choose from {', '.join(NAMES)})")
