"""The simulated cluster over the Kafka wire protocol: one listener per simulated broker.

Any Kafka client (confluent-kafka / librdkafka, kafka-python, Kafka's Java tools)
reaches the simulated cluster the way it reaches a real one: a bootstrap list,
Metadata naming every live broker at its own address, requests that must go to a
particular broker (a BROKER config resource, DescribeLogDirs) sent there. The
encoding is kafka-python's protocol classes, generated from Kafka's JSON message
schemas (flexible versions, tagged fields, compact strings); the server is asyncio,
in a thread of its own; each request is handled under the sim-cluster's lock
against the same ``SimulatedCluster`` the HTTP API serves (``engine.sim.kafka_api``).

A broker that is down (a fault, or the scenario's) stops listening, and its open
connections are closed: clients see a connection refused, as with a dead broker.
It is also absent from Metadata (KRaft fences it). It listens again when it
comes back, on the same port.

Requests this front does not serve are answered as far as Kafka's protocol
allows, and logged: ApiVersions at a version above the highest is answered at v0
with UNSUPPORTED_VERSION and the supported versions (what Kafka does, so the
client can retry lower); another API whose schema is known is answered in its own
format with UNSUPPORTED_VERSION in its error code; a key or version no schema
describes cannot be answered in any format and the connection is closed, as
Kafka closes it ("Received request api key ... which is not enabled").
"""

from __future__ import annotations

import asyncio
import importlib
import io
import logging
import socket
import struct
import threading

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse

from engine.sim.kafka_api import APIS, ERRORS, SUPPORTED, Api

log = logging.getLogger("kreassign.sim.kafka")

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
API_VERSIONS = 18
_PROTOCOL_MODULES = ("kafka.protocol.admin", "kafka.protocol.metadata", "kafka.protocol.consumer",
                     "kafka.protocol.producer")


class FrontError(Exception):
    """The front cannot start (a port taken, ...); the message says why."""


