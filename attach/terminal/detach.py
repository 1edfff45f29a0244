"""The detach keys and the local terminal's modes, as pure values: what ``cotal attach`` (its raw
terminal client lives in :mod:`cotal_tui.cli.passthrough`) and the console's panes, tiles and
peeks agree on, through one parser (:func:`parse_detach_keys`) and one matcher.

By default only Ctrl-] detaches, and Esc reaches the program at once. Other sequences (``esc
esc``, ``ctrl-b d``) are opt-in (``COTAL_DETACH_KEY``, ``[attach] detach_keys``). A press is
recognised only when it arrives alone in one read (plus, for a control key, its kitty CSI-u and
xterm modifyOtherKeys encodings); anything else is data.
"""

from __future__ import annotations

import re

from attach.errors import AttachLayerError

DEFAULT_DETACH = 0x1D  # Ctrl-]
DEFAULT_SPEC = "ctrl-]"
ESC = 0x1B
ESC_WINDOW_S = 0.4  # an Esc-led sequence's next press must come this soon (Esc stays snappy)
PREFIX_WINDOW_S = 1.0  # any other sequence's next press (``ctrl-b d``, tmux-style)
MAX_SEQUENCES = 4
MAX_PRESSES = 3
MAX_SPEC = 200
_CTRL_RE = re.compile(r"^(?:ctrl-|c-|\^)([a-z@\[\\\]\^_])$", re.IGNORECASE)
GRAMMAR = ("ctrl-<c> or ^<c> (c in a-z @ [ \\ ] ^ _), esc, or a sequence of presses such as "
           "\"esc esc\" or \"ctrl-b d\" (a later press may be one printable character); "
           "several separated by commas")
# what a remote program may have turned on, turned off again
RESTORE = (
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l"
    b"\x1b[?1004l\x1b[?2004l\x1b[?1l\x1b>\x1b[?25h\x1b[0m"
)
LEAVE_ALT = b"\x1b[?1049l"
_ALT_RE = re.compile(rb"\x1b\[\?(1049|1047|47)([hl])")


class DetachKeyError(AttachLayerError, ValueError):
    pass


def _cp(byte: int) -> int:
    """The key a control byte is pressed with: 0x1d -> ``]``, 0x02 -> ``b``."""
    if byte == 0:
        return ord("@")
    if 1 <= byte <= 26:
        return ord("a") + byte - 1
    return byte | 0x40  # 0x1b..0x1f -> [ \ ] ^ _


def detach_forms(byte: int) -> set[bytes]:
    """The press as a lone byte, kitty CSI-u and xterm modifyOtherKeys."""
    cp = _cp(byte)
    if byte == ESC:  # Esc itself: its kitty form is ``CSI 27 u``
        return {b"\x1b", b"\x1b[27u"}
    return {bytes([byte]), f"\x1b[{cp};5u".encode(), f"\x1b[27;5;{cp}~".encode()}


def key_label(byte: int) -> str:
    """How a control key is named to the user: ``Ctrl-]``, ``Ctrl-B``, ``Esc``."""
    if byte == ESC:
        return "Esc"
    if byte >= 0x20:
        return chr(byte)
    return "Ctrl-" + ("@" if byte == 0 else chr(ord("A") + byte - 1) if byte <= 26
                      else chr(byte | 0x40))


class DetachKeys:
    """The detach sequences in force: each a tuple of presses, each press one byte (a control
    key, Esc, or — after the first — a printable character). Built by :func:`parse_detach_keys`."""

    __slots__ = ("sequences", "spec")

    def __init__(self, sequences: tuple[tuple[int, ...], ...], spec: str) -> None:
        self.sequences = sequences
        self.spec = spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DetachKeys) and other.sequences == self.sequences

    def __hash__(self) -> int:
        return hash(self.sequences)

    def __repr__(self) -> str:
        return f"DetachKeys({self.spec!r})"

    @property
    def key(self) -> int | None:
        """The single-press detach key (Ctrl-] by default), when there is one: it is also the
        console pane's prefix (``key [`` copy mode, ``key f`` fit)."""
        return next((s[0] for s in self.sequences if len(s) == 1), None)

    @property
    def label(self) -> str:
        """``Ctrl-]``, ``Ctrl-] or Esc Esc``."""
        return " or ".join(" ".join(key_label(b) for b in s) for s in self.sequences)

    def matcher(self) -> "DetachMatcher":
        return DetachMatcher(self)


DEFAULT_KEYS = DetachKeys(((DEFAULT_DETACH,),), DEFAULT_SPEC)


def _press(word: str, first: bool) -> int | None:
    w = word.strip()
    if w.lower() in ("esc", "escape"):
        return ESC
    m = _CTRL_RE.fullmatch(w)
    if m:
        return ord(m.group(1).lower()) & 0x1F
    if not first and len(w) == 1 and 0x21 <= ord(w) < 0x7F and w != ",":
        return ord(w)
    return None


