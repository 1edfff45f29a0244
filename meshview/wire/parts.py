"""A message's parts as the flat text a reader sees (upstream ``core/src/parts.ts`` facts).

The rule upstream enforces, and this module with it: **no part renders as nothing**. Text is
itself; ``data`` is its compact JSON, or ``[empty data part]`` when a (legacy) part carries
none; an artifact shows its publisher's claims *and* its digest, the one handle a reader can
fetch the bytes by; an extension kind is drawn by a renderer registered for that kind
(``ag-ui.frame`` below), else named by a marker; a part the decoder kept although it is
malformed (a text part whose text is not a string) is named by its own marker. Parts are
joined with one space, as upstream joins them. The result is still untrusted text:
sanitize it before it reaches a terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from meshview.wire.frames import AGUI_PROTOCOL
from meshview.wire.messages import (
    ArtifactPart,
    BrokenPart,
    DataPart,
    ExtensionPart,
    Part,
    TextPart,
)

AGUI_FRAME_KIND = "ag-ui.frame"
EMPTY_DATA = "[empty data part]"
#: ours, not upstream's (which folds every event): a frame is rendered up to this many events,
#: the rest are counted in one ``• N more events not shown`` line
AGUI_EVENT_CAP = 10_000


def unrenderable(kind: str) -> str:
    """The marker for an extension kind nothing here can draw: it names the kind."""
    return f"[unrenderable part kind {_js(kind)} — no renderer for it on this surface]"


def broken_text(p: BrokenPart) -> str:
    return f"[{p.kind} part: {p.problem}]"


def _js(v: Any) -> str:
    """A value as JSON the way upstream spells it in markers (no ASCII escaping)."""
    return json.dumps(v, ensure_ascii=False)


def part_text(p: Part) -> str:
    """One part as display text; never the empty string for a non-text part."""
    if isinstance(p, TextPart):
        return p.text
    if isinstance(p, ArtifactPart):
        return f"[artifact {p.name} ({p.mediaType}, {p.size} bytes) {p.digest}]"
    if isinstance(p, DataPart):
        if p.data is msgspec.UNSET:
            return EMPTY_DATA
        try:
            return msgspec.json.encode(p.data).decode()
        except (TypeError, ValueError, RecursionError, OverflowError):
            return EMPTY_DATA
    if isinstance(p, BrokenPart):
        return broken_text(p)
    if isinstance(p, ExtensionPart):
        render = RENDERERS.get(p.kind)
        if render is None:
            return unrenderable(p.kind)
        return _render_safely(render, p)
    return unrenderable(str(getattr(p, "kind", type(p).__name__)))


def _render_safely(render: Callable[[ExtensionPart], str], p: ExtensionPart) -> str:
    try:
        return render(p)
    except Exception as e:  # noqa: BLE001 - a failing renderer must not silence the message
        return f"[part renderer for {_js(p.kind)} failed: {e}]"


def parts_to_text(parts: Sequence[Part]) -> str:
    """A message's parts as one string, space-joined (upstream ``partsToText``)."""
    if type(parts) in (list, tuple) and len(parts) == 1:  # most messages: one part
        p = parts[0]
        if type(p) is TextPart:
            return p.text
        if type(p) is ExtensionPart:  # (an activity frame: straight to its renderer)
            render = RENDERERS.get(p.kind)
            if render is not None:
                return _render_safely(render, p)
        return part_text(p)
    return " ".join(part_text(p) for p in parts)


# ---- ag-ui.frame ------------------------------------------------------------------------------
# One frame carries a run's events (AG-UI vocabulary). Deltas accumulate per message / tool-call
# id so a sentence is one line, not a column; a stream that ended without its END is flushed and
# marked `` …``; an event type this build does not know is named, never skipped. Every line
# starts with a glyph, and payload never starts a line (continuations get ``  · ``): see
# :func:`line_start_safe`. A fallback (``?``, ``(no message)``...) stands in only for a field
# that is absent or not a string; an empty string renders empty, as upstream's.

