"""The engine's log: a line that repeats is said once per interval with its count, and an expected
warning of the Kafka client is INFO.

An engine whose cluster cannot be reached tries again at every tick (ten times a
second by default) and would say so every time: hundreds of identical WARNING
lines a minute that bury everything else. ``Repeats`` (a filter on the log's
handlers) lets the first line of a kind through, holds back the same line for
``REPEAT_INTERVAL`` seconds, and lets the next one through with how many were
held back (warnings and errors only: an INFO line such as "owns the decisions
partition" says a fact each time, however soon it comes again) ("[98 more like this in the last 10 s]"). Lines are alike when they
differ only in their numbers (a retry count, "after 3ms"). Nothing is lost that
matters: every failure is also an event on the log (``ActionFailed``,
``ClusterUnreachable``), in ``status``, on the status page and in ``/metrics``.
When a flood stops, what was held back since its last line is said once the
interval has passed (``flush``, every second from a thread of ``quiet``'s):
"[12 more like this in the last 10 s, the last 7 s ago; none since]", so the log never reads as
if a failure happened once when it went on for seconds; that line is stamped with the time it is said (a
log read in order stays in order).

``EXPECTED`` lists the client library's warnings that are part of normal
operation: aiokafka's "Heartbeat failed for group ... because it is
rebalancing" comes with every failover and every worker that joins (the group
coordinator answers REBALANCE_IN_PROGRESS to heartbeats until the members have
joined again). ``Demote`` (a filter on that logger) makes it INFO.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Callable

REPEAT_INTERVAL = 10.0
"""Seconds during which a line like one just said is counted instead of said again."""

EXPECTED = {
    "aiokafka.consumer.group_coordinator": ("Heartbeat failed for group %s because it is rebalancing",),
}
"""Logger -> message templates logged at WARNING that say something expected: INFO instead."""

_NUMBER = re.compile(r"\d+")
_KEPT = 1000  # kinds of lines remembered at most (the oldest are forgotten first)


class Repeats(logging.Filter):
    """Lets a line through once per ``interval`` (see the module doc). ``clock``: seconds, monotonic."""

    def __init__(self, interval: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.said: dict[tuple, list] = {}  # kind of line -> [when last said, how many held back since, the last
        # held, when it came]
        self.lock = threading.Lock()  # the decider logs from its thread, Faust from the event loop
        self.handlers: list[logging.Handler] = []  # where ``flush`` says what a stopped flood held back

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "kreassign_said", None)
        if decided is not None:  # another handler of the same record asked already
            return decided
        record.kreassign_said = said = self._say(record)
        return said

    def _say(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True  # the flood is of warnings; an INFO line (a role taken, a claim) is a fact to keep
        text = record.getMessage()
        kind = (record.name, record.levelno, _NUMBER.sub("N", text))
        now = self.clock()
        with self.lock:
            entry = self.said.get(kind)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                entry[2] = record
                entry[3] = now
                return False
            held, since = (entry[1], entry[0]) if entry is not None else (0, now)
            self.said.pop(kind, None)
            self.said[kind] = [now, 0, None, now]
            if len(self.said) > _KEPT:
                del self.said[next(iter(self.said))]
        if held:
            record.msg = f"{text} [{held} more like this in the last {now - since:.0f} s]"
            record.args = ()
        return True

    def flush(self) -> int:
        """Say, for every kind of line whose interval has passed with lines held back and none said,
        the last of them with the count ("; none since"): through ``handlers``. Returns how many
        such lines were said."""
        now = self.clock()
        out = []
        with self.lock:
            for entry in self.said.values():
                if entry[1] and now - entry[0] >= self.interval:
                    # a new record stamped now, when it is said (with the held line's own time it came
                    # after later lines with an earlier time, and the log read out of order)
                    held = {k: v for k, v in entry[2].__dict__.items()
                            if k not in ("created", "msecs", "relativeCreated")}
                    last = logging.makeLogRecord(held)
                    last.msg = f"{entry[2].getMessage()} [{entry[1]} more like this in the last " \
                               f"{now - entry[0]:.0f} s, the last {now - entry[3]:.0f} s ago; none since]"
                    last.args = ()
                    last.kreassign_said = True  # said: no handler's filter holds it back
                    out.append(last)
                    entry[0], entry[1], entry[2] = now, 0, None
        for record in out:
            for handler in self.handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)
        return len(out)


class Demote(logging.Filter):
    """On a logger: its records with one of ``templates`` as message go out at INFO, not WARNING."""

    def __init__(self, templates: tuple[str, ...]):
        super().__init__()
        self.templates = frozenset(templates)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and record.msg in self.templates:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def demote_expected() -> None:
    """``EXPECTED``'s warnings become INFO (logger filters: they apply before any handler's level)."""
    for name, templates in EXPECTED.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, Demote) for f in logger.filters):
            logger.addFilter(Demote(templates))


def quiet(handlers, interval: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic,
          flush_every: float | None = 1.0) -> Repeats:
    """Each of ``handlers`` (the root logger's, once Faust has set them up) says repeated lines once
    per ``interval`` (``Repeats``: one for all, so each record gets one answer); a thread says what a
    stopped flood held back (``Repeats.flush``) every ``flush_every`` seconds (None: never, the caller
    flushes)."""
    repeats = Repeats(interval, clock)
    for handler in handlers:
        if not any(isinstance(f, Repeats) for f in handler.filters):
            handler.addFilter(repeats)
            repeats.handlers.append(handler)
    if repeats.handlers and flush_every:
        def flushing() -> None:
            while True:
                time.sleep(flush_every)
                try:
                    repeats.flush()
                except Exception:  # noqa: BLE001 - a handler that fails must not end the flushing
                    pass

        threading.Thread(target=flushing, name="kreassign-log-repeats", daemon=True).start()
    return repeats
