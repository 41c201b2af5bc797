"""The README's commands are the ones users and CI run.

* The "Two commands" section holds exactly the set-up commands: the main job
  (``kreassign demo``, run by tests/test_demo.py) and the test command, which
  ``.ci/run`` runs verbatim.
* Every ``kreassign`` command in the README's ``sh`` blocks parses with the
  real command line; the ones that need no cluster run here and succeed. (The
  ones that need a Kafka cluster are exercised against the embedded broker by
  their own tests: tests/test_cli_*.py, tests/test_status.py, tests/test_engine.py.)
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", text, re.S)


def setup_commands() -> list[str]:
    return sh_blocks(section("Two commands"))


def kreassign_commands() -> list[str]:
    lines = [line.strip() for block in sh_blocks(README) for line in block.splitlines()]
    return [line for line in lines if line.startswith("kreassign ")]


def test_readme_has_exactly_two_setup_commands():
    main_job, tests = setup_commands()
    assert main_job.endswith("kreassign demo") and "pip install" in main_job
    assert tests.endswith("python -m pytest") and "'.[test]'" in tests


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [l for l in (ROOT / ".ci" / "run").read_text().splitlines() if l and not l.startswith("#")]
    assert setup_commands()[1] in ci_lines


@pytest.mark.parametrize("command", kreassign_commands())
def test_every_readme_command_parses(command):
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert callable(args.func)


OFFLINE = [c for c in kreassign_commands() if c.split()[1] in ("plan", "simulate") or "--scenario" in c]


@pytest.mark.parametrize("command", OFFLINE)
def test_readme_commands_that_need_no_cluster_run(command):
    result = subprocess.run([sys.executable, "-m", "engine.cli", *shlex.split(command)[1:]],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
