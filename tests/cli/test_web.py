"""``cotal watch --web``: the console served to a real headless Chromium by textual-serve.

The browser test runs ``cotal watch --web`` as a user would, against the scripted demo team on
the test broker, and drives the system Chromium with Selenium (through the system chromedriver;
nothing is downloaded): the page loads, the roster's names and a message published during the
test appear in the page's terminal, a key typed into the page reaches the console (``?`` opens
its help), and a screenshot of the page is the console, not textual-serve's loading screen (kept
as a test artifact). The token and binding rules are checked over plain HTTP. Skipped, with the
reason, only where Chromium or chromedriver is not installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from cotal_tui.cli.watch_web import NOT_FOR_SESSIONS, is_loopback, parse_bind, session_argv
from cotal_tui.demo.team import Team, TeamSchedule

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                 "google-chrome"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
VIEWPORT = (1400, 900)  # the page's size in CSS pixels = the screenshot's, in pixels
# a closed network: no QUIC, no background fetches, no component updates, no sync
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1"]

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="Chromium and chromedriver are not installed (apt-get install chromium "
           "chromium-driver; .ci/run does it)")

# textual-serve draws the terminal on a canvas, so the page gets this before it loads: the
# first xterm.js Terminal assigned to any object's ``terminal`` property is remembered on
# ``window.__cotalTerm``, and SCREEN reads its buffer through xterm's public API - what a user
# would see, as text.
HOOK = r"""
(() => {
  Object.defineProperty(Object.prototype, "terminal", {
    configurable: true,
    set(v) {
      Object.defineProperty(this, "terminal", {value: v, writable: true, configurable: true,
                                               enumerable: true});
      if (v && v.buffer && !window.__cotalTerm) { window.__cotalTerm = v; }
    },
    get() { return undefined; },
  });
})();
"""
SCREEN = r"""
const t = window.__cotalTerm;
if (!t) { return ""; }
const b = t.buffer.active, out = [];
for (let i = 0; i < t.rows; i++) {
  const line = b.getLine(b.viewportY + i);
  out.push(line ? line.translateToString(true) : "");
}
return out.join("\n");
"""


def wrong_token(token: str) -> str:
    """``token`` with its last character changed (a token that ends in ``x`` stays wrong: an
    ``x`` put in its place made the right token, one generated token in 64)."""
    return token[:-1] + ("y" if token.endswith("x") else "x")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {timeout}s")


def start_chromium(tmp_path: Path) -> Any:
    """The system Chromium under Selenium: a fresh profile, the page VIEWPORT, the hook in."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER,
                                      log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        # headless Chromium still keeps room for a toolbar: size the window so the page is VIEWPORT
        inner = driver.execute_script("return [innerWidth, innerHeight]")
        outer = driver.get_window_size()
        driver.set_window_size(VIEWPORT[0] + outer["width"] - inner[0],
                               VIEWPORT[1] + outer["height"] - inner[1])
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
    except BaseException:
        driver.quit()
        raise
    return driver


def screen_text(driver: Any) -> str:
    return driver.execute_script(SCREEN)


def wait_screen(driver: Any, cond: Callable[[str], object], timeout: float, what: str) -> str:
    """Selenium's wait on the page's terminal text; on timeout, says what the page showed."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
            lambda d: (s := screen_text(d)) and cond(s) and s)
    except TimeoutException:
        logs = "\n".join(e["message"] for e in driver.get_log("browser"))
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; the page "
                             f"showed:\n{screen_text(driver)}\nbrowser console:\n{logs}") from None


def artifact_dirs(tmp_path: Path) -> list[Path]:
    """Where a test keeps what it saw: $COTAL_TEST_ARTIFACTS (else tmp_path), and under CI also
    the checkout's test-artifacts/ (gitignored), where a CI job can collect it."""
    dirs = [Path(os.environ.get("COTAL_TEST_ARTIFACTS") or tmp_path)]
    if os.environ.get("CI") == "true":
        dirs.append(ROOT / "test-artifacts")
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def keep(dirs: list[Path], name: str, data: bytes) -> None:
    for d in dirs:
        (d / name).write_bytes(data)
        print(f"artifact: {d / name}")


