"""Processes for the engine's fault-injection suite: a sim-cluster (HTTP for faults and checks, the
Kafka protocol for the engine, whose real Kafka adapter talks to it) and engine workers, each its
own process (session of its own, so a SIGKILL takes the whole process group), and a tail of the
events topic. Every wait is for a condition, with a deadline."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KTP

from engine.log.codec import codec_for
from engine.log.dead_letter import DeadLetter
from engine.kafka.embedded import EMBEDDED, free_port
from engine.log.envelope import EventEnvelope

KREASSIGN = [sys.executable, "-m", "engine.cli"]


def wait_for(condition, timeout: float, what: str, interval: float = 0.05):
    """The condition's first truthy value, or AssertionError naming what did not happen."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class Process:
    def __init__(self, args: list[str], name: str):
        fd, self.log_path = tempfile.mkstemp(prefix=f"kreassign-{name}-", suffix=".log")
        self.tmp = tempfile.mkdtemp(prefix=f"kreassign-{name}-")  # its TMPDIR: what a SIGKILL leaves is removed
        self.name = name
        self.p = subprocess.Popen(args, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True, cwd=Path(__file__).resolve().parent.parent,
                                  env={**os.environ, "TMPDIR": self.tmp})
        os.close(fd)

    def output(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    def alive(self) -> bool:
        return self.p.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()

    def stop(self, timeout: float = 15.0) -> int:
        if self.alive():
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.p.returncode

    def cleanup(self) -> None:
        self.kill()
        Path(self.log_path).unlink(missing_ok=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def get_json(url: str, timeout: float = 5.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


class SimCluster(Process):
    def __init__(self, scenario: dict, speed: float, tmp_path: Path, start_timeout: float = 20):
        path = tmp_path / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        self.scenario_path = path
        super().__init__(KREASSIGN + ["sim-cluster", "--scenario", str(path), "--speed", str(speed),
                                      "--kafka-port", "0"], "sim")
        self.url, bootstrap = wait_for(self._addresses, start_timeout, "the sim-cluster's URL and Kafka bootstrap")
        self.kafka = f"kafka://{bootstrap}"  # what the engine's --cluster names: its real Kafka adapter

    def _addresses(self):
        first = self.output().split("\n", 1)[0]
        if " at http://" in first and "Kafka bootstrap " in first:
            return first.split(" at ", 1)[1].split(" ", 1)[0], first.split("Kafka bootstrap ", 1)[1].split()[0]
        assert self.alive(), self.output()
        return None

    def state(self) -> dict:
        return get_json(self.url + "/v1/state")

    def alters(self) -> list[dict]:
        return get_json(self.url + "/v1/alters")["alters"]

    def completions(self) -> list[dict]:
        return get_json(self.url + "/v1/completions")["completions"]


class Worker(Process):
    def __init__(self, broker, prefix: str, cluster: str, poll: float = 0.2, extra: tuple = (),
                 broker_profile: str = "embedded"):
        self.port = free_port()
        self.web = f"http://127.0.0.1:{self.port}"
        super().__init__(KREASSIGN + [
            "engine", "--bootstrap-server", broker.bootstrap, "--broker-profile", broker_profile, "--prefix", prefix,
            "--cluster", cluster, "--web-port", str(self.port), "--poll-interval", str(poll), *extra,
        ], "engine")

    def status(self) -> dict | None:
        return get_json(self.web + "/status")

    def active(self) -> dict | None:
        s = self.status()
        return s if s and s.get("active") and not s.get("recovering") else None

    def wait_active(self, timeout: float = 60) -> dict:
        return wait_for(lambda: self._check() or self.active(), timeout, f"worker {self.port} to become the decider")

    def _check(self):
        assert self.alive(), self.output()[-3000:]
        return None


class EventTail:
    """Reads the events topic (one partition) as it grows; decoded envelopes in order."""

    def __init__(self, broker, topic: str):
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tail",
                                  "enable.auto.commit": False, **EMBEDDED.consumer})
        self.consumer.assign([KTP(topic, 0, 0)])
        self.events: list[EventEnvelope] = []
        self.codec = codec_for(EventEnvelope)

    def poll(self) -> list[EventEnvelope]:
        while True:
            messages = self.consumer.consume(1000, 0.05)
            if not messages:
                return self.events
            for m in messages:
                if m.error() is None:
                    self.events.append(self.codec.decode(m.value()))
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(m.error().str())

    def payloads(self, kind=None) -> list:
        self.poll()
        return [e.payload for e in self.events if kind is None or isinstance(e.payload, kind)]

    def close(self) -> None:
        self.consumer.close()


def read_dead_letters(broker, topic: str) -> list[DeadLetter]:
    tail = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dl", "enable.auto.commit": False,
                     **EMBEDDED.consumer})
    tail.assign([KTP(topic, 0, 0)])
    out = []
    try:
        while True:
            messages = tail.consume(1000, 0.2)
            if not messages:
                return out
            out.extend(codec_for(DeadLetter).decode(m.value()) for m in messages if m.error() is None)
    finally:
        tail.close()
