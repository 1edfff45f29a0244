"""One line for an agent's activity frame (``cotal watch --plain --events summary``).

A frame (``ag-ui.frame`` parts on ``events.<owner>.<actor>``) folds to many lines
(:func:`meshview.wire.parts.agui_frame_text`); a line stream full of them buries the chat. The
summary says what happened in the frame in one line: ``▸ run started``, the tools it started
(``⚙ Read, Bash +3``), the first assistant words (``» Looking at the…``), ``✗ run failed``,
``◂ finished``; else how many events it carried. Whatever a peer puts in a frame, the line is
bounded: a few names of a few cells each, a few words, and every piece escaped by
:func:`meshview.wire.sanitize.inline` (no control or invisible character reaches the terminal).
"""

from __future__ import annotations

from typing import Any, Iterable

from meshview.wire import sanitize
from meshview.wire.messages import ExtensionPart
from meshview.wire.parts import AGUI_EVENT_CAP, AGUI_FRAME_KIND

RUN_CELLS = 8  # a run id shown by its first characters (the ids are uuid-like)
TOOL_NAMES = 4  # tool names listed, the rest counted (``+N``)
TOOL_CHARS = 32  # of one tool name
WORDS_CHARS = 60  # of the first assistant words


def first_line(text: str) -> str:
    """A row's text as one bounded, escaped line: what a frame without its parts shows."""
    return sanitize.inline(" ".join(text[:WORDS_CHARS * 4].split()), WORDS_CHARS)


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def frame_summary(parts: Iterable[Any]) -> tuple[str | None, str | None]:
    """The run id (short, escaped; the envelope's ``runId``, else a ``RUN_STARTED`` or
    ``RUN_FINISHED`` event's; None when none names one) and the one-line summary of
    the ``ag-ui.frame`` parts among ``parts``. Reads at most :data:`AGUI_EVENT_CAP` events per
    part and keeps a bounded amount of each; cheap enough per frame on the line stream. The
    summary is None when ``parts`` hold no frame (a row recorded without its parts)."""
    run: str | None = None
    started = finished = failed = False
    tools: list[str] = []
    n_tools = 0
    words: list[str] = []
    have = 0  # characters in ``words``
    words_mid: str | None = None  # the message whose words are kept (the first one)
    n_events = 0
    frames = 0
    for p in parts:
        if not isinstance(p, ExtensionPart) or p.kind != AGUI_FRAME_KIND:
            continue
        frames += 1
        if run is None and p.runId:
            run = p.runId
        events = p.events if isinstance(p.events, list) else []
        n_events += len(events) + (p.dropped or 0)
        for e in events[:AGUI_EVENT_CAP]:
            if not isinstance(e, dict):
                continue
            kind = e.get("type")
            if kind == "TOOL_CALL_START":
                n_tools += 1
                if len(tools) < TOOL_NAMES:
                    tools.append(_s(e.get("toolCallName")) or "?")
            elif kind == "TEXT_MESSAGE_CONTENT" and have <= WORDS_CHARS:
                mid = _s(e.get("messageId")) or ""
                delta = _s(e.get("delta"))
                if delta and (words_mid is None or mid == words_mid):
                    words_mid = mid
                    words.append(delta[:WORDS_CHARS + 1 - have])
                    have += len(words[-1])
            elif kind == "RUN_STARTED":
                started = True
                if run is None:
                    run = _s(e.get("runId"))
            elif kind == "RUN_FINISHED":
                finished = True
                if run is None:
                    run = _s(e.get("runId"))
            elif kind == "RUN_ERROR":
                failed = True
    short = sanitize.inline(run[:RUN_CELLS]) if run else None
    if not frames:
        return short, None
    pieces: list[str] = []
    if started:
        pieces.append("▸ run started")
    if n_tools:
        names = ", ".join(sanitize.inline(t, TOOL_CHARS) for t in tools)
        more = n_tools - len(tools)
        pieces.append("⚙ " + names + (f" +{more}" if more else ""))
    said = " ".join("".join(words).split())  # one line: newlines and runs of blanks folded
    if said:
        pieces.append("» " + sanitize.inline(said, WORDS_CHARS))
    if failed:
        pieces.append("✗ run failed")
    elif finished:
        pieces.append("◂ finished")
    if not pieces:
        pieces.append(f"{n_events} event{'s' if n_events != 1 else ''}")
    return short, " · ".join(pieces)
