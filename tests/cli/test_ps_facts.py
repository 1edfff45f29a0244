"""``cotal ps`` shows every fact a manager's row carries (issue 39 item 1), on a real broker
against the strict stand-in (tests/support/strict_manager.py, whose every reply passes the rev-21
AgentRow schema before it leaves): the plain row's condition, offline age and unknown view in the
reference's words, ``--wide``'s facts line, ``--json`` verbatim, ``--slots``; a lying manager's
changed field type is one named rejection; a partial scatter exits non-zero."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import nats
import pytest
from support.contract import contract
from support.hostile import raw_control_bytes
from support.facts_manager import SHA, FactsManager
from support.strict_manager import StrictManager

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


async def cotal(broker, space: str, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + [argv[0], "--server", broker.url, "--space", space, "--connect-timeout", "2", *argv[1:]]
    env = dict(os.environ)
    env.pop("COTAL_READ_ONLY", None)
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=90, env=env)


class _Lenient:
    """The contract, except that ``ps``/``inspect`` results go out unchecked: the liar's rows."""

    def __init__(self, c) -> None:
        self._c = c

    def __getattr__(self, k: str) -> Any:
        return getattr(self._c, k)

    def validate_result(self, command: str, data: Any) -> list[str]:
        return [] if command in ("ps", "inspect") else self._c.validate_result(command, data)


class LyingManager(StrictManager):
    """A manager whose ``liar`` row sends ``pid`` as a string and whose ``ok`` row carries a
    field no contract revision has (a newer manager's fact)."""

    async def _row(self, seat) -> dict:
        row = await super()._row(seat)
        if seat.name == "liar":
            row["pid"] = "4242"
        else:
            row["gpu"] = {"model": "h100", "count": 8}
        return row


@pytest.fixture
async def strict(broker, space, tmp_path):
    started: list[tuple[StrictManager, Any]] = []

    async def start(cls=FactsManager, seats=("waiter",), **kw) -> StrictManager:
        nc = await nats.connect(broker.url)
        m = await cls(nc, space, seats=seats, root=str(tmp_path / f"s{len(started)}"), **kw).start()
        started.append((m, nc))
        return m

    yield start
    for m, nc in started:
        await m.stop()
        await nc.close()
        assert m.own_failures == []


def rows_of(stdout: str) -> dict[str, str]:
    return {ln.split()[0]: ln for ln in stdout.splitlines()[1:] if ln and not ln.startswith((" ", "manager "))}


async def test_the_plain_row_says_the_condition_the_offline_age_and_an_unknown_view(broker, space, strict):
    m = await strict(seats=("waiter", "gone", "blind"))
    r = await cotal(broker, space, "ps")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = rows_of(r.stdout)
    assert "mesh waiting (rate_limit for 40m) · active 40m ago" in rows["waiter"]
    assert "mesh offline for 3.5h" in rows["gone"]
    assert "mesh unknown (its presence view is stale; last known working)" in rows["blind"]
    assert all(ln.split()[-1] == m.instance_id for ln in rows.values())  # the column stays aligned
    assert "model" not in r.stdout  # the plain table has no facts line


async def test_wide_prints_every_fact_and_json_the_row_verbatim(broker, space, strict):
    await strict(seats=("waiter", "gone"))
    r = await cotal(broker, space, "ps", "--wide")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("waiter "))
    facts = lines[at + 1]
    assert facts.startswith("    model opus / high · provider anthropic · cwd ")
    for part in ("pid 4242", "spawner local.operator", "host h1", "uid ",
                 'forked from sess-1 "fix login" sha256 ab12cd34ef56 (carried from laptop at 2026-12-01T10:00:00Z)',
                 "condition 429 from the provider"):
        assert part in facts, (part, facts)
    gone = lines[next(i for i, ln in enumerate(lines) if ln.startswith("gone ")) + 1]
    assert "model" not in gone and gone.startswith("    cwd ")  # an absent fact is not shown

    r = await cotal(broker, space, "ps", "--json")
    assert r.returncode == 0, r.stderr
    docs = {d["name"]: d for d in map(json.loads, r.stdout.splitlines())}
    w = docs["waiter"]
    assert (w["model"], w["variant"], w["provider"], w["pid"], w["spawner"], w["host"]) == (
        "opus", "high", "anthropic", 4242, "local.operator", "h1")
    assert w["resume"]["transcriptSha256"] == SHA and w["condition"]["code"] == "rate_limit"
    assert isinstance(w["activeAt"], int) and isinstance(docs["gone"]["offlineSince"], int)
    assert "model" not in docs["gone"]


