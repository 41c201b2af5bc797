"""A built wheel (not only the editable install the README uses) carries what kreassign reads at run time.

The wheel is built with the project's own build backend and unpacked; a fresh interpreter that
imports ``engine`` from the unpacked wheel (never from this source tree) must find the Avro schemas,
encode and decode a command with them, load the demo scenario and the Spark queries.
"""

import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from engine.sim.scenario import load

ROOT = Path(__file__).resolve().parent.parent

CHECK = textwrap.dedent("""
    import sys
    from pathlib import Path
    site = Path(sys.argv[1]).resolve()
    import engine, spark
    assert Path(engine.__file__).resolve().is_relative_to(site), engine.__file__
    from engine.bundled import SCENARIO_DIR, SCHEMA_DIR
    assert SCHEMA_DIR == site / "engine" / "schemas", SCHEMA_DIR
    from engine.log.codec import codec_for, releases
    from engine.core.commands import Pause
    from engine.log.envelope import CommandEnvelope
    codec = codec_for(CommandEnvelope)
    from engine.log.envelope import now
    sent = CommandEnvelope("c1", now(), "me@host", Pause("c1"))
    assert codec.decode(codec.encode(sent)) == sent
    assert [p.name for p in releases()] == ["v1"]
    from engine.cli.demo import DEFAULT_SCENARIO
    from engine.sim.scenario import load
    assert DEFAULT_SCENARIO.parent == SCENARIO_DIR == site / "engine" / "scenarios"
    print(len(load(str(DEFAULT_SCENARIO)).brokers), "brokers")
    queries = sorted(p.name for p in (Path(spark.__file__).parent / "queries").glob("*.sql"))
    print(len(queries), "queries")
""")


def test_a_built_wheel_runs_without_the_source_tree(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("kreassign-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(site)
    assert {p.name for p in (ROOT / "schemas").glob("*.avsc")} == {
        Path(n).name for n in names if n.startswith("engine/schemas/") and n.count("/") == 2
    }
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)

    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(site)],
        cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    brokers, queries = out.stdout.split("\n")[:2]
    assert brokers == f"{len(load(str(ROOT / 'ops/scenarios/demo.yaml')).brokers)} brokers"
    assert queries == f"{len(list((ROOT / 'spark/queries').glob('*.sql')))} queries"
