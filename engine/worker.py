"""The running engine: one Faust (faust-streaming) worker. docs/engine.md has the design.

Agents are short loops; everything they decide is the core's:

* ``router`` (commands topic, 6 partitions, spread over every worker): decode
  each command envelope (bad bytes -> the dead-letter topic with the reason),
  check its signature when ``--signing-keys`` is set, and forward the bytes
  unchanged to the decisions topic, marked ``command`` or ``unverified`` (with
  the reason) in the message headers.
* ``decider`` (decisions topic, 1 partition: exactly one worker at a time):
  hands every input to ``engine.decider.Decider`` in a thread (its calls block;
  Faust's heartbeats go on), then writes the rows the new events changed into
  the Faust tables (``engine.views``) and the executor's progress into the
  ``executor`` table. When it gets the partition (first start, restart,
  failover) it recovers from the events topic first.
* a timer on the worker that owns the decisions partition sends a tick into it
  every ``--fast-interval`` (the decider observes everything it watches every
  ``--poll-interval``, and the steps close to done in between): ticks and
  commands are decided in one sequence.
* web (Faust's server): ``/status`` (JSON), ``/metrics`` (Prometheus),
  ``/tables`` (the tables' rows, to compare with a replay of the log).

Broker quirks come only from the broker profile (``engine.broker_profile``):
its ``faust`` settings go to ``faust.App`` and ``faust_consumer`` to
aiokafka's consumer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from engine.adaptive import AdaptiveThrottle
from engine.broker_profile import BrokerProfile
from engine.client_config import ClientConfig
from engine.cluster import Cluster
from engine.codec import DecodeError, codec_for
from engine.commands import Unverified
from engine.dead_letter import DeadLetter, decode_or_set_aside
from engine.decider import Decider, Retry
from engine.envelope import CommandEnvelope, EventEnvelope, now
from engine.eventlog import EventWriter, decoder_for, read_topic
from engine.signing import verify
from engine.topics import COMMANDS, EVENTS, Topics
from engine import views

log = logging.getLogger("kreassign.engine")

KIND = "kind"  # message header on the decisions topic: command | unverified | tick
REASON = "reason"
TICK_KEY = b"tick"
EXECUTED = "executed"  # key of the executor table: the last event whose actions were carried out


@dataclass
class Settings:
    config: ClientConfig
    cluster: Cluster
    prefix: str
    profile: BrokerProfile
    registry: Any = None
    web_port: int = 6066
    web_bind: str = "127.0.0.1"
    poll_interval: float = 1.0  # seconds between full observations of what the core watches
    fast_interval: float = 0.1  # seconds between looks at the steps close to done

    @property
    def tick_interval(self) -> float:
        return min(self.poll_interval, self.fast_interval)
    signing_keys: Mapping[str, bytes] | None = None
    adaptive: AdaptiveThrottle | None = None
    timeout: float = 30.0
    time_scale: float = 1.0  # the cluster's clock against the wall clock (a simulated cluster): a label for /status
    verify_interval: float = 10.0  # seconds between read-backs of the throttle configuration
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


class KafkaEventLog:
    """The events topic as the decider's ``EventLog``: append (waiting for delivery), read to its end."""

    def __init__(self, s: Settings):
        self.s = s
        self.topic = Topics.named(s.prefix).events
        self.writer = EventWriter(config=s.config, prefix=s.prefix, profile=s.profile, registry=s.registry,
                                  timeout=s.timeout)
        self.unreadable: list[DeadLetter] = []

    def append(self, events) -> list[EventEnvelope]:
        return self.writer.append(events)

    def read(self) -> Iterator[tuple[int, EventEnvelope]]:
        self.unreadable = []
        for m in read_topic(self.s.config, self.topic, decoder_for(EventEnvelope, self.s.registry, self.topic),
                            self.unreadable.append, profile=self.s.profile, idle_timeout=self.s.timeout,
                            expect_partitions=EVENTS.partitions):
            yield m.offset, m.value

    def close(self) -> None:
        self.writer.close()