async def test_hostile_facts_are_neutralised_and_bounded(broker, space, strict):
    await strict(seats=("huge",))
    r = await cotal(broker, space, "ps", "--wide")
    assert r.returncode == 0, r.stderr
    assert raw_control_bytes(r.stdout.encode()) == [] and "Traceback" not in r.stderr
    facts = r.stdout.splitlines()[2]
    assert "provider p\\x1b]0;t" in facts  # shown, escaped
    assert len(facts) < 1000  # a 100 kB cwd and a 50 kB model cost a bounded line


@pytest.mark.contract_tap_off("the liar's rows break the rev-21 row schema on purpose")
async def test_a_changed_field_type_is_one_named_rejection_and_new_fields_pass(broker, space, strict):
    m = await strict(LyingManager, seats=("liar", "ok"), the_contract=_Lenient(contract()))
    r = await cotal(broker, space, "ps", "--wide")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    rows = rows_of(r.stdout)
    assert list(rows) == ["ok"]  # the new field `gpu` is tolerated
    assert (f'manager {m.instance_id}: row "liar" rejected (row-field-type): field \'pid\' is string, '
            "the row schema says integer; the other rows are shown") in r.stdout.splitlines()

    r = await cotal(broker, space, "ps", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    [doc] = [json.loads(x) for x in r.stdout.splitlines()]
    assert doc["name"] == "ok" and doc["gpu"] == {"model": "h100", "count": 8}  # verbatim
    assert r.stderr.startswith(f'cotal ps: manager {m.instance_id}: row "liar" rejected (row-field-type)')


async def test_a_partial_scatter_exits_non_zero(broker, space, strict):
    near = await strict(seats=("waiter",))
    far = await strict(seats=("gone",))
    r = await cotal(broker, space, "ps")
    assert r.returncode == 0 and set(rows_of(r.stdout)) == {"waiter", "gone"}, r.stderr
    await far.stop(deregister=False)  # silent, its registration left behind: as a killed host's
    r = await cotal(broker, space, "ps")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert set(rows_of(r.stdout)) == {"waiter"} and near.instance_id in r.stdout
    assert f"manager {far.instance_id}: registration is stale" in r.stdout
    assert r.stderr.strip() == ("cotal ps: partial answer: 1 manager did not answer (named above); "
                                "these rows are not the whole space.")
    r = await cotal(broker, space, "ps", "--json")
    assert r.returncode == 1 and [json.loads(x)["name"] for x in r.stdout.splitlines()] == ["waiter"]


async def test_slots_lists_the_static_slot_rows(broker, space, strict, tmp_path):
    from support.managers import Managers

    m = await strict(seats=())
    r = await cotal(broker, space, "ps", "--slots")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"static-a  local.static-a  slot active rev 3 uid {'u' * 26}  head active rev 4"
                                     f"  live  manager {m.instance_id}"]
    r = await cotal(broker, space, "ps", "--slots", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["manager"] == m.instance_id
    demo = Managers(broker, space, tmp_path)
    try:
        d = await demo.start()
        r = await cotal(broker, space, "ps", "--slots")
        assert r.returncode == 0, r.stderr
        assert f"manager {d.instance_id}: no static slots" in r.stdout.splitlines()
    finally:
        await demo.stop()
