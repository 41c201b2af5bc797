"""The Avro schemas and codec: every command and event survives a round trip,
every encoded value validates against its schema, old data stays readable,
and bad bytes are a reason, never a crash."""

from __future__ import annotations

import io
import json
import random
import shutil
import struct
from datetime import datetime, timezone
from pathlib import Path

import fastavro
import pytest
from fastavro.utils import generate_many
from fastavro.validation import validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import events as ev
from engine.log.avro_mapping import avro_name, record_fields, records_in
from engine.log.codec import MAGIC, RELEASES_DIR, SCHEMA_DIR, Codec, DecodeError, codec_for, fingerprint, load, releases
from engine.log.dead_letter import DeadLetter
from engine.log.envelope import COMMAND_TYPES, CommandEnvelope, EventEnvelope
from tests.avro_strategies import MILLIS, values

ENVELOPES = (EventEnvelope, CommandEnvelope, DeadLetter)
RECORDS: dict[str, type] = {}
for _root in ENVELOPES:
    records_in(_root, RECORDS)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", ev.EVENT_TYPES, ids=lambda t: t.__name__)
@FAST
@given(data=st.data())
def test_every_event_survives_the_round_trip_and_validates(event_type, data):
    envelope = EventEnvelope(data.draw(st.uuids().map(str)), data.draw(MILLIS), data.draw(values(event_type)))
    _check_round_trip(codec_for(EventEnvelope), envelope)


@pytest.mark.parametrize("command_type", COMMAND_TYPES, ids=lambda t: t.__name__)
@FAST
@given(data=st.data())
def test_every_command_survives_the_round_trip_and_validates(command_type, data):
    envelope = CommandEnvelope(
        data.draw(st.uuids().map(str)), data.draw(MILLIS), data.draw(values(str)),
        data.draw(values(command_type)), data.draw(values(bytes | None)),
    )
    _check_round_trip(codec_for(CommandEnvelope), envelope)


@FAST
@given(values(DeadLetter))
def test_dead_letters_survive_the_round_trip(letter):
    _check_round_trip(codec_for(DeadLetter), letter)


def _check_round_trip(codec: Codec, value) -> None:
    datum = codec.to_datum(value)
    assert validate(datum, codec.schema, raise_errors=True)
    data = codec.encode(value)
    assert data[:2] == MAGIC and data[2:10] == codec.fingerprint
    assert codec.decode(data) == value
    payload = getattr(value, "payload", None)
    if payload is not None:  # the payload alone validates against its own record's schema
        assert validate(codec_for(type(payload)).to_datum(payload), load(avro_name(type(payload))), raise_errors=True)


def test_equal_sets_encode_to_equal_bytes():
    from engine.core.partition import PartitionState

    codec = codec_for(PartitionState)
    a = PartitionState((1, 2, 3), frozenset([3, 1, 2]), 1)
    b = PartitionState((1, 2, 3), frozenset([2, 3, 1]), 1)
    assert codec.encode(a) == codec.encode(b)


# --- the schema files ------------------------------------------------------------------------


def test_one_schema_file_per_record_and_no_other():
    files = {p.name for p in SCHEMA_DIR.glob("*.avsc")}
    assert files == {f"{name}.avsc" for name in RECORDS}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_schema_has_namespace_docs_and_the_python_fields(name):
    raw = json.loads((SCHEMA_DIR / f"{name}.avsc").read_text())
    assert raw["namespace"] == "io.kreassign" and f"{raw['namespace']}.{raw['name']}" == name
    assert raw.get("doc"), f"{name}: record has no doc"
    for f in raw["fields"]:
        assert f.get("doc"), f"{name}.{f['name']}: field has no doc"
    assert [f["name"] for f in raw["fields"]] == [n for n, _h in record_fields(RECORDS[name])]


def test_fingerprint_matches_the_avro_specification_vectors():
    # share/test/data/schema-tests.txt of the Avro project: CRC-64-AVRO as signed Java longs.
    vectors = {
        '"null"': 7195948357588979594,
        '{"type":"record","name":"foo","fields":[{"name":"f1","type":"boolean"}]}': 7843277075252814651,
    }
    for schema, want in vectors.items():
        assert fingerprint(fastavro.parse_schema(json.loads(schema))) == struct.pack("<q", want)


# --- evolution: BACKWARD compatible --------------------------------------------------------------


def backward_problems(current_dir: Path, releases_dir: Path, samples: int = 25) -> list[str]:
    """Data written with every released schema, read with the current one: the problems."""
    problems = []
    rng_state = random.getstate()
    random.seed(435)  # fastavro's data generator uses the random module: keep it deterministic
    try:
        for release in releases(releases_dir):
            for path in sorted(release.glob("*.avsc")):
                name = path.stem
                if not (current_dir / path.name).is_file():
                    problems.append(f"{release.name}: {name} was removed")
                    continue
                old = load(name, release)
                codec = Codec(RECORDS[name], current_dir, releases_dir)
                for datum in _samples(old, release, samples):
                    out = io.BytesIO()
                    fastavro.schemaless_writer(out, old, datum)
                    try:
                        codec.decode(MAGIC + fingerprint(old) + out.getvalue())
                    except (DecodeError, TypeError, KeyError) as e:
                        problems.append(f"{release.name}: {name}: {e}")
                        break
    finally:
        random.setstate(rng_state)
    return problems


