"""Cluster calls under a deadline: no call holds the decider's loop longer than ``call_deadline``.

The decider's loop is one thread (``engine.runtime.decider``); a call into a client library blocks it
until the library answers, and a broker that stops answering makes the libraries wait for their request
timeout (30 s; issue 27: no event for 62.5 s while one broker was SIGSTOPped). ``Bounded`` runs every
call of the ``engine.cluster`` interface in a thread of its own and waits at most ``deadline`` seconds
for it. A call still unanswered then is left to finish in the background (its client's own timeout
ends it), and the decider goes on with ``Unavailable`` saying so, which the core already reads as "the
outcome is unknown" (``engine.core.decide``): an alter is retried after its backoff unless a look shows
it started, a throttle change is not in force (and the steps that need it wait), a look is an
``ObservationFailed``. At most ``limit`` calls may be left waiting at once; past it a call fails at once,
naming the oldest one, so a broker that never answers costs threads no more than that.

Partition sizes (``sizes``, ``snapshot``: DescribeLogDirs of every broker, seconds for 100,000
partitions) are waited for longer, as long as no broker is named as not answering (``unresponsive``,
checked every ``deadline``), up to ``patience`` seconds: a slow answer is no hung broker, and a size
unknown counts a copy as a whole move against the caps.

``waiting()`` (status, metrics) lists the calls left waiting, with their age; ``unresponsive()`` is the
adapter's (``engine.cluster.kafka``): the brokers that do not answer and what waits on each.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable, Collection, Mapping

from engine.core.outcomes import Unavailable
from engine.core.partition import TopicPartition

log = logging.getLogger("kreassign.calls")


class Bounded:
    def __init__(self, cluster: Any, deadline: float, limit: int = 16, clock: Callable[[], float] = time.monotonic,
                 patience: float = 30.0):
        self.cluster = cluster
        self.deadline = deadline
        self.limit = limit
        self.patience = patience
        self._clock = clock
        self._waiting: dict[int, tuple[str, float]] = {}  # call -> (what, when it was made), while it runs
        self._late: set[int] = set()  # calls given up on: left to finish in the background
        self._ids = itertools.count()
        self._lock = threading.Lock()

    # -- what an operator sees ---------------------------------------------------------------------

    def waiting(self) -> list[dict]:
        """The calls the decider gave up waiting for that have not returned yet, oldest first."""
        now = self._clock()
        with self._lock:
            late = [(since, what) for call, (what, since) in self._waiting.items() if call in self._late]
        return [{"call": what, "seconds": round(now - since, 1)} for since, what in sorted(late)]

    def running_for(self) -> float:
        """Seconds the oldest call still running has run (0 when none runs): the broker watch probes
        every broker while a call waits (``engine.cluster.watch``, ``demand``)."""
        now = self._clock()
        with self._lock:
            return max((now - since for _what, since in self._waiting.values()), default=0.0)

    def unresponsive(self) -> dict[int, dict]:
        found = getattr(self.cluster, "unresponsive", None)
        return found() if found is not None else {}

    def _why(self) -> str:
        """The brokers that do not answer, without their ages: a reason that stays the same while the
        cause does (the core records a new ``ClusterUnreachable`` only when the reason changes)."""
        silent = self.unresponsive()
        if not silent:
            return ""
        return "; brokers not answering: " + ", ".join(str(b) for b in sorted(silent))

    # -- one call ------------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], Any], failed: Callable[[Unavailable], Any],
              patient: bool = False) -> Any:
        with self._lock:
            late = [(since, w) for call, (w, since) in self._waiting.items() if call in self._late]
            if len(late) >= self.limit:
                since, oldest = min(late)
                return failed(Unavailable(
                    f"{what} not sent: {len(late)} cluster calls are still unanswered (the oldest: {oldest})"
                    f"{self._why()}"))
            call = next(self._ids)
            self._waiting[call] = (what, self._clock())
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["result"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the caller, who decides
                box["error"] = e
            finally:
                with self._lock:
                    self._waiting.pop(call, None)
                    late = call in self._late
                    self._late.discard(call)
                done.set()
                if late:
                    log.info("%s returned %.1f s after the decider stopped waiting for it", what,
                             self._clock() - started)

        started = self._clock()
        threading.Thread(target=run, name=f"kreassign-call-{what}", daemon=True).start()
        answered = done.wait(self.deadline)
        while not answered and patient and not self.unresponsive() and self._clock() - started < self.patience:
            answered = done.wait(self.deadline)  # slow, and every broker answers the watch: wait on
        if not answered:
            with self._lock:
                if call in self._waiting:  # still running: given up on
                    self._late.add(call)
                    waited = f"{self.deadline:g} s" if not patient else "the time every broker answered"
                    return failed(Unavailable(f"{what}: no answer within {waited} (left to finish in the "
                                              f"background){self._why()}"))
            done.wait()  # it finished just now
        if "error" in box:
            raise box["error"]
        return box["result"]

    # -- the engine.cluster interface -------------------------------------------------------------------

    def observe(self, partitions: Collection[TopicPartition] | None = None):
        return self._call("observe", lambda: self.cluster.observe(partitions), lambda u: u)

    def snapshot(self):
        return self._call("snapshot", self.cluster.snapshot, lambda u: u, patient=True)

    def sizes(self, partitions: Collection[TopicPartition]):
        return self._call("sizes", lambda: self.cluster.sizes(partitions), lambda u: u, patient=True)

    def catch_up(self, steps: Mapping):
        return self._call("catch_up", lambda: self.cluster.catch_up(steps), lambda u: u)

    def throttles(self, topics: Collection[str], brokers: Collection[int]):
        return self._call("throttles (read back)", lambda: self.cluster.throttles(topics, brokers), lambda u: u)

    def alter_reassignments(self, targets: Mapping):
        targets = dict(targets)
        return self._call("alter_reassignments", lambda: self.cluster.alter_reassignments(targets),
                          lambda u: {tp: u for tp in targets})

    def cancel_reassignments(self, partitions: Collection[TopicPartition]):
        partitions = list(partitions)
        return self._call("cancel_reassignments", lambda: self.cluster.cancel_reassignments(partitions),
                          lambda u: {tp: u for tp in partitions})

    def elect_preferred_leaders(self, partitions: Collection[TopicPartition]):
        partitions = list(partitions)
        return self._call("elect_preferred_leaders", lambda: self.cluster.elect_preferred_leaders(partitions),
                          lambda u: {tp: u for tp in partitions})

    def apply_throttles(self, throttles):
        return self._call("apply_throttles", lambda: self.cluster.apply_throttles(throttles), lambda u: u)

    def remove_throttles(self, throttles):
        return self._call("remove_throttles", lambda: self.cluster.remove_throttles(throttles), lambda u: u)

    def close(self) -> None:
        self.cluster.close()

    def __getattr__(self, name: str) -> Any:  # anything else of the adapter (health, watch_brokers ...)
        return getattr(self.cluster, name)
