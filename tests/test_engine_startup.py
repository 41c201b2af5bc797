"""What an operator meets when starting engines: a cluster that does not answer stops the start with
one line and exit status 2; a worker says whether it decides or stands by; a cluster lost later is
said once per interval with a count, not ten times a second; a failover's expected heartbeat
warning of the Kafka client stays out of a WARNING log."""

from __future__ import annotations

import io
import logging
import re
import socket
import time

import pytest

from engine.cli import main
from engine.cluster.remote import RemoteCluster
from engine.runtime import logs
from engine.runtime.decider import Decider, MemoryLog
from engine.runtime.decider import IDLE_LOOK
from tests.engine_harness import SimCluster, Worker, wait_for
from tests.test_cli_eventlog import _closed_port
from tests.test_engine import procs, scenario_doc  # noqa: F401 - the fixture

UNREACHABLE = "cannot observe the cluster"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_lost_cluster_is_said_once_per_interval_with_the_count_not_at_every_tick():
    """A minute of ticks every 0.1 s against a cluster that refuses every connection (the decider's
    own lines, through the filter the worker installs on its log's handlers)."""
    clock = Clock()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setLevel(logging.WARNING)
    logs.quiet([handler], clock=clock, flush_every=None)  # flushed by hand: the clock is the test's
    logger = logging.getLogger("kreassign")
    logger.addHandler(handler)
    try:
        cluster = RemoteCluster(f"http://127.0.0.1:{_closed_port()}", timeout=1)
        asked = []
        observe = cluster.observe
        cluster.observe = lambda partitions=None: asked.append(clock.t) or observe(partitions)
        decider = Decider(MemoryLog(), cluster, clock=clock, poll_interval=1.0, floor=0.1)
        ticks = 600
        for _ in range(ticks):
            decider.tick()
            clock.t += 0.1
    finally:
        logger.removeHandler(handler)
    # an idle engine looks at its brokers alone; once they do not answer, at every full look (1 s), not at
    # every tick (0.1 s): a minute gives about 60 looks, and a warning line per 10 s with the count
    assert 55 <= len(asked) <= 61, len(asked)
    lines = [line for line in out.getvalue().splitlines() if UNREACHABLE in line]
    assert 5 <= len(lines) <= 7, lines  # the first, then one per 10 s
    held = [int(n) for n in re.findall(r"\[(\d+) more like this in the last 1\d s\]", "\n".join(lines))]
    assert len(held) == len(lines) - 1
    last = int(logs.REPEAT_INTERVAL / 1.0) + 1  # held back since the last line said: counted by the next one
    assert sum(held) + len(lines) >= len(asked) - last  # nothing else goes uncounted


def test_repeats_tell_lines_apart_by_their_words_not_their_numbers():
    clock = Clock()
    repeats = logs.Repeats(10, clock)

    def said(msg, *args, name="kreassign.decider", level=logging.WARNING):
        return repeats.filter(logging.LogRecord(name, level, __file__, 1, msg, args, None))

    assert said("connect failed after %dms", 3)
    assert not said("connect failed after %dms", 4)  # the same line but for its numbers
    assert said("step %d refused", 1)  # another line
    assert said("connect failed after 3ms", name="kreassign.engine")  # another logger
    clock.t += 10
    record = logging.LogRecord("kreassign.decider", logging.WARNING, __file__, 1, "connect failed after %dms", (9,), None)
    assert repeats.filter(record) and record.getMessage() == "connect failed after 9ms [1 more like this in the last 10 s]"


def test_what_a_stopped_flood_held_back_is_said_once_its_interval_has_passed():
    """Twenty-five warnings in 2.5 s, then silence: the first is said, and once 10 s have passed since
    it, the 24 held back with the last of them, so the log's counts add up to what happened."""
    clock = Clock()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(created)f %(message)s"))
    handler.setLevel(logging.WARNING)
    repeats = logs.quiet([handler], clock=clock, flush_every=None)
    logger = logging.getLogger("kreassign.test-flood")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for n in range(25):
            logger.warning("cannot observe the cluster: attempt %d", n)
            clock.t += 0.1
        assert repeats.flush() == 0  # within the interval: the flood may go on
        clock.t += 9.5  # 12 s since the first was said
        flushed = time.time()
        assert repeats.flush() == 1
        assert repeats.flush() == 0  # said once
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "cannot observe the cluster: attempt 0",
        "cannot observe the cluster: attempt 24 [24 more like this in the last 12 s, the last 10 s ago; none since]"]
    # stamped when said, not with the held line's time: a log read in order stays in order
    assert float(lines[-1].split(" ", 1)[0]) >= flushed


def test_an_info_line_is_said_every_time_however_soon_it_comes_again():
    """A worker given the decisions partition twice within seconds says so twice: the takeover tests
    (and an operator) read it as the fact it is (held back, a second takeover looked like none)."""
    repeats = logs.Repeats(10, Clock())
    for _ in range(2):
        record = logging.LogRecord("kreassign.engine", logging.INFO, __file__, 1,
                                   "worker %s owns the decisions partition: it decides", ("vm:1",), None)
        assert repeats.filter(record)


