"""The shipped ops files load: every scenario, and the compose file's topology."""

from pathlib import Path

import pytest
import yaml

from engine.sim import scenario as S

OPS = Path(__file__).resolve().parent.parent / "ops"


@pytest.mark.parametrize("path", sorted((OPS / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_load_and_move_something(path):
    s = S.load(str(path))
    assert s.targets and 20 <= len(s.partitions) <= 10_000


def test_compose_has_one_controller_and_four_brokers_on_two_racks():
    doc = yaml.safe_load((OPS / "docker-compose.yml").read_text())
    services = doc["services"]
    roles = {name: svc["environment"]["KAFKA_PROCESS_ROLES"] for name, svc in services.items()}
    assert sorted(roles.values()) == ["broker"] * 4 + ["controller"]
    racks = [svc["environment"].get("KAFKA_BROKER_RACK") for svc in services.values() if roles[svc["hostname"]] == "broker"]
    assert sorted(racks) == ["rack-a", "rack-a", "rack-b", "rack-b"]
    assert "KAFKA_ADVERTISED_LISTENERS" not in services["controller"]["environment"]
