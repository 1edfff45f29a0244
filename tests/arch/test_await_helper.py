"""The suite has one await helper, ``conftest.until`` (issue 36): a deadline, and a timeout that
names what it waited for. No test module grows a polling loop of its own again."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from conftest import until

TESTS = Path(__file__).resolve().parents[1]
# names a polling helper goes by (the six copies this replaced were all called one of these)
HELPER_NAMES = {"until", "_until", "wait_for", "wait_until", "eventually", "_wait_for"}
# methods that are thin wrappers over ``until`` (they add what a timeout should show)
WRAPPERS = {("support/tmux.py", "until"), ("support/watchproc.py", "wait_for"),
            ("support/authmesh.py", "wait_for")}


def test_no_test_module_defines_its_own_await_helper():
    own = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel == "conftest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.name in HELPER_NAMES and (rel, node.name) not in WRAPPERS):
                own.append(f"{rel}:{node.lineno} {node.name}")
    assert own == [], f"await with conftest.until, not a local loop: {own}"


def test_a_wrapper_delegates_to_until():
    for rel, name in sorted(WRAPPERS):
        tree = ast.parse((TESTS / rel).read_text())
        fn = next(n for n in ast.walk(tree)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
        calls = {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Name)}
        assert "until" in calls, f"{rel}:{name} must await conftest.until"


async def test_a_timeout_names_what_it_waited_for():
    with pytest.raises(AssertionError, match=r"timed out after 0.05s waiting for the answer"):
        await until(lambda: False, 0.05, "the answer")
    seen = []
    with pytest.raises(AssertionError, match=r"waiting for asked at the end"):
        await until(lambda: False, 0.05, what=lambda: seen.append(1) or "asked at the end")
    assert seen == [1]  # a callable ``what`` is asked once, when it timed out
    # told nothing, the message carries the condition's own source
    with pytest.raises(AssertionError, match=r"lambda: 6 \* 7 == 41"):
        await until(lambda: 6 * 7 == 41, 0.05)


async def test_until_returns_the_truthy_value_once_the_condition_holds():
    box: list[int] = []
    asyncio.get_running_loop().call_later(0.05, box.append, 42)

    async def got():
        return box[:1]

    assert await until(got, 5, "the value") == [42]
