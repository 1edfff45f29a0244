"""Shared fixtures: a real nats-server (session), a 3-node cluster, provisioned spaces."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import nats
import pytest

from cotal_tui.demo.broker import Broker, Cluster
from cotal_tui.demo.provision import provision_space

VECTORS = Path(__file__).resolve().parents[1].parent / "shared" / "vectors"
if not VECTORS.exists():  # CI checkouts carry a copy next to the tests
    VECTORS = Path(__file__).resolve().parent / "vectors"


def load_vectors(name: str) -> list[dict]:
    return json.loads((VECTORS / name).read_text())


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    return VECTORS


@pytest.fixture(scope="session")
def broker():
    """One real nats-server with JetStream for the whole session."""
    b = Broker(name="cotal-test").start()
    yield b
    b.stop()


@pytest.fixture
def fresh_broker():
    """A broker of the test's own, for tests that kill or restart it."""
    b = Broker(name="cotal-fresh").start()
    yield b
    b.stop()


@pytest.fixture
def cluster():
    c = Cluster().start()
    yield c
    c.stop()


_space_ids = itertools.count(1)


@pytest.fixture
def space_name(request) -> str:
    """A unique space token per test so tests sharing the session broker never collide."""
    return f"t{next(_space_ids)}"


@pytest.fixture
async def nc(broker):
    c = await nats.connect(broker.url)
    yield c
    await c.close()


@pytest.fixture
async def space(broker, nc, space_name) -> str:
    """A provisioned space on the session broker; yields its name."""
    await provision_space(nc, space_name)
    return space_name