def _known_messages() -> dict[tuple[int, bool], type]:
    """(api key, is request) -> message class, for every API kafka-python's schemas describe."""
    for name in _PROTOCOL_MODULES:
        importlib.import_module(name)
    out: dict[tuple[int, bool], type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            out.setdefault((cls.API_KEY, cls.is_request()), cls)
    return out


class KafkaFront:
    def __init__(self, sim, host: str = "127.0.0.1", port: int = 0):
        """``port`` 0: a free port per broker; else broker i (in id order) listens on ``port + i``."""
        self.sim = sim
        self.host = host
        brokers = sorted(sim.cluster.state.brokers)
        self._sockets: dict[int, socket.socket] = {}
        try:
            for i, b in enumerate(brokers):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, 0 if port == 0 else port + i))
                self._sockets[b] = s
        except OSError as e:
            for s in self._sockets.values():
                s.close()
            raise FrontError(f"cannot listen on {host}:{port + len(self._sockets) if port else 0} "
                             f"for broker {brokers[len(self._sockets)]}: {e.strerror}") from None
        self.ports = {b: s.getsockname()[1] for b, s in self._sockets.items()}
        self.api = Api(sim, self.addresses)
        self._messages = _known_messages()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._connections: dict[int, set[asyncio.StreamWriter]] = {b: set() for b in brokers}
        self._reconcile: asyncio.Task | None = None

    def addresses(self) -> dict[int, tuple[str, int]]:
        return {b: (self.host, p) for b, p in self.ports.items()}

    @property
    def bootstrap(self) -> str:
        """Every broker's address (a client needs one that is up)."""
        return ",".join(f"{self.host}:{p}" for _b, p in sorted(self.ports.items()))

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sim-kafka-front", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self._loop).result(30)

    def shutdown(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    async def _open(self) -> None:
        alive = self._alive()
        for b, s in self._sockets.items():
            if alive.get(b):
                await self._listen(b, sock=s)
            else:
                s.close()  # a broker down from the start refuses connections until it comes up
        self._sockets = {}
        self._reconcile = asyncio.get_running_loop().create_task(self._follow_liveness())

    async def _close(self) -> None:
        if self._reconcile is not None:
            self._reconcile.cancel()
        for b in list(self._servers):
            await self._stop_listening(b)

    async def _listen(self, broker: int, sock: socket.socket | None = None) -> None:
        async def serve(reader, writer):
            await self._serve(broker, reader, writer)

        if sock is not None:
            server = await asyncio.start_server(serve, sock=sock)
        else:
            server = await asyncio.start_server(serve, self.host, self.ports[broker], reuse_address=True)
        self._servers[broker] = server

    async def _stop_listening(self, broker: int) -> None:
        server = self._servers.pop(broker, None)
        if server is not None:
            server.close()
        for writer in list(self._connections[broker]):
            writer.close()
        if server is not None:
            await server.wait_closed()

    def _alive(self) -> dict[int, bool]:
        with self.sim.lock:
            self.sim.cluster.observe([])  # catch up with the clock: the scenario's faults happen on time
            return {b.id: b.alive for b in self.sim.cluster.state.brokers.values()}

    async def _follow_liveness(self) -> None:
        """A broker that goes down stops listening; one that comes back listens again (same port)."""
        while True:
            await asyncio.sleep(0.1)
            try:
                for b, up in self._alive().items():
                    if up and b not in self._servers:
                        log.info("broker %d is up: listening on %s:%d", b, self.host, self.ports[b])
                        await self._listen(b)
                    elif not up and b in self._servers:
                        log.info("broker %d is down: its listener %s:%d is closed", b, self.host, self.ports[b])
                        await self._stop_listening(b)
            except OSError as e:
                log.warning("cannot follow broker liveness: %s", e)

    # -- connections and requests --------------------------------------------------------------

    async def _serve(self, broker: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections[broker].add(writer)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    if not 0 < size <= MAX_REQUEST_BYTES:
                        log.warning("broker %d: request of %d bytes from %s: closing the connection", broker, size, peer)
                        return
                    data = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                answer = self.respond(broker, data)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
        except ConnectionError:
            return
        finally:
            self._connections[broker].discard(writer)
            writer.close()

    def respond(self, broker: int, data: bytes) -> bytes | None:
        """The framed response to one request, or None to close the connection (what Kafka does)."""
        if len(data) < 8:
            log.warning("broker %d: a request of %d bytes has no header: closing the connection", broker, len(data))
            return None
        key, version, correlation = struct.unpack(">hhi", data[:8])
        supported = SUPPORTED.get(key)
        if key == API_VERSIONS and version > supported[1]:
            log.info("broker %d: ApiVersions v%d above v%d: answered at v0 with UNSUPPORTED_VERSION",
                     broker, version, supported[1])
            return self._unsupported_api_versions(correlation)
        request_cls = self._messages.get((key, True))
        response_cls = self._messages.get((key, False))
        if request_cls is None or response_cls is None or not 0 <= version <= request_cls.max_version:
            log.warning("broker %d: request api key %d v%d is not described by any schema known here: "
                        "closing the connection, as Kafka does", broker, key, version)
            return None
        try:
            buf = io.BytesIO(data)
            header = RequestHeader.decode(buf, flexible=request_cls.flexible_version_q(version))
            body = request_cls.decode(memoryview(data)[buf.tell():], version=version)
        except Exception as e:  # noqa: BLE001 - Kafka closes a connection that sends what it cannot parse
            log.warning("broker %d: cannot parse api key %d v%d (%s: %s): closing the connection",
                        broker, key, version, type(e).__name__, e)
            return None
        if supported is None or not supported[0] <= version <= supported[1]:
            log.warning("broker %d: %s v%d from %r is not served by the simulated cluster: answered with "
                        "UNSUPPORTED_VERSION", broker, request_cls.name, version, header.client_id)
            return self._frame(_error_response(response_cls, version, ERRORS["UNSUPPORTED_VERSION"],
                                               f"{request_cls.name} v{version} is not supported by the simulated "
                                               "cluster"), correlation)
        handler = getattr(self.api, APIS[key][1])
        try:
            with self.sim.lock:
                response = handler(broker, body, version)
        except Exception:  # a bug: answered as Kafka answers an unexpected exception, and logged
            log.exception("broker %d: %s v%d failed", broker, request_cls.name, version)
            response = _error_response(response_cls, version, ERRORS["UNKNOWN_SERVER_ERROR"],
                                       "the simulated cluster failed on this request; see its log")
        return self._frame(response, correlation)

    def _unsupported_api_versions(self, correlation: int) -> bytes:
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(SUPPORTED.items())]
        return self._frame(ApiVersionsResponse(version=0, error_code=ERRORS["UNSUPPORTED_VERSION"], api_keys=keys),
                           correlation)

    @staticmethod
    def _frame(response, correlation: int) -> bytes:
        response.with_header(correlation_id=correlation)
        return response.encode(header=True, framed=True)


def _error_response(response_cls, version: int, code: int, message: str):
    """The response of an API at ``version`` carrying only an error: its top-level error code (and
    message) where the schema has one, every list empty."""
    fields = response_cls._struct.fields
    values = {}
    if "error_code" in fields and fields["error_code"].for_version_q(version):
        values["error_code"] = code
    if "error_message" in fields and fields["error_message"].for_version_q(version):
        values["error_message"] = message
    return response_cls(version=version, **values)
