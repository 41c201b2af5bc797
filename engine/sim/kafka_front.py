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

A broker that hangs (the ``hang`` fault, ``engine.sim.cluster``: a SIGSTOP) keeps
its listener: connections are accepted and requests read, and none is answered
until it resumes (then every request read meanwhile is answered, in order); its
connections stay open. The controller fences it after its session timeout, but
its listener stays as it is: a stopped process does not close its sockets.

Each broker answers from its own metadata (``engine.sim.kafka_api``), which may lag
the controller (the ``lag`` fault).

With a scenario's ``security`` section (``engine.sim.security``) the listeners
authenticate SASL/PLAIN users (SaslHandshake, SaslAuthenticate; anything else
before authentication, or a second ApiVersions, closes the connection, as Kafka's
SaslServerAuthenticator does; a wrong password is
answered SASL_AUTHENTICATION_FAILED and the connection closed 100 ms later, Kafka's
connection.failed.authentication.delay.ms) and every request
is authorized against the scenario's ACLs the way Kafka's handlers authorize it
(``engine.sim.kafka_api``), answering TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED.

Every request is counted where it arrives (``counts()``; ``GET /v1/requests`` of the sim-cluster's HTTP
API): per broker and API, the requests, the bytes of their responses and the clients (``client.id``) that
sent them. This is how the engine's own cost to a cluster is measured (``benchmarks/looks.py``).

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
import time
from collections import Counter

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from engine.sim.kafka_api import API_NAMES, APIS, ERRORS, SUPPORTED, Api
from engine.sim.security import ANONYMOUS

log = logging.getLogger("kreassign.sim.kafka")

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
FAILED_AUTHENTICATION_DELAY = 0.1  # s: Kafka's connection.failed.authentication.delay.ms default (KIP-306)
HUNG_POLL = 0.05  # s: how often a request held by a hung broker checks whether it resumed
SASL_KEYS = {API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE}  # all a client may send before it authenticates
MECHANISMS = ["PLAIN"]
_PROTOCOL_MODULES = ("kafka.protocol.admin", "kafka.protocol.metadata", "kafka.protocol.consumer",
                     "kafka.protocol.producer", "kafka.protocol.sasl")


