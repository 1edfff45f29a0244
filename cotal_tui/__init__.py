"""The console and the ``cotal`` command: ``cli/`` (argparse, signals, stdout/stderr, exit codes),
the App (``app.py``, ``replay_app.py``, ``palette.py``), its ``screens/``, the support modules
they share (session, shell, operator, seats, recording, alerts, config, keymap) and ``demo/``.

The top layer: may import widgets, attach and meshview. Inside, imports point cli -> apps ->
screens -> support modules (``tests/arch/test_layers.py``); only ``cli/demo.py`` imports demo.
"""

import os as _os

# Textual draws at most TEXTUAL_FPS frames a second (its default 60), which is also the least
# gap between two paints: a key pressed just after a drain's paint waited up to 16.7 ms for its
# own. 120 halves that wait (10k agents, j/k worst 41-55 -> 33-44 ms over 4 runs each, CPU the
# same: paints follow events, 5-7 a second). It is read once, when textual is first imported,
# so it is set here, before any of ours imports it; a TEXTUAL_FPS of the user's own wins.
_os.environ.setdefault("TEXTUAL_FPS", "120")
