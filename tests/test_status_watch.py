"""``kreassign status --watch`` where there is no terminal (a pipe, a log file), and Ctrl-C at any moment.

Each test runs the command as its own process (a terminal or not is a property of its standard
output) and waits for conditions: frames read from the pipe, connections accepted by a socket."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import threading
import time

import pytest

from tests.engine_harness import KREASSIGN

FRAME = "--- kreassign status at "


def lines_of(stream) -> queue.Queue:
    """The stream's lines as they come, read by a thread (``None`` at its end)."""
    q: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=read, daemon=True).start()
    return q


def test_watch_into_a_pipe_prints_a_plain_frame_per_interval_and_ctrl_c_ends_it(broker, topics, prefix):
    p = subprocess.Popen(KREASSIGN + ["status", "--watch", "--bootstrap-server", broker.bootstrap, "--broker-profile",
                                      "embedded", "--prefix", prefix], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out = lines_of(p.stdout)
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while sum(line.startswith(FRAME) for line in seen) < 3:
            line = out.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, (seen, p.stderr.read())
            seen.append(line)
        p.send_signal(signal.SIGINT)
        assert p.wait(10) == 0
        err = p.stderr.read()
    finally:
        p.kill()
        p.wait()
    assert err == ""
    frames = "".join(seen).split(FRAME)[1:]
    assert all("no reassignment requests\n" in f and "limits: max_replicas_per_step=1" in f for f in frames[:2])
    assert "\x1b[" not in "".join(seen)  # plain text: no colour nor cursor codes
    limits = next(line for line in seen if line.startswith("limits: "))
    assert limits.count("\n") == 1 and len(limits) > 80  # one line, not wrapped at 80 columns


@pytest.mark.parametrize("argv, code, err", [
    (["status", "--watch"], 0, ""),  # Ctrl-C is how a watch ends
    (["status"], 130, "kreassign status: interrupted\n"),
])
def test_ctrl_c_before_the_first_frame_stops_at_once_without_a_traceback(argv, code, err):
    """The first read is under way (a cluster that accepts and never answers, a long --timeout): the
    Kafka client blocks in C, where Python's own Ctrl-C handling waits until it returns."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        s.settimeout(30)
        p = subprocess.Popen(KREASSIGN + [*argv, "--bootstrap-server", f"127.0.0.1:{s.getsockname()[1]}",
                                          "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            held = [s.accept()[0] for _ in range(2)]  # the reachability check's, then the Kafka client's
            time.sleep(0.2)  # the client has sent its first request (a wait within the read, not for it)
            p.send_signal(signal.SIGINT)
            sent = time.monotonic()
            out, got = p.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            p.kill()
            p.wait()
            for c in locals().get("held", []):
                c.close()
    assert (p.returncode, out, got) == (code, "", err)
    assert took < 5, f"Ctrl-C took {took:.1f} s"


def test_output_that_is_not_a_terminal_is_never_wrapped_at_80_columns():
    import io

    from engine.cli import console_for

    out = io.StringIO()
    line = "query it: kreassign analytics query --warehouse /a/long/path/to/the/warehouse " + "x" * 120
    console_for(out).print(line)
    assert out.getvalue() == line + "\n"


def test_a_reader_that_went_away_is_no_traceback():
    """``kreassign ... | head -1``: the pipe's reader is gone before the command writes (closed first)."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(KREASSIGN + ["limits", "--list"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 1 and p.stderr == ""
