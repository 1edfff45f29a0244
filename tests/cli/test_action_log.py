"""The action log ($COTAL_HOME/log/actions.jsonl, cotal_tui/actionlog.py): ``cotal send`` and the
control verbs (spawn, input, stop) against the real broker and an in-process demo manager; the
log holds exactly the actions done, each with its settled outcome and message id, 0600, and none
of the text that was sent or typed. A refusal before anything touched the network is no action."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys

import pytest

from cotal_tui.actionlog import ActionLog, read_actions, scrub
from support.managers import Managers

COTAL = [sys.executable, "-m", "cotal_tui.cli"]
TYPED = "hunter2-typed-into-the-seat"
SAID = "the-deploy-key-is-not-here"


async def cotal(broker, space: str, home, *argv: str, env: dict | None = None
                ) -> subprocess.CompletedProcess:
    cmd = COTAL + [argv[0], "--server", broker.url, "--space", space, "--connect-timeout", "2",
                   *argv[1:]]
    e = dict(os.environ)
    e.pop("COTAL_READ_ONLY", None)
    e.pop("COTAL_ACTION_LOG", None)  # the log under this COTAL_HOME
    e["COTAL_HOME"] = str(home)
    e.update(env or {})
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=90, env=e)


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


async def test_the_log_holds_exactly_the_actions_done_with_outcomes(broker, space, managers, tmp_path):
    home = tmp_path / "home"
    log = home / "log" / "actions.jsonl"
    m = await managers.start()
    r = await cotal(broker, space, home, "send", "--json", "--as", "ops", "#general", SAID)
    assert r.returncode == 0, r.stderr
    sent_id = json.loads(r.stdout)["id"]
    r = await cotal(broker, space, home, "spawn", "echo", "--name", "logged1", "--on", m.instance_id)
    assert r.returncode == 0, r.stderr
    r = await cotal(broker, space, home, "input", "logged1", TYPED)
    assert r.returncode == 0, r.stderr
    # refused before the network (read-only): nothing was done, nothing is logged
    r = await cotal(broker, space, home, "stop", "logged1", env={"COTAL_READ_ONLY": "1"})
    assert r.returncode == 1 and "read-only" in r.stderr
    r = await cotal(broker, space, home, "stop", "logged1")
    assert r.returncode == 0, r.stderr
    # a stop of a seat nobody hosts: done, and failed
    r = await cotal(broker, space, home, "stop", "nobody-here")
    assert r.returncode == 1

    acts = read_actions(log)
    assert [(a.what, a.target, a.outcome) for a in acts] == [
        ("stop", "nobody-here", "failed"),
        ("stop", "logged1", "done"),
        ("input", "logged1", "done"),
        ("spawn", "logged1", "joined"),
        ("send", "#general", "acknowledged"),
    ]
    assert acts[-1].message_id == sent_id
    assert [a.mesh for a in acts] == [space] * 5  # the :log lens's mesh column
    spawn = acts[3]
    assert spawn.history == ["requested", "joined"] and m.instance_id in (spawn.detail or "")
    assert spawn.goal_id and len(spawn.goal_id) >= 16  # the goal the spawn was followed by
    assert (acts[2].detail or "").endswith(" bytes and Enter")  # how many, never which
    assert acts[0].detail  # the manager's one sentence

    # the file: 0600 in a 0700 folder, append-only lines keyed by id, no text typed or said
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    raw = log.read_text()
    assert TYPED not in raw and SAID not in raw
    rows = [json.loads(x) for x in raw.splitlines()]
    firsts = [x for x in rows if "what" in x]
    assert len(firsts) == 5 and len({x["id"] for x in firsts}) == 5
    assert all(x["id"] in {f["id"] for f in firsts} for x in rows)  # updates name an action


def test_secrets_are_scrubbed_and_a_loose_file_is_tightened(tmp_path):
    path = tmp_path / "log" / "actions.jsonl"
    path.parent.mkdir()
    path.write_text("")
    path.chmod(0o644)
    log = ActionLog(path)
    seed = "SUAIBDPBAUTWCWBKIO6XTXB2OBKQQOBLEJBLIQD4YHQV2JO3XE5PAQJFFL4"
    jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJ4In0.c2ln"
    aid = log.record("spawn", f"nats://u:pw@h/{seed}", "requested", detail=f"bearer abc {jwt}")
    log.settle(aid, "uncertain", detail="no answer\nin time")
    raw = path.read_text()
    assert seed not in raw and jwt not in raw and "pw@" not in raw and "abc" not in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [a] = read_actions(path)
    assert a.outcome == "uncertain" and a.detail == "no answer in time"
    assert a.history == ["requested", "uncertain"]
    assert scrub("nats://u:secret@h") == "nats://***@h"


def test_an_unwritable_log_never_stops_the_action(tmp_path):
    blocker = tmp_path / "log"
    blocker.write_text("a file where the folder should be")
    log = ActionLog(blocker / "actions.jsonl")
    log.record("send", "#general", "acknowledged", message_id="m1")
    assert log.errors == 1 and "cannot be written" in (log.last_error or "")


def test_the_environment_moves_or_turns_off_the_log(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere.jsonl"
    monkeypatch.setenv("COTAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COTAL_ACTION_LOG", str(elsewhere))
    ActionLog().record("stop", "ada", "done")
    assert [a.what for a in read_actions(elsewhere)] == ["stop"]
    monkeypatch.setenv("COTAL_ACTION_LOG", "off")
    ActionLog().record("stop", "bob", "done")
    assert not (tmp_path / "home" / "log").exists() and len(read_actions(elsewhere)) == 1