_CONT = "  · "
_SAY = "» "
_THINK = "(thinking) "
_TOOL = "⚙ "
_RESULT = "  ↳ "


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _or(v: Any, fallback: str) -> str:
    """``v`` when it is a string (empty included), else ``fallback`` (upstream's ``??``)."""
    return v if isinstance(v, str) else fallback


_BLOCK_OPENER = re.compile(r" {0,3}(?:#|[-*+>|]|[0-9]+[.)])(?:\s|$)")
#: what splits a payload into lines: ``\n`` (upstream's one break) and, ours, the other breaks a
#: reader shows as one (CR for a Markdown consumer of ``--json``; NEL, LS, PS in the terminal,
#: meshview.wire.sanitize): each line after one gets the continuation prefix too
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def line_start_safe(line: str) -> bool:
    """A line the fold may emit: one that cannot open a Markdown block (ATX heading, list item,
    blockquote, table row within three leading spaces, or a four-space indented code block);
    upstream's ``LINE_START_SAFE`` (core ``agui-render.ts``). Every fold line passes it."""
    return _BLOCK_OPENER.match(line) is None and not line.startswith("    ")


class _Fold:
    """Deltas accumulate as lists joined once at the end of their stream: linear in the
    frame's size (string concatenation per delta was quadratic)."""

    __slots__ = ("lines", "text", "thinking", "tool_name", "tool_args")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.thinking: dict[str, list[str]] = {}
        self.tool_name: dict[str, str] = {}
        self.tool_args: dict[str, list[str]] = {}

    def emit(self, first: str, cont: str, body: str) -> None:
        if body.isprintable() or _BREAK.search(body) is None:  # (C scans: most bodies)
            self.lines.append(first + body)
            return
        rows = _BREAK.split(body)
        self.lines.append(first + rows[0])
        self.lines.extend(cont + r for r in rows[1:])

    def flush(self, acc: dict[str, list[str]], key: str, first: str, cont: str,
              tail: str = "") -> None:
        body = "".join(acc.pop(key, ()))
        if body:
            self.emit(first, cont, body + tail)

    def event(self, e: Any) -> None:
        # each event type reads only its own fields (a frame is folded per delivery)
        kind = e.get("type") if isinstance(e, dict) else None
        on = _ON.get(kind) if isinstance(kind, str) else None
        if on is None:
            self.emit("• ", _CONT, f"unrecognised event {_js(_s(kind))}")
        else:
            on(self, e.get)

    def _run_started(self, get: Callable[[str], Any]) -> None:
        self.emit("▸ ", _CONT, f"run {_or(get('runId'), '?')} started")

    def _run_finished(self, get: Callable[[str], Any]) -> None:
        outcome = get("outcome")
        how = _s(outcome.get("type")) if isinstance(outcome, dict) else None
        self.emit("◂ ", _CONT, f"run {_or(get('runId'), '?')} finished"
                  + (f" ({how})" if how else ""))

    def _run_error(self, get: Callable[[str], Any]) -> None:
        code = _s(get("code"))
        self.emit("✗ ", _CONT, f"run error{f' [{code}]' if code else ''}: "
                               f"{_or(get('message'), '(no message)')}")

    def _text_start(self, get: Callable[[str], Any]) -> None:
        self.text[_s(get("messageId")) or ""] = []

    def _text_content(self, get: Callable[[str], Any]) -> None:
        self.text.setdefault(_s(get("messageId")) or "", []).append(_s(get("delta")) or "")

    def _text_end(self, get: Callable[[str], Any]) -> None:
        self.flush(self.text, _s(get("messageId")) or "", _SAY, _SAY)

    def _thinking_start(self, get: Callable[[str], Any]) -> None:
        self.thinking[_s(get("messageId")) or ""] = []

    def _thinking_content(self, get: Callable[[str], Any]) -> None:
        self.thinking.setdefault(_s(get("messageId")) or "", []).append(_s(get("delta")) or "")

    def _thinking_end(self, get: Callable[[str], Any]) -> None:
        self.flush(self.thinking, _s(get("messageId")) or "", _THINK, _CONT)

    def _tool_start(self, get: Callable[[str], Any]) -> None:
        tid = _s(get("toolCallId")) or ""
        self.tool_name[tid] = _or(get("toolCallName"), "?")
        self.tool_args[tid] = []

    def _tool_args(self, get: Callable[[str], Any]) -> None:
        self.tool_args.setdefault(_s(get("toolCallId")) or "", []).append(_s(get("delta")) or "")

    def _tool_end(self, get: Callable[[str], Any]) -> None:
        tid = _s(get("toolCallId")) or ""
        args = "".join(self.tool_args.pop(tid, ()))
        name = self.tool_name.pop(tid, None)
        self.emit(_TOOL, _CONT, f"{'?' if name is None else name}({args})")

    def _tool_result(self, get: Callable[[str], Any]) -> None:
        self.emit(_RESULT, _CONT, _or(get("content"), "(no content)"))

    def _custom(self, get: Callable[[str], Any]) -> None:
        self.emit("• ", _CONT, f"custom {_or(get('name'), '(unnamed)')}")

    def finish(self) -> list[str]:
        for key in list(self.text):
            self.flush(self.text, key, _SAY, _SAY, " …")
        for key in list(self.thinking):
            self.flush(self.thinking, key, _THINK, _CONT, " …")
        for key, name in list(self.tool_name.items()):
            args = "".join(self.tool_args.get(key, ()))
            self.emit(_TOOL, _CONT, f"{name}({args}) …")
        self.tool_name.clear()
        return self.lines


