"""The publisher and replay subcommands, and ``kreassign broker``, against the embedded broker."""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from engine.core import events as ev
from engine.core import reassignment_json
from engine.cli import main
from engine.kafka.client_config import ClientConfig
from engine.log.codec import codec_for
from engine.core.commands import Cancel, ChangeLimits, ChangeThrottle, Pause, Resume, Submit
from engine.log.dead_letter import DeadLetterWriter
from engine.kafka.embedded import EMBEDDED
from engine.log.envelope import CommandEnvelope, now
from engine.log.eventlog import EventWriter, decoder_for, read_topic
from engine.core.partition import TopicPartition
from engine.views.summary import summarize
from tests.test_eventlog import story

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "examples" / "target.json"


def kreassign(capsys, broker, prefix, *argv) -> tuple[int, str, str]:
    code = main([*argv, "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded", "--prefix", prefix])
    out, err = capsys.readouterr()
    return code, out, err


def commands(broker, topic) -> list:
    read = read_topic(ClientConfig().with_bootstrap(broker.bootstrap), topic, decoder_for(CommandEnvelope),
                      _fail, group_id="kreassign.reader", profile=EMBEDDED)
    return [m.value.payload for m in sorted(read, key=lambda m: (m.partition, m.offset))]


def _fail(letter):
    raise AssertionError(letter)


def test_execute_no_wait_publishes_the_reassignment_and_prints_the_request_id(capsys, broker, topics, prefix):
    code, out, err = kreassign(capsys, broker, prefix, "execute", "--reassignment-json-file", str(TARGET),
                               "--throttle", "1000000", "--no-wait")
    assert code == 0 and err == ""
    request_id = out.strip()
    [submit] = commands(broker, topics.commands)
    assert submit == Submit(request_id, reassignment_json.parse(TARGET.read_text()), 1_000_000, submit.command_id)
    code, out, _ = kreassign(capsys, broker, prefix, "execute", "--reassignment-json-file", str(TARGET),
                             "--request-id", "mine", "--no-wait")
    assert (code, out) == (0, "mine\n")


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not valid JSON"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "brokers [1] listed more than once"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
     '{"topic":"t","partition":0,"replicas":[2]}]}', "partition t-0 is listed 2 times"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "t-0: empty replica list"),
    ('{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "partition number must be >= 0"),
    ('{"version":1,"partitions":[]}', "the reassignment lists no partitions"),
])
def test_a_bad_reassignment_file_is_one_line_exit_2_and_nothing_is_published(
    capsys, broker, topics, prefix, tmp_path, content, problem,
):
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = kreassign(capsys, broker, prefix, "execute", "--reassignment-json-file", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"kreassign execute: error: {path}: ") and problem in err
    assert commands(broker, topics.commands) == []


