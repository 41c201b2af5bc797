"""A recording TCP proxy in front of a Kafka broker, and what Kafka's authorizer checks for each request.

``Recorder`` listens on a port that the broker advertises as its own (so every
connection of every client goes through it), forwards the bytes unchanged both
ways, and decodes each request (kafka-python's schema-generated protocol
classes) into ``Seen(client_id, api, version, body)``. It is not a broker: it
answers nothing itself.

``checks(seen)`` is the authorization Kafka's broker makes for that request,
as its handlers make it (KafkaApis / AuthHelper, read from Kafka's source): the
(operation, resource type, name) triples that must all be allowed. An API not
in the table raises, so a client that starts sending something new is noticed.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader

from engine.sim.kafka_front import _known_messages

# KIP-714 client telemetry (librdkafka asks for it): flexible from v0; Kafka authorizes nothing for them
# (KafkaApis.handleGetTelemetrySubscriptionsRequest / handlePushTelemetryRequest); kafka-python has no schema of them
TELEMETRY = {71: "GetTelemetrySubscriptions", 72: "PushTelemetry"}
CONSUMER_GROUP_DESCRIBE = 69  # KIP-848's describe (librdkafka's describe_consumer_groups tries it first): flexible v0
ANY_TOPIC_WRITE = ("WRITE", "ANY_TOPIC", "*")  # InitProducerId: IDEMPOTENT_WRITE on the cluster or WRITE on any topic
CLUSTER = "kafka-cluster"


@dataclass(frozen=True)
class Seen:
    client_id: str
    api: str
    version: int
    body: Any


class Recorder:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1"):
        self.target = target
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((host, 0))
        self.server.listen(64)
        self.address = f"{host}:{self.server.getsockname()[1]}"
        self.seen: list[Seen] = []
        self.undecoded: list[str] = []
        self._lock = threading.Lock()
        self._messages = _known_messages()
        self._stop = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="recorder-accept").start()

    def close(self) -> None:
        self._stop = True
        self.server.close()
        for s in list(self._sockets):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while True:
                head = _read(client, 4)
                if head is None:
                    break
                (size,) = struct.unpack(">i", head)
                body = _read(client, size)
                if body is None:
                    break
                self._record(body)
                upstream.sendall(head + body)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record(self, data: bytes) -> None:
        key, version = struct.unpack(">hh", data[:4])
        cls = self._messages.get((key, True))
        if cls is None and key in TELEMETRY:
            header = RequestHeader.decode(io.BytesIO(data), flexible=True)
            with self._lock:
                self.seen.append(Seen(header.client_id or "", TELEMETRY[key], version, None))
            return
        if cls is None and key == CONSUMER_GROUP_DESCRIBE:
            buf = io.BytesIO(data)
            header = RequestHeader.decode(buf, flexible=True)
            with self._lock:
                self.seen.append(Seen(header.client_id or "", "ConsumerGroupDescribe", version,
                                      _compact_strings(buf)))
            return
        if cls is None:
            with self._lock:
                self.undecoded.append(f"api key {key} v{version}")
            return
        try:
            buf = io.BytesIO(data)
            header = RequestHeader.decode(buf, flexible=cls.flexible_version_q(version))
            body = cls.decode(memoryview(data)[buf.tell():], version=version)
        except Exception as e:  # noqa: BLE001 - noted, never stops the traffic
            with self._lock:
                self.undecoded.append(f"{cls.__name__} v{version}: {type(e).__name__}: {e}")
            return
        with self._lock:
            self.seen.append(Seen(header.client_id or "", cls.__name__.removesuffix("Request"), version, body))


def _uvarint(buf: io.BytesIO) -> int:
    shift = value = 0
    while True:
        b = buf.read(1)[0]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def _compact_strings(buf: io.BytesIO) -> list[str]:
    """A compact array of compact strings (ConsumerGroupDescribe's GroupIds, its first field)."""
    n = _uvarint(buf) - 1
    return [buf.read(_uvarint(buf) - 1).decode() for _ in range(max(n, 0))]


def _read(s: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# --- what Kafka's broker authorizes for each request ------------------------------------------


def _topics(items, names_by_id) -> list[str]:
    out = []
    for t in items or ():
        name = getattr(t, "name", None) or getattr(t, "topic", None)
        if not name:
            tid = getattr(t, "topic_id", None)
            name = names_by_id.get(str(tid), f"<topic id {tid}>")
        out.append(name)
    return out


def checks(s: Seen, names_by_id: dict[str, str]) -> list[tuple[str, str, str]]:
    """(operation, resource type, name) Kafka requires for ``s`` (all of them)."""
    b = s.body
    api = s.api
    if api in ("ApiVersions", "SaslHandshake", "SaslAuthenticate", "DescribeCluster") or api in TELEMETRY.values():
        return []
    if api == "Metadata":  # DESCRIBE each topic named; an all-topics request leaves out the rest (no check fails)
        if b.topics is None or (s.version == 0 and not b.topics):
            return []
        return [("DESCRIBE", "TOPIC", t) for t in _topics(b.topics, names_by_id)]
    if api in ("ListOffsets", "DescribeTopicPartitions"):
        return [("DESCRIBE", "TOPIC", t) for t in _topics(b.topics, names_by_id)]
    if api == "Produce":  # a transactional one also needs WRITE on its transactional id
        txn = getattr(b, "transactional_id", None)
        return ([("WRITE", "TRANSACTIONAL_ID", txn)] if txn else []) + [
            ("WRITE", "TOPIC", t) for t in _topics(b.topic_data, names_by_id)]
    if api == "Fetch":
        return [("READ", "TOPIC", t) for t in _topics(b.topics, names_by_id)]
    if api == "InitProducerId":  # transactional: WRITE on its id (the decider's writer)
        return [("WRITE", "TRANSACTIONAL_ID", b.transactional_id)] if b.transactional_id else [ANY_TOPIC_WRITE]
    if api == "FindCoordinator":  # key type 0: a group, 1: a transactional id
        keys = list(b.coordinator_keys or []) if s.version >= 4 else [b.key]
        kinds = {0: "GROUP", 1: "TRANSACTIONAL_ID"}
        if b.key_type not in kinds:
            raise AssertionError(f"FindCoordinator for key type {b.key_type}: kreassign only has groups and transactions")
        return [("DESCRIBE", kinds[b.key_type], k) for k in keys]
    if api == "AddPartitionsToTxn":  # v0-3 (a client's): WRITE on the id and on each topic added
        if s.version > 3:
            raise AssertionError(f"AddPartitionsToTxn v{s.version}: a broker's batched form, not a client's")
        return [("WRITE", "TRANSACTIONAL_ID", b.v3_and_below_transactional_id)] + [
            ("WRITE", "TOPIC", t) for t in _topics(b.v3_and_below_topics, names_by_id)]
    if api == "EndTxn":
        return [("WRITE", "TRANSACTIONAL_ID", b.transactional_id)]
    if api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
        return [("READ", "GROUP", b.group_id)]
    if api == "OffsetCommit":
        return [("READ", "GROUP", b.group_id)] + [("READ", "TOPIC", t) for t in _topics(b.topics, names_by_id)]
    if api == "OffsetFetch":
        groups = b.groups if s.version >= 8 else [b]
        out = []
        for g in groups:
            out.append(("DESCRIBE", "GROUP", g.group_id))
            out += [("DESCRIBE", "TOPIC", t) for t in _topics(g.topics, names_by_id)]
        return out
    if api == "DescribeGroups":
        return [("DESCRIBE", "GROUP", g) for g in b.groups]
    if api == "ConsumerGroupDescribe":  # KafkaApis.handleConsumerGroupDescribe
        return [("DESCRIBE", "GROUP", g) for g in b]
    if api == "CreateTopics":  # CREATE on the cluster, or on each topic (checked as the topic)
        return [("CREATE", "TOPIC", t.name) for t in b.topics]
    raise AssertionError(f"{api} v{s.version} from {s.client_id!r}: not in the audit's table of Kafka's checks")
