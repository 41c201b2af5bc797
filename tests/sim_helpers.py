"""Small scenarios for the simulator's tests."""

import contextlib

from engine.sim import scenario as S


def scenario(partitions, brokers=4, racks=None, network="100 MB/s", throttle="none", **extra):
    """``partitions``: list of (replicas, size, produce_rate) for topic t. Brokers create new replicas
    instantly unless ``replica_creation_time`` is given, and a used-up follower quota lets its rate
    through unless ``follower_quota_loss`` is given: each rule is tested on its own."""
    doc = {
        "brokers": [{"id": b, "rack": (racks or {}).get(b), "network_in": network, "network_out": network}
                    for b in range(1, brokers + 1)],
        "topics": [{"name": "t", "min_insync_replicas": extra.pop("min_isr", 1), "assignment": [
            {"partition": i, "replicas": list(r), "size": size, "produce_rate": rate}
            for i, (r, size, rate) in enumerate(partitions)]}],
        "throttle": throttle,
        "replica_creation_time": 0,
        "follower_quota_loss": 0,
    }
    doc.update(extra)
    return S.from_document(doc)


@contextlib.contextmanager
def kafka_front(doc, speed: float):
    """A simulated cluster of the scenario document ``doc`` at ``speed``, serving its HTTP API and its Kafka
    front: yields the front (``.bootstrap``, ``.counts``; the cluster's server is ``.sim``), shut down after."""
    from engine.sim.kafka_front import KafkaFront
    from engine.sim.server import SimServer

    sim = SimServer(S.from_document(doc), speed=speed)
    sim.start()
    kafka = KafkaFront(sim)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.shutdown()
        sim.shutdown()