def _samples(schema: dict, release: Path, n: int) -> list:
    """Random data for ``schema``, plus data for every branch of a union-of-records field."""
    out = list(generate_many(schema, n))
    for field in schema["fields"]:
        if isinstance(field["type"], list) and sum(isinstance(b, dict) for b in field["type"]) > 1:
            base = out[0]
            for branch in field["type"]:
                if isinstance(branch, dict):
                    out.append({**base, field["name"]: (branch["name"], next(generate_many(load(branch["name"], release), 1)))})
    return out


def test_there_is_a_released_version_and_it_is_readable_by_the_current_schemas():
    assert releases(RELEASES_DIR), "schemas/releases/ holds no released version"
    assert backward_problems(SCHEMA_DIR, RELEASES_DIR) == []


def test_current_schemas_know_every_released_fingerprint():
    for release in releases(RELEASES_DIR):
        for envelope in ENVELOPES:
            codec = codec_for(envelope)
            if (release / f"{codec.name}.avsc").is_file():
                assert fingerprint(load(codec.name, release)) in codec.writers


@pytest.mark.parametrize("change", ["new field without default", "removed union branch", "changed type"])
def test_an_incompatible_change_is_detected(tmp_path, change):
    current = tmp_path / "current"
    shutil.copytree(SCHEMA_DIR, current, ignore=shutil.ignore_patterns("releases"))
    if change == "new field without default":
        path = current / "io.kreassign.TopicPartition.avsc"
        schema = json.loads(path.read_text())
        schema["fields"].append({"name": "epoch", "type": "long", "doc": "x"})
    elif change == "removed union branch":
        path = current / "io.kreassign.EventEnvelope.avsc"
        schema = json.loads(path.read_text())
        schema["fields"][2]["type"].remove("io.kreassign.Paused")
    else:
        path = current / "io.kreassign.Broker.avsc"
        schema = json.loads(path.read_text())
        schema["fields"][0]["type"] = "string"
    path.write_text(json.dumps(schema))
    assert backward_problems(current, RELEASES_DIR, samples=10) != []


# --- bad bytes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good() -> bytes:
    return codec_for(EventEnvelope).encode(EventEnvelope("id-1", datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=timezone.utc), ev.Paused("c")))


@pytest.mark.parametrize("mangle, reason", [
    (lambda b: b[:-3], "truncated body"),
    (lambda b: b[:6], "truncated header"),
    (lambda b: b + b"\x00", "bytes after the end of the record"),
    (lambda b: b[:2] + b"\x01" * 8 + b[10:], "unknown schema fingerprint"),
    (lambda b: b"{\"not\": \"avro\"}", "not Avro single-object encoding"),
    (lambda b: b"", "not Avro single-object encoding"),
    (lambda b: None, "empty message"),
    (lambda b: b"\x00\x00\x00\x00\x07" + b[10:], "Confluent Schema Registry framing (schema id 7)"),
])
def test_bad_bytes_raise_decode_error_with_the_reason(good, mangle, reason):
    with pytest.raises(DecodeError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        codec_for(EventEnvelope).decode(mangle(good))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_no_bytes_crash_the_decoder(data):
    codec = codec_for(EventEnvelope)
    for candidate in (data, MAGIC + codec.fingerprint + data):
        try:
            codec.decode(candidate)
        except DecodeError:
            pass


# --- Confluent Schema Registry framing ----------------------------------------------------------------


def test_registry_framing_round_trip_with_confluents_mock_registry(good):
    pytest.importorskip("confluent_kafka.schema_registry.avro")
    from confluent_kafka.schema_registry import SchemaRegistryClient

    registry = SchemaRegistryClient.new_client({"url": "mock://kreassign-test"})
    codec = codec_for(EventEnvelope).with_registry(registry, "kreassign.events")
    value = EventEnvelope("id-2", datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=timezone.utc), ev.ThrottleRateChanged(5, "operator", "c"))
    data = codec.encode(value)
    assert data[0] == 0 and registry.get_subjects() == ["kreassign.events-value"]
    assert codec.decode(data) == value
    assert codec.decode(good) == codec_for(EventEnvelope).decode(good)  # single-object still read
    with pytest.raises(DecodeError, match="Schema Registry"):
        codec.decode(b"\x00\x00\x00\x03\x09" + data[5:])  # an id the registry never issued


def test_the_limits_schema_defaults_are_the_engines_defaults():
    # a log written before a limit existed folds to the engine's default for it, not another value
    # (creation_window_ms's schema default was 2000 after the engine's became 1500)
    import dataclasses
    import json

    from engine.core.limits import DEFAULT_LIMITS

    schema = json.loads((SCHEMA_DIR / "io.kreassign.Limits.avsc").read_text())
    defaults = {f["name"]: f.get("default") for f in schema["fields"]}
    assert defaults == {f.name: getattr(DEFAULT_LIMITS, f.name) for f in dataclasses.fields(DEFAULT_LIMITS)}
