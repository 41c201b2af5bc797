"""Avro encoding of kreassign's messages: single-object encoding by default,
Confluent Schema Registry framing when a registry is configured.

Single-object encoding (Avro specification): ``C3 01``, the 8-byte
little-endian CRC-64-AVRO fingerprint of the writer schema's parsing canonical
form, then the binary body. Every message names its schema, so no registry is
needed to read it. A ``Codec`` knows the current schema of its record and every
released version (``schemas/releases/<version>/``): it reads data written with
any of them and resolves it to the current schema (BACKWARD compatibility).

Schemas are loaded with ``fastavro.schema.load_schema``, which resolves named
types from the sibling ``<full name>.avsc`` files; only that expanded form has
the specification's fingerprint.

Anything that cannot be read (unknown fingerprint, truncated body, trailing
bytes, not Avro at all) raises ``DecodeError`` with the reason; callers set
the message aside in the dead-letter topic (``engine.log.dead_letter``).
"""

from __future__ import annotations

import io
import json
import struct
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint as _fingerprint, load_schema, to_parsing_canonical_form

from engine.log.avro_mapping import avro_name, decoder, encoder
from engine.bundled import SCHEMA_DIR

RELEASES_DIR = SCHEMA_DIR / "releases"
MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = 0


class DecodeError(ValueError):
    """A message that cannot be decoded; the message is the reason."""


def load(full_name: str, directory: Path = SCHEMA_DIR) -> dict:
    """The parsed schema of ``<directory>/<full_name>.avsc``, named types inlined."""
    return load_schema(str(directory / f"{full_name}.avsc"))


def fingerprint(schema: dict) -> bytes:
    """CRC-64-AVRO fingerprint of a parsed schema, as the 8 bytes single-object encoding uses."""
    return bytes.fromhex(_fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


def releases(releases_dir: Path = RELEASES_DIR) -> list[Path]:
    return sorted(p for p in releases_dir.iterdir() if p.is_dir()) if releases_dir.is_dir() else []


class Codec:
    """Single-object Avro encoding of one record type (an envelope)."""

    def __init__(self, python_type: type, schema_dir: Path = SCHEMA_DIR, releases_dir: Path = RELEASES_DIR):
        self.python_type = python_type
        self.name = avro_name(python_type)
        self.schema = load(self.name, schema_dir)
        self.fingerprint = fingerprint(self.schema)
        self._header = MAGIC + self.fingerprint
        # Writer schemas this codec reads: the current one (None: no resolution needed)
        # and every released version, by fingerprint.
        self.writers: dict[bytes, dict | None] = {}
        for release in releases(releases_dir):
            if (release / f"{self.name}.avsc").is_file():
                old = load(self.name, release)
                self.writers[fingerprint(old)] = old
        self.writers[self.fingerprint] = None
        self.to_datum = encoder(python_type)
        self.from_datum = decoder(python_type)

    def encode(self, value: Any) -> bytes:
        out = io.BytesIO()
        out.write(self._header)
        fastavro.schemaless_writer(out, self.schema, self.to_datum(value))
        return out.getvalue()

    def decode(self, data: bytes | None) -> Any:
        """The Python value (an envelope of the core's command or event)."""
        return self.from_datum(self.decode_datum(data))

    def decode_datum(self, data: bytes | None) -> Any:
        """The plain Avro datum in the current schema (dicts, lists; a union branch as
        ``(record name, dict)``): what an analytics job wants, without building Python objects."""
        if data is None:
            raise DecodeError("empty message (no value)")
        if data[:2] != MAGIC:
            if data[:1] == bytes([CONFLUENT_MAGIC]) and len(data) >= 5:
                schema_id = struct.unpack(">I", data[1:5])[0]
                raise DecodeError(
                    f"Confluent Schema Registry framing (schema id {schema_id}) but no schema registry is configured"
                )
            raise DecodeError(f"not Avro single-object encoding (starts with {data[:10].hex(' ') or 'nothing'})")
        if len(data) < 10:
            raise DecodeError(f"truncated header ({len(data)} bytes)")
        fp = data[2:10]
        if fp not in self.writers:
            raise DecodeError(f"unknown schema fingerprint {fp.hex()} (not {self.name} of any known version)")
        return self._read(data, 10, self.writers[fp])

    def _read(self, data: bytes, start: int, writer: dict | None) -> Any:
        body = io.BytesIO(data)
        body.seek(start)
        try:
            if writer is None:
                datum = fastavro.schemaless_reader(body, self.schema, None, return_record_name=True)
            else:
                datum = fastavro.schemaless_reader(body, writer, self.schema, return_record_name=True)
        except EOFError:
            raise DecodeError("truncated body") from None
        except Exception as e:  # noqa: BLE001 - any reader failure is a bad message, never a crash
            raise DecodeError(f"cannot read the Avro body: {_short(e)}") from None
        if body.tell() != len(data):
            raise DecodeError(f"{len(data) - body.tell()} bytes after the end of the record")
        return datum

    def with_registry(self, registry: Any, topic: str) -> "RegistryCodec":
        """This codec with Confluent Schema Registry framing for ``topic`` (a URL or a client)."""
        return RegistryCodec(self, registry, topic)


class RegistryCodec:
    """Confluent Schema Registry framing (magic 0, 4-byte schema id, body), with confluent-kafka's
    own serializers; subject ``<topic>-value``. It still reads single-object encoded messages."""

    def __init__(self, codec: Codec, registry: Any, topic: str):
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
            from confluent_kafka.serialization import MessageField, SerializationContext
        except ImportError as e:  # the registry client's own dependencies are an optional extra
            raise RuntimeError(
                f"Schema Registry support needs confluent-kafka's registry extra "
                f"(pip install 'kreassign[registry]'): {e}"
            ) from None
        if isinstance(registry, str):
            registry = SchemaRegistryClient.new_client({"url": registry})
        self.codec = codec
        self.registry = registry
        schema_str = json.dumps(_without_parser_marks(codec.schema))
        self._serialize = AvroSerializer(
            registry, schema_str, lambda value, ctx: codec.to_datum(value), conf={"auto.register.schemas": True}
        )
        self._deserialize = AvroDeserializer(registry, schema_str, return_record_name=True)
        self._ctx = SerializationContext(topic, MessageField.VALUE)

    def encode(self, value: Any) -> bytes:
        return self._serialize(value, self._ctx)

    def decode(self, data: bytes | None) -> Any:
        if data is None or data[:1] != bytes([CONFLUENT_MAGIC]):
            return self.codec.decode(data)
        try:
            datum = self._deserialize(data, self._ctx)
        except Exception as e:  # noqa: BLE001 - unknown id, bad body: a bad message, never a crash
            raise DecodeError(f"cannot read Schema Registry framed message: {_short(e)}") from None
        try:
            return self.codec.from_datum(datum)
        except Exception as e:  # noqa: BLE001
            raise DecodeError(f"record does not match {self.codec.name}: {_short(e)}") from None


def _short(e: Exception, limit: int = 240) -> str:
    """An exception as one short line (fastavro's messages can quote whole schemas)."""
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _without_parser_marks(schema: Any) -> Any:
    """A parsed schema as plain JSON (fastavro adds ``__fastavro_parsed`` markers)."""
    if isinstance(schema, dict):
        return {k: _without_parser_marks(v) for k, v in schema.items() if not k.startswith("__")}
    if isinstance(schema, list):
        return [_without_parser_marks(v) for v in schema]
    return schema


@cache
def codec_for(python_type: type) -> Codec:
    """The codec of an envelope type, built once (fingerprinting is slow)."""
    return Codec(python_type)
