"""``kreassign plan`` on files, as an operator runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


def current_doc(parts):
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in parts.items()]}


def test_json_format_reproduces_the_kip_example(tmp_path, capsys):
    cur = write(tmp_path, "cur.json", current_doc({("t", 0): [0, 1, 2, 3, 4]}))
    tgt = write(tmp_path, "tgt.json", current_doc({("t", 0): [5, 6, 7, 8, 9]}))
    assert main(["plan", "--reassignment-json-file", tgt, "--current-json-file", cur,
                 "--max-replicas-per-step", "2", "--format", "json", "--steps", "kip-435"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "steps": [
        [5, 0, 1, 2, 3, 4], [5, 6, 2, 3, 4], [5, 6, 7, 8, 4], [5, 6, 7, 8, 9]]}]}
    # the default: the new preferred leader joins in the step that drops the old one (one epoch bump)
    assert main(["plan", "--reassignment-json-file", tgt, "--current-json-file", cur,
                 "--max-replicas-per-step", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"][0]["steps"] == [
        [5, 1, 2, 3, 4], [5, 6, 7, 3, 4], [5, 6, 7, 8, 9]]
    assert main(["plan", "--reassignment-json-file", tgt, "--current-json-file", cur,
                 "--format", "json", "--steps", "whole"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"][0]["steps"] == [[5, 6, 7, 8, 9]]


def test_text_format_names_each_step(tmp_path, capsys):
    cur = write(tmp_path, "cur.json", current_doc({("t", 0): [0, 1, 2], ("t", 1): [1, 2, 0]}))
    tgt = write(tmp_path, "tgt.json", current_doc({("t", 0): [3, 1, 2], ("t", 1): [1, 2, 0]}))
    assert main(["plan", "--reassignment-json-file", tgt, "--current-json-file", cur]) == 0
    out = capsys.readouterr().out
    assert "t-0: [0,1,2] -> [3,1,2] in 1 step" in out
    assert "+[3] -[0] leader 0 -> 3" in out
    assert "t-1: already at target [1,2,0]" in out
    assert "2 partitions, 1 steps, 1 replicas to copy" in out


@pytest.mark.parametrize("content, message", [
    ("{nope", "not valid JSON"),
    ('{"version": 2, "partitions": []}', "unsupported version 2"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": "x", "replicas": []}]}', "partitions[0].partition must be an integer"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}, {"topic": "u", "partition": 0, "replicas": [1]}]}',
     "brokers [1] listed more than once; unknown topic 'u'"),
])
def test_bad_target_file_is_one_line_naming_the_file_exit_2(tmp_path, capsys, content, message):
    cur = write(tmp_path, "cur.json", current_doc({("t", 0): [0, 1, 2]}))
    tgt = write(tmp_path, "tgt.json", content)
    assert main(["plan", "--reassignment-json-file", tgt, "--current-json-file", cur]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and tgt in err and message in err


def test_missing_file_and_bad_options(tmp_path, capsys):
    cur = write(tmp_path, "cur.json", current_doc({("t", 0): [0, 1, 2]}))
    assert main(["plan", "--reassignment-json-file", str(tmp_path / "none.json"), "--current-json-file", cur]) == 2
    assert "none.json: No such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["plan", "--reassignment-json-file", cur, "--current-json-file", cur, "--max-replicas-per-step", "0"])
    assert e.value.code == 2


def test_console_script_runs_the_bundled_example():
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "plan", "--reassignment-json-file", str(EXAMPLES / "target.json"),
         "--current-json-file", str(EXAMPLES / "current.json")],
        capture_output=True, text=True, check=True,
    )
    assert "orders-0: [0,1,2,3,4] -> [5,6,7,8,9] in 5 steps" in result.stdout
