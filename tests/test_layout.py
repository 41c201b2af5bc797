"""The layout is the architecture: which package may import which.

Every ``import`` in ``engine/`` is read from the source (including imports inside
functions; imports under ``if TYPE_CHECKING:`` are types, not dependencies) and
checked against the rules each package's docstring states. A new module that
breaks a rule fails here, with the line that breaks it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parent.parent / "engine"

# package -> the packages it may import (itself always allowed)
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "views": {"core"},
    "kafka": set(),
    "log": {"core", "views", "kafka"},
    "sim": {"core"},
    "cluster": {"core", "kafka", "sim"},
    "runtime": {"core", "views", "kafka", "log", "cluster"},
    "whatif": {"core", "views", "sim", "runtime", "log"},  # log: the fault simulator's snapshots and envelopes
    "cli": {"core", "views", "kafka", "log", "sim", "cluster", "runtime", "whatif"},
}
SHARED = {"bundled", "__init__"}  # engine.bundled (where shipped files are) and the version

# The core does no I/O: of the standard library it uses only modules that cannot
# reach a clock, a file, a socket or a thread; of the rest, only immutables.
CORE_MAY_USE = {
    "__future__", "typing", "dataclasses", "functools", "collections", "contextlib", "gc", "heapq",
    "hashlib", "json", "statistics", "math", "bisect", "re", "enum", "itertools", "operator",
    "immutables",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST, module: str, is_package: bool):
    """(line, imported module) for every import outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield child.lineno, alias.name
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".")
                    base = base[: len(base) - child.level + (1 if is_package else 0)]
                    name = ".".join(base + ([child.module] if child.module else []))
                else:
                    name = child.module or ""
                yield child.lineno, name
                # ``from engine import x`` / ``from engine.core import x``: x may be a module
                for alias in child.names:
                    yield child.lineno, f"{name}.{alias.name}"
            stack.append(child)


def _sources() -> dict[str, tuple[str, str, bool]]:
    """module -> (where, source, is a package) for every module of ``engine/``."""
    return {_module_name(p): (str(p.relative_to(ENGINE.parent)), p.read_text(encoding="utf-8"), p.name == "__init__.py")
            for p in ENGINE.rglob("*.py")}


SOURCES = _sources()


def _edges(sources):
    for module, (where, text, is_package) in sorted(sources.items()):
        for line, name in _imports(ast.parse(text, filename=where), module, is_package):
            yield module, where, line, name


def package_violations(sources) -> list[str]:
    broken: dict[tuple[str, int], str] = {}  # one line per import statement
    for module, where, line, name in _edges(sources):
        if not name.startswith("engine.") or name not in sources:
            continue  # ``from engine.core import events`` also yields engine.core.events: that one is checked
        source, target = _package(module), _package(name)
        if target == source or target in SHARED or source in SHARED:
            continue
        if target not in MAY_IMPORT.get(source, set()):
            broken.setdefault((where, line), f"{where}:{line}: {source} may not import {name}")
    return list(broken.values())


def core_io_violations(sources) -> list[str]:
    stdlib = set(sys.stdlib_module_names)
    broken: dict[tuple[str, int], str] = {}
    for module, where, line, name in _edges(sources):
        if _package(module) != "core" or name.startswith("engine"):
            continue
        top = name.split(".")[0]
        if top in CORE_MAY_USE:
            continue  # ``from typing import X`` yields typing and typing.X: both pass here
        kind = "standard library" if top in stdlib else "third-party"
        broken.setdefault((where, line), f"{where}:{line}: the core imports {name} ({kind})")
    return list(broken.values())


def test_every_module_lives_in_a_package_that_has_rules():
    loose = sorted(m for m in SOURCES if _package(m) not in MAY_IMPORT and _package(m) not in SHARED)
    assert loose == [], f"modules outside the role packages (give them a home and a rule): {loose}"


def test_each_package_imports_only_what_its_rules_allow():
    assert package_violations(SOURCES) == []


def test_the_core_uses_no_io():
    assert core_io_violations(SOURCES) == []


@pytest.mark.parametrize("source, text", [
    ("core", "def f():\n    from engine.log.envelope import now\n"),
    ("core", "import engine.cluster.kafka\n"),
    ("views", "from engine.runtime import decider\n"),
    ("cluster", "from engine.runtime.worker import Engine\n"),
    ("sim", "from engine.cluster.kafka import KafkaCluster\n"),
    ("kafka", "from engine.log.codec import codec_for\n"),
    ("runtime", "from engine.cli import main\n"),
])
def test_a_forbidden_import_is_reported_with_its_place(source, text):
    """The check can fail: a forbidden import added to a real tree is named, file and line."""
    sources = dict(SOURCES)
    sources[f"engine.{source}.intruder"] = (f"engine/{source}/intruder.py", text, False)
    broken = package_violations(sources)
    assert len(broken) == 1 and broken[0].startswith(f"engine/{source}/intruder.py:"), broken


@pytest.mark.parametrize("text", ["import time\n", "from datetime import datetime\n", "import socket\n",
                                  "def f():\n    import confluent_kafka\n"])
def test_io_in_the_core_is_reported(text):
    sources = {"engine.core.intruder": ("engine/core/intruder.py", text, False)}
    assert len(core_io_violations(sources)) == 1


def test_a_type_checking_import_is_not_a_dependency():
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine.log.envelope import E\n"
    sources = dict(SOURCES)
    sources["engine.views.typed"] = ("engine/views/typed.py", text, False)
    assert package_violations(sources) == []
