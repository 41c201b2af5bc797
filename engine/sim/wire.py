"""JSON forms of what crosses the sim-cluster's HTTP API (``engine.sim.server``,
``engine.cluster.remote``): observations, results, throttle sets, partitions."""

from __future__ import annotations

from typing import Iterable, Mapping

from engine.core.outcomes import Ok, Refused, Result, Unavailable
from engine.core.cluster_snapshot import partition_document, partition_from_document
from engine.core.commands import Observation
from engine.core.partition import Broker, TopicInfo, TopicPartition
from engine.core.throttles import ThrottledReplica, ThrottleSet


class WireError(ValueError):
    """A document that does not have the expected shape."""


def tps_document(tps: Iterable[TopicPartition]) -> list:
    return [[tp.topic, tp.partition] for tp in tps]


def tps_from(doc: object) -> list[TopicPartition]:
    try:
        return [TopicPartition(str(t), int(p)) for t, p in doc]  # type: ignore[union-attr]
    except (TypeError, ValueError) as e:
        raise WireError(f"expected a list of [topic, partition]: {e}") from None


def result_document(r: Result) -> dict:
    if isinstance(r, Ok):
        return {"ok": True, "note": r.note}
    if isinstance(r, Refused):
        return {"ok": False, "code": r.code, "message": r.message}
    return {"ok": False, "unavailable": r.message}


def result_from(doc: Mapping) -> Result:
    if doc.get("ok"):
        return Ok(doc.get("note", ""))
    if "unavailable" in doc:
        return Unavailable(str(doc["unavailable"]))
    return Refused(str(doc.get("code", "UNKNOWN")), str(doc.get("message", "")))


def results_document(results: Mapping[TopicPartition, Result]) -> list:
    return [{"topic": tp.topic, "partition": tp.partition, "result": result_document(r)} for tp, r in results.items()]


def results_from(doc: object) -> dict[TopicPartition, Result]:
    try:
        return {TopicPartition(str(e["topic"]), int(e["partition"])): result_from(e["result"]) for e in doc}
    except (KeyError, TypeError, ValueError) as e:
        raise WireError(f"not a results list: {e}") from None


def throttles_document(t: ThrottleSet) -> dict:
    return {
        "leader": sorted([r.topic, r.partition, r.broker] for r in t.leader),
        "follower": sorted([r.topic, r.partition, r.broker] for r in t.follower),
        "leader_brokers": sorted(t.leader_brokers),
        "follower_brokers": sorted(t.follower_brokers),
        "rate": t.rate,
    }


def throttles_from(doc: Mapping) -> ThrottleSet:
    try:
        return ThrottleSet(
            frozenset(ThrottledReplica(str(t), int(p), int(b)) for t, p, b in doc.get("leader", ())),
            frozenset(ThrottledReplica(str(t), int(p), int(b)) for t, p, b in doc.get("follower", ())),
            frozenset(int(b) for b in doc.get("leader_brokers", ())),
            frozenset(int(b) for b in doc.get("follower_brokers", ())),
            None if doc.get("rate") is None else int(doc["rate"]),
        )
    except (TypeError, ValueError, AttributeError) as e:
        raise WireError(f"not a throttle set: {e}") from None


def observation_document(o: Observation) -> dict:
    return {
        "brokers": None if o.brokers is None else [[b.id, b.rack, b.alive] for b in o.brokers],
        "topics": {
            t: None if i is None else [i.partitions, i.min_insync_replicas] for t, i in o.topics.items()
        },
        "partitions": [partition_document(tp, p) for tp, p in o.partitions.items()],
    }


def observation_from(doc: Mapping) -> Observation:
    try:
        brokers = doc.get("brokers")
        return Observation(
            brokers=None if brokers is None else tuple(Broker(int(i), r, bool(a)) for i, r, a in brokers),
            topics={str(t): None if i is None else TopicInfo(int(i[0]), int(i[1])) for t, i in doc["topics"].items()},
            partitions=dict(partition_from_document(p) for p in doc["partitions"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise WireError(f"not an observation: {e}") from None