def test_the_heartbeat_warning_of_every_rebalance_is_info():
    logs.demote_expected()
    record = logging.LogRecord("aiokafka.consumer.group_coordinator", logging.WARNING, __file__, 1,
                               "Heartbeat failed for group %s because it is rebalancing", ("g",), None)
    assert logging.getLogger("aiokafka.consumer.group_coordinator").filter(record)
    assert record.levelno == logging.INFO
    other = logging.LogRecord("aiokafka.consumer.group_coordinator", logging.WARNING, __file__, 1,
                              "Heartbeat failed for group %s: coordinator (node %s) is not available", ("g", 1), None)
    logging.getLogger("aiokafka.consumer.group_coordinator").filter(other)
    assert other.levelno == logging.WARNING  # only the expected one


def engine_argv(broker, prefix, cluster, *extra):
    return ["engine", "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded", "--prefix", prefix,
            "--cluster", cluster, "--web-port", str(_closed_port()), *extra]


def test_an_engine_whose_sim_cluster_refuses_the_connection_does_not_start(capsys, broker, topics, prefix):
    port = _closed_port()
    started = time.monotonic()
    code = main(engine_argv(broker, prefix, f"sim+http://127.0.0.1:{port}"))
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"kreassign engine: error: --cluster sim+http://127.0.0.1:{port}: cannot reach the sim-cluster at "
                   f"127.0.0.1:{port}: no address accepts a connection (127.0.0.1:{port}: Connection refused)\n")
    assert took < 10, f"{took:.1f} s"  # the start-up check of the log comes first; the refusal itself is at once


def test_an_engine_whose_cluster_never_answers_stops_after_the_timeout(capsys, broker, topics, prefix):
    with socket.socket() as s:  # accepts, never answers: an HTTP server that hangs
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        url = f"sim+http://127.0.0.1:{s.getsockname()[1]}"
        code = main(engine_argv(broker, prefix, url, "--timeout", "2"))
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"kreassign engine: error: --cluster {url}: the cluster did not answer within 2 s (--timeout): "
                   f"sim-cluster at {url[4:]} not reachable: timed out\n"), err


def test_workers_say_whether_they_decide_or_stand_by_and_a_lost_cluster_is_said_once_per_interval(
        broker, topics, prefix, tmp_path, procs):  # noqa: F811 - the fixture
    sim = SimCluster(scenario_doc(4), speed=1, tmp_path=tmp_path)
    procs.append(sim)
    first = Worker(broker, prefix, "sim+" + sim.url)
    procs.append(first)
    first.wait_active()
    wait_for(lambda: " decides: it was given the decisions partition" in first.output(), 30, "the decider's line")
    second = Worker(broker, prefix, "sim+" + sim.url)
    procs.append(second)
    wait_for(lambda: " stands by: another worker decides" in second.output(), 60, "the standby's line")
    # the second's join is a rebalance: the first claims the decisions partition again and recovers
    # (``Worker.overtaken``: /status "recovering" meanwhile), so it is the decider again a moment later, not
    # necessarily at the instant the standby's line is out (asserted at that instant, this failed now and then)
    first.wait_active(30)
    assert " decides: " not in second.output()
    assert "because it is rebalancing" not in first.output() + second.output()  # INFO, below the default level

    sim.kill()
    lost = time.monotonic()
    # idle, the engine looks at its brokers every IDLE_LOOK s; once they do not answer, every poll (1 s)
    wait_for(lambda: "more like this in the last" in first.output(), IDLE_LOOK + 30,
             "a repeated warning with its count")
    seconds = time.monotonic() - lost
    lines = [line for line in first.output().splitlines() if UNREACHABLE in line]
    held = sum(int(n) for n in re.findall(r"\[(\d+) more like this", "\n".join(lines)))
    assert len(lines) <= seconds / logs.REPEAT_INTERVAL + 2, lines
    assert held >= 2, lines  # looks every second once lost (at least a fifth of them on a loaded machine)


class Starting:
    """A cluster that answers its observation only from the ``ready``-th question on."""

    def __init__(self, ready: int | None):
        self.ready, self.asked = ready, 0

    def observe(self, partitions=None):
        from engine.core.commands import Observation
        from engine.core.outcomes import Unavailable

        self.asked += 1
        if self.ready is None or self.asked < self.ready:
            return Unavailable("503 starting")
        return Observation()


def test_the_start_up_check_waits_for_a_starting_cluster_within_the_bound_and_says_so_once(capsys):
    from engine.cli import CliError
    from engine.cli.engine import cluster_answers

    clock = Clock()

    def sleep(s):
        clock.t += s

    cluster_answers(Starting(ready=4), "sim:x.yaml", 30, clock, sleep)
    assert capsys.readouterr().err == ("kreassign engine: --cluster sim:x.yaml does not answer yet (503 starting); "
                                       "asking again for up to 30 s (--timeout)\n")
    never = Starting(ready=None)
    with pytest.raises(CliError, match=r"^--cluster sim:x.yaml: the cluster did not answer within 5 s \(--timeout\): "
                                       r"503 starting$"):
        cluster_answers(never, "sim:x.yaml", 5, clock, sleep)
    assert never.asked == 6 and clock.t <= 1000 + 3 + 5  # asked every second, from 0 s to the bound


def test_web_port_0_is_any_free_port_not_a_traceback():
    from engine.cli.engine import check_port

    port = check_port("127.0.0.1", 0)
    assert 0 < port < 65536
    with socket.socket() as s:  # free indeed
        s.bind(("127.0.0.1", port))