def png_pixels(data: bytes, step: int = 1) -> tuple[int, int, list[bytes]]:
    """Width, height (from IHDR) and the RGB pixels on every ``step``-th row and column of an
    8-bit RGB/RGBA PNG, which Chromium's screenshots are: enough to look at the pixels without
    an imaging library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data[pos + 8:pos + 8 + n])
        elif kind == b"IDAT":
            idat.append(data[pos + 8:pos + 8 + n])
        pos += 12 + n
    assert ihdr is not None, "a PNG without IHDR"
    w, h, depth, colour, _, _, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, ihdr
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    rows, prev = [], bytearray(stride)
    low7, high1 = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
    for y in range(h):
        at = y * (stride + 1)
        f, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:  # most rows: bytewise add, on the whole row as one integer
            u, v = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            total = ((u & low7) + (v & low7)) ^ ((u ^ v) & high1)  # no carry between bytes
            line = bytearray(total.to_bytes(stride, "big"))
        elif f == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, [r[i:i + 3] for r in rows[::step] for i in range(0, stride, bpp * step)]


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


def loading_screenshot(driver: Any, url: str) -> bytes:
    """textual-serve's loading screen, held: ``?delay=1`` shows it with a Start button and
    does not connect (no console process starts)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + ("&" if "?" in url else "?") + "delay=1")
    WebDriverWait(driver, 30).until(EC.visibility_of_element_located((By.ID, "start")))
    return driver.get_screenshot_as_png()


