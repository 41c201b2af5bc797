"""The physical lower bound on a reassignment's makespan, whatever the strategy.

Every strategy here copies each new replica once, through the scenario's
throttle (``kafka-reassign-partitions.sh --throttle``, Cruise Control's
replication throttle and kreassign all throttle every copy at the same rate),
and a new replica must receive at least the partition's size. So:

* inbound, per broker b: the bytes of every replica b gains (in FTR, not in
  CR), divided by the fastest b can receive copies: its inbound capacity minus
  the produce traffic of the partitions it keeps throughout (in CR and FTR; 0
  if the scenario injects faults, which can drop that traffic), capped by the
  follower throttle;
* outbound, the cluster as a whole: all those bytes divided by what every
  live broker together can send to copies (outbound capacity, capped by the
  leader throttle). Per broker it would not be a bound: leaders move.

The bound is the larger. Copies that also carry what is produced meanwhile,
steps a strategy runs one after another, and idle time only add to the
makespan, never subtract: the bound is never above a measured makespan
(property-tested over generated scenarios). One exception, by design:
kreassign releases the last ``throttle_release_ms`` worth of each copy from the
throttle so its replicas never join the ISR throttled, so each of its steps may
beat bytes/rate by up to that much.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.sim.scenario import Scenario

INF = float("inf")


@dataclass(frozen=True)
class Bound:
    seconds: float
    binding: str  # what sets it, e.g. "broker 7 inbound"
    inbound: dict[int, float]  # broker -> seconds its inbound needs at least
    outbound: float  # seconds the whole cluster's sending needs at least
    bytes_to_copy: int


def lower_bound(scenario: Scenario) -> Bound:
    throttle = scenario.throttle if scenario.throttle is not None else INF
    brokers = {b.id: b for b in scenario.brokers}
    gains: dict[int, int] = {}
    kept_produce: dict[int, float] = {}
    for t in scenario.targets:
        p = scenario.partitions[t.tp]
        for b in set(t.replicas) - set(p.replicas):
            gains[b] = gains.get(b, 0) + p.size
    if not scenario.faults:
        final = scenario.target_assignment()
        for tp, p in scenario.partitions.items():
            for b in set(p.replicas) & set(final[tp]):
                kept_produce[b] = kept_produce.get(b, 0.0) + p.produce_rate
    inbound = {}
    for b, n in gains.items():
        rate = min(throttle, brokers[b].network_in - kept_produce.get(b, 0.0))
        inbound[b] = n / rate if rate > 0 else INF
    total = sum(gains.values())
    send = sum(min(throttle, b.network_out) for b in scenario.brokers if b.alive)
    outbound = total / send if total else 0.0
    seconds, binding = outbound, "all brokers' outbound"
    for b, s in sorted(inbound.items()):
        if s > seconds:
            seconds, binding = s, f"broker {b} inbound"
    return Bound(seconds, binding if total else "nothing to copy", inbound, outbound, total)
