"""``kreassign acls`` and the documented ACLs: one list (``engine.kafka.acls``), printed, tabled, and pasteable.

The printed commands are valid kafka-acls.sh commands (the simulated cluster's parser of them,
``engine.sim.security``, reads them back to exactly the grants of ``engine.kafka.acls``), and
docs/engine.md and the README show exactly what the command prints. That the grants are the
ones that work is tests/test_security.py (a secured protocol peer enforcing exactly them).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from engine.kafka import acls as A
from engine.cli import main
from engine.sim.security import CLUSTER_NAME, operation_name, parse_acl_command

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ["--principal-engine", "User:engine", "--principal-operator", "User:operator", "--principal-analyst",
           "User:analyst", "--principal-admin", "User:admin", "--topics", "orders,payments"]
PRINCIPALS = {A.ENGINE: ["User:engine"], A.OPERATOR: ["User:operator"], A.ANALYST: ["User:analyst"],
              A.ADMIN: ["User:admin"]}


def run(capsys, *argv):
    code = main(["acls", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def grants_of(bindings):
    out = set()
    for b in bindings:
        r = b.need.resource
        for op in b.need.operations:
            out.add((b.principal, operation_name(op), r.kind.upper().replace("-", "_"), r.name if r.kind != "cluster" else CLUSTER_NAME,
                     "PREFIXED" if r.prefixed else "LITERAL"))
    return out


def test_the_printed_commands_add_exactly_the_documented_grants_each_under_its_reason(capsys):
    code, out, _err = run(capsys, *EXAMPLE, "--prefix", "team-a.")
    assert code == 0
    lines = out.splitlines()
    commands = [line for line in lines if line.startswith("kafka-acls.sh ")]
    parsed = {(a.principal, a.operation, a.resource_type, a.name, a.pattern)
              for c in commands for a in parse_acl_command(c)}
    assert parsed == grants_of(A.bindings(PRINCIPALS, "team-a.", A.TopicScope(names=("orders", "payments"))))
    for i, line in enumerate(lines):
        if line.startswith("kafka-acls.sh "):
            assert lines[i - 1].startswith("# ") and ": " in lines[i - 1]  # the reason, right above
    assert "--group team-a.reader" in out and "--group team-a.engine" in out and "kreassign.reader" not in out


def test_topic_scopes_least_privilege_first(capsys, tmp_path):
    plan = tmp_path / "drain.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "b", "partition": 0, "replicas": [1, 2]}, {"topic": "a", "partition": 3, "replicas": [2, 3]}]}))
    _code, out, _ = run(capsys, "--principal-engine", "User:e", "--reassignment-json-file", str(plan))
    assert re.findall(r"--operation AlterConfigs --topic (\S+)$", out, re.M) == ["a", "b"]
    _code, out, _ = run(capsys, "--principal-engine", "User:e", "--topic-prefix", "app.")
    assert "--operation Describe --operation AlterConfigs --topic app. --resource-pattern-type prefixed" in out
    _code, out, _ = run(capsys, "--principal-engine", "User:e", "--all-topics")
    assert shlex.split(out.splitlines()[-1])[-2:] == ["--topic", "*"]
    _code, out, _ = run(capsys, "--principal-analyst", "User:a")  # analysts need no topic scope
    assert "--operation Read --topic kreassign.events" in out


@pytest.mark.parametrize("argv,message", [
    ([], "name at least one principal"),
    (["--principal-engine", "engine"], "a Kafka principal is TYPE:NAME"),
    (["--principal-engine", "User:e"], "say which topics the engine may reassign"),
    (["--principal-operator", "User:o", "--topics", " , "], "--topics: no topic named"),
])
def test_bad_arguments_are_named_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and out == ""


def test_json_has_one_object_per_grant(capsys):
    _code, out, _ = run(capsys, *EXAMPLE, "--format", "json")
    docs = [json.loads(line) for line in out.splitlines()]
    assert len(docs) == len(A.bindings(PRINCIPALS, "kreassign.", A.TopicScope(names=("orders", "payments"))))
    assert {d["role"] for d in docs} == {"engine", "operator", "analyst", "admin"}
    assert all(d["command"].startswith("kafka-acls.sh ") and d["why"] for d in docs)


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1]


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    out, lang, body = [], None, []
    for line in text.splitlines():
        stripped = line.strip()
        if lang is None and stripped.startswith("```"):
            lang, body = stripped[3:], []
        elif lang is not None and stripped == "```":
            out.append((lang, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def test_docs_show_exactly_what_kreassign_acls_prints_and_the_same_table(capsys):
    engine_md = (ROOT / "docs" / "engine.md").read_text()
    security = _section(engine_md, "## Security\n").split("\n## ", 1)[0]
    (command,) = [body for lang, body in code_blocks(security) if lang == "sh"]
    code, printed, _ = run(capsys, *shlex.split(command)[2:])
    assert code == 0
    assert printed.rstrip("\n") in [body for lang, body in code_blocks(security) if lang == ""]
    items = A.bindings(PRINCIPALS, "kreassign.", A.TopicScope(names=("orders", "payments")))
    table = [line for line in security.splitlines() if line.startswith("| User:")]
    assert table == ["| " + " | ".join(row) + " |" for row in A.table(items)]


def test_the_readme_security_section_matches_the_table():
    readme = (ROOT / "README.md").read_text()
    security = _section(readme, "### Security\n").split("\n## ", 1)[0]
    rows = [line for line in security.splitlines() if line.startswith("| User:")]
    items = A.bindings(PRINCIPALS, "kreassign.", A.TopicScope(names=("orders", "payments")))
    assert rows == ["| " + " | ".join(row[:3]) + " |" for row in A.table(items)]
    (command,) = [body for lang, body in code_blocks(security) if lang == "sh"]
    assert shlex.split(command)[2:] == EXAMPLE
