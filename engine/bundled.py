"""Files kreassign ships besides its code: the Avro schemas and the bundled scenarios.

In the repository they live at the top (``schemas/``, ``ops/scenarios/``), where an
editable install reads them; a wheel carries them inside the package
(``engine/schemas``, ``engine/scenarios``; see ``pyproject.toml``).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _directory(packaged: str, in_repository: str) -> Path:
    inside = _PACKAGE / packaged
    return inside if inside.is_dir() else _PACKAGE.parent / in_repository


SCHEMA_DIR = _directory("schemas", "schemas")
SCENARIO_DIR = _directory("scenarios", "ops/scenarios")
