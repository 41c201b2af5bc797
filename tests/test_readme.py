"""The README's two commands are the ones CI and users run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_readme_has_exactly_two_setup_commands():
    commands = readme_commands()
    assert len(commands) == 2
    assert "kreassign" in commands[0] and "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [l for l in (ROOT / ".ci" / "run").read_text().splitlines() if l and not l.startswith("#")]
    assert readme_commands()[1] in ci_lines


def test_main_job_files_exist():
    for path in re.findall(r"(examples/\S+\.json)", readme_commands()[0]):
        assert (ROOT / path).is_file(), path