def faust_credentials(config: ClientConfig):
    """``broker_credentials`` for Faust from the ``--command-config`` properties (SASL PLAIN/SCRAM, SSL)."""
    kp = config.kafka_python()
    protocol = str(kp.get("security_protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=kp.get("ssl_cafile"), certfile=kp.get("ssl_certfile"),
                                     keyfile=kp.get("ssl_keyfile"), password=kp.get("ssl_password"))
        if kp.get("ssl_check_hostname") is False:
            context.check_hostname = False
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    return faust.SASLCredentials(username=kp.get("sasl_plain_username"), password=kp.get("sasl_plain_password"),
                                 mechanism=kp.get("sasl_mechanism", "PLAIN"), ssl_context=context)


def _transport(consumer_overrides: Mapping[str, object]):
    """Faust's aiokafka transport, with aiokafka consumer attributes set from the broker profile."""

    class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport):
            consumer = super()._create_worker_consumer(transport)
            for name, value in consumer_overrides.items():
                setattr(consumer, f"_{name}", value)
            return consumer

    class Consumer(faust_aiokafka.Consumer):
        def _new_consumer_thread(self):
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_aiokafka.Transport):
        pass

    Transport.Consumer = Consumer
    return Transport


class EngineApp(faust.App):
    transport_class: Any = None

    def _new_transport(self):
        if self.transport_class is None:
            return super()._new_transport()
        return self.transport_class(self.conf.broker_consumer, self)


