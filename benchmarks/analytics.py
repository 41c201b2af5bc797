"""The analytics job's speed: N events on the embedded broker -> audit table + spans + aggregates.

    python -m benchmarks.analytics --events 1000000

The log: a real run of the core (``TimedDriver`` on the fake cluster: a
reassignment of P partitions, RF 3, every replica moved, sizes 1-100 MB, an
engine round every 7 s), repeated under new request ids and later times
until it holds N events; a realistic mix (observations, ready/planned/
started/completed steps, throttles, completions). It is encoded with the
project's codec (both cores) and produced to an embedded broker (tansu),
then the job runs once with ``--trigger available-now`` on ``local[2]``.

Measured: the whole job (the four queries, stage by stage) from its start
to the last query's end, and each stage; Spark's start separately. Checked:
one audit row per event, one step row per step. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import shutil
import tempfile
import time
from datetime import timedelta

from confluent_kafka import Producer

from benchmarks.planner import workload
from engine.core import events as ev
from engine.kafka.client_config import ClientConfig
from engine.log.codec import codec_for
from engine.core.commands import PartitionTarget, Submit
from engine.kafka.embedded import EMBEDDED, EmbeddedBroker
from engine.log.envelope import EventEnvelope, event_key, millis, new_id
from engine.core.partition import TopicPartition
from engine.kafka.topics import Topics, create, reader_group
from tests.analytics_log import TimedDriver, sized_cluster

_TEMPLATE: list[tuple] = []  # (time, event) of one run; inherited by the encoding workers (fork)
_PERIOD = timedelta(0)


def template(partitions: int) -> tuple[list[tuple], timedelta]:
    assignment, targets, sizes = {}, {}, {}
    for i, (cr, ftr) in enumerate(workload(partitions)):
        tp = TopicPartition(f"topic-{i % 100}", i // 100)
        assignment[tp], targets[tp], sizes[tp] = cr, ftr, (1 + (i * 7919) % 100) * 1_000_000
    d = TimedDriver(sized_cluster(assignment, range(60), sizes))
    d.feed(Submit("template", tuple(PartitionTarget(t.topic, t.partition, r) for t, r in targets.items()), 50_000_000))
    d.run()
    return list(zip(d.stamps, d.events)), d.at - d.stamps[0] + timedelta(minutes=1)


def _copy(event, request_id: str):
    if hasattr(event, "request_id") and event.request_id is not None:
        return dataclasses.replace(event, request_id=request_id)
    return event


def _encode(copy: int) -> list[tuple[bytes, bytes, int]]:
    codec = codec_for(EventEnvelope)
    out = []
    for t, e in _TEMPLATE:
        envelope = EventEnvelope(new_id(), t + copy * _PERIOD, _copy(e, f"bench-{copy}"))
        out.append((event_key(envelope.payload).encode(), codec.encode(envelope), millis(envelope.recorded_at)))
    return out


def main(argv=None) -> None:
    global _TEMPLATE, _PERIOD
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=2_000, help="partitions of one run (the template)")
    p.add_argument("--keep", action="store_true", help="keep the warehouse (its path is printed)")
    args = p.parse_args(argv)

    _TEMPLATE, _PERIOD = template(args.partitions)
    copies = -(-args.events // len(_TEMPLATE))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        messages = [m for chunk in pool.map(_encode, range(copies)) for m in chunk][: args.events]
    steps = sum(isinstance(e, ev.StepPlanned) for _t, e in _TEMPLATE) * copies  # an upper bound if cut
    warehouse = tempfile.mkdtemp(prefix="kreassign-bench-warehouse-")

    from spark import audit_job
    from spark import warehouse as wh
    from spark.session import session

    with EmbeddedBroker() as broker:
        create({"bootstrap.servers": broker.bootstrap})
        topic = Topics.named().events
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                             "queue.buffering.max.messages": 2_000_000})
        t0 = time.perf_counter()
        for key, value, ts in messages:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, timestamp=ts)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(120) == 0
        produced = time.perf_counter() - t0

        t1 = time.perf_counter()
        spark = session("local[2]", app="kreassign-bench", conf={
            "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"})
        started = time.perf_counter() - t1
        options = audit_job.JobOptions(
            warehouse=warehouse, topic=topic, group=reader_group(),
            kafka=ClientConfig().with_bootstrap(broker.bootstrap).confluent(**EMBEDDED.consumer))
        t2 = time.perf_counter()
        runs = audit_job.run(spark, options)
        job = time.perf_counter() - t2
        wh.register(spark, warehouse)
        audit_rows = spark.sql("SELECT count(*) FROM audit").first()[0]
        step_rows = spark.sql("SELECT count(*) FROM steps").first()[0]
        spark.stop()
    if not args.keep:
        shutil.rmtree(warehouse, ignore_errors=True)
    assert audit_rows == len(messages), (audit_rows, len(messages))
    assert step_rows <= steps and (len(messages) < len(_TEMPLATE) * copies or step_rows == steps), (step_rows, steps)
    stages = {}
    for r in runs:
        stages.setdefault(round(r.seconds, 1), []).append(r.name)
    print(json.dumps({
        "benchmark": "analytics", "events": len(messages), "template_events": len(_TEMPLATE), "copies": copies,
        "steps": step_rows, "produce_events_per_s": round(len(messages) / produced),
        "spark_start_seconds": round(started, 1), "job_seconds": round(job, 1),
        "job_events_per_s": round(len(messages) / job),
        "stages": {"+".join(names): seconds for seconds, names in stages.items()},
        "rows": {r.name: r.rows for r in runs}, "warehouse": warehouse if args.keep else None,
    }))


if __name__ == "__main__":
    main()
