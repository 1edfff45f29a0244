"""``cotal demo --auth static`` in a real terminal (tmux): the demo's waiting run shows in
NEEDS-YOU within seconds, ``r`` on it opens the answer composer, an answer typed and sent with
Enter settles the checkpoint, the row leaves the rail, and the journal (``R``, Enter) shows the
settled step with its key verbatim."""

from __future__ import annotations

import sys

from support.tmux import Tmux, needs_tmux

from test_auth_demo_tmux import SECRET_RE, static_demo, term_env  # noqa: F401  (fixture)

pytestmark = needs_tmux


async def test_answer_the_demo_run_from_needs_you(static_demo):
    home = static_demo["home"]
    cmd = f"{sys.executable} -m cotal_tui.cli"
    t = Tmux("runs")
    try:
        await t.start(f"{cmd} watch", term_env(home), cols=160, rows=48)
        await t.until(lambda s: "roster" in s, 60, "the console")
        # n: the NEEDS-YOU rail focused (wide) or its overlay (narrow); the run's card comes first
        await t.keys("n")
        screen = await t.until(lambda s: "⏸ run-" in s and "approve" in s, 60, "the run in NEEDS-YOU")
        assert not SECRET_RE.search(screen)
        await t.keys("r")
        await t.until(lambda s: "/checkpoint:approve#0" in s and "enter send" in s, 10, "the composer")
        await t.keys("y", "e", "s", "Enter")
        await t.until(lambda s: "⏸ run-" not in s, 30, "the run row left NEEDS-YOU")
        if "esc close" in await t.screen():  # narrow: NEEDS-YOU was an overlay; close it first
            await t.keys("Escape")
            await t.until(lambda s: "esc close" not in s, 10, "the overlay closed")
        await t.keys("R")
        await t.until(lambda s: "✓ completed" in s, 20, "the completed run in the runs lens")
        await t.keys("Enter")
        screen = await t.until(lambda s: "/checkpoint:approve#0" in s and "answered by" in s, 20,
                               "the settled step in the journal")
        assert "#" in screen and "/step:publish#0" in screen
    finally:
        await t.kill()
