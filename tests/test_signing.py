"""Command signing (engine/log/signing.py): keys files, sign and verify, the publisher CLI options."""

import argparse
import json

import pytest

from engine.cli import CliError
from engine.cli.connection import add_signing_arguments, signing_key as cli_key
from engine.core.commands import ChangeLimits, Pause
from engine.log.envelope import CommandEnvelope, now
from engine.log.signing import SigningError, SigningKey, load_keys, sign, signing_key, verify

KEYS = {"ops": b"s3cret", "ci": b"other"}


def envelope(command=Pause("c1")):
    return CommandEnvelope(command.command_id, now(), "me@host", command)


def test_a_signed_command_verifies_and_any_change_breaks_it():
    signed = sign(envelope(ChangeLimits({"R": 2, "P": 9}, "c2")), SigningKey("ops", b"s3cret"))
    assert signed.signature.startswith(b"ops:") and verify(signed, KEYS) is None
    altered = signed._replace(payload=ChangeLimits({"R": 3, "P": 9}, "c2"))
    assert "bad signature for key 'ops'" in verify(altered, KEYS)
    assert "bad signature" in verify(signed._replace(issued_by="mallory@host"), KEYS)
    assert "unknown key 'x'" in verify(sign(envelope(), SigningKey("x", b"s3cret")), KEYS)
    assert "unsigned" in verify(envelope(), KEYS)
    assert "malformed" in verify(envelope()._replace(signature=b"\xff\xfe"), KEYS)


def test_keys_files_and_their_errors(tmp_path):
    f = tmp_path / "keys.json"
    f.write_text(json.dumps({"ops": "s3cret", "ci": "other"}))
    assert load_keys(str(f)) == KEYS
    assert signing_key(str(f), "ci") == SigningKey("ci", b"other")
    with pytest.raises(SigningError, match="holds 2 keys"):
        signing_key(str(f))
    with pytest.raises(SigningError, match="has no key 'nope'"):
        signing_key(str(f), "nope")
    for text, problem in (("[1]", "expected a JSON object"), ("{bad", "not JSON"), ('{"a": ""}', "non-empty string"),
                          ('{"a:b": "x"}', "contain no ':'")):
        f.write_text(text)
        with pytest.raises(SigningError, match=problem):
            load_keys(str(f))
    with pytest.raises(SigningError, match="No such file"):
        load_keys(str(tmp_path / "missing.json"))


def test_publisher_cli_options(tmp_path):
    f = tmp_path / "keys.json"
    f.write_text(json.dumps({"ops": "s3cret"}))
    p = argparse.ArgumentParser()
    add_signing_arguments(p)
    assert cli_key(p.parse_args([])) is None
    assert cli_key(p.parse_args(["--signing-keys", str(f)])) == SigningKey("ops", b"s3cret")
    with pytest.raises(CliError, match="needs --signing-keys"):
        cli_key(p.parse_args(["--signing-key-id", "ops"]))
    with pytest.raises(CliError, match="has no key"):
        cli_key(p.parse_args(["--signing-keys", str(f), "--signing-key-id", "x"]))