def parse_detach_keys(value: str | list | tuple | None, *, source: str = "COTAL_DETACH_KEY"
                      ) -> DetachKeys:
    """The one parser of detach keys (``COTAL_DETACH_KEY``, ``[attach] detach_keys``): a string
    of sequences separated by commas (or a list of them), each a sequence of presses separated
    by spaces. ``None`` is the default, Ctrl-] alone. Anything else that is not a good value
    raises :class:`DetachKeyError`, one sentence naming ``source``."""
    if value is None:
        return DEFAULT_KEYS
    if isinstance(value, str):
        if not value.strip():
            raise DetachKeyError(f"{source} is set but empty: unset it for Ctrl-], or give {GRAMMAR}")
        if len(value) > MAX_SPEC:
            raise DetachKeyError(f"{source} is longer than {MAX_SPEC} characters; give {GRAMMAR}")
        parts = value.split(",")
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        if sum(len(v) for v in value) > MAX_SPEC:
            raise DetachKeyError(f"{source} is longer than {MAX_SPEC} characters; give {GRAMMAR}")
        parts = [p for v in value for p in v.split(",")]
    else:
        raise DetachKeyError(f"{source} must be a string or a non-empty list of strings: {GRAMMAR}")
    seqs: list[tuple[int, ...]] = []
    for part in parts:
        words = part.split()
        if not words:
            raise DetachKeyError(f"{source}={_shown(value)} has an empty sequence; give {GRAMMAR}")
        if len(words) > MAX_PRESSES:
            raise DetachKeyError(f"{source}={_shown(value)}: a sequence is at most {MAX_PRESSES} "
                                 f"presses ({part.strip()!r} has {len(words)})")
        presses = tuple(_press(w, i == 0) for i, w in enumerate(words))
        bad = next((w for w, p in zip(words, presses) if p is None), None)
        if bad is not None:
            first = " (a sequence starts with a control key or esc)" if bad == words[0] else ""
            raise DetachKeyError(f"{source}={_shown(value)}: {bad!r} is not a key{first}; "
                                 f"give {GRAMMAR}")
        seq = tuple(p for p in presses if p is not None)
        if seq not in seqs:
            seqs.append(seq)
    if len(seqs) > MAX_SEQUENCES:
        raise DetachKeyError(f"{source}={_shown(value)}: at most {MAX_SEQUENCES} sequences")
    for s in seqs:
        for t in seqs:
            if s != t and t[:len(s)] == s:
                raise DetachKeyError(
                    f"{source}={_shown(value)}: {' '.join(key_label(b) for b in t)} can never "
                    f"detach, {' '.join(key_label(b) for b in s)} detaches first")
    spec = ", ".join(" ".join(_spelling(b) for b in s) for s in seqs)
    return DetachKeys(tuple(seqs), spec)


def _spelling(byte: int) -> str:
    if byte == ESC:
        return "esc"
    if byte >= 0x20:
        return chr(byte)
    return "ctrl-" + chr(_cp(byte))


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else repr(list(value)) if isinstance(value, (list, tuple)) else type(value).__name__


def parse_detach_key(value: str | None) -> int:
    """The single detach key of ``COTAL_DETACH_KEY`` (its older, one-key reading)."""
    keys = parse_detach_keys(value)
    key = keys.key
    if key is None or len(keys.sequences) != 1:
        raise DetachKeyError(f"COTAL_DETACH_KEY={value!r} is not one key")
    return key


def banner_text(name: str, keys: "DetachKeys | int") -> str:
    label = keys.label if isinstance(keys, DetachKeys) else key_label(keys)
    return f"attached to {name} - {label} to detach"


def detached_text(name: str) -> str:
    return f"detached from {name}"


class DetachMatcher:
    """Watches input for a detach sequence, one read (raw ``cotal attach``) or one key press (a
    pane) at a time. A read that is not exactly a press of a sequence still in play is data: it
    goes out at once, with any presses held before it. Presses that could still begin a
    sequence are held until the next press or :attr:`window` seconds (the caller's timer, then
    :meth:`flush`). With the default (Ctrl-] alone) nothing is ever held: Esc goes out as typed."""

    __slots__ = ("keys", "_forms", "_held", "_bytes", "completed")

    def __init__(self, keys: DetachKeys) -> None:
        self.keys = keys
        self._forms = {b: frozenset(detach_forms(b)) if b < 0x20 else frozenset({bytes([b])})
                       for s in keys.sequences for b in s}
        self._held: list[int] = []  # the presses matched so far
        self._bytes: list[bytes] = []  # ... as they were read (sent if the sequence breaks)
        self.completed: tuple[int, ...] = ()  # the sequence the last detach completed

    @property
    def holding(self) -> bool:
        return bool(self._held)

    @property
    def window(self) -> float:
        """How long the held presses wait for the next one."""
        return ESC_WINDOW_S if self._held[:1] == [ESC] else PREFIX_WINDOW_S

    def flush(self) -> bytes:
        """The window passed: the held presses are data after all."""
        out = b"".join(self._bytes)
        self._held.clear()
        self._bytes.clear()
        return out

    def _step(self, data: bytes) -> tuple[bool, bool]:
        """(matched a press of a live sequence, completed one)."""
        n = len(self._held)
        done = False
        hit: int | None = None
        for s in self.keys.sequences:
            if len(s) > n and tuple(s[:n]) == tuple(self._held) and data in self._forms[s[n]]:
                hit = s[n]
                if len(s) == n + 1:
                    done, self.completed = True, s
        if hit is None:
            return False, False
        if done:
            self._held.clear()
            self._bytes.clear()
        else:
            self._held.append(hit)
            self._bytes.append(data)
        return True, done

    def feed(self, data: bytes) -> tuple[bytes, bool]:
        """One read or press: (bytes to send now, whether a detach sequence completed). Bytes
        to send come before the detach."""
        out = b""
        if self._held:
            hit, done = self._step(data)
            if hit:
                return b"", done
            out = self.flush()
        hit, done = self._step(data)
        if hit:
            return out, done
        for s in self.keys.sequences:  # a whole sequence in one read (a fast ``Esc Esc``)
            if len(s) > 1 and data == bytes(s):
                self.completed = s
                return out, True
        return out + data, False


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
