"""A wrong ``--bootstrap-server``: a refused connection is said at once by every command, and an
address that accepts and never answers is given up after ``--timeout``, never later.

No broker is needed: a port nobody listens on, and a socket that listens (the kernel completes
every TCP handshake) but never reads nor answers, which is what a client meets behind a silent
load balancer or a hung broker process."""

from __future__ import annotations

import socket
import time

import pytest

from engine.cli import main
from engine.kafka.reach import unreachable
from tests.test_cli_eventlog import TARGET, _closed_port

REFUSED_WITHIN = 3.0  # seconds a command may take to say that nothing listens (a refusal takes a millisecond)
MARGIN = 1.0  # seconds a command may take beyond --timeout on an address that never answers

COMMANDS = [
    ["status"], ["status", "--watch"], ["list"], ["replay"], ["execute", "--reassignment-json-file", str(TARGET)],
    ["cancel", "--request", "r"], ["pause"], ["resume"], ["throttle", "--rate", "1000"],
    ["limits", "--set", "max_partitions_in_flight=5"], ["verify", "--request", "r"], ["dead-letters"],
    ["topics", "create"], ["balance", "--show-cluster-state"], ["engine", "--cluster", "kafka", "--web-port", "0"],
]


@pytest.fixture
def silent():
    """HOST:PORT of a socket that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def timed(argv) -> tuple[int, float]:
    started = time.monotonic()
    code = main(argv)
    return code, time.monotonic() - started


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_refused_connection_is_one_line_within_moments_whatever_the_timeout(capsys, argv):
    port = _closed_port()
    code, took = timed([*argv, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "20"])
    out, err = capsys.readouterr()
    assert took < REFUSED_WITHIN, f"{argv[0]} took {took:.1f} s to say the connection was refused"
    assert code == 2 and out == "", (out, err)
    assert err.count("\n") == 1, err
    assert (f"error: cannot reach the cluster at 127.0.0.1:{port}: no bootstrap address accepts a connection "
            f"(127.0.0.1:{port}: Connection refused)") in err


def test_a_cluster_address_of_the_engine_is_checked_too(capsys, broker):
    port = _closed_port()
    code, took = timed(["list", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded",
                        "--cluster", f"kafka://127.0.0.1:{port}", "--timeout", "20"])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach the cluster at 127.0.0.1:{port}" in err and took < REFUSED_WITHIN


@pytest.mark.parametrize("argv", [["status"], ["list"], ["replay"], ["verify", "--request", "r"],
                                  ["execute", "--reassignment-json-file", str(TARGET)], ["pause"],
                                  ["engine", "--cluster", "kafka", "--web-port", "0"]],
                         ids=lambda a: a[0])
def test_an_address_that_never_answers_is_given_up_after_the_timeout_not_later(capsys, silent, argv):
    timeout = 2.0
    code, took = timed([*argv, "--bootstrap-server", silent, "--timeout", f"{timeout:g}"])
    out, err = capsys.readouterr()
    assert took < timeout + MARGIN, f"{argv[0]} waited {took:.1f} s with --timeout {timeout:g}"
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"cannot reach the cluster at {silent}" in err


def test_unreachable_answers_as_soon_as_it_knows(silent):
    closed = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    assert "Connection refused" in unreachable(closed, 20)
    assert unreachable(f"{closed},{silent}", 20) is None  # one address answers: the clients take it from there
    assert "does not resolve" in unreachable("no-such-broker.invalid:9092", 20)
    assert time.monotonic() - started < REFUSED_WITHIN
    assert unreachable("", 20) is None and unreachable(None, 20) is None  # nothing given: the command says so


@pytest.mark.parametrize("argv, says", [
    ([], "kreassign: error: the following arguments are required: COMMAND (see kreassign --help)"),
    (["nope"], "kreassign: error: argument COMMAND: invalid choice: 'nope'"),
    (["status", "--bootstrap-server", "b:1", "--bogus"],
     "kreassign status: error: unrecognized arguments: --bogus (see kreassign status --help)"),
    (["status", "--bootstrap-server", "b:1", "--watchh"],
     "kreassign status: error: unrecognized arguments: --watchh (did you mean --watch?) "
     "(see kreassign status --help)"),
    (["topics", "create", "--bootstrap-server", "b:1", "--prefx", "p."],
     "kreassign topics create: error: unrecognized arguments: --prefx (did you mean --prefix?) p. "
     "(see kreassign topics create --help)"),
    (["limits", "--bootstrap-server", "b:1", "--set", "a=1", "extra"],
     "kreassign limits: error: unrecognized arguments: extra (see kreassign limits --help)"),
    (["throttle", "--bootstrap-server", "b:1", "--rate", "0"],
     "kreassign throttle: error: argument --rate: must be at least 1, got 0"),
    (["execute", "--bootstrap-server", "b:1"],
     "kreassign execute: error: the following arguments are required: --reassignment-json-file "
     "(see kreassign execute --help)"),
])
def test_a_usage_error_is_one_line_exit_2_like_every_other_error(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith(says), err


def test_the_missing_topics_hint_names_the_prefix_in_use():
    from engine.kafka.topics import create_command, missing

    assert create_command("kreassign.events") == "kreassign topics create"
    assert create_command("demo.events") == "kreassign topics create --prefix demo."
    assert create_command("orders") is None  # not one of kreassign's topics: no hint
    assert missing("demo.commands") == "topic demo.commands does not exist (run: kreassign topics create --prefix demo.)"


def test_an_address_family_this_host_cannot_open_is_a_reason_not_a_wait(monkeypatch):
    """A name that resolves to an address of a family the host has disabled (IPv6 off: the socket
    itself cannot be made) is one more failed address, said at once, not a silent thread that leaves
    the command waiting out its timeout."""
    def no_family(*_args, **_kwargs):
        raise OSError(97, "Address family not supported by protocol")

    monkeypatch.setattr(socket, "socket", no_family)
    started = time.monotonic()
    said = unreachable("127.0.0.1:9092", 20)
    assert "Address family not supported by protocol" in said
    assert time.monotonic() - started < REFUSED_WITHIN
