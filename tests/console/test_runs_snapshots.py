"""SVG baselines of the runs lens, a run's journal, the answer composer and a run's NEEDS-YOU
card, from deterministic data (the demo space's fixed clock plus hand-made run-ps/run-status
values fed through the model's run inputs). Update only these with ``--snapshot-update``."""

from __future__ import annotations

import pytest
from support.console import make_app

from meshview.model.runs_state import JournalRow, Pause, RunView

SIZES = [pytest.param((120, 40), id="120x40"), pytest.param((80, 24), id="80x24")]
IID = "q" * 26
WAITING = "run-3f2a" + "0" * 28
DONE = "run-9c41" + "1" * 28
GONE = "run-77e0" + "2" * 28


def _app():
    app = make_app()
    app.animation_level = "none"
    m = app.session.model
    now = app.clock.t
    m.apply_run_rows(IID, (
        RunView(WAITING, "manager", IID, "running", holder="manager@demo", epoch=1, journal_high=2,
                started_at=now - 5 * 60_000),
        RunView(DONE, "manager", IID, "completed", holder="manager@demo", epoch=1, journal_high=5,
                started_at=now - 3_600_000, forked_from=f"{GONE}@/checkpoint:approve#0"),
        RunView(GONE, "manager", IID, "released", epoch=2, journal_high=1, started_at=now - 7_200_000),
    ))
    m.apply_run_status(IID, WAITING, (
        JournalRow(n=0, kind="activation", holder="manager@demo", epoch=1, replayed_to=0),
        JournalRow(n=1, kind="step", step_key="/step:build#0", state="settled", outcome="ok",
                   started_at=now - 299_000, ended_at=now - 296_000),
        JournalRow(n=3, kind="step", step_key="/checkpoint:approve#0", state="pending", outcome="pending",
                   started_at=now - 295_000, prompt="ship release 1.8?", addressee="ops",
                   deadline_at=now + 42 * 60_000, on_expiry="fail"),
    ), (Pause("/checkpoint:approve#0", "checkpoint", "ship release 1.8?", addressee="ops",
              deadline_at=now + 42 * 60_000, on_expiry="fail"),))
    return app


@pytest.mark.parametrize("size", SIZES)
def test_runs_lens(snap_compare, size):
    assert snap_compare(_app(), press=["R"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_run_journal(snap_compare, size):
    assert snap_compare(_app(), press=["R", "enter"], terminal_size=size)


def test_answer_composer(snap_compare):
    assert snap_compare(_app(), press=["R", "r"], terminal_size=(120, 40))


def test_needs_you_run_card(snap_compare):
    assert snap_compare(_app(), press=["n"], terminal_size=(120, 40))
