"""Shared fixtures: a real nats-server (session), a 3-node cluster, provisioned spaces."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

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


async def until(*args: Any, timeout: float | None = None,
                what: str | Callable[[], str] | None = None, interval: float = 0.02) -> Any:
    """Await a condition with a deadline (never sleep-and-hope); returns its truthy value.

    The suite's one await helper. ``until(cond[, timeout[, what]])`` polls on the event loop;
    ``until(pilot, cond, ...)`` polls through a Textual pilot (so the app runs between checks)
    and lets the screen paint once what the condition saw. ``cond`` may be a coroutine
    function. On timeout the AssertionError names ``what`` (a callable is asked then, so it
    can say what was seen: a process's stderr, a screen), or else the condition's source line.
    """
    pilot = None
    if args and hasattr(args[0], "pause") and hasattr(args[0], "app"):
        pilot, args = args[0], args[1:]
    cond, rest = args[0], list(args[1:])
    if rest:
        timeout = rest.pop(0)
    if rest:
        what = rest.pop(0)
    timeout = 15.0 if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if inspect.isawaitable(value):
            value = await value
        if value:
            if pilot is not None:
                await pilot.pause()
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {_what(what, cond)}")
        if pilot is not None:
            await pilot.pause(interval)
        else:
            await asyncio.sleep(interval)


def _what(what: str | Callable[[], str] | None, cond: Any) -> str:
    """What an ``until`` waited for: as told (a callable asked now), else the condition's source."""
    if callable(what):
        return what()
    if what is not None:
        return what
    try:
        src = " ".join(inspect.getsource(cond).split())
    except (OSError, TypeError):
        return repr(cond)
    return src if len(src) <= 240 else src[:237] + "..."


@pytest.fixture
async def tmux():
    """A private tmux server (see ``support/tmux.py``), killed after the test."""
    from support.tmux import Tmux

    t = Tmux()
    yield t
    await t.kill()


# ---- the manager contract tap (support/contract.py) ------------------------------------------

_TAPPED_DIRS = ("attach", "cli")  # the control and attach suites: every manager call is checked
# Tests that publish contract-breaking requests on purpose (a test of the refusal, not of our
# client), as node-id prefixes with the reason; keep it short and say why.
CONTRACT_TAP_EXEMPT: dict[str, str] = {}


def pytest_configure(config):
    # the suite never writes the operator's own action log (tests of the log point it elsewhere)
    os.environ.setdefault("COTAL_ACTION_LOG", "off")
    config.addinivalue_line(
        "markers", "contract_tap_off(reason): this test sends contract-breaking manager calls on purpose; "
        "the autouse contract tap does not judge it")


@pytest.fixture
async def contract_tap(broker, space):
    """Every §13 manager request and reply on this test's space, held to the rev-22 contract (rev 21
    for a request that pins rev 21's digests);
    the test fails at teardown with the list of violations."""
    from support.contract import ContractTap

    c = await nats.connect(broker.url, name="contract-tap")
    tap = await ContractTap(c, space).start()
    yield tap
    await tap.stop()
    await c.close()
    tap.assert_clean()


@pytest.fixture(autouse=True)
def _contract_tap_auto(request):
    """Opt-out tap for tests under tests/attach and tests/cli that provision a space on the
    session broker (where the managers and the client meet)."""
    path = Path(str(request.node.path))
    here = Path(__file__).resolve().parent
    try:
        sub = path.relative_to(here).parts[0]
    except ValueError:
        sub = ""
    if sub not in _TAPPED_DIRS or "space" not in request.fixturenames:
        return
    if os.environ.get("COTAL_TEST_CONTRACT_TAP") == "off":  # to measure the tap's own cost
        return
    if request.node.get_closest_marker("contract_tap_off") is not None:
        return
    if any(request.node.nodeid.startswith(p) for p in CONTRACT_TAP_EXEMPT):
        return
    request.getfixturevalue("contract_tap")


@pytest.fixture(autouse=True)
def _demo_replies_keep_the_contract():
    """Every reply an in-process demo manager sends is validated against the contract's closed
    output schema; one it could not send inside its schema (answered ``internal`` instead) fails
    the test that caused it, wherever in the suite."""
    from cotal_tui.demo import contract

    before = len(contract.VIOLATIONS)
    yield
    new = contract.VIOLATIONS[before:]
    assert not new, f"the demo manager answered outside the contract: {new}"
