"""Which brokers answer: a probe of every live broker, on threads of their own, over connections of their own.

A broker that stops answering (SIGSTOP, a long pause, a hung disk) keeps its connections open, and
KRaft fences it only after ``broker.session.timeout.ms`` (9 s by default; on Kafka 4.0 leadership had
moved away within 20 s). Meanwhile every request sent to it waits for the client's request timeout
(30 s), and librdkafka keeps sending an admin client's requests to the broker it chose (its controller,
the broker it bootstrapped from) until then. On a real cluster that held kreassign's decider for 31 s
and then said "cannot observe the cluster: _TIMED_OUT" without naming the broker (issue 27).

``BrokerWatch`` sends each live broker an ApiVersions request (the one request every Kafka listener
answers before authentication) over a connection of its own to the broker's address, every
``interval`` seconds, one probe at a time per broker; it depends on no client library's metadata, so a
hung broker a client bootstrapped from does not blind it. A broker none of whose probes since its last
answer has been answered for ``deadline`` seconds (a probe waiting, or probes that fail: a refused
connection) is *unresponsive*, since the first of them was sent, until a probe is answered.
How often it probes follows ``demand()`` (the engine's: what is in flight), so that an idle engine
sends nothing and a busy one little: ``"urgent"`` (a cluster call has been waiting: some broker may
hold it) probes every live broker every ``interval``; ``"busy"`` (steps in flight) each broker every
``busy_interval`` (a hung broker nothing waits on yet is named within ``busy_interval + deadline``);
``"idle"`` sends no probe at all (the probes already sent are still judged). Without ``demand``
every round is urgent.

``on_change`` is called with the set of unresponsive brokers whenever it changes; the log says when a
broker stops and starts answering again. ``unresponsive()`` is read by other threads (status, metrics,
the adapter). ``connect(address, timeout)`` opens a connection as the cluster's client settings say
(TLS where they ask for it: ``engine.cluster.kafka``).

A connection is kept for the next probe only with ``reuse`` (a PLAINTEXT or SSL listener). A SASL
listener answers one ApiVersions before authentication and closes the connection at the second (Kafka's
SaslServerAuthenticator: "Unexpected ApiVersions request received during SASL authentication state
HANDSHAKE_REQUEST"): reused, every other probe would fail and a healthy broker be named unresponsive. So
there each probe has a connection of its own, closed once it is answered.
"""

from __future__ import annotations

import io
import itertools
import logging
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

log = logging.getLogger("kreassign.cluster.watch")

PROBE_TIMEOUT = 30.0
"""Seconds one probe waits for its answer before its connection is dropped (a new probe reconnects): a
broker that resumes within it answers that very probe."""
PROBE_THREADS = 32
"""Probes in flight at once, at most (one per broker; a hung broker holds one thread)."""


