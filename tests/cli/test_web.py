"""``cotal watch --web``: the console served to a real headless Chromium by textual-serve.

The browser test runs ``cotal watch --web`` as a user would, against the scripted demo team on
the test broker, and drives Chromium through chromedriver (tests/support/browser.py): the page
loads, the roster's names and a message published during the test appear in the page's terminal,
and a key typed into the page reaches the console (``?`` opens its help). The token and binding
rules are checked over plain HTTP. Skipped, with the reason, only where Chromium or chromedriver
is not installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from cotal_tui.cli.watch_web import NOT_FOR_SESSIONS, is_loopback, parse_bind, session_argv
from cotal_tui.demo.team import Team, TeamSchedule
from support.browser import CHROMEDRIVER, CHROMIUM, Browser, find, free_port, wait_port

ROOT = Path(__file__).resolve().parents[2]

needs_chromium = pytest.mark.skipif(
    find(CHROMIUM) is None or find(CHROMEDRIVER) is None,
    reason="Chromium and chromedriver are not installed (apt-get install chromium "
           "chromium-driver; .ci/run does it)")


def _serve(*args: str, home: Path) -> subprocess.Popen:
    env = {**os.environ, "COTAL_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("COTAL_WEB_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "cotal_tui.cli", "watch", *args],
                            cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _stop(p: subprocess.Popen) -> str:
    p.terminate()
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    return err.decode("utf-8", "replace")


def _sessions(server_pid: int) -> list[int]:
    """Processes running ``cotal_tui.cli.watch_web`` (one browser session each) under the server."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if b"cotal_tui.cli.watch_web" in cmd and int(stat.rsplit(")", 1)[1].split()[1]) in (
                server_pid, *_children(server_pid)):
            out.append(int(d.name))
    return out


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


@needs_chromium
async def test_console_in_a_real_browser(broker, nc, space, tmp_path):
    team = Team(nc, space, seed=2, agents=4,
                schedule=TeamSchedule(crash_after=None, restart_after=None, chat_interval=1.0))
    await team.start()
    port = free_port()
    server = _serve("--web", f"127.0.0.1:{port}", "--server", broker.url, "--space", space,
                    home=tmp_path)
    browser = Browser()
    try:
        await asyncio.to_thread(wait_port, port)
        await asyncio.to_thread(browser.start)
        await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/")
        names = [a.name for a in team.members]
        screen = await asyncio.to_thread(
            browser.until, lambda s: "roster ·" in s and all(f"{n}/" in s for n in names), 60,
            "the roster in the browser")
        assert "connected" in screen
        # a live message, published now, shows up in the page
        probe = f"browser probe {uuid.uuid4().hex[:8]}"
        await team.post(team.members[0], "general", probe)
        await asyncio.to_thread(browser.until, lambda s: probe in s, 30, "the live message")
        # one observer per browser session: this page runs one console process
        assert len(_sessions(server.pid)) == 1
        # a key typed into the page reaches the console: ? opens its help
        await asyncio.to_thread(browser.send_keys, "?")
        await asyncio.to_thread(browser.until, lambda s: "global keys" in s, 30, "the help")
    finally:
        await asyncio.to_thread(browser.stop)
        err = _stop(server)
        await team.stop()
    assert "Traceback" not in err, err


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def test_token_is_required_once_given(broker, space, tmp_path):
    port = free_port()
    token = uuid.uuid4().hex
    server = _serve("--web", f"127.0.0.1:{port}", "--web-token", token, "--server", broker.url,
                    "--space", space, home=tmp_path)
    try:
        await asyncio.to_thread(wait_port, port)
        base = f"http://127.0.0.1:{port}"
        for path in ("/", "/static/js/textual.js", "/ws", f"/?token={token[:-1]}x"):
            status, _, body = await asyncio.to_thread(_get, base + path)
            assert status == 403, path
            assert b"token" in body
        status, headers, body = await asyncio.to_thread(_get, f"{base}/?token={token}")
        assert status == 200 and b"textual-terminal" in body
        assert b"googleapis" not in body  # the page fetches nothing from elsewhere
        cookie = headers.get("Set-Cookie", "")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        jar = {"Cookie": cookie.split(";", 1)[0]}
        status, _, _ = await asyncio.to_thread(_get, f"{base}/static/js/textual.js", jar)
        assert status == 200
        # a page of another origin may not open the console's websocket, token or not
        status, _, _ = await asyncio.to_thread(
            _get, f"{base}/ws", {**jar, "Origin": "http://evil.example", "Upgrade": "websocket",
                                 "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                                 "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert status == 403
    finally:
        err = _stop(server)
    assert token not in err  # the token is never printed


def test_a_non_loopback_bind_needs_a_token(tmp_path):
    env = {**os.environ, "COTAL_HOME": str(tmp_path)}
    env.pop("COTAL_WEB_TOKEN", None)
    p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "watch", "--web",
                        "0.0.0.0:1", "--server", "nats://127.0.0.1:1"], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "--web-token" in p.stderr
    assert "Traceback" not in p.stderr


def test_bind_parsing_and_session_flags():
    assert parse_bind(None) == ("127.0.0.1", 8765)
    assert parse_bind("9000") == ("127.0.0.1", 9000)
    assert parse_bind(":9001") == ("127.0.0.1", 9001)
    assert parse_bind("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_bind("[::1]:81") == ("::1", 81)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    args = argparse.Namespace(server=["nats://u:p@h:4222"], space="s", web="127.0.0.1:1",
                              web_token="secret", backfill=5, no_dms=True, record="x.gz",
                              notify=True, notify_cmd="echo hi", read_only=False)
    argv = session_argv(args)
    assert argv[:4] == ["--server", "nats://u:p@h:4222", "--space", "s"]
    assert "--backfill" in argv and "--no-dms" in argv and "--notify" in argv
    assert "--notify-cmd" in argv
    assert "secret" not in argv and "--web" not in argv and "--record" not in argv
    assert {"web", "web_token", "record"} <= NOT_FOR_SESSIONS
