"""Optional command signing: HMAC-SHA256 over the command envelope, keys from a file.

Kafka ACLs decide who may write the commands topic (docs/engine.md). Signing
adds proof of who issued a command on top: a publisher holding a key signs,
and an engine started with ``--signing-keys`` accepts only commands signed
with one of its keys. The other commands are rejected with the reason (a
``CommandRejected`` event); the engine keeps running and nothing else changes.

* Keys file: a JSON object ``{"key id": "secret", ...}``; each secret is used
  as its UTF-8 bytes. The same file (or the one entry a publisher needs) is
  given to ``kreassign execute ... --signing-keys F [--signing-key-id ID]``.
* Signed content: the envelope's Avro single-object encoding (current
  schema, ``engine.log.codec``) with ``signature`` null. The encoding is
  deterministic (maps keep their order, sets are sorted), so the engine
  recomputes exactly what the publisher signed after decoding.
* ``signature`` field: the ASCII bytes ``"<key id>:<hex digest>"``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Mapping, NamedTuple

from engine.log.codec import codec_for
from engine.log.envelope import CommandEnvelope


class SigningError(ValueError):
    """A keys file or key id that cannot be used; the message says why."""


class SigningKey(NamedTuple):
    key_id: str
    secret: bytes


def load_keys(path: str) -> dict[str, bytes]:
    """key id -> secret, from a JSON object of strings."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise SigningError(f"{path}: {e.strerror}") from None
    except ValueError as e:
        raise SigningError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict) or not doc:
        raise SigningError(f'{path}: expected a JSON object {{"key id": "secret", ...}} with at least one key')
    keys = {}
    for key_id, secret in doc.items():
        if not isinstance(secret, str) or not secret:
            raise SigningError(f"{path}: the secret of key {key_id!r} must be a non-empty string")
        if ":" in key_id or not key_id:
            raise SigningError(f"{path}: key id {key_id!r} must be non-empty and contain no ':'")
        keys[key_id] = secret.encode()
    return keys


def signing_key(path: str, key_id: str | None = None) -> SigningKey:
    """The key a publisher signs with: ``key_id``, or the only key of the file."""
    keys = load_keys(path)
    if key_id is None:
        if len(keys) != 1:
            raise SigningError(f"{path} holds {len(keys)} keys: name the one to sign with (--signing-key-id)")
        key_id = next(iter(keys))
    if key_id not in keys:
        raise SigningError(f"{path} has no key {key_id!r}")
    return SigningKey(key_id, keys[key_id])


def _digest(envelope: CommandEnvelope, secret: bytes) -> str:
    content = codec_for(CommandEnvelope).encode(envelope._replace(signature=None))
    return hmac.new(secret, content, hashlib.sha256).hexdigest()


def sign(envelope: CommandEnvelope, key: SigningKey) -> CommandEnvelope:
    return envelope._replace(signature=f"{key.key_id}:{_digest(envelope, key.secret)}".encode())


def verify(envelope: CommandEnvelope, keys: Mapping[str, bytes]) -> str | None:
    """Why the envelope must be rejected, or ``None`` if it is signed with one of ``keys``."""
    sig = envelope.signature
    if sig is None:
        return "unsigned command: this engine accepts only signed commands (--signing-keys)"
    try:
        key_id, digest = sig.decode("ascii").split(":", 1)
    except (UnicodeDecodeError, ValueError):
        return "malformed signature: expected '<key id>:<hex HMAC-SHA256>'"
    secret = keys.get(key_id)
    if secret is None:
        return f"signed with unknown key {key_id!r}"
    if not hmac.compare_digest(digest, _digest(envelope, secret)):
        return f"bad signature for key {key_id!r}: the command was altered or signed with another secret"
    return None