class BrokerWatch:
    def __init__(self, addresses: Callable[[], Mapping[int, str]], deadline: float, interval: float | None = None,
                 on_change: Callable[[frozenset], None] | None = None,
                 connect: Callable[[str, float], socket.socket] | None = None,
                 clock: Callable[[], float] = time.monotonic, demand: Callable[[], str] | None = None,
                 busy_interval: float | None = None, reuse: bool = True,
                 counted: Callable[[int], None] | None = None):
        """``addresses()``: host:port of each live broker to probe; ``deadline``: the seconds a broker may
        leave its probes unanswered before it is unresponsive; ``interval`` between rounds (default half
        the deadline); ``reuse``: keep a probe's connection for the next one (not on a SASL listener);
        ``counted(broker)``: called for every probe sent (the request budget counts them)."""
        self.deadline = deadline
        self.interval = interval if interval is not None else deadline / 2
        self.busy_interval = busy_interval if busy_interval is not None else 2 * deadline
        self._demand = demand
        self._counted = counted
        self._sent: dict[int, float] = {}  # broker -> when its last probe was sent
        self.probes = 0  # probes sent since the start (benchmarks, tests)
        self._addresses = addresses
        self._on_change = on_change
        self._connect = connect or _plain
        self._reuse = reuse
        self._clock = clock
        self._pending: dict[int, Any] = {}  # broker -> its probe in flight (a future)
        self._unanswered: dict[int, float] = {}  # broker -> when the first probe since its last answer was sent
        self._since: dict[int, float] = {}  # unresponsive broker -> since
        self._sockets: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=PROBE_THREADS, thread_name_prefix="kreassign-probe")
        self._ids = itertools.count(1)

    # -- what other threads read ------------------------------------------------------------------

    def unresponsive(self) -> dict[int, float]:
        """Broker -> seconds it has not answered, for every unresponsive broker."""
        now = self._clock()
        with self._lock:
            return {b: now - since for b, since in self._since.items()}

    # -- running ----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kreassign-broker-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for s in list(self._sockets.values()):
            _close(s)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.probe_once()
            except Exception:  # noqa: BLE001 - the watch must outlive anything a probe raises
                log.exception("the broker watch failed a round; it goes on")

    def probe_once(self) -> None:
        """One round: judge the probes in flight, then probe every live broker without one."""
        now = self._clock()
        addresses = dict(self._addresses())
        changed = False
        for b, future in list(self._pending.items()):
            if not future.done():
                continue
            del self._pending[b]
            if future.exception() is None:
                self._unanswered.pop(b, None)
                changed |= self._answered(b, now)
        for b, sent in list(self._unanswered.items()):
            if b not in addresses:  # fenced, or gone from the cluster: the observations say it is down
                self._unanswered.pop(b, None)
                self._pending.pop(b, None)
                with self._lock:
                    changed |= self._since.pop(b, None) is not None
            elif now - sent >= self.deadline and b not in self._since:
                with self._lock:
                    self._since[b] = sent
                changed = True
                log.warning("broker %d has not answered for %.1f s (the engine's probe): it is named in status; "
                            "calls that need it wait, the others go on without it", b, now - sent)
        demand = "urgent" if self._demand is None else self._demand()
        for b, address in sorted(addresses.items()):
            if b in self._pending or demand == "idle":
                continue
            if demand != "urgent" and now - self._sent.get(b, float("-inf")) < self.busy_interval:
                continue
            self._unanswered.setdefault(b, now)
            self._sent[b] = now
            self.probes += 1
            if self._counted is not None:
                self._counted(b)
            self._pending[b] = self._pool.submit(self._probe, b, address)
        if changed and self._on_change is not None:
            self._on_change(frozenset(self._since))

    def _answered(self, b: int, now: float) -> bool:
        with self._lock:
            since = self._since.pop(b, None)
        if since is None:
            return False
        log.warning("broker %d answers again, after %.1f s", b, now - since)
        return True

    def _probe(self, b: int, address: str) -> None:
        """ApiVersions v0 to ``b`` over its own connection (opened if needed, closed after it without
        ``reuse``), until its answer comes."""
        from kafka.protocol.metadata import ApiVersionsRequest

        sock = self._sockets.get(b)
        try:
            if sock is None:
                sock = self._sockets[b] = self._connect(address, PROBE_TIMEOUT)
            sock.settimeout(PROBE_TIMEOUT)
            correlation = next(self._ids) & 0x7FFFFFFF
            request = ApiVersionsRequest(version=0)
            request.with_header(correlation_id=correlation, client_id="kreassign-broker-watch")
            sock.sendall(request.encode(header=True, framed=True))
            (size,) = struct.unpack(">i", _read(sock, 4))
            answer = _read(sock, size)
            (got,) = struct.unpack(">i", answer[:4])
            if got != correlation:
                raise ConnectionError(f"broker {b} answered correlation id {got}, not {correlation}")
        except BaseException:
            self._sockets.pop(b, None)
            if sock is not None:
                _close(sock)
            raise
        if not self._reuse:  # a SASL listener: one ApiVersions per unauthenticated connection
            self._sockets.pop(b, None)
            _close(sock)


def _read(sock: socket.socket, n: int) -> bytes:
    buf = io.BytesIO()
    while buf.tell() < n:
        chunk = sock.recv(n - buf.tell())
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf.write(chunk)
    return buf.getvalue()


def _plain(address: str, timeout: float) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
