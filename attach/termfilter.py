"""What a seat's output may not do to the operator's own terminal through raw ``cotal attach``.

Raw attach copies the seat's bytes to the operator's terminal, so a seat could write the
operator's clipboard (OSC 52, kitty's OSC 5522, iTerm2's ``OSC 1337;Copy=``) or tunnel any
sequence past an outer tmux (a ``DCS tmux;`` passthrough). These are dropped unless the operator
allows the clipboard (``--clipboard``, as tmux's ``set-clipboard``). The window title (OSC 0/1/2)
is kept by default, as the embedded pane keeps it, and dropped when the operator says so.

The filter follows sequences across reads (an OSC split over two chunks is still caught) and a
chunk with no ``ESC ]`` or ``ESC P`` passes untouched, without a copy.
"""

from __future__ import annotations

import re

_START = re.compile(rb"\x1b(?:[\]P]|\Z)")  # an OSC or DCS, or an ESC that ends the chunk
_HEAD_MAX = 16  # enough of a sequence's start to know what it is
_CLIPBOARD = (b"52", b"5522")
_TITLES = (b"0", b"1", b"2")
_OSC_END = re.compile(rb"[\x07\x18\x1a\x1b]")  # BEL, CAN, SUB, or ESC (ST or an abort)
_DCS_END = re.compile(rb"[\x18\x1a\x1b]")  # CAN, SUB, or ESC: ST, an abort, or ESC ESC (data)


class TermFilter:
    """Feed the seat's output chunks; get back what may reach the operator's terminal."""

    def __init__(self, *, clipboard: bool = False, titles: bool = True) -> None:
        self.clipboard = clipboard
        self.titles = titles
        self.dropped = 0  # sequences dropped so far
        self._held = b""  # the unfinished start of a sequence, or an ESC that ended a read
        self._skip: re.Pattern | None = None  # inside a dropped sequence: its end

    def feed(self, data: bytes) -> bytes:
        if not self._held and self._skip is None:
            if b"\x1b" not in data or (b"\x1b]" not in data and b"\x1bP" not in data
                                        and not data.endswith(b"\x1b")):
                return data  # the common chunk: nothing to look at
        buf, self._held = self._held + data, b""
        out: list[bytes] = []
        i, n = 0, len(buf)
        while i < n:
            if self._skip is not None:
                i = self._skip_to_end(buf, i)
                if i < 0:
                    return b"".join(out)  # the rest of the chunk is inside it
                continue
            m = _START.search(buf, i)
            if m is None:
                out.append(buf[i:])
                break
            at = m.start()
            out.append(buf[i:at])
            verdict = self._judge(buf, at)
            if verdict is None:  # not enough of it yet: wait for the next chunk
                self._held = buf[at:]
                break
            if verdict:
                out.append(buf[at:at + 2])
                i = at + 2
            else:
                self.dropped += 1
                self._skip = _OSC_END if buf[at + 1] == 0x5D else _DCS_END
                i = at + 2
        return b"".join(out)

    def _skip_to_end(self, buf: bytes, i: int) -> int:
        """Past the end of the dropped sequence from ``i``; -1 when it goes on past ``buf``.
        An ESC ends an OSC (ST when a backslash follows, else it starts the next sequence);
        in a DCS passthrough ESC ESC is an escaped ESC, still inside."""
        n = len(buf)
        while True:
            m = self._skip.search(buf, i)  # type: ignore[union-attr]
            if m is None:
                return -1
            j = m.end()
            if m.group() != b"\x1b":  # CAN, SUB, or BEL ending an OSC
                self._skip = None
                return j
            if j == n:  # ST, a pair or an abort: the next read says
                self._held = b"\x1b"
                return -1
            if self._skip is _DCS_END and buf[j] == 0x1B:
                i = j + 1
                continue
            self._skip = None
            return j + 1 if buf[j] == 0x5C else j - 1

    def flush(self) -> bytes:
        """What is held at the end of the stream (an unfinished start, passed as it is)."""
        held, self._held = self._held, b""
        return b"" if self._skip is not None else held

    def _judge(self, buf: bytes, at: int) -> bool | None:
        """True: pass the sequence starting at ``at``; False: drop it; None: cannot tell yet."""
        if at + 1 >= len(buf):
            return None  # a lone ESC at the end of the chunk
        head = buf[at + 2:at + 2 + _HEAD_MAX]
        ended = len(head) >= _HEAD_MAX or any(c in head for c in b"\x07\x18\x1a\x1b")
        if buf[at + 1] == 0x50:  # DCS: only tmux's passthrough is judged
            if len(head) < 5 and not ended:
                return None
            return self.clipboard or not head.startswith(b"tmux;")
        ps, semi, rest = head.partition(b";")
        if not semi and not ended:
            return None
        if ps in _CLIPBOARD:
            return self.clipboard
        if ps == b"1337":
            if len(rest) < 5 and not ended:
                return None
            return self.clipboard or not rest.startswith(b"Copy=")
        if ps in _TITLES:
            return self.titles
        return True
