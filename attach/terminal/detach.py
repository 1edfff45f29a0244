"""The detach key and the local terminal's modes, as pure values: what ``cotal attach`` (its raw
terminal client lives in :mod:`cotal_tui.cli.passthrough`) and the console's panes agree on.

The detach key is recognised only when it arrives alone in one read (plus its kitty CSI-u and
xterm modifyOtherKeys encodings); anything else is data.
"""

from __future__ import annotations

import re

from attach.errors import AttachLayerError

DEFAULT_DETACH = 0x1D  # Ctrl-]
_DETACH_RE = re.compile(r"^(?:ctrl-|\^)([a-z@\[\\\]\^_])$", re.IGNORECASE)

# what a remote program may have turned on, turned off again
RESTORE = (
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l"
    b"\x1b[?1004l\x1b[?2004l\x1b[?1l\x1b>\x1b[?25h\x1b[0m"
)
LEAVE_ALT = b"\x1b[?1049l"
_ALT_RE = re.compile(rb"\x1b\[\?(1049|1047|47)([hl])")


class DetachKeyError(AttachLayerError, ValueError):
    pass


def parse_detach_key(value: str | None) -> int:
    """``COTAL_DETACH_KEY``: ``ctrl-<c>`` or ``^<c>``, c in a-z @ [ \\ ] ^ _; byte = c & 0x1f.
    Unset means Ctrl-]; set but empty is an error (a typo should not silently mean Ctrl-])."""
    if value is None:
        return DEFAULT_DETACH
    if not value.strip():
        raise DetachKeyError("COTAL_DETACH_KEY is set but empty: unset it for Ctrl-], "
                             "or give ctrl-<c> or ^<c> with c in a-z @ [ \\ ] ^ _")
    m = _DETACH_RE.fullmatch(value.strip())
    if not m:
        raise DetachKeyError(
            f"COTAL_DETACH_KEY={value!r} is not ctrl-<c> or ^<c> with c in a-z @ [ \\ ] ^ _"
        )
    c = m.group(1).lower()
    return ord(c) & 0x1F


def key_label(byte: int) -> str:
    """How the detach key is named to the user: ``Ctrl-]``, ``Ctrl-B``."""
    return "Ctrl-" + ("@" if byte == 0 else chr(ord("A") + byte - 1) if byte <= 26
                      else chr(byte | 0x40))


def banner_text(name: str, byte: int) -> str:
    return f"attached to {name} - {key_label(byte)} to detach"


def detached_text(name: str) -> str:
    return f"detached from {name}"


def detach_forms(byte: int) -> set[bytes]:
    """The press as a lone byte, kitty CSI-u and xterm modifyOtherKeys."""
    if byte == 0:
        cp = ord("@")
    elif 1 <= byte <= 26:
        cp = ord("a") + byte - 1
    else:
        cp = byte | 0x40  # 0x1b..0x1f -> [ \ ] ^ _
    return {bytes([byte]), f"\x1b[{cp};5u".encode(), f"\x1b[27;5;{cp}~".encode()}


class AltTracker:
    """Follows ?1049/1047/47 h|l across chunk boundaries."""

    def __init__(self) -> None:
        self.alt = False
        self._tail = b""

    def feed(self, data: bytes) -> None:
        buf = self._tail + data
        for m in _ALT_RE.finditer(buf):
            self.alt = m.group(2) == b"h"
        self._tail = buf[-12:]