def test_a_missing_file_and_an_unreachable_cluster_are_one_line_errors(capsys, tmp_path):
    code = main(["execute", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(tmp_path / "x.json")])
    assert code == 2 and capsys.readouterr().err.strip().endswith("x.json: No such file or directory")
    code = main(["pause", "--bootstrap-server", f"127.0.0.1:{_closed_port()}", "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot reach the cluster" in err


@pytest.mark.parametrize("argv", [["status"], ["pause"], ["execute", "--reassignment-json-file", str(TARGET)],
                                  ["list", "--cluster", "kafka"]])
def test_an_unreachable_cluster_is_one_line_with_its_cause_and_no_raw_log_lines(argv):
    port = _closed_port()
    result = subprocess.run([sys.executable, "-m", "engine.cli", *argv, "--bootstrap-server", f"127.0.0.1:{port}",
                             "--timeout", "2"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr  # librdkafka writes to the fd itself: checked here
    assert f"cannot reach the cluster at 127.0.0.1:{port}" in result.stderr
    assert f"(127.0.0.1:{port}: Connection refused)" in result.stderr  # engine.kafka.reach: said at once
    assert "%3|" not in result.stderr


def test_control_commands_and_cancel(capsys, broker, topics, prefix, tmp_path):
    partitions = tmp_path / "cancel.json"
    partitions.write_text('{"version":1,"partitions":[{"topic":"orders","partition":1,"replicas":[1,2]}]}')
    ids = []
    for argv in (
        ["cancel", "--request", "r1"],
        ["cancel", "--request", "r1", "--partitions", str(partitions), "--rollback"],
        ["cancel", "--request", "r1", "--partitions", '{"partitions":[{"topic":"a","partition":2}]}'],
        ["limits", "--set", "reassignment.parallel.partition.count=5", "--set", "max-incoming-moves-per-broker=3"],
        ["throttle", "--rate", "none"],
        ["throttle", "--rate", "2000"],
        ["pause"],
        ["resume"],
    ):
        code, out, err = kreassign(capsys, broker, prefix, *argv, "--no-wait")
        assert (code, err) == (0, ""), argv
        ids.append(out.strip())
    read = commands(broker, topics.commands)  # per partition: order holds per key, not across keys
    assert [c for c in read if isinstance(c, Cancel)] == [
        Cancel("r1", None, False, ids[0]),
        Cancel("r1", (TopicPartition("orders", 1),), True, ids[1]),
        Cancel("r1", (TopicPartition("a", 2),), False, ids[2]),
    ]
    assert [c for c in read if not isinstance(c, Cancel)] == [
        ChangeLimits({"reassignment.parallel.partition.count": 5, "max-incoming-moves-per-broker": 3}, ids[3]),
        ChangeThrottle(None, ids[4]), ChangeThrottle(2000, ids[5]), Pause(ids[6]), Resume(ids[7]),
    ]


@pytest.mark.parametrize("argv, problem", [
    (["limits", "--set", "no.such.limit=3"], "unknown limit 'no.such.limit' (kreassign limits --list names them all)"),
    (["limits", "--set", "max_partition_in_flight=3"],
     "unknown limit 'max_partition_in_flight' (did you mean max_partitions_in_flight? kreassign limits --list "
     "names them all)"),
    (["limits", "--set", "max_replicas_per_step=0"], "must be an integer >= 1"),
    (["limits", "--set", "max_replicas_per_step"], "expected NAME=VALUE"),
    (["limits"], "give at least one --set"),
    (["cancel", "--request", "r", "--partitions", '{"partitions":[{"topic":"a"}]}'], "partitions[0].partition"),
    (["cancel", "--request", "r", "--partitions", "[1,2"], "not valid JSON"),
])
def test_bad_command_options_are_one_line_exit_2_and_nothing_is_published(capsys, broker, topics, prefix, argv, problem):
    code, out, err = kreassign(capsys, broker, prefix, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and problem in err
    assert commands(broker, topics.commands) == []


def test_throttle_rate_must_be_positive_or_none(capsys, broker, prefix):
    with pytest.raises(SystemExit) as exit_:
        kreassign(capsys, broker, prefix, "throttle", "--rate", "0")
    assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_limits_list_needs_no_cluster(capsys):
    assert main(["limits", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("the defaults (give --bootstrap-server for the limits in force):\n")
    assert "max_partitions_in_flight (P): 200 (default); aliases: reassignment.parallel.partition.count" in out


def test_limits_explain_says_what_a_limit_bounds_by_any_of_its_names(capsys):
    assert main(["limits", "--explain", "num.concurrent.partition.movements.per.broker.out"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("max_outgoing_moves_per_broker (out), default 2; aliases: "
                          "num.concurrent.partition.movements.per.broker.out\n")
    assert "The leader serves every new follower from its disk and NIC" in out
    assert main(["limits", "--explain", "throttle-margin-pct"]) == 0
    assert capsys.readouterr().out.startswith("throttle_margin_pct (M), default 8; from 0 to 25; ")
    assert main(["limits", "--explain", "num.concurrent.partition.movements.per.broker"]) == 0  # --set takes it
    out = capsys.readouterr().out
    assert out.startswith("num.concurrent.partition.movements.per.broker sets 3 limits at once: "
                          "max_incoming_moves_per_broker, max_outgoing_moves_per_broker, max_new_replicas_per_broker.\n")
    assert "\nmax_new_replicas_per_broker (new), default 2; " in out
    assert main(["limits", "--explain", "H"]) == 0  # its symbol, as --list shows it
    assert capsys.readouterr().out.startswith("max_drop_hold_seconds (H), default 300; from 0; ")
    assert main(["limits", "--explain", "max_moves"]) == 2
    assert "unknown limit 'max_moves' (kreassign limits --list names them all)" in capsys.readouterr().err


def test_limits_list_shows_the_limits_in_force_from_the_log(capsys, broker, topics, prefix):
    from engine.core.limits import DEFAULT_LIMITS

    with EventWriter(config=ClientConfig().with_bootstrap(broker.bootstrap), prefix=prefix, profile=EMBEDDED) as w:
        w.append([ev.LimitsChanged(DEFAULT_LIMITS.changed({"max_partitions_in_flight": 50}), "c1")])
    code, out, err = kreassign(capsys, broker, prefix, "limits", "--list")
    assert (code, err) == (0, "")
    assert out.startswith(f"the limits in force (the event log on {broker.bootstrap}, prefix {prefix}):\n")
    assert "max_partitions_in_flight (P): 50 (default 200); aliases: reassignment.parallel.partition.count" in out
    assert "max_replicas_per_step (R): 1 (default); " in out


# --- replay ------------------------------------------------------------------------------------------------


def test_replay_prints_the_summary_of_the_folded_state(capsys, broker, topics, prefix):
    d = story()
    with EventWriter(config=ClientConfig().with_bootstrap(broker.bootstrap), prefix=prefix, profile=EMBEDDED) as w:
        w.append(d.events)
    code, out, err = kreassign(capsys, broker, prefix, "replay", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["events"] == doc["next_offset"] == len(d.events)
    assert {k: v for k, v in doc.items() if k in summarize(d.state)} == json.loads(json.dumps(summarize(d.state)))
    code, out, _ = kreassign(capsys, broker, prefix, "replay")
    assert code == 0 and out.startswith(f"events: {len(d.events)} ")
    assert "  r1: ended: " in out and "  r3: running: " in out and f"steps in flight: {len(d.state.steps)}" in out
    code, out, _ = kreassign(capsys, broker, prefix, "replay", "--until-offset", "3", "--format", "json")
    assert json.loads(out)["events"] == 3


def test_replay_of_a_missing_events_topic_is_a_one_line_error(capsys, broker, prefix):
    code, out, err = kreassign(capsys, broker, prefix, "replay", "--timeout", "5")
    assert code == 2 and err == f"kreassign replay: error: topic {prefix}events does not exist on {broker.bootstrap} " \
        f"(run: kreassign topics create --prefix {prefix})\n"  # the prefix in use: the hint works as printed


def test_topics_create_twice_prints_created_then_exists(capsys, broker, prefix):
    code, out, _ = kreassign(capsys, broker, prefix, "topics", "create")
    assert code == 0 and out.count(": created") == 5
    code, out, _ = kreassign(capsys, broker, prefix, "topics", "create")
    assert code == 0 and out.count(": exists") == 5


def test_a_deployment_without_the_snapshots_topic_is_told_and_folds_the_whole_log(capsys, broker, prefix):
    from confluent_kafka.admin import AdminClient, NewTopic

    from engine.kafka.topics import LAYOUT, SNAPSHOTS

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # an older version's topics
    for f in admin.create_topics([NewTopic(prefix + s.suffix, s.partitions, 1, config=dict(s.config))
                                  for s in LAYOUT if s is not SNAPSHOTS]).values():
        f.result()
    with EventWriter(broker.bootstrap, prefix=prefix, profile=EMBEDDED) as w:
        w.append([ev.Paused()])
    code, out, err = kreassign(capsys, broker, prefix, "replay", "--format", "json", "--timeout", "5")
    assert code == 0 and json.loads(out)["paused"] is True and json.loads(out)["from_snapshot"] is None
    assert f"note: topic {prefix}snapshots does not exist" in err and f"kreassign topics create --prefix {prefix}," in err
    code, out, err = kreassign(capsys, broker, prefix, "status", "--format", "json", "--timeout", "5")
    assert code == 0 and json.loads(out)["paused"] is True and "snapshots does not exist" in err
    code, out, _ = kreassign(capsys, broker, prefix, "topics", "create")
    assert code == 0 and out.count(": exists") == 4 and f"{prefix}snapshots: created" in out


# --- dead letters ---------------------------------------------------------------------------------------------


def test_dead_letters_lists_every_unreadable_message_with_source_reason_and_the_original_bytes(
        capsys, broker, topics, prefix):
    good = codec_for(CommandEnvelope).encode(CommandEnvelope("c1", now(), "me@host", Pause("c1")))
    bad = {1: b"not avro at all", 2: good[:-3], 3: None}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in (good, bad[1], bad[2], bad[3]):
        producer.produce(topics.commands, key=b"control", value=value, partition=0)
    assert producer.flush(10) == 0
    dead = DeadLetterWriter(lambda t, k, v: producer.produce(t, key=k, value=v), topics.dead_letters)
    read = read_topic(ClientConfig().with_bootstrap(broker.bootstrap), topics.commands,
                      decoder_for(CommandEnvelope), dead, group_id="kreassign.reader",
                      profile=EMBEDDED)
    assert [m.value.payload for m in read] == [Pause("c1")]
    producer.produce(topics.dead_letters, value=b"junk on the dead-letter topic itself")
    assert producer.flush(10) == 0

    code, out, err = kreassign(capsys, broker, prefix, "dead-letters", "--format", "json")
    assert code == 0 and err.startswith(f"kreassign dead-letters: skipped {topics.dead_letters}/0/3: not Avro")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["source_topic"], d["source_partition"], d["source_offset"], d["key"]) for d in docs] == [
        (topics.commands, 0, offset, base64.b64encode(b"control").decode()) for offset in (1, 2, 3)]
    assert [None if d["value"] is None else base64.b64decode(d["value"]) for d in docs] == [bad[1], bad[2], bad[3]]
    reasons = [d["reason"] for d in docs]
    assert reasons[0].startswith("not Avro single-object encoding") and reasons[1:] == [
        "truncated body", "empty message (no value)"]

    code, out, _ = kreassign(capsys, broker, prefix, "dead-letters")
    lines = out.splitlines()
    assert code == 0 and lines[-1] == f"3 dead letters on {topics.dead_letters}"
    assert [line.split("  ")[1:] for line in lines[:-1]] == [
        [f"{topics.commands}/0/1", "(15 bytes)", reasons[0]],
        [f"{topics.commands}/0/2", f"({len(good) - 3} bytes)", "truncated body"],
        [f"{topics.commands}/0/3", "(no value)", "empty message (no value)"],
    ]
    code, out, _ = kreassign(capsys, broker, prefix, "dead-letters", "--source", topics.events)
    assert (code, out) == (0, f"0 dead letters on {topics.dead_letters}\n")


# --- kreassign broker --------------------------------------------------------------------------------------


def test_broker_subcommand_prints_its_address_serves_and_stops_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "broker", "--prefix", "cli-broker."],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        bootstrap = proc.stdout.readline().strip()
        assert proc.stdout.readline().strip() == f"use: --bootstrap-server {bootstrap} --broker-profile embedded " \
            "--prefix cli-broker."
        host, port = bootstrap.rsplit(":", 1)
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = set(admin.list_topics(timeout=10).topics)
        assert {"cli-broker.commands", "cli-broker.events", "cli-broker.dead-letters"} <= names
        del admin
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert _refused(host, int(port)), "tansu still listens after the broker command stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _refused(host: str, port: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_replay_shows_each_pacing_of_the_looks_with_what_it_came_to(capsys, broker, topics, prefix):
    """``replay`` summarised the state, which keeps only the pacing on now: no pacing was ever shown, not even
    cut in the middle of one, while ``status`` folded from the same log showed it. It lists each pacing: its
    line and start, and its end with the looks deferred, the longest wait and how long it lasted, or that it
    is still on where the fold stops."""
    line = "looks paced by the request budget: broker 3 at 12/s"
    log = [ev.LooksPaced(line), ev.Paused(), ev.LooksPaced(None, 25, 1.0, 92.0), ev.Resumed(),
           ev.LooksPaced("looks paced by the request budget: broker 1 at 12/s")]
    with EventWriter(config=ClientConfig().with_bootstrap(broker.bootstrap), prefix=prefix, profile=EMBEDDED) as w:
        w.append(log)
    code, out, err = kreassign(capsys, broker, prefix, "replay", "--format", "json", "--from-start")
    assert (code, err) == (0, "")
    first, second = json.loads(out)["pacings"]
    assert first["line"] == line and first["started_at"] <= first["ended_at"]
    assert (first["deferred"], first["longest_wait_seconds"], first["lasted_seconds"]) == (25, 1.0, 92.0)
    assert second["line"].endswith("broker 1 at 12/s") and second["started_at"] and second["ended_at"] is None
    code, out, _ = kreassign(capsys, broker, prefix, "replay")
    assert code == 0
    assert "looks paced by the request budget (LooksPaced): 2" in out
    assert (f"to {first['ended_at']}: {line}; then the engine's looks no longer wait for the request budget (25 "
            "looks deferred over 92 s, the longest wait 1.00 s)") in out
    assert f"from {second['started_at']} (still on where the fold stops): {second['line']}" in out
    # cut in the middle of the first: on, as status shows it from the same cut of the log
    code, out, _ = kreassign(capsys, broker, prefix, "replay", "--until-offset", "2", "--format", "json")
    [on] = json.loads(out)["pacings"]
    assert (on["line"], on["started_at"], on["ended_at"]) == (line, first["started_at"], None)
    code, out, _ = kreassign(capsys, broker, prefix, "replay", "--until-offset", "2")
    assert f"from {first['started_at']} (still on where the fold stops): {line}" in out
    code, out, _ = kreassign(capsys, broker, prefix, "status", "--format", "json")
    assert [a["title"] for a in json.loads(out)["attention"] if a["kind"] == "paced"] == [second["line"]]
