"""A message body as Markdown on the detail card, with nothing from the wire acting on the
terminal.

The wire carries no format marker on a text part (``{"kind":"text","text":…}``: wire.md §3),
so a body is taken as Markdown only when it says so structurally (:func:`looks_like_markdown`:
a fence, a heading, a list, a table or a link); a plain body would lose its line breaks if it
were read as Markdown, so it is shown as it is.

Neutralisation happens on both sides of the parser: the source is sanitised
(:func:`meshview.wire.sanitize.text`: controls, bidi and invisibles escaped visibly), then
every token again (markdown-it decodes entities such as ``&#27;`` into characters). Links
render as their text and their target in plain text (``click (javascript:…)``), never as an
OSC 8 hyperlink; images as ``[image: alt] (target)``; raw HTML as literal text; code fences
get no lexer from the wire (a lexer named by a peer is a regex engine it picked). Every
rendered segment is finally stripped of any link and of control segments. A rendering that
would show less text than the body holds (nesting past the parser's limit, a table wider than
the card) is refused, and the body shown as sent: Markdown must never hide part of a message.
"""

from __future__ import annotations

import io
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.style import Style
from rich.text import Text

from meshview.wire import sanitize

if TYPE_CHECKING:
    from markdown_it.token import Token

# markdown-it and Rich's Markdown (~30 ms to import, pygments under it) load with the first body
# rendered as Markdown, not with the console (issue 40, start-up)

# structural Markdown, one line each: a code fence, an ATX heading, a list item, a table row
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.M)
_HEADING = re.compile(r"^ {0,3}#{1,6} +\S", re.M)
_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,3}[.)]) +\S", re.M)
_TABLE = re.compile(r"^ {0,3}\|?(?: *:?-{3,}:? *\|)+ *:?-{3,}:? *\|? *$", re.M)
_LINK = re.compile(r"!?\[[^\]\n]{1,200}\]\([^)\s]{1,2000}\)")
#: a longer body is shown as sent unless asked for (m): rendering 64 kB of table takes ~1 s
MD_CAP = 32 * 1024
#: deeper than this the parser drops text (markdown-it stops at 20 levels) or Rich runs out of
#: width for it: such a body is shown as sent, never with parts of it missing
MAX_LEVEL = 16
_ALNUM = re.compile(r"[^\W_]")


def looks_like_markdown(text: str) -> bool:
    """Whether ``text`` is Markdown by its structure: a code fence, a heading, two list
    items, a table's rule row, or an inline link or image. Emphasis alone does not count (an
    ``*`` or ``_`` in plain text is common and harmless shown as is). Past :data:`MD_CAP`
    characters, no."""
    if len(text) > MD_CAP:
        return False
    return bool(_FENCE.search(text) or _HEADING.search(text) or _TABLE.search(text)
                or _LINK.search(text) or len(_ITEM.findall(text)) >= 2)


def _inert(s: object) -> str:
    return sanitize.inline(s if isinstance(s, str) else str(s or ""))


def _neutralise(tokens: list[Token]) -> list[Token]:
    """The token stream with nothing left that acts: see the module docstring."""
    from markdown_it.token import Token

    out: list[Token] = []
    for t in tokens:
        if t.type == "image":
            alt = "".join(c.content for c in t.children or ()) or t.content
            src = _inert(t.attrs.get("src", ""))
            t = Token("text", "", 0, content=f"[image: {_inert(alt)}] ({src})")
        elif t.type == "html_inline":
            t = Token("text", "", 0, content=_inert(t.content))
        elif t.type == "html_block":
            t = Token("code_block", "code", 0, content=sanitize.text(t.content, indent=""),
                      block=True)
        else:
            if t.type == "fence":
                t.info = ""  # no lexer named by the wire
            if t.content:
                t.content = (sanitize.text(t.content, indent="") if t.block
                             else _inert(t.content))
            for key in ("href", "src", "title"):
                if key in t.attrs:
                    t.attrs[key] = _inert(t.attrs[key])
            if t.children:
                t.children = _neutralise(t.children)
        out.append(t)
    return out


@lru_cache(maxsize=1)
def _safe_markdown() -> Any:
    """:class:`SafeMarkdown`, made on first use (its base's import is the cost)."""
    from rich.markdown import Markdown

    class SafeMarkdown(Markdown):
        """Rich's Markdown over a neutralised token stream, links as text (no OSC 8)."""

        def __init__(self, markup: str) -> None:
            super().__init__(sanitize.text(markup, indent=""), hyperlinks=False)
            self.parsed = _neutralise(self.parsed)

        def depth(self) -> int:
            return max((t.level for t in self.parsed), default=0)

        def letters(self) -> int:
            """Letters and digits the rendering must show: every text and code the tokens hold
            (a link's target and an image's are added by the rendering, on top)."""
            n = 0
            for t in self.parsed:
                if t.type in ("fence", "code_block"):
                    n += len(_ALNUM.findall(t.content))
                for c in t.children or ():
                    if c.type in ("text", "code_inline"):
                        n += len(_ALNUM.findall(c.content))
            return n

    return SafeMarkdown


def _line_text(segments) -> Text:
    line = Text()
    for seg in segments:
        if seg.control:
            continue
        style = seg.style
        if isinstance(style, Style) and style.link:
            style = style.update_link(None)
        line.append(sanitize.inline(seg.text), style)
    line.rstrip()
    return line


@lru_cache(maxsize=8)
def markdown_lines(text: str, width: int, indent: int = 2) -> tuple[Text, ...] | None:
    """``text`` rendered as Markdown ``width`` cells wide, each line a plain :class:`Text`
    (kept for the last few bodies: the open card rebuilds a few times a second). None when
    rendering would lose text: nested deeper than :data:`MAX_LEVEL`, or fewer letters shown
    than the body holds (a table too wide for the card cuts its cells)."""
    room = max(8, width - indent)
    console = Console(file=io.StringIO(), width=room, color_system="truecolor",
                      force_terminal=True, legacy_windows=False)
    md = _safe_markdown()(text)
    if md.depth() > MAX_LEVEL:
        return None
    lines = console.render_lines(md, console.options.update_width(room), pad=False)
    pad = " " * indent
    out: list[Text] = []
    for segs in lines:
        t = _line_text(segs)
        if t.plain:
            out.append(Text(pad) + t)
        elif out and out[-1].plain:  # one blank line between blocks, never a run of them
            out.append(Text(""))
    while out and not out[-1].plain:
        out.pop()
    if sum(len(_ALNUM.findall(t.plain)) for t in out) < md.letters():
        return None
    return tuple(out)
