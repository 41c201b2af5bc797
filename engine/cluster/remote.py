"""``RemoteCluster``: the ``engine.cluster`` interface over a ``kreassign sim-cluster`` process.

The engine cannot tell it from the in-process simulated cluster or from
Kafka: the same calls, the same results. A connection refused, a timeout or
an error answer becomes ``Unavailable`` (the simulated cluster may be
restarting, exactly like a broker). ``inject`` drives the simulated cluster's
faults (tests, the demo).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Collection, Mapping

from engine.sim import wire
from engine.core.outcomes import Result, Unavailable
from engine.core.cluster_snapshot import ClusterSnapshot
from engine.core.commands import Observation
from engine.core.partition import Replicas, TopicPartition
from engine.core.throttles import RateRead, ThrottleConfigs, ThrottleSet, parse_config_entries, read_back


class RemoteCluster:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None) -> dict | Unavailable:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:200]
            return Unavailable(f"sim-cluster answered {e.code} to {method} {path}: {detail}")
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            return Unavailable(f"sim-cluster at {self.url} not reachable: {reason}")

    def _each(self, path: str, body: dict, tps: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        answer = self._call("POST", path, body)
        if isinstance(answer, Unavailable):
            return {tp: answer for tp in tps}
        return wire.results_from(answer["results"])

    def health(self) -> dict | Unavailable:
        return self._call("GET", "/v1/health")

    def state(self) -> dict | Unavailable:
        return self._call("GET", "/v1/state")

    def alters(self) -> dict | Unavailable:
        return self._call("GET", "/v1/alters")

    def inject(self, broker: int, action: str, factor: float = 1.0, seconds: float = 0.0) -> dict | Unavailable:
        return self._call("POST", "/v1/faults", {"broker": broker, "action": action, "factor": factor,
                                                 "seconds": seconds})

    def observe(self, partitions: Collection[TopicPartition] | None = None) -> Observation | Unavailable:
        body = {"partitions": None if partitions is None else wire.tps_document(partitions)}
        answer = self._call("POST", "/v1/observe", body)
        return answer if isinstance(answer, Unavailable) else wire.observation_from(answer)

    def sizes(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int] | Unavailable:
        answer = self._call("POST", "/v1/sizes", {"partitions": wire.tps_document(partitions)})
        if isinstance(answer, Unavailable):
            return answer
        return {TopicPartition(d["topic"], d["partition"]): int(d["size"]) for d in answer["sizes"]}

    def catch_up(self, steps) -> dict[TopicPartition, int] | Unavailable:
        body = {"steps": [{"topic": tp.topic, "partition": tp.partition, "leader": leader, "adding": list(nr)}
                          for tp, (leader, nr) in steps.items()]}
        answer = self._call("POST", "/v1/catch_up", body)
        if isinstance(answer, Unavailable):
            return answer
        return {TopicPartition(d["topic"], d["partition"]): int(d["remaining"]) for d in answer["remaining"]}

    def snapshot(self) -> ClusterSnapshot | Unavailable:
        answer = self._call("GET", "/v1/snapshot")
        return answer if isinstance(answer, Unavailable) else ClusterSnapshot.from_document(answer)

    def alter_reassignments(self, targets: Mapping[TopicPartition, Replicas]) -> dict[TopicPartition, Result]:
        body = {"targets": [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                            for tp, r in targets.items()]}
        return self._each("/v1/alter", body, list(targets))

    def cancel_reassignments(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._each("/v1/cancel", {"partitions": wire.tps_document(partitions)}, partitions)

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, Result]:
        return self._each("/v1/elect", {"partitions": wire.tps_document(partitions)}, partitions)

    def apply_throttles(self, throttles: ThrottleSet) -> Result:
        answer = self._call("POST", "/v1/throttles/apply", wire.throttles_document(throttles))
        return answer if isinstance(answer, Unavailable) else wire.result_from(answer["result"])

    def remove_throttles(self, throttles: ThrottleSet) -> Result:
        answer = self._call("POST", "/v1/throttles/remove", wire.throttles_document(throttles))
        return answer if isinstance(answer, Unavailable) else wire.result_from(answer["result"])

    def throttles(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleSet | Unavailable:
        read = self.throttle_configs(topics, brokers)
        return read if isinstance(read, Unavailable) else read.throttles

    def throttle_configs(self, topics: Collection[str], brokers: Collection[int]) -> ThrottleConfigs | Unavailable:
        """``throttles`` and ``wildcard_throttles`` from one /v1/state (a topic's list ["*"] where it is the
        wildcard: left out of the entries), and the ``LOG_DIRS_RATE`` set through the sim-cluster's Kafka front."""
        answer = self.state()
        if isinstance(answer, Unavailable):
            return answer
        t = answer["throttles"]
        wanted_topics, wanted_brokers = set(topics), set(brokers)

        def entries(lists):
            return frozenset(e for topic, values in lists.items() if topic in wanted_topics
                             for e in parse_config_entries(topic, ",".join(values)))

        def rate(side, b):
            value = t[side].get(str(b))
            return None if value is None else int(value)

        wild = {topic: frozenset(side for side in ("leader", "follower") if "*" in t[side].get(topic, ()))
                for topic in wanted_topics}
        log_dirs = {int(b): int(r) for b, r in t.get("log_dirs_rate", {}).items() if int(b) in wanted_brokers}
        return ThrottleConfigs(
            read_back(entries(t["leader"]), entries(t["follower"]),
                      [RateRead(b, rate("leader_rate", b), rate("follower_rate", b)) for b in sorted(wanted_brokers)]),
            {topic: sides for topic, sides in wild.items() if sides}, log_dirs)

    def requests_sent(self) -> None:
        """None: counted nothing. Its calls are HTTP to the sim-cluster, not Kafka requests (the
        sim-cluster's Kafka front, ``--kafka-port``, counts the requests that arrive there), so the decider
        holds no request budget on it."""
        return None

    def close(self) -> None:
        pass

    def wildcard_throttles(self, topics: Collection[str]) -> dict[str, frozenset[str]] | Unavailable:
        """Topic -> its sides ("leader", "follower") whose throttled-replicas list is the wildcard ``*`` (/v1/state
        gives it as ["*"]; ``throttles`` leaves it out)."""
        read = self.throttle_configs(topics, ())
        return read if isinstance(read, Unavailable) else dict(read.wildcards)
