"""The running engine: one Faust (faust-streaming) worker. docs/engine.md has the design.

Agents are short loops; everything they decide is the core's:

* ``router`` (commands topic, 6 partitions, spread over every worker): decode
  each command envelope (bad bytes -> the dead-letter topic with the reason),
  check its signature when ``--signing-keys`` is set, and forward the bytes
  unchanged to the decisions topic, marked ``command`` or ``unverified`` (with
  the reason) in the message headers.
* ``decider`` (decisions topic, 1 partition: exactly one worker at a time):
  hands every input to ``engine.runtime.decider.Decider`` in a thread (its calls block;
  Faust's heartbeats go on), then writes the executor's progress into the
  ``executor`` table. When it gets the partition (first start, restart,
  failover) it recovers from the events topic first.
* a timer on the worker that owns the decisions partition sends a tick into it
  when the decider has something to do (``Decider.due_in``: a look the core asks
  for, a full look every ``--poll-interval`` while anything is watched, a retry,
  a read-back), checking every ``--fast-interval``; with nothing in flight only
  a keep-alive tick every ``keepalive`` seconds (a deposed worker watches the
  active decider's ticks): ticks and commands are decided in one sequence.
* web (Faust's server): ``/status`` (JSON), ``/metrics`` (Prometheus),
  ``/tables`` (the views of the decider's state, ``engine.views.tables``, and the
  executor table: what a replay of the log must give).

Broker quirks come only from the broker profile (``engine.kafka.broker_profile``):
its ``faust`` settings go to ``faust.App`` and ``faust_consumer`` to
aiokafka's consumer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import shutil
from pathlib import Path
import socket
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from engine.core.adaptive import AdaptiveThrottle
from engine.core.budget import DEFAULT_BUDGET as DEFAULT_REQUEST_BUDGET
from engine.kafka.broker_profile import BrokerProfile
from engine.kafka.client_config import ClientConfig
from engine.cluster import Cluster
from engine.log.codec import DecodeError, codec_for
from engine.core.commands import Unverified
from engine.log.dead_letter import DeadLetter, decode_or_set_aside
from engine.log import snapshot_store
from engine.runtime.calls import Bounded
from engine.runtime import logs
from engine.runtime.decider import Decider, Deposed, Retry
from engine.log.envelope import CommandEnvelope, EventEnvelope, now
from engine.log.eventlog import WRITER_HEADER as WRITER, EventWriter, Fenced, PublishError, decoder_for
from engine.log.snapshot_store import SnapshotWriter
from engine.log.signing import verify
from engine.kafka.topics import COMMANDS, Topics, decider_transactional_id, engine_group
from engine.views import tables as views

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
    poll_interval: float = 1.0  # seconds between full observations of what the core watches (the ceiling)
    fast_interval: float = 0.1  # the least seconds between two looks (the floor); the timer's period
    request_budget: float | None = DEFAULT_REQUEST_BUDGET  # requests/s per broker the looks keep within (None: none)

    @property
    def tick_interval(self) -> float:
        return min(self.poll_interval, self.fast_interval)
    signing_keys: Mapping[str, bytes] | None = None
    adaptive: AdaptiveThrottle | None = None
    timeout: float = 30.0
    time_scale: float = 1.0  # the cluster's clock against the wall clock (a simulated cluster): a label for /status
    verify_interval: float = 10.0  # seconds between read-backs of the throttle configuration
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    snapshot_every: int = 10_000  # events between snapshots (0: none but at a clean shutdown)
    lease: float = 0.5  # seconds a decider may act after a commit of its own (fencing, docs/engine.md)
    call_deadline: float = 1.0  # seconds the decider waits for one cluster call (engine.runtime.calls)
    max_waiting_calls: int = 16  # cluster calls left to finish in the background at once, at most
    broker_deadline: float = 1.0  # seconds a broker may leave the watch's probe unanswered (engine.cluster.watch)


class KafkaEventLog:
    """The events topic as the decider's ``EventLog``: transactional appends (fencing), snapshots,
    folds that start from the latest snapshot, and the lease that guards every action.

    Creating it claims the decider's ``transactional.id`` (``<prefix>decider``): every older
    producer with that id is fenced, its open transaction aborted, and its later appends fail
    (``Deposed``). It is created when a worker is given the decisions partition, *before* the log is
    read, so no deposed decider can append after the new one has read the log.

    The lease: a decider may change the cluster only within ``lease`` seconds of the start of a
    commit of its own that succeeded (an append, or a lease record on the decisions topic, which
    the decider skips). A new decider waits ``lease`` seconds after its claim before acting. So a
    deposed decider whose commit was accepted just before the claim acts no later than the new one
    starts; one that stalled past its lease (a pause, SIGSTOP) renews first, and is refused."""

    def __init__(self, s: Settings):
        self.s = s
        self.topic = Topics.named(s.prefix).events
        self.decisions_topic = Topics.named(s.prefix).decisions
        started = time.monotonic()
        self.writer = EventWriter(config=s.config, prefix=s.prefix, profile=s.profile, registry=s.registry,
                                  timeout=s.timeout, transactional_id=decider_transactional_id(s.prefix))
        self.writer.writer_id = s.worker_id
        claimed = time.monotonic()
        self.hold_until = claimed + s.lease
        log.info("claimed the decider's transactional.id in %.3f s", claimed - started)
        self.unreadable: list[DeadLetter] = []
        self.snapshots: SnapshotWriter | None = None
        self.snapshot_slot = 0
        self.last_snapshot: dict | None = None
        self.warm: snapshot_store.Found | None = None  # a snapshot read ahead (Engine.warm_up)
        self._next = 0

    def append(self, events) -> list[EventEnvelope]:
        try:
            envelopes = self.writer.append(events)
        except Fenced as e:
            raise Deposed(f"another decider took over: {e}") from None
        if self.writer.last_offset is not None:
            self._next = self.writer.last_offset + 1
        return envelopes

    @property
    def next_offset(self) -> int:
        return self._next

    def resume(self):
        self.unreadable = []
        warm, self.warm = self.warm, None
        found = snapshot_store.latest(self.s.config, prefix=self.s.prefix, profile=self.s.profile,
                                      timeout=self.s.timeout, unless_end=warm.end if warm is not None else None)
        if found is None:  # the snapshot read ahead is still the latest: one offsets request instead of a read
            found = warm
        notes = list(found.assembled.skipped) + ([found.problem] if found.problem else [])
        snap, records, note = snapshot_store.resume(self.s.config, found.assembled.snapshot, prefix=self.s.prefix,
                                                    profile=self.s.profile, registry=self.s.registry,
                                                    timeout=self.s.timeout, set_aside=self.unreadable.append)
        if note:
            notes.append(note)
        if found.slot is not None:
            self.snapshot_slot = 1 - found.slot
        self.last_snapshot = None if snap is None else {
            "id": snap.id, "next_offset": snap.fold.next_offset, "written_at": snap.written_at,
            "writer": snap.writer, "bytes": snap.size, "seconds_to_read": round(found.seconds, 3),
            "read_ahead": found is warm}
        self._next = snap.fold.next_offset if snap is not None else 0

        def tail():
            for offset, envelope in records:
                self._next = offset + 1
                yield offset, envelope
        return (snap.fold if snap is not None else None), tail(), notes

    def guard(self) -> None:
        wait = self.hold_until - time.monotonic()
        if wait > 0:  # the decider before may still act until its lease ends
            log.info("waiting %.1f s before acting: the lease of the decider before this one", wait)
            time.sleep(wait)
        renewals = 0
        while True:
            committed = self.writer.committed_at
            if committed is not None and time.monotonic() - committed < self.s.lease:
                return
            if renewals == RENEWALS:
                break
            self.renew()
            renewals += 1
        # the lease runs from the start of a commit: one that took longer than the lease proves
        # nothing about now (a successor may have claimed while it waited)
        raise Retry(f"the decider's lease could not be renewed in time: {RENEWALS} commits each took "
                    f"longer than the {self.s.lease:g} s lease")

    def renew(self) -> None:
        """Commit a lease record (fenced like an append): proof that no other decider took over."""
        try:
            self.writer.write_other(self.decisions_topic, [(LEASE_KEY, b"", int(time.time() * 1000))],
                                    headers=[(KIND, b"lease"), (WRITER, self.s.worker_id.encode())])
        except Fenced as e:
            raise Deposed(f"another decider took over: {e}") from None
        except PublishError as e:
            raise Retry(f"cannot renew the decider's lease: {e}") from None

    def write_snapshot(self, fold) -> dict:
        if self.snapshots is None:
            self.snapshots = SnapshotWriter(self.s.config, prefix=self.s.prefix, profile=self.s.profile,
                                            timeout=self.s.timeout, writer=self.s.worker_id, slot=self.snapshot_slot)
        started = time.monotonic()
        sid, records, size = self.snapshots.write(fold)
        self.last_snapshot = {"id": sid, "next_offset": fold.next_offset, "records": records, "bytes": size,
                              "seconds_to_write": round(time.monotonic() - started, 3)}
        return self.last_snapshot

    def close(self) -> None:
        self.writer.close()
        if self.snapshots is not None:
            self.snapshots.close()


LEASE_KEY = b"lease"
RECOVERY_RETRY = 1.0  # seconds between a failed claim or recovery and the next attempt
RENEWALS = 3  # lease records committed in a row before guard() gives up (Retry: claim, recover, try again)
WARM_INTERVAL = 10.0  # seconds between a standby's checks for a newer snapshot to read ahead
FAUST_QUIET = 10.0  # seconds an owned decisions partition may deliver no input (Faust not ready) before it is said
FAUST_GIVE_UP = 30.0  # seconds of that, with Faust's table recovery not moving either, before the worker stops


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
        # the one Faust table: what the views hold is the decider's state, rebuilt by every recovery
        # from the log (a changelog of them would be read back row by row at every takeover)
        self.executor_table = self.app.Table("executor", partitions=1, key_type=str)
        # every cluster call of the decider under a deadline (engine.runtime.calls); the brokers probed
        self.cluster = Bounded(s.cluster, s.call_deadline, s.max_waiting_calls, patience=s.timeout)
        watch = getattr(s.cluster, "watch_brokers", None)
        if watch is not None:
            watch(s.broker_deadline, demand=self.watch_demand)
        self.event_log: KafkaEventLog | None = None
        self.decider: Decider | None = None
        self.active = False  # this worker owns the decisions partition and has not been deposed
        self.owns = False  # Faust's last assignment gave this worker the decisions partition
        self.role: str | None = None  # what it last said it does: "decides" or "standby" (``say_role``)
        self.claim = True  # the next recovery claims the decider's transactional.id first
        self.claimed_in = -1  # the ``generation`` in which the claim behind ``event_log`` started
        self.deposed: str | None = None  # why this worker stopped deciding while Faust still assigns it
        self.deposed_at = 0.0
        self.foreign_tick_at = float("-inf")  # when a tick another worker sent was last read (``may_reclaim``)
        self.needs_recovery = True
        # Faust hands the decider its inputs only once its table recovery is done: when this worker was
        # given the decisions partition, when the decider agent last got an input from it, and the last
        # move of Faust's table recovery (``faust_stall``); why this worker stopped (``give_up``)
        self.assigned_at: float | None = None
        self.delivered_at = float("-inf")
        self.faust_mark: object = None
        self.faust_moved_at = 0.0
        self.faust_said = 0
        self.gave_up: str | None = None
        self.generation = 0  # counts Faust's assignments and revocations: a recovery they overtake is redone
        self.claim_lock = asyncio.Lock()
        self.snapshot_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
        self.warm: snapshot_store.Found | None = None  # the latest snapshot, read ahead while not deciding
        self.warm_future = None
        self.warm_end: int | None = None  # the snapshots topic's end when last read ahead (``warm_up``)
        self.warmed = False  # a snapshot was read ahead (``warm_up``): later reads do not freeze
        self.snapshot_future = None
        self.snapshot_events = 0  # the decider's event count at the last snapshot
        self.snapshot_error: str | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decider")
        self.last_tick = 0.0
        self.last_sent = 0.0  # when the timer last sent a tick (``tick_due``)
        self.counters: dict[str, int] = {"events": 0, "dead_letters": 0, "rejected_unverified": 0,
                                         "StepStarted": 0, "StepCompleted": 0, "recoveries": 0,
                                         "recoveries_restarted": 0, "retries": 0}
        self.last_recovery: dict | None = None
        self.recovery_error: str | None = None  # why the last recovery failed (it is retried), for /status
        self.last_retry: dict | None = None  # the last decision given up for now (``Retry``): why, when
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
        app = EngineApp(engine_group(s.prefix), **settings)
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
            self.watch_faust(time.monotonic())
            if self.may_reclaim(time.monotonic()):
                log.warning("deposed %.0f s ago but still given the decisions partition (no rebalance came) and no "
                            "other decider's tick seen for %.0f s: claiming it again",
                            time.monotonic() - self.deposed_at, time.monotonic() - self.foreign_tick_at)
                self.deposed, self.active, self.claim, self.needs_recovery = None, True, True, True
            if self.active and self.tick_due(time.monotonic()):
                await self.send_tick()

        @app.on_partitions_assigned.connect
        async def assigned(sender, assigned, **kwargs):
            self.on_assigned(any(tp.topic == self.topics.decisions for tp in assigned))
            if self.active:
                asyncio.ensure_future(self.claim_early())  # the recovery's claim, while Faust gets ready
                # and an input for the recovery to start on as soon as Faust is ready (the timer's
                # ticks, sent only while active, start now too: this one saves at most a tick interval)
                asyncio.ensure_future(self.send_tick())

        @app.on_partitions_revoked.connect
        async def revoked(sender, revoked, **kwargs):
            if any(tp.topic == self.topics.decisions for tp in revoked):
                self.on_revoked()

        @app.page("/")
        async def page(web, request):
            return web.html(STATUS_PAGE)

        @app.page("/status")
        async def status(web, request):
            return web.json(await self.status())

        @app.page("/tables")
        async def tables(web, request):
            d = self.decider
            if not self.active or d is None or self.needs_recovery:
                return web.json({})
            state = d.state  # immutable: the decider thread replaces it, never changes it
            executor = dict(self.executor_table.items())

            def body() -> str:  # off the event loop: 100,000 partitions' rows take a while to make and write
                rows = views.rows(state)
                return json.dumps({**{name: views.present(table) for name, table in rows.items()},
                                   "executor": executor}, default=str)
            return web.text(await asyncio.get_running_loop().run_in_executor(None, body),
                            content_type="application/json")

        @app.page("/metrics")
        async def metrics(web, request):
            from engine.runtime.metrics import exposition

            body, content_type = exposition(self)
            return web.text(body.decode(), content_type=content_type)

        @app.timer(WARM_INTERVAL)
        async def keep_warm():
            if not self.active:
                self.warm_up()

        @app.task
        async def announce():
            print(f"kreassign engine: worker {self.s.worker_id} web http://{self.s.web_bind}:{self.s.web_port}",
                  file=sys.__stdout__, flush=True)

    def watch_demand(self) -> str:
        """How often the broker watch probes (``engine.cluster.watch``): every broker at once while a cluster
        call has waited a quarter of the broker deadline ("urgent": some broker may hold it), each broker
        every two deadlines while steps or elections are in flight ("busy"), none while idle."""
        if self.cluster.running_for() >= self.s.broker_deadline / 4:
            return "urgent"
        d = self.decider
        if self.active and d is not None and (d.state.steps or d.state.elections):
            return "busy"
        return "idle"

    def tick_due(self, at: float) -> bool:
        """Whether the timer sends a tick now: while the decider recovers (a tick starts it), when the
        decider has something due (``Decider.due_in``), and else a keep-alive every ``keepalive`` s."""
        d = self.decider
        if d is None or self.needs_recovery:
            return True
        due = d.due_in()
        if due is not None and due <= self.s.tick_interval / 2:
            return True
        return at - self.last_sent >= self.keepalive

    @property
    def keepalive(self) -> float:
        """Seconds between ticks of an idle decider: a quarter of ``reclaim_after`` (a deposed worker
        claims again only when no other decider's tick came for that long), at most 10 s."""
        return min(10.0, self.reclaim_after / 4)

    async def send_tick(self) -> None:
        self.last_sent = time.monotonic()
        try:
            await self.decisions.send(key=TICK_KEY, value=b"", headers={KIND: b"tick", WRITER: self.s.worker_id.encode()})
        except Exception as e:  # noqa: BLE001 - the timer sends the next one; the decider needs no particular tick
            log.warning("cannot send a tick to the decisions topic: %s: %s", type(e).__name__, e)

    def on_assigned(self, owns: bool) -> None:
        """Faust's assignment (every rebalance): whether this worker now decides. A recovery under
        way when it comes starts again (``generation``): its claim may predate another worker's."""
        if owns:
            log.info("worker %s owns the decisions partition: it decides", self.s.worker_id)
        self.say_role("decides" if owns else "standby")
        self.assigned_at = self.faust_moved_at = time.monotonic() if owns else None
        self.faust_mark, self.faust_said = self.faust_recovery_mark(), 0
        self.generation += 1
        self.active = self.owns = owns
        self.deposed = None
        self.claim = True
        self.needs_recovery = True

    def say_role(self, role: str) -> None:
        """One line on standard output when this worker's part changes (the first assignment
        included): whether it decides, or stands by while another worker does."""
        if role == self.role:
            return
        self.role = role
        if role == "decides":
            line = "decides: it was given the decisions partition"
        else:
            line = ("stands by: another worker decides; this one routes commands and takes over the deciding "
                    "if that worker stops")
        print(f"kreassign engine: worker {self.s.worker_id} {line}", file=sys.__stdout__, flush=True)

    def on_revoked(self) -> None:
        self.assigned_at = None
        self.generation += 1
        self.active = self.owns = False
        self.needs_recovery = True

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
        self.delivered_at = time.monotonic()  # Faust delivers (``faust_stall``)
        headers = _headers(message)
        kind = headers.get(KIND, b"")
        if kind == b"tick" and headers.get(WRITER, self.s.worker_id.encode()) != self.s.worker_id.encode():
            self.foreign_tick_at = time.monotonic()  # another worker decides (or did until just now)
        if not self.active:
            return  # revoked while this input was on its way: the new owner decides it
        if kind == b"lease":
            return  # a decider's proof of ownership (KafkaEventLog.renew), not an input
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
                continue  # deposed, revoked, or overtaken by a rebalance: looked at again
            d, generation = self.decider, self.generation
            try:
                envelopes = await loop.run_in_executor(self.pool, d.tick if inp is None else (lambda: d.decide(inp)))
                break
            except Deposed as e:
                if self.overtaken(generation, e):
                    continue
                self.depose(str(e))
                return
            except Retry as e:
                d.blocked = str(e)
                self.given_up(e, "decide")
                # claim again: a commit that timed out may still complete in the background, and a new
                # claim settles it (committed or aborted) before the log is read
                self.needs_recovery = self.claim = True
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

    def given_up(self, e: Retry, what: str) -> None:
        """A decision or a recovery's actions given up for now (``Retry``, e.g. the lease could not
        be renewed in time): claimed again, recovered and tried again; /status, the status page and
        /metrics say why meanwhile."""
        log.warning("cannot %s now, will claim again, recover and retry: %s", what, e)
        self.counters["retries"] += 1
        self.last_retry = {"reason": str(e), "at": now().isoformat(timespec="seconds"), "monotonic": time.monotonic()}
        self.recovery_error = f"cannot {what} now (claiming and recovering again): {e}"

    def faust_recovery_mark(self) -> object:
        """Where Faust's table recovery is (the changelog offsets it has read): it moves while Faust reads."""
        try:
            return tuple(sorted((str(tp), o) for tp, o in self.app.tables.recovery.active_offsets.items()))
        except Exception:  # noqa: BLE001 - Faust's internals: without them only the inputs count
            return None

    def faust_stall(self, at: float) -> float | None:
        """Seconds this worker has owned the decisions partition while Faust delivered it no input and
        its table recovery (the executor table's changelog, read before Faust delivers anything) did not
        move; None if Faust delivered an input since the assignment, or this worker does not decide.
        Nobody decides meanwhile: the group gave the partition to this worker, which heartbeats on."""
        if not (self.active and self.owns) or self.assigned_at is None or self.delivered_at >= self.assigned_at:
            return None
        mark = self.faust_recovery_mark()
        if mark != self.faust_mark:
            self.faust_mark, self.faust_moved_at = mark, at
        return at - max(self.assigned_at, self.faust_moved_at)

    def faust_blocked(self, at: float) -> str | None:
        """Why nothing is decided, for /status's ``blocked``, while ``faust_stall`` passes ``FAUST_QUIET``."""
        stall = self.faust_stall(at)
        if stall is None or stall < FAUST_QUIET:
            return None
        return (f"this worker was given the decisions partition {at - self.assigned_at:.0f} s ago and Faust has "
                f"delivered no input from it since (its table recovery has not moved for {stall:.0f} s): nobody "
                f"decides; at {FAUST_GIVE_UP:g} s this worker stops, so that another takes the partition over")

    def watch_faust(self, at: float) -> None:
        """The timer's check that the partition this worker owns gets decided: a WARNING every 10 s while
        Faust delivers nothing (``faust_blocked``), and at ``FAUST_GIVE_UP`` s the worker stops (``give_up``):
        Faust's table recovery stalled for good (seen after a SIGSTOP: no event of the changelog came for
        minutes, while the worker heartbeat on and held the partition)."""
        reason = self.faust_blocked(at)
        if reason is None:
            return
        stall = self.faust_stall(at)
        if stall >= FAUST_GIVE_UP:
            self.give_up(reason)
        elif int(stall // 10) > self.faust_said:
            self.faust_said = int(stall // 10)
            log.warning("%s", reason)

    def give_up(self, reason: str) -> None:
        """Stop this worker (SIGTERM: Faust leaves the group and closes cleanly; the exit code is 3), so that
        the group gives the decisions partition to another worker; restart it to have a standby again."""
        if self.gave_up is not None:
            return
        log.error("this worker stops: %s", reason)
        self.gave_up, self.active = reason, False
        os.kill(os.getpid(), signal.SIGTERM)

    def may_reclaim(self, at: float) -> bool:
        """A deposed worker that Faust still gives the decisions partition claims it again only when
        ``reclaim_after`` has passed since it was deposed *and* since the last tick another worker
        sent: a decider that took over sends ticks to this very partition, which this worker still
        reads, so while one lives this worker never fences it (no ping-pong between two workers
        that both believe they own the partition, one of them only until its rebalance comes)."""
        return (self.deposed is not None and self.owns and at - self.deposed_at > self.reclaim_after
                and at - self.foreign_tick_at > self.reclaim_after)

    @property
    def reclaim_after(self) -> float:
        """Seconds a deposed worker that Faust still gives the decisions partition waits before it
        claims it again: two session timeouts, time enough for the rebalance that deposed it."""
        return 2 * float(self.s.profile.faust.get("broker_session_timeout", 60.0))

    def overtaken(self, generation: int, fenced: Exception | None = None) -> bool:
        """Whether a rebalance came since ``generation`` (while this worker recovered or decided). It
        may have given the partition to another worker for a moment and back: that worker's claim
        fences this one's, so a fence met meanwhile deposes nobody (this worker is the owner now), and
        the claim is redone before this worker decides anything (``claim_decider`` sees that the claim
        behind its log started in an older generation). True: recover again (``run`` does, if still
        active)."""
        if self.generation == generation:
            return False
        self.needs_recovery = True
        if self.active:
            self.counters["recoveries_restarted"] += 1
            log.info("a rebalance came during the recovery or the decision%s: claiming and recovering again",
                     f" (and another claim fenced it: {fenced})" if fenced is not None else "")
        return True

    def depose(self, reason: str) -> None:
        log.error("this worker stops deciding: %s", reason)
        self.deposed, self.deposed_at = reason, time.monotonic()
        self.active = False
        self.needs_recovery = True

    async def claim_decider(self) -> KafkaEventLog | None:
        """The decider's log, under a claim of its transactional.id made in this generation (or
        after a ``claim`` was asked for): the first step of every recovery, also started as soon as
        Faust assigns the decisions partition, so the lease after it runs while Faust recovers its
        table and the first tick comes. None if this worker stopped deciding meanwhile."""
        loop = asyncio.get_running_loop()
        async with self.claim_lock:  # one claim at a time: a second would fence the first
            while self.claim or self.event_log is None or self.claimed_in != self.generation:
                if not self.active:
                    # revoked: a claim this worker made meanwhile may yet land after the next owner's
                    # and fence it (a claim retried through a coordinator move); that owner is deposed
                    # and claims again once no decider has ticked for ``reclaim_after``
                    return None
                old, self.event_log = self.event_log, None
                if old is not None:
                    await loop.run_in_executor(self.pool, old.close)
                generation = self.generation
                try:  # claim first: no deposed decider can append after this one has read the log
                    self.event_log = await loop.run_in_executor(self.pool, KafkaEventLog, self.s)
                    self.claim, self.claimed_in = False, generation
                except Exception as e:  # noqa: BLE001 - the cluster unreachable (or the grant missing): again
                    self.recovery_error = f"cannot claim the decider's transactional.id: {type(e).__name__}: {e}"
                    log.warning("%s; retrying", self.recovery_error)
                    await asyncio.sleep(RECOVERY_RETRY)
            return self.event_log

    async def claim_early(self) -> None:
        try:
            await self.claim_decider()
        except Exception:  # noqa: BLE001 - the recovery claims again and reports why it cannot
            log.exception("the claim at the assignment failed; the recovery claims again")

    async def recover(self) -> None:
        """One attempt to claim the decider and fold the log; ``run`` calls it again while
        ``needs_recovery`` (a failed attempt says why in ``recovery_error``, and claims again)."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        generation = self.generation
        elog = await self.claim_decider()
        if elog is None or self.overtaken(generation):
            return
        claimed = time.monotonic()
        warm = await self.read_ahead_done()
        if self.overtaken(generation):  # the log may have been closed (a new claim) meanwhile
            return
        elog.warm = warm
        executed = self.executor_table.get(EXECUTED)
        decider = Decider(elog, self.cluster, adaptive=self.s.adaptive,
                          verify_interval=self.s.verify_interval, poll_interval=self.s.poll_interval,
                          floor=self.s.fast_interval, budget=self.s.request_budget)
        try:
            recovered = await loop.run_in_executor(self.pool, decider.recover, executed)
        except Deposed as e:
            if not self.overtaken(generation, e):
                self.depose(str(e))
            return
        except Exception as e:  # noqa: BLE001 - the log or the cluster unreachable (or a grant revoked): again
            if self.overtaken(generation):
                return
            if isinstance(e, Retry):  # the recovery's own actions (re-asserted) met an expired lease
                self.given_up(e, "re-assert the actions in flight")
            else:
                self.recovery_error = f"{type(e).__name__}: {e}"
                log.warning("recovery failed, claiming and recovering again: %s", self.recovery_error)
            # claim again: a commit that timed out may still complete in the background, and a new claim
            # settles it (committed or aborted) before the log is read again
            self.claim = True
            await asyncio.sleep(RECOVERY_RETRY)
            return
        if self.overtaken(generation):
            return
        self.recovery_error = None
        self.last_recovery = recovered
        self.last_recovery["seconds_claim"] = round(claimed - started, 3)
        self.last_recovery["snapshot"] = elog.last_snapshot
        # counted from the snapshot it started from: a long tail folded now is written as a snapshot at once
        self.snapshot_events = decider.events - self.last_recovery.get("events", 0)
        if elog.unreadable:
            self.last_recovery["unreadable_events"] = [f"{d.source}: {d.reason}" for d in elog.unreadable]
            log.warning("the events topic has %d unreadable messages (skipped)", len(elog.unreadable))
        self.decider = decider
        self.needs_recovery = False
        self.counters["recoveries"] += 1
        log.info("recovered: %s", self.last_recovery)
        self.executor_table[EXECUTED] = decider.executed

    def warm_up(self) -> None:
        """Read the latest snapshot ahead, in the background: a worker that is given the decisions
        partition then folds only the events after it, and checks with one offsets request that no
        newer snapshot came (``KafkaEventLog.resume``). A starting worker does it while it joins the
        group, a standby every ``WARM_INTERVAL`` seconds if the snapshots topic grew. Any snapshot
        is a sound start: it is the fold of the log below its offset, and the log after it is read
        only after the claim."""
        if self.warm_future is not None and not self.warm_future.done():
            return
        end = self.warm_end
        # Frozen out of the cyclic collector's reach (``gc_paused``) only at the first read, when the
        # worker starts: its first collections would walk the whole state (at 100,000 partitions two
        # walks of 0.5 to 0.8 s, on a takeover that follows at once). A standby's later reads repeat
        # for as long as it lives, and a freeze would also take the garbage other threads made meanwhile;
        # the recovery freezes what it folds.
        freeze = not self.warmed

        def read() -> None:
            try:
                found = snapshot_store.latest(self.s.config, prefix=self.s.prefix, profile=self.s.profile,
                                              timeout=self.s.timeout, unless_end=end, freeze=freeze)
            except Exception as e:  # noqa: BLE001 - the recovery reads it again (and says why it cannot)
                log.warning("cannot read the latest snapshot ahead: %s: %s", type(e).__name__, e)
                return
            if found is None or found.problem is not None:
                return  # unchanged since the last read, or unreadable now (the recovery says why)
            self.warm = found if found.assembled.snapshot is not None else None
            self.warmed = self.warmed or self.warm is not None  # the first snapshot read is the one frozen
            self.warm_end = found.end  # also when there is none yet: read again only once the topic grows

        self.warm_future = self.snapshot_pool.submit(read)

    async def read_ahead_done(self) -> snapshot_store.Found | None:
        """The snapshot read ahead, once a read under way ends; handed over once (the decider's state
        grows from it)."""
        future = self.warm_future
        if future is not None and not future.done():
            await asyncio.wrap_future(future)
        warm, self.warm, self.warm_end = self.warm, None, None
        return warm

    def record(self, envelopes: list[EventEnvelope]) -> None:
        if envelopes:
            self.counters["events"] += len(envelopes)
            for e in envelopes:
                name = type(e.payload).__name__
                if name in self.counters:
                    self.counters[name] += 1
        d = self.decider
        if d is not None and self.executor_table.get(EXECUTED) != d.executed:
            self.executor_table[EXECUTED] = d.executed
        if d is not None and self.s.snapshot_every and d.events - self.snapshot_events >= self.s.snapshot_every:
            self.snapshot()

    def snapshot(self, wait: bool = False) -> None:
        """Write a snapshot of the decider's fold in the background (one at a time). Only when every
        action of its log was carried out: a snapshot vouches for that (``Decider.recover``)."""
        d, elog = self.decider, self.event_log
        if d is None or elog is None or d.executed != d.last_event or not d.events:
            return
        if self.snapshot_future is not None and not self.snapshot_future.done():
            return  # the one being written covers most of it; the next input triggers another
        fold = d.fold()
        self.snapshot_events = d.events

        def write() -> None:
            try:
                done = elog.write_snapshot(fold)
                self.snapshot_error = None
                log.info("snapshot written: %s", done)
            except Exception as e:  # noqa: BLE001 - without snapshots recovery folds more, nothing is lost
                self.snapshot_error = f"{type(e).__name__}: {e}"
                log.warning("cannot write a snapshot (recovery will fold from the previous one): %s",
                            self.snapshot_error)

        self.snapshot_future = self.snapshot_pool.submit(write)
        if wait:
            self.snapshot_future.result()

    # --- status -------------------------------------------------------------------------------------

    async def status(self) -> dict:
        base = {"worker": self.s.worker_id, "active": self.active, "time_scale": self.s.time_scale,
                "recoveries": self.counters["recoveries"],
                "recoveries_restarted": self.counters["recoveries_restarted"],  # by a rebalance (``overtaken``)
                "retries": self.counters["retries"], "last_retry": self.last_retry and {
                    "reason": self.last_retry["reason"], "at": self.last_retry["at"],
                    "seconds_ago": round(time.monotonic() - self.last_retry["monotonic"], 1)}}
        if self.deposed is not None:
            base["deposed"] = self.deposed
        d = self.decider
        if not self.active or d is None or self.needs_recovery:
            blocked = (self.recovery_error or self.faust_blocked(time.monotonic())) if self.active else None
            return {**base, "recovering": self.active, "blocked": blocked, "stopped": self.gave_up}
        loop = asyncio.get_running_loop()
        doc = await loop.run_in_executor(None, d.status)
        snapshots = {"every_events": self.s.snapshot_every, "last": self.event_log.last_snapshot if self.event_log
                     else None, "events_since": d.events - self.snapshot_events, "error": self.snapshot_error}
        return {**base, "recovering": False, "recovery": self.last_recovery, "snapshots": snapshots,
                "dead_letters": self.counters["dead_letters"], **doc}

    # --- running ------------------------------------------------------------------------------------

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # the decider's current input ends first
        if self.decider is not None and self.deposed is None and self.decider.events > self.snapshot_events:
            self.snapshot()  # a clean shutdown leaves a snapshot of everything it decided (if all carried out)
        self.snapshot_pool.shutdown(wait=True)
        if self.event_log is not None:
            self.event_log.close()
        self.cluster.close()
        shutil.rmtree(self.datadir, ignore_errors=True)


STATUS_PAGE = (Path(__file__).parent / "web" / "status.html").read_text(encoding="utf-8")
"""The status page: static HTML that polls ``/status`` and redraws itself."""


def _headers(message) -> dict[str, bytes]:
    raw = message.headers or {}
    items = raw.items() if isinstance(raw, Mapping) else raw
    return {k: (v or b"") for k, v in items}


class QuietWorker(faust.Worker):
    """Faust's worker, whose log says a repeated line once per interval with its count
    (``engine.runtime.logs``): its handlers exist once Faust has set the root logger up."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        logs.quiet(logger.handlers)


def run_worker(engine: Engine, loglevel: str = "warning") -> None:
    """Run until SIGINT/SIGTERM (Faust's worker handles both and stops cleanly)."""
    logging.getLogger("kreassign").setLevel(logging.INFO)
    from engine.kafka.client_config import LIBRDKAFKA

    LIBRDKAFKA.propagate = True  # the engine's own clients' log lines belong in its log
    logs.demote_expected()  # a failover's "Heartbeat failed ... because it is rebalancing" is INFO
    engine.warm_up()  # the latest snapshot is read while Faust starts and joins the group
    try:
        worker = QuietWorker(engine.app, loglevel=loglevel, redirect_stdouts=False, quiet=True)
        if not sys.stdout.isatty():
            worker.spinner = None  # its cursor codes would land in a log file
        worker.execute_from_commandline()
    finally:
        engine.close()
        if engine.gave_up is not None:
            raise SystemExit(3)  # not a clean stop: a supervisor restarts it

