"""``cotal demo`` in a real terminal (tmux): within a minute the demo's ``migrator`` seat asks
``Proceed with the migration? [y/N]`` and waits on ``approval``; ``T`` shows its card with the
prompt from its terminal, ``y`` shows the exact bytes, Enter sends them, and the card leaves
once the seat stops waiting. Every step polls ``capture-pane`` with a deadline."""

from __future__ import annotations

import os
import re
import sys

from support.tmux import needs_tmux

pytestmark = needs_tmux

PROMPT = "│ Proceed with the migration? [y/N]"


def migrator_selected(screen: str) -> bool:
    """The selected card is the one that lists its actions: is it the migrator's?"""
    cards = re.split(r"(?m)^◐ ", screen)
    return any(c.startswith("migrator") and "[y] y⏎" in c for c in cards)


async def test_triage_answers_the_demo_migration(tmux, tmp_path):
    env = {"TERM": "xterm-256color", "COTAL_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    await tmux.start(f"{sys.executable} -m cotal_tui.cli demo --agents 3", env, cols=160, rows=60)
    await tmux.until(lambda s: "roster" in s, 60, "the console")
    await tmux.until(lambda s: "migrator" in s and "managed pty" in s, 60, "the migrator seat")
    for attempt in range(3):  # a user presses again if a busy machine ate the first key
        await tmux.keys("T")
        try:
            await tmux.until(lambda s: "triage ·" in s, 10, "the triage screen")
            break
        except AssertionError:
            if attempt == 2:
                raise
    await tmux.until(lambda s: PROMPT in s, 30, "the migrator's prompt on its card")
    for _ in range(8):
        screen = await tmux.until(lambda s: "triage ·" in s, 5, "triage")
        if migrator_selected(screen):
            break
        await tmux.keys("j")
    else:
        raise AssertionError("could not put the cursor on the migrator's card")
    await tmux.keys("y")
    await tmux.until(lambda s: 'b"y\\r"' in s and "Enter send" in s, 10, "the bytes, before sending")
    await tmux.keys("Enter")
    await tmux.until(lambda s: "sent y⏎" in s or "answered" in s, 20, "the answer sent")
    await tmux.until(lambda s: PROMPT not in s and not re.search(r"(?m)^◐ migrator", s), 30, "the card gone")
