"""Every command subcommand prints the engine's verdict: through the embedded broker and a running
engine (a Faust worker on a sim-cluster), the exit statuses and the messages a user sees; the
rejections then stay listed by ``status`` and ``replay`` and counted in ``/metrics``."""

from __future__ import annotations

import argparse
import json
import urllib.request

from engine.cli import main
from engine.sim import scenario as S
from tests.engine_harness import SimCluster, Worker
from tests.test_engine import procs, scenario_doc  # noqa: F401  (procs is a fixture)


def run(capsys, broker, prefix, *argv) -> tuple[int, str, str]:
    code = main([*argv, "--bootstrap-server", broker.bootstrap, "--broker-profile", "embedded", "--prefix", prefix])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, partitions) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(path)


def test_commands_wait_for_the_engines_verdict_and_print_it(broker, topics, tmp_path, procs, capsys):  # noqa: F811
    prefix = topics.events[: -len("events")]
    doc = scenario_doc(8, brokers=5, size="2 GB")
    sim = SimCluster(doc, speed=1, tmp_path=tmp_path)  # slow: the request is still running when it is cancelled
    procs.append(sim)
    worker = Worker(broker, prefix, f"sim+{sim.url}")
    procs.append(worker)
    worker.wait_active()

    # a cancel of a request that does not exist: rejected, the reason on stderr, exit 1
    code, out, err = run(capsys, broker, prefix, "cancel", "--request", "does-not-exist")
    assert (code, out) == (1, "")
    assert err.startswith("kreassign cancel: rejected: cancel of request does-not-exist (1 reason); nothing changed")
    assert "  - unknown request 'does-not-exist'" in err

    # a reassignment naming broker 99, an unknown topic and an unknown partition: every reason
    bad = write(tmp_path, "bad.json", [{"topic": "t", "partition": 0, "replicas": [1, 2, 99]},
                                       {"topic": "nope", "partition": 0, "replicas": [1, 2, 3]},
                                       {"topic": "t", "partition": 77, "replicas": [1, 2, 3]}])
    code, out, err = run(capsys, broker, prefix, "execute", "--reassignment-json-file", bad)
    assert (code, out) == (1, "")
    assert "rejected: submit of request" in err and "(3 reasons)" in err
    reasons = [line for line in err.splitlines() if line.startswith("  - ")]
    assert len(reasons) == 3
    assert any("99" in r for r in reasons) and any("'nope'" in r for r in reasons) and any("t-77" in r for r in reasons)

    # a good one: accepted, the request id labelled
    targets = tuple(S.from_document(doc).targets)
    good = write(tmp_path, "good.json", [{"topic": t.topic, "partition": t.partition, "replicas": list(t.replicas)}
                                         for t in targets])
    code, out, err = run(capsys, broker, prefix, "execute", "--reassignment-json-file", good, "--request-id", "r1")
    assert (code, err) == (0, "")
    assert out.startswith(f"accepted: request r1: {len(targets)} partitions (")
    # the same request again: nothing new for the engine to decide, and the command says so
    code, out, err = run(capsys, broker, prefix, "execute", "--reassignment-json-file", good, "--request-id", "r1")
    assert (code, err) == (0, "") and "already accepted with exactly these targets" in out

    # control commands
    code, out, _ = run(capsys, broker, prefix, "pause")
    assert code == 0 and out.startswith("accepted: paused")
    code, out, err = run(capsys, broker, prefix, "pause")  # set-like: a runbook's repeated pause is no error
    assert (code, err) == (0, "") and out.startswith("accepted: already paused, nothing changed")
    code, out, _ = run(capsys, broker, prefix, "limits", "--set", "reassignment.parallel.partition.count=3")
    assert code == 0 and "max_partitions_in_flight=3" in out
    code, out, _ = run(capsys, broker, prefix, "throttle", "--rate", "30000000")
    assert code == 0 and out.startswith("accepted: throttle rate for new steps 30 MB/s")
    code, out, _ = run(capsys, broker, prefix, "resume")
    assert code == 0 and out.startswith("accepted: resumed")

    # cancel with rollback, naming a partition of the request: accepted, with what it did
    code, out, err = run(capsys, broker, prefix, "cancel", "--request", "r1", "--rollback", "--partitions",
                         json.dumps({"partitions": [{"topic": targets[0].topic, "partition": targets[0].partition}]}))
    assert (code, err) == (0, ""), err
    assert out.startswith("accepted: cancel of request r1 (1 named partition, with rollback to the original replicas)")

    # the rejections stay: replay and status list them, /metrics counts them
    code, out, _ = run(capsys, broker, prefix, "replay", "--format", "json")
    doc_ = json.loads(out)
    assert doc_["rejected"] == {"cancel": 1, "submit": 1}
    assert [r["command"] for r in doc_["rejections"]] == ["cancel", "submit"]
    assert doc_["rejections"][0]["reasons"] == ["unknown request 'does-not-exist'"]
    code, out, _ = run(capsys, broker, prefix, "status")
    assert code == 0 and out.startswith("needs attention:")
    assert "! cancel of request does-not-exist rejected: unknown request 'does-not-exist'" in out
    assert "submit of request" in out and "pause rejected" not in out
    with urllib.request.urlopen(worker.web + "/metrics") as answer:
        metrics = answer.read().decode()
    assert 'kreassign_commands_rejected_total{command="cancel"} 1.0' in metrics
    assert 'kreassign_commands_rejected_total{command="submit"} 1.0' in metrics
    assert 'kreassign_commands_rejected_total{command="limits"} 0.0' in metrics
    assert 'kreassign_commands_rejected_total{command="pause"} 0.0' in metrics
    # the throttle, and what Kafka's configs hold for it: + throttle_margin_pct (8 % by default)
    gauges = dict(line.split() for line in metrics.splitlines() if line.startswith(("kreassign_throttle_rate_bytes ",
                                                                                   "kreassign_kafka_throttle_rate_bytes ")))
    assert float(gauges["kreassign_kafka_throttle_rate_bytes"]) == float(gauges["kreassign_throttle_rate_bytes"]) * 108 // 100
    assert "\x1b" not in worker.output()  # no terminal codes (Faust's spinner) in the engine's log


