"""Run alerts from the event frames (issue 37 item 7), on a real broker through ``cotal watch
--json --notify-cmd``: ``--notify-run-failed`` alerts when an agent's run ends in ``RUN_ERROR``
(``COTAL_EVENT=run-failed``), ``--notify-finished`` when a run closed and the agent then reads idle
(``COTAL_EVENT=finished``, not while it still reads working). Each is opted into: a watcher with
only ``--notify`` stays quiet. A lying peer's failed run (its own subject, another agent's
channel and name) alerts as itself, never as the agent it names."""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

from conftest import until
from cotal_tui.config import notify_settings, settings
from meshview.lines.notify import Alert, WaitingEpisodes
from support.observer import now_ms, post, presence, put_presence
from support.watchproc import WatchProc


async def frame(nc, space: str, actor: str, seq: int, run: str, events: list, *,
                claims: str | None = None) -> None:
    target = claims or actor
    m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": f"local.{actor}", "name": target}, "channel": f"events.local.{target}",
         "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                    "runId": run, "epoch": "e1", "seq": seq, "events": events}]}
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{actor}.events.local.{target}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


def started(run: str) -> dict:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run}


def _runs(log) -> list[dict[str, str]]:
    if not log.exists():
        return []
    return [dict(line.split("=", 1) for line in block.strip().splitlines())
            for block in log.read_text().split("---") if block.strip()]


async def test_run_failed_and_finished_alerts_are_opt_in(broker, nc, space, tmp_path):
    log, quiet_log = tmp_path / "runs.env", tmp_path / "quiet.env"
    cmd = "env | grep ^COTAL_ | sort >> {}; echo --- >> {}"
    base = ("--json", "--server", broker.url, "--space", space)
    env = {"COTAL_HOME": str(tmp_path)}
    w = WatchProc.start(*base, "--notify-run-failed", "--notify-finished",
                        "--notify-cmd", cmd.format(log, log), env=env)
    quiet = WatchProc.start(*base, "--notify", "--notify-cmd", cmd.format(quiet_log, quiet_log),
                            env=env)
    await put_presence(nc, space, presence("ada", "working", role="dev"))
    try:
        for k in range(200):  # both watchers live
            await post(nc, space, "ada", "general", f"sync-{k}")
            if all("sync-" in p.stdout_text for p in (w, quiet)):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the watchers never went live")
        await frame(nc, space, "ada", 1, "r1", [started("r1"),
                                                {"type": "TOOL_CALL_START", "toolCallName": "Bash"}])
        await frame(nc, space, "ada", 2, "r1", [{"type": "RUN_ERROR", "message": "run failed"}])
        await until(lambda: len(_runs(log)) == 1, 20, "the run-failed alert")
        # the lying peer: bob's own subject, ada's channel and name
        await frame(nc, space, "bob", 1, "rb", [started("rb"),
                                                {"type": "RUN_ERROR", "message": "run failed"}],
                    claims="ada")
        await until(lambda: len(_runs(log)) == 2, 20, "bob's run-failed alert")
        # a run closes while presence still says working: no alert until it reads idle
        await frame(nc, space, "ada", 3, "r2", [started("r2")])
        await frame(nc, space, "ada", 4, "r2", [{"type": "RUN_FINISHED", "runId": "r2"}])
        await w.wait_for(lambda: any(o["state"] == "finished" for o in w.objs("run")), 20,
                         "the finished run line")
        await post(nc, space, "ada", "general", "barrier")
        await w.wait_for(lambda: "barrier" in w.stdout_text, 20, "the barrier")
        assert len(_runs(log)) == 2
        await put_presence(nc, space, presence("ada", "idle", role="dev"))
        await until(lambda: len(_runs(log)) == 3, 20, "the finished alert")
        await quiet.wait_for(lambda: any(o["state"] == "finished" for o in quiet.objs("run")),
                             20, "the quiet watcher saw the runs too")
    finally:
        w.stop()
        quiet.stop()
    failed, lying, done = _runs(log)
    assert failed["COTAL_EVENT"] == "run-failed" and failed["COTAL_AGENT_ID"] == "local.ada"
    assert failed["COTAL_AGENT"] == "ada" and failed["COTAL_RUN_ID"] == "r1"
    assert failed["COTAL_TEXT"] == "ada: run failed" and failed["COTAL_ROLE"] == "dev"
    assert lying["COTAL_EVENT"] == "run-failed" and lying["COTAL_AGENT_ID"] == "local.bob"
    assert lying["COTAL_AGENT"] != "ada" and "ada" not in lying["COTAL_TEXT"]
    assert done["COTAL_EVENT"] == "finished" and done["COTAL_AGENT_ID"] == "local.ada"
    assert done["COTAL_RUN_ID"] == "r2" and done["COTAL_TEXT"] == "ada finished a run and is idle"
    assert not quiet_log.exists()  # opt-in: --notify alone rings for waiting agents only
    assert b"\x1b" not in w.stdout_bytes and b"\x07" not in w.stdout_bytes


def test_flags_and_config_opt_in_and_imply_notify(tmp_path):
    args = argparse.Namespace(notify=False, notify_cmd=None, notify_escape=None,
                              notify_stalled=False, stalled_minutes=None,
                              notify_run_failed=True, notify_finished=False)
    s = notify_settings(args, tmp_path)
    assert s.run_failed and not s.finished and s.terminal  # implies --notify
    assert not notify_settings(None, tmp_path).run_failed
    (tmp_path / "config.toml").write_text("[notify]\nfinished = true\nrun_failed = false\n")
    s = notify_settings(None, tmp_path)
    assert s.finished and not s.run_failed and s.terminal
    rows = {r.key: r for r in settings(None, tmp_path)}
    assert rows["notify.finished"].value is True and rows["notify.finished"].source == "config.toml"
    assert rows["notify.run_failed"].value is False


def test_run_alerts_share_the_waiting_bucket_and_say_one_line():
    t = [0.0]
    ep = WaitingEpisodes("s", burst=2, refill_s=20.0, clock=lambda: t[0])
    assert ep.admit() == 0 and ep.admit() == 0
    assert ep.admit() is None and ep.held == 1  # held back, counted
    t[0] = 20.0
    assert ep.admit() == 1  # said with the next one through
    a = Alert("local.ada", "ada\x1b[2J", None, "rate_limit", "run failed", "s", "", more=2,
              event="run-failed", run_id="r1")
    assert a.text() == "ada [2J: run failed (rate_limit) (+2 more held back)"
    assert "\n" not in a.text() and a.env()["COTAL_EVENT"] == "run-failed"
    assert Alert("local.ada", "ada", None, None, None, "s", "", event="finished").title() == (
        "cotal: ada is done")
