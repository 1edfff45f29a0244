"""The console and the ``cotal`` command: ``cli/`` (argparse, signals, stdout/stderr, exit codes),
the App (``app.py``, ``replay_app.py``, ``palette.py``), its ``screens/``, the support modules
they share (session, shell, operator, seats, recording, alerts, config, keymap) and ``demo/``.

The top layer: may import widgets, attach and meshview. Inside, imports point cli -> apps ->
screens -> support modules (``tests/arch/test_layers.py``); only ``cli/demo.py`` imports demo.
"""
