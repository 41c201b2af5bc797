"""Messages that cannot be read are set aside, never a crash.

A consumer of the commands or events topic decodes each message with
``decode_or_set_aside``: a message that decodes is returned; one that does not
(unknown schema fingerprint, truncated body, not Avro, no value) becomes a
``DeadLetter`` - raw key and value byte for byte, source topic, partition and
offset, and the reason - handed to ``set_aside``, and the consumer goes on
with the next message. ``DeadLetterWriter`` is the usual ``set_aside``: it
appends the letter to the dead-letter topic through any producer (a
confluent-kafka ``Producer``, or a Faust agent's send).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, NamedTuple, TypeVar

from engine.log.codec import DecodeError, codec_for
from engine.log.envelope import now

T = TypeVar("T")


class DeadLetter(NamedTuple):
    source_topic: str
    source_partition: int
    source_offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    recorded_at: datetime

    @property
    def source(self) -> str:
        """``topic/partition/offset``: the key of the letter on the dead-letter topic."""
        return f"{self.source_topic}/{self.source_partition}/{self.source_offset}"


def decode_or_set_aside(
    decode: Callable[[bytes | None], T],
    topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
    set_aside: Callable[[DeadLetter], None],
) -> T | None:
    """``decode(value)``, or ``None`` after handing a ``DeadLetter`` to ``set_aside``."""
    try:
        return decode(value)
    except DecodeError as e:
        set_aside(DeadLetter(topic, partition, offset, key, value, str(e), now()))
        return None


class DeadLetterWriter:
    """Appends dead letters to the dead-letter topic.

    ``produce(topic, key, value)`` is any producer call (for confluent-kafka:
    ``lambda t, k, v: producer.produce(t, key=k, value=v)``); the caller flushes.
    """

    def __init__(self, produce: Callable[[str, bytes, bytes], Any], topic: str):
        self.produce = produce
        self.topic = topic
        self.codec = codec_for(DeadLetter)
        self.count = 0

    def __call__(self, letter: DeadLetter) -> None:
        self.produce(self.topic, letter.source.encode(), self.codec.encode(letter))
        self.count += 1


def read_dead_letter(value: bytes) -> DeadLetter:
    """Decode one message of the dead-letter topic."""
    return codec_for(DeadLetter).decode(value)
