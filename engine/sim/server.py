"""``kreassign sim-cluster``: the simulated cluster as its own long-running process.

It outlives the engine exactly as a real cluster would: kill and restart the
engine, the cluster keeps its state. Simulated time follows the wall clock,
scaled by ``speed`` (and the scenario's faults happen when their time comes).
Served on a loopback port as JSON over HTTP (the standard library's server;
one lock around the simulated cluster):

| method and path | body | answer |
| --- | --- | --- |
| GET /v1/health | | {"time", "speed", "scenario"} |
| POST /v1/observe | {"partitions": [[topic, p], ...] or null} | an observation |
| GET /v1/snapshot | | a cluster snapshot (sizes included) |
| POST /v1/alter | {"targets": [{"topic", "partition", "replicas"}]} | {"results": [...]} |
| POST /v1/cancel, /v1/elect | {"partitions": [[topic, p], ...]} | {"results": [...]} |
| POST /v1/sizes | {"partitions": [[topic, p], ...]} | {"sizes": [{"topic", "partition", "size"}]} |
| POST /v1/catch_up | {"steps": [{"topic", "partition", "leader", "adding"}]} | {"remaining": [{"topic", "partition", "remaining"}]} |
| POST /v1/throttles/apply, /v1/throttles/remove | a throttle set | {"result": ...} |
| POST /v1/faults | {"broker", "action": down/up/slow/lag/hang/resume, "factor", "seconds"} (``engine.sim.cluster``) | {"time"} |
| GET /v1/state | | time, reassignments in progress, throttles in force (a topic's list ["*"] where it is the wildcard; each broker's replica.alter.log.dirs.io.max.bytes.per.second set over the Kafka front), brokers, partitions under min ISR now and ever, lowest ISR headroom |
| GET /v1/alters | | every alter received: [{"time", "topic", "partition", "replicas"}] in order |
| GET /v1/completions | | every reassignment the controller completed (Phase B) or reverted: [{"time", "topic", "partition"}] in order |
| GET /v1/requests[?reset=1] | | the Kafka front's count of the requests that arrived, per broker and API, with the bytes of their responses and the clients that sent them (``engine.sim.kafka_front.KafkaFront.counts``; ``reset``: start counting anew) |
| POST /v1/acls | {"add": [kafka-acls.sh command, ...], "remove": [...]} | {"acls": number in force} (a scenario with a ``security`` section only) |

The HTTP API itself is not authenticated: the scenario's ``security`` section
(``engine.sim.security``) secures the Kafka front only.

``engine.cluster.remote.RemoteCluster`` is the client; ``engine.sim.wire``
the JSON forms.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from engine.sim import wire
from engine.core.partition import TopicPartition
from engine.sim.cluster import SimulatedCluster
from engine.sim.model import linked
from engine.sim.scenario import Scenario


class SimServer:
    def __init__(self, scenario: Scenario, speed: float = 1.0, host: str = "127.0.0.1", port: int = 0):
        self.scenario = scenario
        self.speed = speed
        self._start = time.monotonic()
        self.cluster = SimulatedCluster.from_scenario(scenario, clock=self.sim_time)
        self.lock = threading.Lock()
        self.front = None  # the Kafka front (engine.sim.kafka_front), if one serves this cluster
        self.alters: list[dict] = []  # every alter target received, in order (the fault-injection suite checks them)
        self.security = None  # the Kafka front's users and ACLs (engine.sim.security), if the scenario has them
        if scenario.security is not None:
            from engine.sim.security import from_document

            self.security = from_document(scenario.security)
        handler = type("Handler", (_Handler,), {"sim": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True

    def sim_time(self) -> float:
        return (time.monotonic() - self._start) * self.speed

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> threading.Thread:
        """Serve in a background thread (tests); ``shutdown`` stops it."""
        t = threading.Thread(target=self.serve_forever, name="sim-cluster", daemon=True)
        t.start()
        return t

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the API --------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: dict) -> dict:
        route = _ROUTES.get((method, path))
        if route is None:
            raise LookupError(f"no such endpoint: {method} {path}")
        with self.lock:
            return route(self, body)

    def _health(self, _body) -> dict:
        self.cluster.observe([])  # catch up with the clock
        return {"time": self.cluster.time, "speed": self.speed, "scenario": self.scenario.name}

    def _observe(self, body) -> dict:
        tps = body.get("partitions")
        obs = self.cluster.observe(None if tps is None else wire.tps_from(tps))
        return wire.observation_document(obs)

    def _sizes(self, body) -> dict:
        sizes = self.cluster.sizes(wire.tps_from(body.get("partitions") or []))
        return {"sizes": [{"topic": tp.topic, "partition": tp.partition, "size": n} for tp, n in sorted(sizes.items())]}

    def _catch_up(self, body) -> dict:
        try:
            steps = {TopicPartition(str(d["topic"]), int(d["partition"])): (d.get("leader"), tuple(int(b) for b in d["adding"]))
                     for d in body["steps"]}
        except (KeyError, TypeError, ValueError) as e:
            raise wire.WireError(f"expected steps [{{topic, partition, leader, adding}}]: {e}") from None
        remaining = self.cluster.catch_up(steps)
        return {"remaining": [{"topic": tp.topic, "partition": tp.partition, "remaining": n}
                              for tp, n in sorted(remaining.items())]}

    def _snapshot(self, _body) -> dict:
        return self.cluster.snapshot().to_document()

    def _alter(self, body) -> dict:
        try:
            targets = {TopicPartition(str(t["topic"]), int(t["partition"])): tuple(int(b) for b in t["replicas"])
                       for t in body["targets"]}
        except (KeyError, TypeError, ValueError) as e:
            raise wire.WireError(f"expected targets [{{topic, partition, replicas}}]: {e}") from None
        results = self.cluster.alter_reassignments(targets)
        self.record_alters(targets)
        return {"results": wire.results_document(results)}

    def record_alters(self, targets) -> None:
        """Every alter target received, over HTTP or the Kafka protocol (``GET /v1/alters``)."""
        self.alters.extend({"time": self.cluster.time, "topic": tp.topic, "partition": tp.partition,
                            "replicas": list(r)} for tp, r in targets.items())

    def _cancel(self, body) -> dict:
        return {"results": wire.results_document(self.cluster.cancel_reassignments(wire.tps_from(body["partitions"])))}

    def _elect(self, body) -> dict:
        return {"results": wire.results_document(
            self.cluster.elect_preferred_leaders(wire.tps_from(body["partitions"])))}

    def _apply(self, body) -> dict:
        return {"result": wire.result_document(self.cluster.apply_throttles(wire.throttles_from(body)))}

    def _remove(self, body) -> dict:
        return {"result": wire.result_document(self.cluster.remove_throttles(wire.throttles_from(body)))}

    def _fault(self, body) -> dict:
        try:
            broker, action = int(body["broker"]), str(body["action"])
            factor = float(body.get("factor", 1.0))
            seconds = float(body.get("seconds", 0.0))
        except (KeyError, TypeError, ValueError) as e:
            raise wire.WireError(f"expected {{broker, action, factor, seconds}}: {e}") from None
        self.cluster.inject(broker, action, factor, seconds)
        return {"time": self.cluster.time}

    def _state(self, _body) -> dict:
        self.cluster.observe([])  # catch up with the clock
        s = self.cluster.state
        t = s.throttles
        return {
            "time": s.time,
            "reassigning": [wire.partition_document(tp, p.view()) for tp, p in sorted(s.partitions.items())
                            if p.reassigning],
            "throttles": {
                "leader": {topic: _listed(e) for topic, e in t.leader.items() if e},
                "follower": {topic: _listed(e) for topic, e in t.follower.items() if e},
                "leader_rate": {str(b): r for b, r in t.leader_rate.items()},
                "follower_rate": {str(b): r for b, r in t.follower_rate.items()},
                # kept by the Kafka front (set through it), moving nothing: verify reports one left
                "log_dirs_rate": {str(b): r for b, r in (self.front.api.log_dirs_rates() if self.front else {}).items()},
            },
            "brokers": [{"id": b.id, "rack": b.rack, "alive": b.alive, "slow": b.slow,
                         "hung": self.cluster.is_hung(b.id), "metadata_lag": self.cluster.metadata_lag.get(b.id, 0.0)}
                        for b in sorted(s.brokers.values())],
            "under_min_isr": sorted(str(tp) for tp in s.stats.under_min),
            "under_min_isr_ever": sorted(str(tp) for tp in s.stats.under_min_partitions),
            "min_isr_headroom": s.stats.min_headroom,
            "under_replicated": s.stats.under_replicated,
            "acks_all_blocked": sorted(str(tp) for tp in s.stats.blocked),
            "isr_joins_throttled_and_saturated": s.stats.throttled_joins,
        }

    def _alters(self, _body) -> dict:
        return {"alters": list(self.alters)}

    def _completions(self, _body) -> dict:
        self.cluster.observe([])  # catch up with the clock
        return {"completions": [{"time": t, "topic": tp.topic, "partition": tp.partition}
                                for t, tp in linked(self.cluster.state.stats.done_log)]}
    def _requests(self, body) -> dict:
        if self.front is None:
            raise LookupError("this sim-cluster has no Kafka front (--kafka-port): nothing to count")
        return self.front.counts(reset=str(body.get("reset", "")).lower() in ("1", "true", "yes"))

    def _acls(self, body) -> dict:
        from engine.sim.security import SecurityError, parse_acl_command

        if self.security is None:
            raise wire.WireError("the scenario has no security section: nothing is authorized, no ACL applies")
        try:
            add = [a for c in body.get("add") or [] for a in parse_acl_command(str(c))]
            remove = [a for c in body.get("remove") or [] for a in parse_acl_command(str(c))]
        except SecurityError as e:
            raise wire.WireError(str(e)) from None
        self.security.authorizer.add(add)
        self.security.authorizer.remove(remove)
        return {"acls": len(self.security.authorizer.acls)}


def _listed(entries) -> list[str]:
    """A topic's throttled-replicas list as /v1/state gives it: ["*"] for the wildcard (set over the Kafka
    front: every replica), else its "partition:broker" entries."""
    if "*" in entries:
        return ["*"]
    return sorted(f"{p}:{b}" for p, b in entries)


_ROUTES: dict[tuple[str, str], Callable[[SimServer, dict], dict]] = {
    ("GET", "/v1/health"): SimServer._health,
    ("POST", "/v1/observe"): SimServer._observe,
    ("GET", "/v1/snapshot"): SimServer._snapshot,
    ("POST", "/v1/sizes"): SimServer._sizes,
    ("POST", "/v1/catch_up"): SimServer._catch_up,
    ("POST", "/v1/alter"): SimServer._alter,
    ("POST", "/v1/cancel"): SimServer._cancel,
    ("POST", "/v1/elect"): SimServer._elect,
    ("POST", "/v1/throttles/apply"): SimServer._apply,
    ("POST", "/v1/throttles/remove"): SimServer._remove,
    ("POST", "/v1/faults"): SimServer._fault,
    ("GET", "/v1/state"): SimServer._state,
    ("GET", "/v1/alters"): SimServer._alters,
    ("GET", "/v1/completions"): SimServer._completions,
    ("POST", "/v1/acls"): SimServer._acls,
    ("GET", "/v1/requests"): SimServer._requests,
}


class _Handler(BaseHTTPRequestHandler):
    sim: SimServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            if not isinstance(body, dict):
                raise wire.WireError("the body must be a JSON object")
            path, _, query = self.path.partition("?")
            body = {**dict(urllib.parse.parse_qsl(query)), **body}  # GET /v1/requests?reset=1
            status, answer = 200, self.sim.handle(method, path, body)
        except LookupError as e:
            status, answer = 404, {"error": str(e)}
        except (ValueError, KeyError) as e:  # WireError, bad JSON, bad fault
            status, answer = 400, {"error": str(e)}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # quiet: the engine polls often
        pass
