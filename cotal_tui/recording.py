"""Recording from the console: ``cotal watch --record FILE`` and the palette's ``record``.

Both put a :class:`meshview.record.Recorder` on a session's model; the recording ends when the
session stops (or when ``record`` is chosen again). ``cotal replay FILE`` plays it back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cotal_tui.config import config_dir
from meshview.record import MAX_SIZE, Recorder, active_recorder


def default_path(space: str) -> str:
    """``$COTAL_HOME/recordings/<space>-<date>-<time>.jsonl.gz`` (the folder made private)."""
    d = config_dir() / "recordings"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in space) or "space"
    return str(d / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl.gz")


def start_recording(session: Any, path: str | None = None, *,
                    max_size: int = MAX_SIZE) -> Recorder:
    """Record ``session``'s model until the session stops. Check ``.error`` (one sentence)."""
    model = session.model
    path = path or default_path(model.space)
    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    rec = Recorder(model, str(Path(path).expanduser()), max_size=max_size)
    session.recorder = rec
    if not getattr(session, "_record_close_hooked", False):
        session._record_close_hooked = True
        stop = session.stop

        async def stop_then_close() -> None:
            try:
                await stop()
            finally:
                r = getattr(session, "recorder", None)
                if r is not None:
                    r.close()

        session.stop = stop_then_close
    return rec


def toggle_recording(app: Any, path: str | None = None) -> str:
    """The palette's ``record``: start recording the open console's space (to ``path``, else
    a new file under ``$COTAL_HOME/recordings``), or stop the recording in progress. Returns the
    sentence it also shows on the status line."""
    screen = app.console_screen() if hasattr(app, "console_screen") else None
    session = getattr(screen, "session", None)
    model = getattr(session, "model", None)
    if session is None or model is None:
        msg, err = "record: open a space first", True
    elif getattr(session, "recording", None) is not None and not hasattr(session, "observer"):
        msg, err = "record: this is already a recording", True
    elif (rec := active_recorder(model)) is not None:
        rec.close()
        msg, err = f"recording stopped: {rec.summary()}", False
    else:
        try:
            rec = start_recording(session, path)
        except OSError as e:
            rec, msg, err = None, f"record: cannot write there: {e.strerror or e}", True
        if rec is not None:
            msg, err = ((rec.error, True) if rec.error else
                        (f"recording to {rec.path} (record again to stop)", False))
    if hasattr(app, "notify_line"):
        app.notify_line(msg, err)
    return msg
