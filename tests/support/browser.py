"""A real headless Chromium driven by chromedriver over plain HTTP WebDriver calls.

No selenium: the W3C WebDriver protocol is a handful of JSON requests. Chromium runs with the
flags a closed network needs (no QUIC, no background networking, no component updates, no sync)
and a fresh profile. The terminal textual-serve draws is a canvas, so the page gets a small hook
before it loads (through chromedriver's CDP passthrough) that keeps a reference to the xterm.js
``Terminal`` it creates; :meth:`Browser.screen_text` reads the terminal's buffer through xterm's
public API - what a user would see, as text.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = ("chromedriver", "chromium-driver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900"]

# Any object that gets a ``terminal`` property assigned keeps it as its own property, and the
# first xterm Terminal assigned that way is remembered on ``window.__cotalTerm``.
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

READ = r"""
const t = window.__cotalTerm;
if (!t) { return null; }
const b = t.buffer.active, out = [];
for (let i = 0; i < t.rows; i++) {
  const line = b.getLine(b.viewportY + i);
  out.push(line ? line.translateToString(true) : "");
}
return out.join("\n");
"""


def find(names: tuple[str, ...]) -> str | None:
    return next((p for p in (shutil.which(n) for n in names) if p), None)


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


class Browser:
    def __init__(self) -> None:
        self.chromium = find(CHROMIUM)
        self.driver_bin = find(CHROMEDRIVER)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.session: str | None = None
        self.profile = tempfile.mkdtemp(prefix="cotal-chromium-")

    def start(self) -> "Browser":
        assert self.chromium and self.driver_bin
        self.port = free_port()
        self.proc = subprocess.Popen([self.driver_bin, f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        wait_port(self.port)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": self.chromium,
                                   "args": FLAGS + [f"--user-data-dir={self.profile}"]},
        }}}
        r = self._call("POST", "/session", caps, timeout=60)
        self.session = r["sessionId"] if "sessionId" in r else r["value"]["sessionId"]
        self.cdp("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
        return self

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise AssertionError(f"webdriver {method} {path}: {e.code} {e.read()[:500]!r}")

    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def cdp(self, cmd: str, params: dict) -> Any:
        return self._call("POST", self._s("/goog/cdp/execute"), {"cmd": cmd, "params": params})

    def get(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url}, timeout=60)

    def script(self, js: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": js, "args": list(args)})[
            "value"]

    def screen_text(self) -> str:
        return self.script(READ) or ""

    def send_keys(self, text: str) -> None:
        """Typed into xterm's input element, as a user typing in the page."""
        el = self._call("POST", self._s("/element"),
                        {"using": "css selector", "value": ".xterm-helper-textarea"})["value"]
        eid = next(iter(el.values()))
        self._call("POST", self._s(f"/element/{eid}/value"), {"text": text})

    def until(self, cond: Callable[[str], object], timeout: float = 30.0,
              what: str = "the page") -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen_text()
            if cond(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; the browser "
                             f"showed:\n{text}")

    def stop(self) -> None:
        if self.session is not None:
            try:
                self._call("DELETE", self._s(""), timeout=20)
            except Exception:
                pass
            self.session = None
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
        shutil.rmtree(self.profile, ignore_errors=True)