class Session:
    """One connection: who it is (``User:NAME`` once authenticated, ``User:ANONYMOUS`` on a
    PLAINTEXT listener) and where its SASL exchange stands."""

    __slots__ = ("principal", "host", "authenticated", "mechanism", "raw_token_next", "versions_seen")

    def __init__(self, host: str, sasl: bool):
        self.host = host
        self.authenticated = not sasl
        self.principal = None if sasl else ANONYMOUS
        self.mechanism: str | None = None
        self.raw_token_next = False  # after SaslHandshake v0 the token comes unframed by Kafka's headers
        self.versions_seen = False  # an ApiVersions answered before authentication: the next must be SaslHandshake


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
    def __init__(self, sim, host: str = "127.0.0.1", port: int = 0, max_request_partition_size_limit: int | None = None):
        """``port`` 0: a free port per broker; else broker i (in id order) listens on ``port + i``.
        ``max_request_partition_size_limit``: the brokers' static ``max.request.partition.size.limit``
        (Kafka's default 2000): the most partitions one DescribeTopicPartitions answer holds."""
        if max_request_partition_size_limit is not None and max_request_partition_size_limit < 1:
            raise FrontError(f"max.request.partition.size.limit must be at least 1 (Kafka's atLeast(1)), got "
                             f"{max_request_partition_size_limit}")
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
        if max_request_partition_size_limit is not None:
            self.api.max_request_partition_size_limit = max_request_partition_size_limit
        self._messages = _known_messages()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._connections: dict[int, set[asyncio.StreamWriter]] = {b: set() for b in brokers}
        self._reconcile: asyncio.Task | None = None
        self._count_lock = threading.Lock()
        self._requests: Counter = Counter()  # (broker, api key, client id) -> requests
        self._bytes: Counter = Counter()  # (broker, api key, client id) -> bytes of the responses
        self._counting_since = time.monotonic()
        sim.front = self  # the sim-cluster's HTTP API serves its counts (GET /v1/requests)

    # -- what arrives ----------------------------------------------------------------------

    def counts(self, reset: bool = False) -> dict:
        """The requests that arrived since the start (or the last reset): ``{"seconds", "brokers": {broker:
        {api name: {"requests", "response_bytes"}}}, "clients": {client id: {"requests", "response_bytes"}},
        "total": {"requests", "response_bytes"}}`` (responses framed, as sent; a request whose connection
        was closed instead of answered counts with 0 bytes)."""
        with self._count_lock:
            requests, sent, since = dict(self._requests), dict(self._bytes), self._counting_since
            if reset:
                self._requests.clear()
                self._bytes.clear()
                self._counting_since = time.monotonic()
        brokers: dict = {}
        clients: dict = {}
        total = {"requests": 0, "response_bytes": 0}
        for (broker, key, client), n in sorted(requests.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
            size = sent.get((broker, key, client), 0)
            name = API_NAMES.get(key, "unframed" if key == -1 else f"api {key}")
            per = brokers.setdefault(broker, {}).setdefault(name, {"requests": 0, "response_bytes": 0})
            who = clients.setdefault(client or "", {"requests": 0, "response_bytes": 0})
            for d in (per, who, total):
                d["requests"] += n
                d["response_bytes"] += size
        return {"seconds": round(time.monotonic() - since, 3), "brokers": brokers, "clients": clients,
                "total": total}

    def _count(self, broker: int, key: int, client: str | None, answer) -> None:
        size = 0 if answer is None else len(answer[0] if isinstance(answer, tuple) else answer)
        with self._count_lock:
            self._requests[(broker, key, client)] += 1
            self._bytes[(broker, key, client)] += size

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
        current = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not current]  # connections still being served
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

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
        """Whether each broker listens: alive, or hung (a stopped process keeps its sockets)."""
        with self.sim.lock:
            self.sim.cluster.observe([])  # catch up with the clock: the scenario's faults happen on time
            return {b.id: b.alive or self.sim.cluster.is_hung(b.id) for b in self.sim.cluster.state.brokers.values()}

    def _hung(self, broker: int) -> bool:
        with self.sim.lock:
            self.sim.cluster.observe([])
            return self.sim.cluster.is_hung(broker)

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
        security = self.sim.security
        session = Session(peer[0] if peer else "127.0.0.1", security is not None and security.sasl)
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
                while self._hung(broker):  # read, and held: a stopped broker answers nothing
                    await asyncio.sleep(HUNG_POLL)
                answer = self.respond(broker, data, session)
                if answer is None:
                    return
                close = isinstance(answer, tuple)  # (the last answer, then the connection is closed)
                writer.write(answer[0] if close else answer)
                await writer.drain()
                if close:  # Kafka delays the close (connection.failed.authentication.delay.ms, KIP-306)
                    await asyncio.sleep(FAILED_AUTHENTICATION_DELAY)
                    return
        except ConnectionError:
            return
        finally:
            self._connections[broker].discard(writer)
            writer.close()

    def respond(self, broker: int, data: bytes, session: Session | None = None) -> bytes | tuple[bytes] | None:
        """``_respond``, counted (``counts``): the request's API key and client id, the response's bytes."""
        raw = session is not None and session.raw_token_next  # a SASL token without a request header
        answer = self._respond(broker, data, session)
        if raw or len(data) < 8:
            self._count(broker, -1, None, answer)
        else:
            self._count(broker, struct.unpack(">h", data[:2])[0], _client_id(data), answer)
        return answer

    def _respond(self, broker: int, data: bytes, session: Session | None = None) -> bytes | tuple[bytes] | None:
        """The framed response to one request, or None to close the connection (what Kafka does), or
        ``(response,)``: send it, then close the connection (a failed authentication)."""
        session = session or Session("127.0.0.1", False)
        if session.raw_token_next:  # SaslHandshake v0: the token is the whole frame
            session.raw_token_next = False
            ok, _message = self._plain(session, data)
            return struct.pack(">i", 0) if ok else None
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
        if not session.authenticated and key not in SASL_KEYS:
            log.warning("broker %d: unexpected Kafka request of type %s during SASL handshake from %s: "
                        "closing the connection, as Kafka does", broker, request_cls.name, session.host)
            return None
        if not session.authenticated and key == API_VERSIONS:
            # SaslServerAuthenticator: one ApiVersions, then the next request must be SaslHandshake
            # ("Unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST")
            if session.versions_seen or session.mechanism is not None:
                log.warning("broker %d: unexpected ApiVersions request during SASL authentication from %s (one was "
                            "answered already): closing the connection, as Kafka does", broker, session.host)
                return None
            session.versions_seen = True
        if key == SASL_HANDSHAKE:
            return self._handshake(broker, body, version, correlation, session)
        if key == SASL_AUTHENTICATE:
            return self._authenticate(broker, body, version, correlation, session)
        handler = getattr(self.api, APIS[key][1])
        try:
            with self.sim.lock:
                response = handler(broker, body, version, session)
        except Exception:  # a bug: answered as Kafka answers an unexpected exception, and logged
            log.exception("broker %d: %s v%d failed", broker, request_cls.name, version)
            response = _error_response(response_cls, version, ERRORS["UNKNOWN_SERVER_ERROR"],
                                       "the simulated cluster failed on this request; see its log")
        return self._frame(response, correlation)

    # -- SASL/PLAIN (Kafka's SaslServerAuthenticator and PlainSaslServer) ----------------------------

    def _handshake(self, broker, body, version, correlation, session: Session):
        if session.authenticated and session.principal != ANONYMOUS or session.mechanism is not None:
            log.warning("broker %d: SaslHandshake again on an authenticated connection: closing it", broker)
            return None
        if self.sim.security is None or not self.sim.security.sasl:
            log.warning("broker %d: SaslHandshake on a PLAINTEXT listener: closing the connection", broker)
            return None
        if body.mechanism not in MECHANISMS:
            log.info("broker %d: SASL mechanism %r is not enabled (PLAIN is)", broker, body.mechanism)
            return self._frame(SaslHandshakeResponse(version=version, error_code=ERRORS["UNSUPPORTED_SASL_MECHANISM"],
                                                     mechanisms=MECHANISMS), correlation)
        session.mechanism = body.mechanism
        session.raw_token_next = version == 0
        return self._frame(SaslHandshakeResponse(version=version, error_code=0, mechanisms=MECHANISMS), correlation)

    def _authenticate(self, broker, body, version, correlation, session: Session):
        if session.mechanism is None or session.authenticated:
            log.warning("broker %d: SaslAuthenticate without a handshake: closing the connection", broker)
            return None
        ok, message = self._plain(session, bytes(body.auth_bytes or b""))
        fields = dict(version=version, error_code=0 if ok else ERRORS["SASL_AUTHENTICATION_FAILED"],
                      error_message=None if ok else message, auth_bytes=b"")
        if version >= 1:
            fields["session_lifetime_ms"] = 0
        frame = self._frame(SaslAuthenticateResponse(**fields), correlation)
        if ok:
            log.info("broker %d: %s authenticated from %s", broker, session.principal, session.host)
            return frame
        log.info("broker %d: failed authentication from %s: %s", broker, session.host, message)
        return (frame,)

    def _plain(self, session: Session, token: bytes) -> tuple[bool, str]:
        """RFC 4616 ``[authzid] NUL authcid NUL passwd`` checked as PlainSaslServer checks it."""
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            return False, f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
        authzid, user, password = parts
        if not user:
            return False, "Authentication failed: username not specified"
        if not password:
            return False, "Authentication failed: password not specified"
        if not self.sim.security.authenticate(user, password):
            return False, "Authentication failed: Invalid username or password"
        if authzid and authzid != user:
            return False, "Authentication failed: Client requested an authorization id that is different from username"
        session.authenticated = True
        session.principal = f"User:{user}"
        return True, ""

    def _unsupported_api_versions(self, correlation: int) -> bytes:
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(SUPPORTED.items())]
        return self._frame(ApiVersionsResponse(version=0, error_code=ERRORS["UNSUPPORTED_VERSION"], api_keys=keys),
                           correlation)

    @staticmethod
    def _frame(response, correlation: int) -> bytes:
        response.with_header(correlation_id=correlation)
        return response.encode(header=True, framed=True)


def _client_id(data: bytes) -> str | None:
    """The client id of a request (every request header version from 1 on has it right after the
    correlation id, a nullable int16-length string); None if it cannot be read."""
    if len(data) < 10:
        return None
    (length,) = struct.unpack(">h", data[8:10])
    if length < 0 or 10 + length > len(data):
        return None
    return data[10:10 + length].decode("utf-8", errors="replace")


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
