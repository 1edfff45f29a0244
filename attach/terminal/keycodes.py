"""Key events (as Textual names them) → the bytes an xterm would send to the remote program.

Pure, no Textual import: it sits beside the mirror (which reads what the program sends back).
The embedded attach pane owns every key, so it re-encodes what Textual parsed: cursor keys
honour application-cursor mode (DECCKM), modified special keys use xterm's ``1;<m>`` form,
Ctrl combos become C0 bytes, Alt becomes an ESC prefix, and anything printable is sent as its
UTF-8 character. Mouse and paste encoding live here too, so the pane stays a renderer.
"""

from __future__ import annotations

ESC = "\x1b"

# name → (CSI final or "~" number, SS3 form when unmodified in application mode)
_CURSOR = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_TILDE = {"insert": 2, "delete": 3, "pageup": 5, "pagedown": 6}
_F_SS3 = {1: "P", 2: "Q", 3: "R", 4: "S"}
_F_TILDE = {5: 15, 6: 17, 7: 18, 8: 19, 9: 20, 10: 21, 11: 23, 12: 24}

# Ctrl + a named printable key (Textual's names for the characters) → C0 byte
_CTRL_NAMED = {
    "@": 0x00, "space": 0x00, "left_square_bracket": 0x1B, "backslash": 0x1C,
    "right_square_bracket": 0x1D, "circumflex_accent": 0x1E, "underscore": 0x1F,
    "question_mark": 0x7F, "2": 0x00, "3": 0x1B, "4": 0x1C, "5": 0x1D, "6": 0x1E, "7": 0x1F,
    "8": 0x7F, "slash": 0x1F, "minus": 0x1F,
}
_PLAIN = {"enter": "\r", "tab": "\t", "escape": ESC, "backspace": "\x7f", "space": " "}
_MODS = ("shift", "alt", "meta", "ctrl", "super", "hyper")


def split_key(key: str) -> tuple[frozenset[str], str]:
    """``"ctrl+shift+up"`` → ({"ctrl", "shift"}, "up"). ``"ctrl++"`` style keys keep the ``+``."""
    parts = key.split("+")
    mods: set[str] = set()
    while len(parts) > 1 and parts[0] in _MODS:
        mods.add(parts.pop(0))
    return frozenset(mods), "+".join(parts)


def _modifier_param(mods: frozenset[str]) -> int:
    """xterm's modifier parameter: 1 + shift(1) + alt(2) + ctrl(4) (+ meta as alt)."""
    return 1 + ("shift" in mods) + 2 * ("alt" in mods or "meta" in mods) + 4 * ("ctrl" in mods)


def encode_key(key: str, character: str | None, *, app_cursor: bool = False) -> bytes | None:
    """The bytes for one Textual key event, or ``None`` for a key with no terminal encoding."""
    mods, base = split_key(key)
    if key == "shift+tab" or base == "backtab":
        return b"\x1b[Z"
    s = _special(mods, base, app_cursor)
    if s is not None:
        return s.encode()
    alt = "alt" in mods or "meta" in mods
    prefix = ESC if alt else ""
    if "ctrl" in mods:
        b = _ctrl_byte(base)
        if b is None:
            return None
        return (prefix + chr(b)).encode()
    if base in _PLAIN and not (character and character.isprintable() and base != "space"):
        return (prefix + _PLAIN[base]).encode()
    if character and (character.isprintable() or character in "\t\r"):
        if alt and len(character) > 1:
            character = character[-1]
        return (prefix + character).encode("utf-8", "replace")
    if len(base) == 1 and base.isprintable():  # e.g. alt+x delivered without a character
        ch = base.upper() if "shift" in mods else base
        return (prefix + ch).encode("utf-8", "replace")
    return None


def _ctrl_byte(base: str) -> int | None:
    if len(base) == 1 and base.isascii() and base.isalpha():
        return ord(base.lower()) & 0x1F
    return _CTRL_NAMED.get(base)


def _special(mods: frozenset[str], base: str, app_cursor: bool) -> str | None:
    m = _modifier_param(mods)
    if base in _CURSOR:
        final = _CURSOR[base]
        if m > 1:
            return f"{ESC}[1;{m}{final}"
        return f"{ESC}O{final}" if app_cursor else f"{ESC}[{final}"
    if base in _TILDE:
        n = _TILDE[base]
        return f"{ESC}[{n};{m}~" if m > 1 else f"{ESC}[{n}~"
    if base.startswith("f") and base[1:].isdigit():
        n = int(base[1:])
        if 13 <= n <= 24:  # xterm sends F13..F24 as shift+F1..F12
            n -= 12
            m = _modifier_param(mods | {"shift"})
        if n in _F_SS3:
            return f"{ESC}[1;{m}{_F_SS3[n]}" if m > 1 else f"{ESC}O{_F_SS3[n]}"
        if n in _F_TILDE:
            return f"{ESC}[{_F_TILDE[n]};{m}~" if m > 1 else f"{ESC}[{_F_TILDE[n]}~"
        return None
    if base == "enter" and "ctrl" not in mods:
        return (ESC if "alt" in mods or "meta" in mods else "") + "\r"
    if base == "backspace":
        if "ctrl" in mods:
            return "\x08"
        return (ESC if "alt" in mods or "meta" in mods else "") + "\x7f"
    if base == "tab" and "ctrl" not in mods:
        return (ESC if "alt" in mods or "meta" in mods else "") + "\t"
    if base == "escape" and "ctrl" not in mods:
        return ESC + ESC if "alt" in mods or "meta" in mods else ESC
    return None


def encode_paste(text: str, bracketed: bool) -> bytes:
    """A paste as a terminal sends it: newlines as CR, wrapped when the program asked (?2004)."""
    body = text.replace("\r\n", "\r").replace("\n", "\r")
    if bracketed:
        body = body.replace("\x1b[201~", "")  # a paste must not end its own bracket early
        return ("\x1b[200~" + body + "\x1b[201~").encode("utf-8", "replace")
    return body.encode("utf-8", "replace")


def encode_mouse(
    button: int, x: int, y: int, *, press: bool, motion: bool = False, wheel: int = 0,
    shift: bool = False, meta: bool = False, ctrl: bool = False, sgr: bool = True,
) -> bytes | None:
    """One mouse report at zero-based cell (x, y).

    ``button``: 1 left, 2 middle, 3 right, 0 none (motion with no button); ``wheel``: -1 up,
    +1 down. SGR (?1006) when ``sgr``, else the legacy X10 form (coordinates ≤ 222).
    """
    if wheel:
        cb = 64 if wheel < 0 else 65
    elif button in (1, 2, 3):
        cb = button - 1
    else:
        cb = 3
    if motion:
        cb += 32
    cb += 4 * shift + 8 * meta + 16 * ctrl
    if sgr:
        return f"{ESC}[<{cb};{x + 1};{y + 1}{'M' if press or wheel else 'm'}".encode()
    if x > 222 or y > 222:
        return None
    if not press and not wheel and not motion:
        cb = 3 + 4 * shift + 8 * meta + 16 * ctrl  # X10 release carries no button
    return b"\x1b[M" + bytes([32 + cb, 33 + x, 33 + y])