def test_no_engine_no_verdict_exit_status_3_and_the_command_stays_published(broker, topics, capsys):
    prefix = topics.events[: -len("events")]
    code, out, err = run(capsys, broker, prefix, "pause", "--wait-timeout", "1.5")
    assert (code, out) == (3, "")
    assert "no verdict within 1.5 s: no engine decided command" in err and "Exit status 3." in err
    assert f"--prefix {prefix}" in err
    code, out, err = run(capsys, broker, prefix, "resume", "--no-wait")
    assert (code, err) == (0, "") and len(out.strip()) == 36  # the command id


def test_a_web_port_in_use_is_one_line_naming_the_option(capsys, tmp_path):
    import socket

    from engine.kafka.embedded import free_port

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["engine", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--cluster", "sim:nothing.yaml",
                     "--web-port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"port {port} is in use on 127.0.0.1: pass --web-port with another port" in err


def test_execute_throttle_takes_none_as_throttle_rate_does_and_every_format_option_says_what_it_gives():
    from engine.cli import build_parser
    from engine.cli.connection import KEEP

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    b = ["--bootstrap-server", "127.0.0.1:9"]
    args = parser.parse_args(["execute", *b, "--reassignment-json-file", "x.json", "--throttle", "none"])
    throttle = parser.parse_args(["throttle", *b, "--rate", "none"])
    assert args.throttle is None and throttle.rate is None  # the same parser: none lifts the throttle
    assert parser.parse_args(["execute", *b, "--reassignment-json-file", "x.json", "--throttle", "50000000"]).throttle == 50_000_000
    assert parser.parse_args(["execute", *b, "--reassignment-json-file", "x.json"]).throttle is KEEP
    for name in ("execute", "balance"):
        text = sub[name].format_help()
        assert "BYTES_PER_SEC|none" in text and "'none': unthrottled" in " ".join(text.split()), name
    for name in ("status", "plan", "replay", "simulate", "balance"):
        [fmt] = [a for a in sub[name]._actions if "--format" in a.option_strings]
        assert fmt.help and "json" in fmt.help, name
