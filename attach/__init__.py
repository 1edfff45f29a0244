"""Both sides of the §13 endpoint plane and the session rails, as behaviour: the caller and the
control verbs (``endpoint``, ``control``, ``managed``), the rails, host and client of an attach
session, the headless terminal mirror, and passthrough to a real terminal.

May import ``meshview`` (the wire shapes and subjects come from ``meshview.wire``) and itself;
never Textual or Rich (``tests/arch/test_layers.py`` proves it), never widgets or cotal_tui.
"""
