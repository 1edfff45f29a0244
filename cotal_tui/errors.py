"""The console's error root, and the three layers' roots the CLI's edge turns into a sentence."""

from __future__ import annotations

from attach.errors import AttachLayerError
from meshview.errors import MeshviewError


class CotalError(Exception):
    """The root of every error cotal_tui raises; its text is one sentence for a user."""


# what a command may let reach the CLI's edge: said as its own sentence, never a traceback
LAYER_ROOTS: tuple[type[Exception], ...] = (MeshviewError, AttachLayerError, CotalError)