class Engine:
    """One worker: the Faust app, its agents, the decider when this worker owns it."""

    def __init__(self, s: Settings):
        self.s = s
        self.topics = Topics.named(s.prefix)
        self.datadir = tempfile.mkdtemp(prefix="kreassign-engine-")
        self.app = self._app()
        self.commands = self.app.topic(self.topics.commands, key_serializer="raw", value_serializer="raw",
                                       partitions=COMMANDS.partitions)
        self.decisions = self.app.topic(self.topics.decisions, key_serializer="raw", value_serializer="raw",
                                        partitions=1)
        self.dead_letters = self.app.topic(self.topics.dead_letters, key_serializer="raw", value_serializer="raw",
                                           partitions=1)
        self.tables = {name: self.app.Table(name, partitions=1, key_type=str) for name in views.TABLES}
        self.executor_table = self.app.Table("executor", partitions=1, key_type=str)
        self.event_log: KafkaEventLog | None = None
        self.decider: Decider | None = None
        self.active = False  # this worker owns the decisions partition
        self.needs_recovery = True
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decider")
        self.last_tick = 0.0
        self.counters: dict[str, int] = {"events": 0, "dead_letters": 0, "rejected_unverified": 0,
                                         "StepStarted": 0, "StepCompleted": 0, "recoveries": 0}
        self.last_recovery: dict | None = None
        self._decode = decoder_for(CommandEnvelope, s.registry, self.topics.commands)
        self.cached_status: dict | None = None
        self._wire()

    # --- the app ----------------------------------------------------------------------------

    def _app(self) -> faust.App:
        s = self.s
        settings: dict[str, Any] = dict(
            broker=[f"kafka://{b.strip()}" for b in (s.config.bootstrap or "").split(",") if b.strip()],
            store="memory://",
            datadir=self.datadir,
            processing_guarantee="at_least_once",
            topic_partitions=1,
            consumer_auto_offset_reset="earliest",
            web_port=s.web_port,
            web_bind=s.web_bind,
            web_host=s.web_bind,
            web_in_thread=False,
        )
        credentials = faust_credentials(s.config)
        if credentials is not None:
            settings["broker_credentials"] = credentials
        settings.update(s.profile.faust)
        app = EngineApp(f"{s.prefix}engine", **settings)
        if s.profile.faust_consumer:
            app.transport_class = _transport(s.profile.faust_consumer)
        return app

    def _wire(self) -> None:
        app = self.app

        @app.agent(self.commands, name="router")
        async def router(stream):
            async for event in stream.events():
                await self.route(event.message)

        @app.agent(self.decisions, name="decider")
        async def decider(stream):
            async for event in stream.events():
                await self.decide(event.message)

        @app.timer(self.s.tick_interval)
        async def tick():
            if self.active:
                await self.decisions.send(key=TICK_KEY, value=b"", headers={KIND: b"tick"})

        @app.on_partitions_assigned.connect
        async def assigned(sender, assigned, **kwargs):
            owns = any(tp.topic == self.topics.decisions for tp in assigned)
            if owns:
                log.info("worker %s owns the decisions partition: it decides", self.s.worker_id)
            self.active = owns
            self.needs_recovery = True

        @app.on_partitions_revoked.connect
        async def revoked(sender, revoked, **kwargs):
            if any(tp.topic == self.topics.decisions for tp in revoked):
                self.active = False
                self.needs_recovery = True

        @app.page("/")
        async def page(web, request):
            return web.html(STATUS_PAGE)

        @app.page("/status")
        async def status(web, request):
            return web.json(await self.status())

        @app.page("/tables")
        async def tables(web, request):
            return web.json({name: dict(t.items()) for name, t in {**self.tables, "executor": self.executor_table}.items()}
                            if self.active else {})

        @app.page("/metrics")
        async def metrics(web, request):
            from engine.metrics import exposition

            body, content_type = exposition(self)
            return web.text(body.decode(), content_type=content_type)

        @app.task
        async def announce():
            print(f"kreassign engine: worker {self.s.worker_id} web http://{self.s.web_bind}:{self.s.web_port}",
                  file=sys.__stdout__, flush=True)

    # --- router ---------------------------------------------------------------------------------

    def decode_command(self, data: bytes | None) -> CommandEnvelope:
        try:
            return self._decode(data)
        except DecodeError:
            raise
        except Exception as e:  # noqa: BLE001 - anything a message makes the decoder do is a bad message
            raise DecodeError(f"not a command envelope: {type(e).__name__}: {e}") from None

    async def route(self, message) -> None:
        letters: list[DeadLetter] = []
        envelope = decode_or_set_aside(self.decode_command, message.topic, message.partition, message.offset,
                                       message.key, message.value, letters.append)
        if envelope is None:
            await self.set_aside(letters[0])
            return
        headers = {KIND: b"command"}
        if self.s.signing_keys is not None:
            reason = verify(envelope, self.s.signing_keys)
            if reason is not None:
                headers = {KIND: b"unverified", REASON: reason.encode()}
        fut = await self.decisions.send(key=message.key, value=message.value, headers=headers, force=True)
        await fut

    async def set_aside(self, letter: DeadLetter) -> None:
        log.warning("dead letter from %s: %s", letter.source, letter.reason)
        self.counters["dead_letters"] += 1
        fut = await self.dead_letters.send(key=letter.source.encode(), value=codec_for(DeadLetter).encode(letter),
                                           force=True)
        await fut

    # --- decider ----------------------------------------------------------------------------------

    async def decide(self, message) -> None:
        if not self.active:
            return  # revoked while this input was on its way: the new owner decides it
        headers = _headers(message)
        kind = headers.get(KIND, b"")
        if kind == b"tick":
            if time.monotonic() - self.last_tick < self.s.tick_interval / 2:
                return  # ticks queued while the decider was busy: one does for all
            call = None
        else:
            try:
                envelope = self.decode_command(message.value)
            except DecodeError as e:  # the router checked it; only a foreign writer gets here
                await self.set_aside(DeadLetter(message.topic, message.partition, message.offset, message.key,
                                                message.value, str(e), now()))
                return
            inp = envelope.payload
            if kind == b"unverified":
                inp = Unverified(inp, headers.get(REASON, b"signature check failed").decode(errors="replace"))
                self.counters["rejected_unverified"] += 1
            call = inp
        await self.run(call, message)
        if call is None:
            self.last_tick = time.monotonic()

    async def run(self, inp, message) -> None:
        """Decide ``inp`` (``None``: a tick), retrying (after recovering) while it cannot be decided."""
        loop = asyncio.get_running_loop()
        delay = 0.2
        while True:
            if not self.active:
                return
            if self.needs_recovery or self.decider is None:
                await self.recover()
            d = self.decider
            try:
                envelopes = await loop.run_in_executor(self.pool, d.tick if inp is None else (lambda: d.decide(inp)))
                break
            except Retry as e:
                log.warning("cannot decide now, will recover and retry: %s", e)
                d.blocked = str(e)
                self.needs_recovery = True
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)
            except Exception as e:  # noqa: BLE001 - an input the engine cannot handle is set aside, never a crash
                log.exception("the decider failed on %s", type(inp).__name__)
                self.needs_recovery = True
                await self.set_aside(DeadLetter(message.topic, message.partition, message.offset, message.key,
                                                message.value, f"the engine could not decide it: {type(e).__name__}: {e}",
                                                now()))
                return
        self.record(envelopes)

    async def recover(self) -> None:
        loop = asyncio.get_running_loop()
        if self.event_log is None:
            self.event_log = KafkaEventLog(self.s)
        executed = self.executor_table.get(EXECUTED)
        decider = Decider(self.event_log, self.s.cluster, adaptive=self.s.adaptive,
                          verify_interval=self.s.verify_interval, poll_interval=self.s.poll_interval)
        while True:
            try:
                self.last_recovery = await loop.run_in_executor(self.pool, decider.recover, executed)
                break
            except Exception as e:  # noqa: BLE001 - the log or the cluster unreachable: try again
                log.warning("recovery failed, retrying: %s: %s", type(e).__name__, e)
                await asyncio.sleep(1.0)
        if self.event_log.unreadable:
            self.last_recovery["unreadable_events"] = [f"{d.source}: {d.reason}" for d in self.event_log.unreadable]
            log.warning("the events topic has %d unreadable messages (skipped)", len(self.event_log.unreadable))
        self.decider = decider
        self.needs_recovery = False
        self.counters["recoveries"] += 1
        log.info("recovered: %s", self.last_recovery)
        self.sync_tables(None)
        self.executor_table[EXECUTED] = decider.executed

    def record(self, envelopes: list[EventEnvelope]) -> None:
        if envelopes:
            self.counters["events"] += len(envelopes)
            for e in envelopes:
                name = type(e.payload).__name__
                if name in self.counters:
                    self.counters[name] += 1
            self.sync_tables(views.touched(e.payload for e in envelopes))
        d = self.decider
        if d is not None and self.executor_table.get(EXECUTED) != d.executed:
            self.executor_table[EXECUTED] = d.executed

    def sync_tables(self, keys: views.Keys | None) -> None:
        """Write the rows that differ from the state (all of them after a recovery)."""
        state = self.decider.state
        for name, rows in views.rows(state, keys).items():
            table = self.tables[name]
            if keys is None:
                for key in [k for k in table.keys() if k not in rows]:
                    del table[key]
            for key, row in rows.items():
                if row is None:
                    if key in table:
                        del table[key]
                elif table.get(key) != row:
                    table[key] = row

    # --- status -------------------------------------------------------------------------------------

    async def status(self) -> dict:
        base = {"worker": self.s.worker_id, "active": self.active, "time_scale": self.s.time_scale}
        d = self.decider
        if not self.active or d is None or self.needs_recovery:
            return {**base, "recovering": self.active}
        loop = asyncio.get_running_loop()
        doc = await loop.run_in_executor(None, d.status)
        return {**base, "recovering": False, "recovery": self.last_recovery,
                "dead_letters": self.counters["dead_letters"], **doc}

    # --- running ------------------------------------------------------------------------------------

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.event_log is not None:
            self.event_log.close()
        self.s.cluster.close()
        shutil.rmtree(self.datadir, ignore_errors=True)


STATUS_PAGE = (Path(__file__).parent / "web" / "status.html").read_text(encoding="utf-8")
"""The status page: static HTML that polls ``/status`` and redraws itself."""


def _headers(message) -> dict[str, bytes]:
    raw = message.headers or {}
    items = raw.items() if isinstance(raw, Mapping) else raw
    return {k: (v or b"") for k, v in items}


def run_worker(engine: Engine, loglevel: str = "warning") -> None:
    """Run until SIGINT/SIGTERM (Faust's worker handles both and stops cleanly)."""
    logging.getLogger("kreassign").setLevel(logging.INFO)
    from engine.client_config import LIBRDKAFKA

    LIBRDKAFKA.propagate = True  # the engine's own clients' log lines belong in its log
    try:
        worker = faust.Worker(engine.app, loglevel=loglevel, redirect_stdouts=False, quiet=True)
        if not sys.stdout.isatty():
            worker.spinner = None  # its cursor codes would land in a log file
        worker.execute_from_commandline()
    finally:
        engine.close()

