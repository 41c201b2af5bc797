"""Prometheus ``/metrics`` of a worker, exposed with prometheus-client (never hand-written).

Read at scrape time from the worker (``engine.runtime.worker.Engine``) and its decider:
counters since the worker started (events appended, steps started and
completed, dead letters, recoveries), the commands rejected by command (counted
in the state, so since the log began, whichever worker decides), and gauges of
the state (decider active, partitions remaining, bytes remaining where sizes
are known, steps in flight, the throttle rate for new steps).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

import time
from collections import Counter

from engine.core.budget import PACED_SHOWN
from engine.views.summary import bytes_remaining, problems
from engine.core.decide import creations, rate_in_kafka
from engine.core.scheduler import DRAINED, PIN_IN, PIN_OUT, PINNED, pin_holds


class _Collector:
    def __init__(self, engine):
        self.engine = engine

    def collect(self):
        e = self.engine
        c = e.counters
        for name, key, doc in (
            ("kreassign_events_appended", "events", "Events appended to the events topic by this worker"),
            ("kreassign_steps_started", "StepStarted", "Steps the cluster accepted"),
            ("kreassign_steps_completed", "StepCompleted", "Steps completed"),
            ("kreassign_dead_letters", "dead_letters", "Messages set aside in the dead-letter topic"),
            ("kreassign_recoveries", "recoveries", "Times this worker recovered the state from the events topic"),
            ("kreassign_recoveries_restarted", "recoveries_restarted",
             "Recoveries or decisions this worker started again because a rebalance came meanwhile"),
            ("kreassign_decision_retries", "retries", "Decisions given up for now and retried after a new claim and "
             "recovery (/status 'last_retry' says why: e.g. the decider's lease could not be renewed in time)"),
        ):
            m = CounterMetricFamily(name, doc)
            m.add_metric([], c[key])
            yield m
        active = e.active and e.decider is not None and not e.needs_recovery
        yield _gauge("kreassign_decider_active", "1 if this worker is the active decider", 1 if active else 0)
        faust = getattr(e, "faust_blocked", lambda at: None)
        yield _gauge("kreassign_recovery_failing", "1 while the decider's recovery fails and is retried, or cannot "
                     "start because Faust delivers no input (/status 'blocked' says why: e.g. a grant on kreassign's "
                     "own topics revoked)",
                     1 if e.active and (getattr(e, "recovery_error", None) or faust(time.monotonic())) else 0)
        cluster = getattr(e, "cluster", None)
        if cluster is not None:
            silent = getattr(cluster, "unresponsive", lambda: {})()
            g = GaugeMetricFamily("kreassign_broker_unresponsive_seconds", "Seconds a broker has not answered the "
                                  "engine's probe, for each broker that does not answer now (status names what "
                                  "waits on it)", labels=["broker"])
            for b, info in sorted(silent.items()):
                g.add_metric([str(b)], info["seconds"])
            yield g
            yield _gauge("kreassign_cluster_calls_waiting", "Cluster calls the decider stopped waiting for (past "
                         "--call-deadline) that have not returned yet", len(getattr(cluster, "waiting", list)()))
            sent = getattr(cluster, "requests_sent", lambda: None)()
            if sent is not None:
                m = CounterMetricFamily("kreassign_requests_sent", "Requests this worker sent the reassigned "
                                        "cluster, by broker; 'any': those whose broker the client library chooses "
                                        "(the request budget charges them to every broker)", labels=["broker"])
                for b, n in sorted(sent.totals.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
                    m.add_metric(["any" if b is None else str(b)], n)
                yield m
        budget = getattr(e.s, "request_budget", None)
        if budget is not None:
            yield _gauge("kreassign_request_budget", "Requests a second per broker the decider's looks keep within "
                         "(--request-budget)", budget)
        if not active:
            return
        d = e.decider
        deferred = CounterMetricFamily("kreassign_looks_deferred", "Looks the decider deferred because the busiest "
                                       "broker's requests of the last second had used the request budget")
        deferred.add_metric([], d.deferred)
        yield deferred
        pacing = d.budget_status(d.clock())["paced"]  # (the decider's clock: a simulation's runs on its own)
        yield _gauge("kreassign_looks_paced", "1 while the decider's looks are paced by the request budget (a look "
                     f"deferred within the last {PACED_SHOWN:g} seconds)", 0 if pacing is None else 1)
        yield _gauge("kreassign_looks_paced_longest_wait_seconds", "The longest a read of the pacing shown now waited "
                     "for the request budget, from its first deferral to when the budget let it go (0: none shown)",
                     0 if pacing is None else pacing["longest_wait_seconds"])
        urgent = CounterMetricFamily("kreassign_urgent_catch_ups", "Catch-up measures of copies near their release "
                                     "the decider sent although the request budget was used (held, they could end "
                                     "throttled and stall acks=all writes)")
        urgent.add_metric([], d.urgent)
        yield urgent
        over = CounterMetricFamily("kreassign_reads_over_budget", "Reads the decider sent over the request budget "
                                   "after waiting a whole window (requests never held kept it full)")
        over.add_metric([], d.overshoots)
        yield over
        s = d.state
        failed = CounterMetricFamily("kreassign_action_failures", "Actions the cluster refused or could not be "
                                     "asked, by action and Kafka's error code", labels=["action", "code"])
        for (action, code), n in sorted(d.failures.items()):
            failed.add_metric([action, code], n)
        yield failed
        drifts = CounterMetricFamily("kreassign_throttle_drifts", "Throttle pieces another tool changed that this "
                                     "worker's decider set right (ThrottlesDrifted), by kind: entry_missing, "
                                     "entry_left_over, rate_missing, rate_changed (a broker's rate read at another "
                                     "value than the one in force)", labels=["kind"])
        for kind in ("entry_missing", "entry_left_over", "rate_missing", "rate_changed"):
            drifts.add_metric([kind], d.drifts[kind])
        yield drifts
        now = GaugeMetricFamily("kreassign_problems", "Failures in force now (status' problems), by kind",
                                labels=["kind"])
        for kind, n in sorted(Counter(p["kind"] for p in problems(s)).items()):
            now.add_metric([kind], n)
        yield now
        yield _gauge("kreassign_partitions_waiting", "Partitions that cannot progress now (status says why); "
                     "the drops --steps grouped holds on purpose are not among them", len(s.waiting) - len(s.drop_group))
        yield _gauge("kreassign_partitions_drops_held", "Partitions of --steps grouped requests whose final drop "
                     "waits to go with the others of its leader (status says which leader)", len(s.drop_group))
        held = GaugeMetricFamily("kreassign_partitions_held_by_pin", "Ready partitions the dominant-source rule "
                                 "holds, by reason: pinned (another leader's copy into the broker the dominant "
                                 "leader copies into alone), pin-out (the dominant leader's copy into another "
                                 "broker), pin-in (its copy into a broker another leader copies into), drained "
                                 "(another leader's copy into a broker draining for it); status says which brokers",
                                 labels=["reason"])
        holds = pin_holds(s.ready, s.in_flight, s.limits, creations(s), s.live_brokers())
        for why in (PINNED, PIN_OUT, PIN_IN, DRAINED):
            held.add_metric([why], sum(1 for _key, w in holds.held.values() if w == why))
        yield held
        yield _gauge("kreassign_partitions_remaining", "Partitions of open requests not finished", d.remaining())
        yield _gauge("kreassign_steps_in_flight", "Steps in flight", len(s.steps))
        if d.sizes:
            yield _gauge("kreassign_bytes_remaining", "Bytes still to copy (partitions of known size)",
                         bytes_remaining(s, d.sizes))
        rejected = CounterMetricFamily(
            "kreassign_commands_rejected", "Commands the engine rejected, by command (from the event log: since it began)",
            labels=["command"])
        for command in ("submit", "cancel", "limits", "throttle", "pause", "resume"):
            rejected.add_metric([command], s.rejected.get(command, 0))
        yield rejected
        if s.throttle_rate is not None:
            yield _gauge("kreassign_throttle_rate_bytes", "Replication throttle rate for new steps, bytes/s",
                         s.throttle_rate)
            yield _gauge("kreassign_kafka_throttle_rate_bytes",
                         "The rate kreassign gives Kafka's *.replication.throttled.rate for it: the throttle plus "
                         "throttle_margin_pct, bytes/s", rate_in_kafka(s))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc)
    g.add_metric([], value)
    return g


def exposition(engine) -> tuple[bytes, str]:
    """The text exposition format and its content type (without the charset, which the web server adds)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(engine))
    return generate_latest(registry), "; ".join(
        part for part in CONTENT_TYPE_LATEST.split("; ") if not part.startswith("charset"))
