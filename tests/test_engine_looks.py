"""Issue 26, item 1: the engine's looks have a budget, held where the requests arrive. The running engine
(a Faust worker, its event log on the embedded broker) against the simulated cluster's Kafka front through
the real Kafka adapter (``--cluster kafka://``), default intervals; the front counts every request per
broker (``GET /v1/requests``).

* idle (active, nothing submitted): no request at all to the reassigned cluster (before: ApiVersions to
  every broker twice a second and a DescribeCluster a second: 45 requests in 5 s);
* moving (4 copies of 12 MB into one broker at 4 MB/s, about 9.5 s): at most BUSY_BUDGET requests a second to
  any broker, on average over the move, actions included (before: 22.8; after: about 5.5 over 12 s; since
  copies are first measured 1 s after they start and released 1 s before their end, 4.6 to 4.9, and 8.0 where
  KRaft's controller was broker 1, which leads every copy: 20 looks and 25 catch-up measures in 9.4 s);
* idle again once the request completed: nothing."""

from __future__ import annotations

import time

from engine.core import events as ev
from engine.core.commands import PartitionTarget
from engine.kafka.broker_profile import profile
from engine.log.eventlog import Publisher
from tests.engine_harness import EventTail, SimCluster, Worker, get_json, wait_for

EMBEDDED = profile("embedded")
BUSY_BUDGET = 10.0  # requests/s to the busiest broker, on average over a move (measured: 4.6 to 8.0, above)
DOC = {
    "name": "looks", "seed": 3,
    "brokers": [{"id": b, "network_in": "100 MB/s", "network_out": "100 MB/s"} for b in (1, 2, 3, 4)],
    "topics": [{"name": "t", "min_insync_replicas": 2,
                "assignment": [{"replicas": [1, 2, 3], "size": "12 MB"} for _ in range(4)]}],
}
TARGETS = tuple(PartitionTarget("t", p, (1, 2, 4)) for p in range(4))


def counts(sim) -> dict:
    return get_json(sim.url + "/v1/requests")


def quiet(sim, timeout: float = 60.0) -> None:
    """Until a whole second passes with no request at the front: what the engine was doing is done (the
    idle windows measured after it must not depend on how long it took on this machine)."""
    def a_quiet_second() -> bool:
        get_json(sim.url + "/v1/requests?reset=1")
        time.sleep(1.0)
        return counts(sim)["total"]["requests"] == 0

    wait_for(a_quiet_second, timeout, "a second without a request from the engine", interval=0)


def per_broker(counted: dict) -> dict[int, int]:
    return {int(b): sum(a["requests"] for a in apis.values()) for b, apis in counted["brokers"].items()}


def test_the_engine_asks_an_idle_cluster_nothing_and_a_moving_one_within_its_budget(broker, topics, tmp_path):
    sim = SimCluster(DOC, speed=1, tmp_path=tmp_path)
    prefix = topics.events[: -len("events")]
    worker = None
    tail = None
    try:
        worker = Worker(broker, prefix, sim.kafka, poll=1.0)
        worker.wait_active()
        quiet(sim)  # the start-up's own looks (longer on a loaded machine than on a quiet one)
        get_json(sim.url + "/v1/requests?reset=1")
        time.sleep(5)
        idle = counts(sim)
        print(f"idle {idle['seconds']} s: {idle['total']}, {idle['brokers']}")
        assert idle["total"]["requests"] == 0, idle["brokers"]
        tail = EventTail(broker, topics.events)
        with Publisher(broker.bootstrap, prefix=prefix, profile=EMBEDDED) as p:
            p.change_throttle(4_000_000)
            get_json(sim.url + "/v1/requests?reset=1")
            started = time.monotonic()
            p.submit(TARGETS, request_id="r")
            wait_for(lambda: worker._check() or any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()),
                     120, "the move to complete", interval=0.2)
            seconds = time.monotonic() - started
        moving = counts(sim)
        rates = {b: n / seconds for b, n in per_broker(moving).items()}
        print(f"moving {seconds:.1f} s: {moving['total']}, requests/s per broker {rates}, {moving['brokers']}")
        assert max(rates.values()) <= BUSY_BUDGET, (rates, moving["brokers"])
        quiet(sim)  # the last throttle removal
        get_json(sim.url + "/v1/requests?reset=1")
        time.sleep(4)
        after = counts(sim)
        assert after["total"]["requests"] == 0, after["brokers"]
        assert worker.stop() == 0
    finally:
        if tail is not None:
            tail.close()
        if worker is not None:
            worker.cleanup()
        sim.cleanup()
