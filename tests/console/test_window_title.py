"""The terminal title carries the waiting count (``2 waiting · cotal demo``; ``cotal demo`` when
nobody waits), written as OSC 2 only when it changes, the terminal's own title saved first and
given back on exit; a hostile space name cannot put an escape into it; ``[ui] title_counts =
false`` leaves the title alone."""

from __future__ import annotations

from pathlib import Path

from support.console import StaticSession, build_model, pid

from conftest import until
import cotal_tui.app as app_module
from cotal_tui.app import TITLE_POP, TITLE_PUSH, CotalApp, window_title
from meshview.model.snapshot import PresenceRecord

WIDE = (120, 40)


class Recording(CotalApp):
    """The console, with what it writes to the terminal between frames kept for the test."""

    RUNS_TICK_S = 0.05
    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))  # a subclass's is beside its own module

    def __init__(self, **kw):
        super().__init__(**kw)
        self.written: list[str] = []

    def write_to_terminal(self, data: str) -> None:
        self.written.append(data)
        super().write_to_terminal(data)


def idle(model, name: str) -> None:
    p = model.peer(pid(name))
    model.apply_presence(PresenceRecord(id=p.id, name=p.name, status="idle", ts=model.clock(), role=p.role,
                                        lifecycle_uid=p.lifecycle_uid))


def titles(app: Recording) -> list[str]:
    return [w.removeprefix(TITLE_PUSH) for w in app.written if "\x1b]2;" in w]


async def test_the_title_counts_who_waits(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    model, _ = build_model()
    waiting = sum(1 for p in model.snapshot().agents if p.status == "waiting")
    assert waiting == 2  # bram and dax
    app = Recording(session=StaticSession(model, space="demo"))
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: app.title == "2 waiting · cotal demo")
        assert app.written[0] == TITLE_PUSH + "\x1b]2;2 waiting · cotal demo\x07"
        idle(model, "bram")
        await until(pilot, lambda: app.title == "1 waiting · cotal demo")
        idle(model, "dax")
        await until(pilot, lambda: app.title == "cotal demo")
        assert titles(app) == ["\x1b]2;2 waiting · cotal demo\x07", "\x1b]2;1 waiting · cotal demo\x07",
                               "\x1b]2;cotal demo\x07"]  # once per change, not per tick
        assert sum(TITLE_PUSH in w for w in app.written) == 1
        app.exit(0)
    assert app.written[-1] == TITLE_POP


def test_a_hostile_space_name_stays_text():
    t = window_title("x\x1b]2;owned\x07\u202eevil\x9b", 3)
    assert t.startswith("3 waiting · cotal x")
    assert not any(c in t for c in "\x1b\x07\u202e\x9b")


async def test_title_counts_off_leaves_the_title_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text("[ui]\ntitle_counts = false\n")
    model, _ = build_model()
    app = Recording(session=StaticSession(model, space="demo"))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause(10 * Recording.RUNS_TICK_S)  # ten ticks pass
        assert app.title == "cotal console" and titles(app) == []
        app.exit(0)
    assert TITLE_POP not in app.written
