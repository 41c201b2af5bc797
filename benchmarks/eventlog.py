"""The event log's speed: Avro codec rates, and produce -> replay through the embedded broker.

    python -m benchmarks.eventlog --partitions 5000

Builds a real log (a reassignment of N partitions, RF 3, every replica moved,
run to completion against the in-memory test cluster, as benchmarks.fold
does), then measures on it:

* encode and decode of the event envelopes (single-object Avro, in memory);
* appending the whole log to the events topic of an embedded broker (tansu)
  with ``EventWriter`` (idempotent producer, acks=all, lz4);
* ``replay`` of that topic from offset 0: read, decode, fold. The replayed
  state is checked equal to the run's.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.planner import workload
from engine.kafka.client_config import ClientConfig
from engine.log.codec import codec_for
from engine.core.commands import PartitionTarget, Submit
from engine.kafka.embedded import EMBEDDED, EmbeddedBroker
from engine.log.envelope import EventEnvelope, new_id, now
from engine.log.eventlog import EventWriter
from engine.core.partition import TopicPartition
from engine.log.replay import replay
from engine.kafka.topics import create
from tests.fake_cluster import Driver, FakeCluster


def real_log(partitions: int) -> Driver:
    assignment, targets = {}, {}
    for i, (cr, ftr) in enumerate(workload(partitions)):
        tp = TopicPartition(f"topic-{i % 100}", i // 100)
        assignment[tp], targets[tp] = cr, ftr
    d = Driver(FakeCluster(assignment, range(60)))
    d.feed(Submit("bench", tuple(PartitionTarget(t.topic, t.partition, r) for t, r in targets.items())))
    d.run()
    return d


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--partitions", type=int, default=5_000)
    args = p.parse_args(argv)
    d = real_log(args.partitions)
    codec = codec_for(EventEnvelope)
    t = now()
    envelopes = [EventEnvelope(new_id(), t, e) for e in d.events]
    n = len(envelopes)

    t0 = time.perf_counter()
    encoded = [codec.encode(e) for e in envelopes]
    t1 = time.perf_counter()
    decoded = [codec.decode(b) for b in encoded]
    t2 = time.perf_counter()
    assert decoded == envelopes

    with EmbeddedBroker() as broker:
        create({"bootstrap.servers": broker.bootstrap})
        config = ClientConfig().with_bootstrap(broker.bootstrap)
        t3 = time.perf_counter()
        with EventWriter(config=config, profile=EMBEDDED) as writer:
            writer.write(envelopes)
        t4 = time.perf_counter()
        result = replay(config, profile=EMBEDDED)
        t5 = time.perf_counter()
    assert result.events == n and result.state == d.state
    print(json.dumps({
        "benchmark": "eventlog", "partitions": args.partitions, "events": n,
        "bytes_per_event": round(sum(map(len, encoded)) / n, 1),
        "encode_events_per_s": round(n / (t1 - t0)),
        "decode_events_per_s": round(n / (t2 - t1)),
        "produce_events_per_s": round(n / (t4 - t3)),
        "replay_events_per_s": round(n / (t5 - t4)),
        "produce_then_replay_seconds": round(t5 - t3, 2),
    }))


if __name__ == "__main__":
    main()
