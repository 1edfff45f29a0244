"""``cotal demo`` in tmux at 80×24 (issue 38 items 4 and 5): roster ``a`` fits the seat to the
pane, so a line the remote shell right-aligns to its own width ends in the terminal's last
column; Esc Esc reaches a seat running ``cat -v`` (it prints ``^[^[``) and Ctrl-] alone brings
the console back. Every step polls ``capture-pane`` with a deadline."""

from __future__ import annotations

import os
import sys

from support.tmux import needs_tmux

pytestmark = needs_tmux


async def test_attach_fits_80x24_and_esc_esc_reaches_cat_v(tmux, tmp_path):
    env = {"TERM": "xterm-256color", "COTAL_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    await tmux.start(f"{sys.executable} -m cotal_tui.cli demo --shell --agents 3", env, cols=80,
                     rows=24)
    await tmux.until(lambda s: "managed pty" in s, 60, "managed seats in the roster")
    for attempt in range(3):  # a user presses again if a busy machine ate the first keys
        await tmux.keys("h")  # focus the roster
        await tmux.keys("a")
        try:
            await tmux.until(lambda s: "attached · Ctrl-]" in s, 15, "the attach screen")
            break
        except AssertionError:
            if attempt == 2:
                raise
    await tmux.until(lambda s: "fitted 80×22" in s, 20, "the seat fitted to the pane")
    await tmux.until(lambda s: any(ln.rstrip().endswith(("$", "#"))
                                   for ln in s.split("attached · Ctrl-]", 1)[1].splitlines()),
                     20, "the seat's shell prompt")
    # right-aligned to the width the seat's own tty reports: fitted, it ends in column 80
    await tmux.keys('printf "%$(tput cols)s\\n" "EDGE$((6*7))"', "Enter")
    screen = await tmux.until(lambda s: "EDGE42" in s, 20, "the right-aligned line")
    edge = next(ln for ln in screen.splitlines() if ln.rstrip().endswith("EDGE42"))
    assert len(edge.rstrip()) == 80, repr(edge)  # the last column is visible, nothing cropped
    # Esc Esc is the program's: cat -v shows it (the tty echoes ^[^[, cat prints it again)
    # type only once bash has printed its marker: it has given the tty back to cooked mode by
    # then (keys typed ahead while readline still held the tty raw echoed a bare ^M on CI)
    await tmux.keys("echo READY-$((6*7)); cat -v", "Enter")
    await tmux.until(lambda s: "READY-42" in s, 20, "bash running the line")
    await tmux.keys("cat-$((6*7))", "Enter")  # cat is reading (not bash's readline) once it echoes
    await tmux.until(lambda s: s.count("cat-$((6*7))") >= 2, 20, "cat -v reading")
    await tmux.keys("Escape")
    await tmux.keys("Escape")
    # the tty echoes both (echoctl); Enter only then, as a person types it (Esc then Enter
    # within Textual's escape delay would read as alt+enter)
    await tmux.until(lambda s: "^[^[" in s, 20, "the seat's tty echoing ^[^[")
    await tmux.keys("Enter")
    await tmux.until(lambda s: s.count("^[^[") >= 2, 20, "cat -v printing ^[^[")
    assert "attached · Ctrl-]" in await tmux.screen()  # Esc Esc did not detach
    await tmux.keys("C-d")
    await tmux.keys("C-]")
    await tmux.until(lambda s: "attached · Ctrl-]" not in s and "managed pty" in s, 20,
                     "the console again")
