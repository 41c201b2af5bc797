"""Which brokers answer: a probe of every live broker, on a thread of its own, through a client of its own.

A broker that stops answering (SIGSTOP, a long pause, a hung disk) keeps its connections open, and
KRaft fences it only after ``broker.session.timeout.ms`` (9 s by default; on Kafka 4.0 leadership had
moved away within 20 s). Meanwhile every request sent to it waits for the client's request timeout
(30 s), and librdkafka keeps sending an admin client's requests to the broker it chose (its controller,
the broker it bootstrapped from) until then. On a real cluster that held kreassign's decider for 31 s
and then said "cannot observe the cluster: _TIMED_OUT" without naming the broker (issue 27).

``BrokerWatch`` sends each live broker a DescribeConfigs of its own BROKER resource (librdkafka sends
a BROKER resource to that very broker), one probe at a time per broker, every ``interval`` seconds. A
broker whose probe has waited ``deadline`` seconds is *unresponsive*, since the probe was sent, until
a probe of it is answered (any answer counts, a refusal too: the broker answered). ``on_change`` is
called with the set of unresponsive brokers whenever it changes; the log says when a broker stops and
starts answering again. ``unresponsive()`` is read by other threads (status, metrics, the adapter).

The probes go through a client of their own (``admin_factory``), so a probe never waits behind the
adapter's requests nor they behind it; ``rebuild(bootstrap)`` replaces it (the adapter does when a
broker stops answering: its clients may be the ones stuck on it).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Collection

log = logging.getLogger("kreassign.cluster.watch")

PROBE_TIMEOUT = 30.0
"""Seconds librdkafka keeps one probe before it gives up on it (a new one is sent then): a broker that
resumes within it answers that very probe."""


class BrokerWatch:
    def __init__(self, admin_factory: Callable[[str | None], Any], brokers: Callable[[], Collection[int]],
                 deadline: float, interval: float | None = None,
                 on_change: Callable[[frozenset], None] | None = None, clock: Callable[[], float] = time.monotonic):
        """``admin_factory(bootstrap)`` makes a confluent-kafka AdminClient (``None``: the configured
        bootstrap); ``brokers()`` the ids of the live brokers to probe; ``deadline`` the seconds a
        probe may wait before its broker is unresponsive; ``interval`` between rounds (default half the
        deadline)."""
        self.deadline = deadline
        self.interval = interval if interval is not None else deadline / 2
        self._factory = admin_factory
        self._brokers = brokers
        self._on_change = on_change
        self._clock = clock
        self._admin: Any = None
        self._retired: list = []  # clients replaced by ``rebuild``, kept until ``stop``
        self._bootstrap: str | None = None
        self._pending: dict[int, tuple[float, Any]] = {}  # broker -> (sent, future) of its probe in flight
        self._since: dict[int, float] = {}  # unresponsive broker -> when its oldest unanswered probe was sent
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what other threads read ------------------------------------------------------------------

    def unresponsive(self) -> dict[int, float]:
        """Broker -> seconds it has not answered a probe, for every unresponsive broker."""
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

    def rebuild(self, bootstrap: str | None) -> None:
        """Probe through a new client bootstrapped from ``bootstrap`` from the next round on. The old
        one is kept (destroying a librdkafka client waits for its requests, and its probes still count
        when answered); the brokers that answer are probed afresh through the new one."""
        with self._lock:
            self._bootstrap = bootstrap
            if self._admin is not None:
                self._retired.append(self._admin)
            self._admin = None
            for b in [b for b in self._pending if b not in self._since]:
                del self._pending[b]

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.probe_once()
            except Exception:  # noqa: BLE001 - the watch must outlive anything a client raises
                log.exception("the broker watch failed a round; it goes on")

    def probe_once(self) -> None:
        """One round: judge the probes in flight, then probe every live broker without one."""
        now = self._clock()
        live = set(self._brokers())
        changed = False
        for b, (sent, future) in list(self._pending.items()):
            if future.done():
                del self._pending[b]
                if _answered(future):
                    changed |= self._answered(b, now)
                continue
            if now - sent >= self.deadline and b not in self._since:
                with self._lock:
                    self._since[b] = sent
                changed = True
                log.warning("broker %d has not answered for %.1f s (a probe sent to it waits): it is named in "
                            "status; calls that need it wait, the others go on without it", b, now - sent)
        for b in list(self._since):
            if b not in live:  # fenced, or gone from the cluster: the observations say it is down
                with self._lock:
                    del self._since[b]
                self._pending.pop(b, None)
                changed = True
        admin = self._client()
        for b in sorted(live - set(self._pending)):
            try:
                from confluent_kafka.admin import ConfigResource, ResourceType

                futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(b))],
                                                 request_timeout=PROBE_TIMEOUT)
                self._pending[b] = (now, next(iter(futures.values())))
            except Exception as e:  # noqa: BLE001 - could not even be sent: tried again next round
                log.debug("cannot probe broker %d: %s", b, e)
        if changed and self._on_change is not None:
            self._on_change(frozenset(self._since))

    def _answered(self, b: int, now: float) -> bool:
        with self._lock:
            since = self._since.pop(b, None)
        if since is None:
            return False
        log.warning("broker %d answers again, after %.1f s", b, now - since)
        return True

    def _client(self) -> Any:
        with self._lock:
            if self._admin is None:
                self._admin = self._factory(self._bootstrap)
            return self._admin


def _answered(future: Any) -> bool:
    """Whether a finished probe got an answer from its broker: a result, or an error Kafka sent (a
    refusal is an answer); not a timeout or a transport failure of the client's own."""
    try:
        future.result(timeout=0)
        return True
    except Exception as e:  # noqa: BLE001 - KafkaException
        err = e.args[0] if getattr(e, "args", None) else None
        code = err.code() if hasattr(err, "code") else None
        return code is not None and code >= 0  # librdkafka's own (local) codes are negative