#: event type -> what :meth:`_Fold.event` does with it (a type not here is named, never skipped)
_ON: dict[str, Callable[[_Fold, Callable[[str], Any]], None]] = {
    "RUN_STARTED": _Fold._run_started, "RUN_FINISHED": _Fold._run_finished,
    "RUN_ERROR": _Fold._run_error,
    "TEXT_MESSAGE_START": _Fold._text_start, "TEXT_MESSAGE_CONTENT": _Fold._text_content,
    "TEXT_MESSAGE_END": _Fold._text_end,
    "REASONING_MESSAGE_START": _Fold._thinking_start,
    "REASONING_MESSAGE_CONTENT": _Fold._thinking_content,
    "REASONING_MESSAGE_END": _Fold._thinking_end,
    "TOOL_CALL_START": _Fold._tool_start, "TOOL_CALL_ARGS": _Fold._tool_args,
    "TOOL_CALL_END": _Fold._tool_end, "TOOL_CALL_RESULT": _Fold._tool_result,
    "CUSTOM": _Fold._custom,
}


def skew_line(protocol: str) -> str:
    """The line a frame built against another AG-UI vocabulary starts with (upstream's strict
    parser would refuse it; this fold is tolerant, so it renders, flagged)."""
    return f"• protocol skew: {protocol} (this console reads {AGUI_PROTOCOL})"


def agui_frame_text(p: ExtensionPart) -> str:
    """An ``ag-ui.frame`` part folded into readable lines (one string, ``\\n``-joined), the
    first naming a ``protocol`` other than :data:`~meshview.wire.frames.AGUI_PROTOCOL`."""
    if p.kind != AGUI_FRAME_KIND:
        return "[not an AG-UI frame]"
    fold = _Fold()
    protocol = p.protocol
    if protocol is not None and protocol != AGUI_PROTOCOL:
        fold.emit("• ", _CONT, skew_line(protocol)[2:])
    events = p.events
    if not isinstance(events, list) or not events:
        return "\n".join([*fold.lines, "[AG-UI frame carrying no events]"])
    skew = len(fold.lines)
    for e in events[:AGUI_EVENT_CAP]:
        fold.event(e)
    lines = fold.finish()
    more = max(0, len(events) - AGUI_EVENT_CAP) + (p.dropped or 0)
    if more:
        lines.append(f"• {more} more events not shown")
    if len(lines) == skew:
        lines.append(f"[AG-UI frame with {len(events) + (p.dropped or 0)} event(s) "
                     "and nothing to show]")
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[ExtensionPart], str]] = {AGUI_FRAME_KIND: agui_frame_text}
"""Extension part kind -> renderer. A kind missing here renders as :func:`unrenderable`."""
