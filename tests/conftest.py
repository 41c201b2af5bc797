"""Shared fixtures: one embedded broker (tansu) for the whole test session.

Tests that use it create their own topics under a prefix unique to the test
(``prefix`` / ``topics``), so they never see each other's messages.
"""

from __future__ import annotations

import itertools
import re

import pytest

from engine.kafka.embedded import EmbeddedBroker
from engine.kafka.topics import Topics, create

_numbers = itertools.count()


@pytest.fixture(scope="session")
def broker():
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def prefix(request) -> str:
    """A topic-name prefix no other test uses."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "-", request.node.name)[:60]
    return f"t{next(_numbers)}-{name}."


@pytest.fixture
def topics(broker, prefix) -> Topics:
    """kreassign's topics, created under this test's prefix."""
    create({"bootstrap.servers": broker.bootstrap}, prefix)
    return Topics.named(prefix)
