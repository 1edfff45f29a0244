"""The console's seams stay typed: every session kind keeps ``ConsoleSession``, the App keeps
``ConsoleShell``, and nothing in the console probes a session or calls the App untyped."""

from __future__ import annotations

import re
from pathlib import Path

from nats.aio.client import Client as NATS
from support.console import StaticSession, build_model

from cotal_tui.session import ConsoleSession, LiveSession, SessionOptions
from cotal_tui.shell import ConsoleShell
from meshview.link.connect import ConnectTarget
from meshview.record.replay import ReplaySession, load_recording

ROOT = Path(__file__).resolve().parents[2]


def _py(*dirs: str) -> list[Path]:
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py"))]


def _hits(pattern: str, files: list[Path]) -> list[str]:
    rx = re.compile(pattern)
    return [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in files
            for i, line in enumerate(p.read_text().splitlines(), 1) if rx.search(line)]


def test_no_untyped_app_calls_in_screens():
    assert _hits(r"type:\s*ignore\[attr-defined\]", _py("cotal_tui/screens")) == []


def test_no_session_probing():
    files = _py("cotal_tui", "widgets")
    assert _hits(r"\b(getattr|hasattr)\((self\.)?session\b", files) == []
    assert _hits(r"\b(getattr|hasattr)\((self\.)?(app|screen)\b", files) == []
    assert _hits(r"\bsession\.(stop|start)\s*=[^=]", files) == []  # no patched methods


def test_every_session_kind_keeps_the_contract(tmp_path):
    from meshview.record.record import Recorder

    static = StaticSession(build_model()[0])
    model = build_model()[0]
    path = tmp_path / "r.jsonl.gz"
    Recorder(model, str(path)).close()
    replay = ReplaySession(load_recording(str(path)))

    live = LiveSession(NATS(), ConnectTarget(servers=("nats://127.0.0.1:9",), space="demo"), "demo", SessionOptions())
    for session, kind in ((static, "static"), (replay, "replay"), (live, "live")):
        assert isinstance(session, ConsoleSession), type(session).__name__
        assert session.kind == kind and session.on_stop == []


def test_the_apps_keep_the_shell():
    from cotal_tui.app import CotalApp
    from cotal_tui.replay_app import ReplayApp

    assert isinstance(CotalApp(), ConsoleShell)
    model = build_model()[0]
    assert ReplayApp.__mro__[1] is CotalApp and isinstance(CotalApp(session=StaticSession(model)),
                                                            ConsoleShell)


async def test_stop_runs_the_hooks_in_order(tmp_path):
    """What recording and alerts hook a session's end on, for a replay and a live session."""
    from meshview.record.record import Recorder

    model = build_model()[0]
    path = tmp_path / "r.jsonl.gz"
    Recorder(model, str(path)).close()

    live = LiveSession(NATS(), ConnectTarget(servers=("nats://127.0.0.1:9",), space="demo"), "demo", SessionOptions())
    for session in (ReplaySession(load_recording(str(path))), live):
        ran: list[str] = []
        session.on_stop.append(lambda: ran.append("a"))
        session.on_stop.append(lambda: ran.append("b"))
        await session.stop()
        assert ran == ["a", "b"], type(session).__name__
