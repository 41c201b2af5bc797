"""``kreassign balance`` on a scenario file, as an operator runs it."""

import json
from pathlib import Path

import pytest

from engine.cli import main

SCENARIO = """
name: skewed
seed: 3
brokers:
  - {id: 0, rack: a}
  - {id: 1, rack: a}
  - {id: 2, rack: b}
  - {id: 3, rack: b}
  - {id: 4, rack: c}
topics:
  - name: orders
    assignment:
      - {partition: 0, replicas: [0, 2], size: 1 GB}
      - {partition: 1, replicas: [0, 2], size: 2 GB}
      - {partition: 2, replicas: [0, 3], size: 3 GB}
      - {partition: 3, replicas: [1, 2], size: 4 GB}
      - {partition: 4, replicas: [0, 3], size: 5 GB}
reassignment: {kind: explicit, targets: []}
"""


@pytest.fixture
def scenario(tmp_path):
    p = tmp_path / "skewed.yaml"
    p.write_text(SCENARIO)
    return str(p)


def test_show_cluster_state_lists_brokers_racks_and_imbalance(scenario, capsys):
    assert main(["balance", "--scenario", scenario, "--show-cluster-state"]) == 0
    out = capsys.readouterr().out
    assert "Brokers" in out and "Racks" in out and "Imbalance" in out
    lines = out.splitlines()
    head = [c.strip() for c in next(line for line in lines if "replicas" in line).strip("┃ ").split("┃")]
    assert head[:3] == ["broker", "rack", "replicas"]  # each broker's id and rack are named
    assert [c.strip() for c in next(line for line in lines if "│" in line).strip("│ ").split("│")][:2] == ["0", "a"]
    assert [line for line in lines if line.startswith("Imbalance")][0].endswith("%")  # one line, not wrapped
    assert main(["balance", "--scenario", scenario, "--show-cluster-state", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["name"]: r["rack"] for r in doc["brokers"]}["0"] == "a"
    assert {r["name"]: r["replicas"] for r in doc["brokers"]} == {"0": 4, "1": 1, "2": 3, "3": 2, "4": 0}
    assert {r["name"]: r["replicas"] for r in doc["racks"]} == {"a": 5, "b": 5, "c": 0}
    assert doc["imbalance_percent"]["replicas"] == pytest.approx(100.0)


def test_cluster_balance_prints_kafka_sections_and_writes_the_output_file(scenario, tmp_path, capsys):
    out_file = tmp_path / "proposal.json"
    assert main(["balance", "--scenario", scenario, "--cluster-balance", "--threshold-percentage", "0",
                 "--output-file", str(out_file)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert out[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(out[4])
    assert json.loads(out_file.read_text()) == proposed
    current = {(p["topic"], p["partition"]): p["replicas"] for p in json.loads(out[1])["partitions"]}
    after = {(p["topic"], p["partition"]): p["replicas"] for p in proposed["partitions"]}
    assert set(current) == set(after)
    assert any("replicas moved (lower bound" in line for line in out)


def test_remove_brokers_json_summary(scenario, capsys):
    assert main(["balance", "--scenario", scenario, "--remove-brokers", "0", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(0 not in p["replicas"] for p in doc["proposed"]["partitions"])
    assert doc["summary"]["replicas_moved"] >= 4 and doc["summary"]["lower_bound"] >= 4


def test_generate_mode(scenario, tmp_path, capsys):
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"orders"}],"version":1}')
    assert main(["balance", "--scenario", scenario, "--topics-to-move-json-file", str(topics),
                 "--broker-list", "2,3,4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(set(p["replicas"]) <= {2, 3, 4} for p in doc["proposed"]["partitions"])


@pytest.mark.parametrize("argv, message", [
    (["--remove-brokers", "9"], "brokers [9] are not in the cluster"),
    (["--replica-balance", "--broker-list", "1"], "--broker-list goes with --topics-to-move-json-file"),
    (["--replica-balance", "--threshold-percentage", "150"], "between 0 and 100"),
])
def test_bad_requests_exit_2_with_one_line(scenario, capsys, argv, message):
    assert main(["balance", "--scenario", scenario, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_execute_submits_the_proposal_as_a_request(scenario, broker, topics, capsys):
    from engine.kafka.client_config import ClientConfig
    from engine.log.codec import codec_for
    from engine.log.envelope import CommandEnvelope
    from engine.log.eventlog import read_topic

    assert main(["balance", "--scenario", scenario, "--replica-balance", "--threshold-percentage", "0",
                 "--execute", "--bootstrap-server", broker.bootstrap, "--prefix", topics.commands[: -len("commands")],
                 "--broker-profile", "embedded", "--format", "json", "--no-wait"]) == 0
    doc = json.loads(capsys.readouterr().out)
    set_aside = []
    messages = read_topic(ClientConfig({"bootstrap.servers": broker.bootstrap}), topics.commands,
                          codec_for(CommandEnvelope).decode, set_aside.append, group_id="kreassign.reader",
                          idle_timeout=2.0)
    commands = [m.value.payload for m in messages]
    assert not set_aside and [c.request_id for c in commands] == [doc["request_id"]]
    submitted = {(t.topic, t.partition): list(t.replicas) for t in commands[0].partitions}
    assert submitted == {(p["topic"], p["partition"]): p["replicas"] for p in doc["proposed"]["partitions"]}


def test_execute_needs_the_event_log(scenario, capsys):
    assert main(["balance", "--scenario", scenario, "--replica-balance", "--execute"]) == 2
    assert "give --bootstrap-server" in capsys.readouterr().err


def test_live_cluster_snapshot_from_the_embedded_broker(broker, topics, capsys):
    """The embedded broker is a one-broker cluster: its state can be shown (the Kafka adapter's read path)."""
    assert main(["balance", "--bootstrap-server", broker.bootstrap, "--show-cluster-state", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["brokers"]) == 1 and doc["brokers"][0]["replicas"] >= 1


def test_unreachable_cluster_is_one_line(capsys):
    assert main(["balance", "--bootstrap-server", "127.0.0.1:1", "--show-cluster-state", "--timeout", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "127.0.0.1:1" in err


def test_no_proposal_moves_replicas_onto_a_broker_that_is_down(tmp_path, capsys):
    p = tmp_path / "down.yaml"
    p.write_text(SCENARIO.replace("- {id: 4, rack: c}", "- {id: 4, rack: c, alive: false}"))
    assert main(["balance", "--scenario", str(p), "--replica-balance"]) == 2
    assert "brokers [4] are down" in capsys.readouterr().err
    assert main(["balance", "--scenario", str(p), "--remove-brokers", "4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(4 not in q["replicas"] for q in doc["proposed"]["partitions"])


def test_a_pinned_broker_is_named_and_the_others_are_balanced(tmp_path, capsys):
    # broker 3 is its rack's last broker and holds one replica of every partition (all span three racks)
    rows = [f"      - {{partition: {i}, replicas: [{'1, 2' if i % 3 else '4, 5'}, 3], size: 1 GB}}" for i in range(12)]
    p = tmp_path / "lonely-rack.yaml"
    p.write_text("name: lonely-rack\nseed: 1\nbrokers:\n"
                 + "".join(f"  - {{id: {b}, rack: {r}}}\n" for b, r in ((1, "a"), (4, "a"), (2, "b"), (5, "b"), (3, "c")))
                 + "topics:\n  - name: t\n    assignment:\n" + "\n".join(rows) + "\nreassignment: {kind: explicit, targets: []}\n")
    assert main(["balance", "--scenario", str(p), "--replica-balance", "--threshold-percentage", "0"]) == 0
    out = capsys.readouterr().out
    assert "Replicas per broker target 6..6 (threshold 0 %): every broker within it but the pinned [3]: " \
           "brokers 3 (12) stay outside the range" in out
    assert main(["balance", "--scenario", str(p), "--replica-balance", "--threshold-percentage", "0",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = doc["summary"]
    assert summary["pinned"] == [3] and summary["balanced"] and summary["replicas_moved"] == summary["lower_bound"] == 4


def test_a_proposal_of_one_is_counted_as_one():
    # "1 partitions change: 1 replicas moved ...; 1 preferred leaders change" read as a count of several
    from engine.cli.balance import render_proposal
    from engine.core.balancer import propose
    from engine.core.partition import TopicPartition

    t = [TopicPartition("t", i) for i in range(3)]
    p = propose("add-brokers", {t[0]: (0,), t[1]: (0,), t[2]: (1,)}, {}, [0, 1], {tp: 1 for tp in t},
                threshold=0.0, rack_aware=False, add=[2])
    assert len(p.proposed) == p.replicas_moved == p.leaders_moved == 1
    assert "1 partition changes: 1 replica moved (lower bound 1), 1 B to copy; 1 preferred leader changes" in \
        render_proposal(p, 0.0)


def test_adding_a_broker_to_the_small_cluster_changes_six_preferred_leaders(capsys):
    # the operator's run: 24 x 16 MiB led 8 each by brokers 1-3, broker 4 added. Broker 4 must lead 6;
    # the other 12 moves take a follower's replica (same bytes), so no other preferred leader changes
    scenario = Path(__file__).resolve().parent.parent / "ops" / "scenarios" / "add-broker-small-cluster-4mbs.yaml"
    for threshold, moved in (("0", 18), ("10", 17)):
        assert main(["balance", "--scenario", str(scenario), "--add-brokers", "4",
                     "--threshold-percentage", threshold]) == 0
        out = capsys.readouterr().out
        copied = f"{moved * 16 * 1024 * 1024 / 1e6:.0f} MB"
        assert f"{moved} partitions change: {moved} replicas moved (lower bound {moved}), {copied} to copy; " \
               "6 preferred leaders change" in out