def console_screenshot(driver: Any) -> bytes:
    """The page once textual-serve has swapped its loading screen for the terminal: the first
    bytes arrived, the intro is hidden and the terminal's fade-in is over."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30)
    wait.until(EC.text_to_be_present_in_element_attribute((By.TAG_NAME, "body"), "class",
                                                          "-first-byte"))
    wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, ".intro-dialog")))
    wait.until(lambda d: d.execute_script(
        "return getComputedStyle(document.querySelector('.textual-terminal')).opacity") == "1")
    return driver.get_screenshot_as_png()


def assert_is_the_console(png: bytes, loading: bytes) -> None:
    """The screenshot is the page's size, and the console drawn in it: most of it changed from
    the loading screen, into text on a background (not one flat colour: a blank terminal)."""
    w, h, pixels = png_pixels(png, step=2)
    assert (w, h) == VIEWPORT, f"the screenshot is {w}x{h}, the page {VIEWPORT[0]}x{VIEWPORT[1]}"
    _, _, before = png_pixels(loading, step=2)
    differ = sum(a != b for a, b in zip(pixels, before)) / len(pixels)
    colours = Counter(pixels)
    top = colours.most_common(1)[0][1] / len(pixels)
    assert differ > 0.5, f"only {differ:.0%} of the page differs from the loading screen"
    assert top < 0.95 and len(colours) > 16, \
        f"a blank page: one colour covers {top:.0%} of it, {len(colours)} colours in all"


@needs_chromium
async def test_console_in_a_real_browser(broker, nc, space, tmp_path, monkeypatch):
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.common.by import By

    # the driver and the browser are given, so Selenium Manager never runs; were it to, offline
    monkeypatch.setenv("SE_OFFLINE", "true")
    team = Team(nc, space, seed=2, agents=4,
                schedule=TeamSchedule(crash_after=None, restart_after=None, chat_interval=1.0))
    await team.start()
    port = free_port()
    server = _serve("--web", f"127.0.0.1:{port}", "--server", broker.url, "--space", space,
                    home=tmp_path)
    artifacts = artifact_dirs(tmp_path)
    chrome = None
    try:
        url, _ = await asyncio.to_thread(_url_from_stderr, server)  # the generated token's URL
        await asyncio.to_thread(wait_port, port)
        chrome = await asyncio.to_thread(start_chromium, tmp_path)
        loading = await asyncio.to_thread(loading_screenshot, chrome, url)
        keep(artifacts, "web-loading.png", loading)
        await asyncio.to_thread(chrome.get, url)
        names = [a.name for a in team.members]
        screen = await asyncio.to_thread(
            wait_screen, chrome, lambda s: "roster ·" in s and all(f"{n}/" in s for n in names),
            60, "the roster in the browser")
        assert "connected" in screen
        # a live message, published now, shows up in the page
        probe = f"browser probe {uuid.uuid4().hex[:8]}"
        await team.post(team.members[0], "general", probe)
        await asyncio.to_thread(wait_screen, chrome, lambda s: probe in s, 30, "the live message")
        # what the page looks like: the console, drawn, at the page's size
        png = await asyncio.to_thread(console_screenshot, chrome)
        keep(artifacts, "web-console.png", png)
        await asyncio.to_thread(assert_is_the_console, png, loading)
        # one observer per browser session: this page runs one console process
        assert len(_sessions(server.pid)) == 1
        # a key typed into the page reaches the console: ? opens its help
        await asyncio.to_thread(
            lambda: chrome.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys("?"))
        await asyncio.to_thread(wait_screen, chrome, lambda s: "global keys" in s, 30, "the help")
    finally:
        if chrome is not None:  # the browser goes first: a connected page holds the server
            await asyncio.to_thread(chrome.quit)
        err = _stop(server)
        await team.stop()
    assert "Traceback" not in err, err


def _png(w: int, h: int, rows: list[bytes], alpha: bool = False, filters: str = "0") -> bytes:
    """A PNG of these pixel rows, each row written with the next filter type in ``filters``."""
    bpp = 4 if alpha else 3
    out, prev = [], bytes(w * bpp)
    for y, row in enumerate(rows):
        f = int(filters[y % len(filters)])
        enc = bytearray([f])
        if f == 0:
            enc += row
        for i, x in enumerate(row if f else b""):
            a, b, c = (row[i - bpp] if i >= bpp else 0), prev[i], (prev[i - bpp] if i >= bpp else 0)
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            ref = (0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else c)[f]
            enc.append((x - ref) & 255)
        out.append(bytes(enc))
        prev = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6 if alpha else 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"".join(out))) + chunk(b"IEND", b""))


def test_the_screenshot_check_tells_a_console_from_a_blank_or_loading_page():
    rnd = random.Random(27)
    # the reader undoes every PNG filter type, RGB and RGBA
    for alpha in (False, True):
        rows = [rnd.randbytes(13 * (4 if alpha else 3)) for _ in range(11)]
        w, h, pixels = png_pixels(_png(13, 11, rows, alpha, filters="01234"))
        assert (w, h) == (13, 11)
        step = 4 if alpha else 3
        assert pixels == [r[i:i + 3] for r in rows for i in range(0, len(r), step)]
    w, h = VIEWPORT
    busy = _png(w, h, [rnd.randbytes(w * 3) for _ in range(h)])
    flat = _png(w, h, [b"\x0c\x18\x1f" * w] * h)
    assert_is_the_console(busy, flat)
    with pytest.raises(AssertionError, match="differs from the loading screen"):
        assert_is_the_console(busy, busy)  # the page never left the loading screen
    with pytest.raises(AssertionError, match="a blank page"):
        assert_is_the_console(_png(w, h, [b"\x1e\x1e\x1e" * w] * h), flat)
    with pytest.raises(AssertionError, match="the screenshot is 1400x757"):
        assert_is_the_console(_png(w, 757, [b"\x00" * w * 3] * 757), flat)


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
        for path in ("/", "/static/js/textual.js", "/ws", f"/?token={wrong_token(token)}"):
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


# ---- issue 35: the token on every request, Host and Origin against DNS rebinding --------------

WS_HEADERS = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def _raw_status(port: int, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """One request over a plain socket, with exactly these headers (Host included, or left out):
    the status and the first bytes of the answer. A 101 is read no further."""
    lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items()),
             "Connection: close" if "Connection" not in headers else "", "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall("\r\n".join(x for x in lines[:-2] if x).encode() + b"\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        if b" 101 " not in data.split(b"\r\n", 1)[0]:
            s.settimeout(2)
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except OSError:
                pass
    return int(data.split(b" ", 2)[1]), data


def _url_from_stderr(p: subprocess.Popen, timeout: float = 30.0) -> tuple[str, list[str]]:
    """The URL the server printed (its stderr, read line by line until it is there)."""
    import threading

    seen: list[str] = []
    found = threading.Event()

    def read() -> None:
        for raw in p.stderr:
            seen.append(raw.decode("utf-8", "replace"))
            if "serving the console on " in seen[-1]:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), f"no URL printed within {timeout}s: {seen}"
    return seen[-1].split("serving the console on ", 1)[1].split()[0], seen


async def test_web_loopback_needs_the_token_host_and_origin(broker, space, tmp_path):
    """No token given: one is generated and printed once, in the URL; then every request and
    websocket without it, with a wrong one, with a rebound Host or a foreign Origin gets 403."""
    port = free_port()
    server = _serve("--web", f"127.0.0.1:{port}", "--web-host", "console.test",
                    "--server", broker.url, "--space", space, home=tmp_path)
    try:
        url, printed = await asyncio.to_thread(_url_from_stderr, server)
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        token = url.split("?token=", 1)[1]
        assert len(token) >= 24
        host = f"127.0.0.1:{port}"
        good = {"Host": host}
        ok = f"/?token={token}"

        def status(path: str, headers: dict[str, str]) -> int:
            return _raw_status(port, path, headers)[0]

        refused = {
            "no token": ("/", good),
            "no token, static": ("/static/js/textual.js", good),
            "wrong token": (f"/?token={wrong_token(token)}", good),
            "rebinding Host": (ok, {"Host": f"evil.example:{port}"}),
            "rebinding Host, ws": (f"/ws?token={token}", {"Host": f"evil.example:{port}",
                                                          "Origin": f"http://evil.example:{port}",
                                                          **WS_HEADERS}),
            "another port in Host": (ok, {"Host": f"127.0.0.1:{port + 1}"}),
            "ws, no Origin, no token": ("/ws", {**good, **WS_HEADERS}),
            "ws, mismatched Origin": (f"/ws?token={token}",
                                      {**good, "Origin": "http://evil.example", **WS_HEADERS}),
            "ws, Origin null": (f"/ws?token={token}", {**good, "Origin": "null", **WS_HEADERS}),
            "mismatched Origin, page": (ok, {**good, "Origin": f"http://evil.example:{port}"}),
        }
        for what, (path, headers) in refused.items():
            code, body = await asyncio.to_thread(_raw_status, port, path, headers)
            assert code == 403, (what, body[:300])
            assert b"Traceback" not in body
        assert (await asyncio.to_thread(status, ok, {}) in (400, 403))  # HTTP/1.1 with no Host
        # the right token and Host: the page, by address, localhost or a --web-host name
        for h in (host, f"localhost:{port}", "console.test", f"console.test:{port}"):
            code, body = await asyncio.to_thread(_raw_status, port, ok, {"Host": h})
            assert code == 200 and b"textual-terminal" in body, (h, body[:300])
        # and the websocket opens, with or without an Origin (a non-browser client sends none)
        for extra in ({}, {"Origin": f"http://127.0.0.1:{port}"}):
            code = await asyncio.to_thread(status, f"/ws?token={token}",
                                           {**good, **extra, **WS_HEADERS})
            assert code == 101, extra
    finally:
        err = _stop(server)
    assert err.count(token) == 0  # the rest of stderr: printed once, in the URL only
    assert sum(line.count(token) for line in printed) == 1
    assert "Traceback" not in err


def _web_args(**kw: Any) -> argparse.Namespace:
    base = dict(web_token=None, web_token_file=None, web_host=None)
    return argparse.Namespace(**{**base, **kw})


def test_token_from_flag_file_or_environment(tmp_path, monkeypatch):
    from cotal_tui.cli.watch_web import WebError, read_token

    monkeypatch.delenv("COTAL_WEB_TOKEN", raising=False)
    assert read_token(_web_args()) == (None, "")
    f = tmp_path / "token"
    f.write_text("s3cret-from.file_~\n")
    assert read_token(_web_args(web_token_file=str(f)))[0] == "s3cret-from.file_~"
    monkeypatch.setenv("COTAL_WEB_TOKEN", "from-env")
    assert read_token(_web_args()) == ("from-env", "COTAL_WEB_TOKEN")
    assert read_token(_web_args(web_token="flag"))[0] == "flag"  # the flag first, then the file
    assert read_token(_web_args(web_token_file=str(f)))[0] == "s3cret-from.file_~"
    (tmp_path / "empty").write_text("\n")
    for bad, says in ((_web_args(web_token_file=str(tmp_path / "empty")), "is empty"),
                      (_web_args(web_token_file=str(tmp_path / "none")), "cannot read"),
                      (_web_args(web_token="a b"), "only letters"),
                      (_web_args(web_token="tok\x1b]0;x\x07"), "only letters")):
        with pytest.raises(WebError, match=says):
            read_token(bad)


def test_host_rule():
    from cotal_tui.cli.watch_web import HostRule, WebError

    r = HostRule("127.0.0.1", 8765, ["console.test", "proxy.test:443"])
    assert r.host_ok("127.0.0.1:8765") and r.host_ok("localhost:8765") and r.host_ok("[::1]:8765")
    assert r.host_ok("console.test") and r.host_ok("console.test:9999") and r.host_ok("CONSOLE.test")
    assert r.host_ok("proxy.test:443") and not r.host_ok("proxy.test")
    for bad in (None, "", "evil.example:8765", "127.0.0.1:8766", "127.0.0.1", "localhost",
                "127.0.0.1.evil.example:8765", "a@127.0.0.1:8765", "127.0.0.1:8765/x",
                "127.0.0.1:notaport", "löcalhost:8765"):
        assert not r.host_ok(bad), bad
    assert r.origin_ok("http://127.0.0.1:8765") and r.origin_ok("http://localhost:8765")
    assert r.origin_ok("https://console.test")
    for bad in ("null", "http://evil.example:8765", "file://", "http://127.0.0.1:8766",
                "chrome-extension://abc", "http://127.0.0.1:8765/path"):
        assert not r.origin_ok(bad), bad
    wild = HostRule("0.0.0.0", 80)
    assert wild.host_ok("192.168.1.7") and wild.host_ok("10.0.0.1:80") and wild.host_ok("localhost")
    assert not wild.host_ok("evil.example") and not wild.host_ok("192.168.1.7:81")
    lan = HostRule("192.168.1.7", 8765)
    assert lan.host_ok("192.168.1.7:8765") and not lan.host_ok("localhost:8765")
    with pytest.raises(WebError):
        HostRule("127.0.0.1", 1, ["bad/name"])
