"""Raw attach's filter of what a seat may do to the operator's terminal (attach/termfilter.py)."""

from __future__ import annotations

import random

from attach.termfilter import TermFilter

CLIP = b"\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07"
CLIP_ST = b"\x1b]52;p;c2VjcmV0\x1b\\"
KITTY = b"\x1b]5522;type=write\x07"
ITERM = b"\x1b]1337;Copy=:c2VjcmV0\x07"
TMUX = b"\x1bPtmux;\x1b\x1b]52;c;c2VjcmV0\x07\x1b\\"
TITLE = b"\x1b]0;pwned\x07"
TITLE2 = b"\x1b]2;also\x1b\\"
KEEP = (b"\x1b[31mred\x1b[0m", b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", b"\x1b]11;?\x07",
        b"\x1bP+q544e\x1b\\", b"\x1b]1337;SetMark\x07", "ünï 🎉".encode(), b"\x1b[?1049h")
STREAM = (b"a" + CLIP + b"b" + TITLE + b"c" + KEEP[0] + CLIP_ST + b"d" + KITTY + KEEP[1]
          + ITERM + b"e" + TMUX + b"f" + TITLE2 + KEEP[2] + KEEP[3] + KEEP[4] + b"g" + KEEP[5]
          + KEEP[6] + b"h")
DEFAULT = (b"a" + b"b" + TITLE + b"c" + KEEP[0] + b"d" + KEEP[1] + b"e" + b"f" + TITLE2
           + KEEP[2] + KEEP[3] + KEEP[4] + b"g" + KEEP[5] + KEEP[6] + b"h")


def run(chunks, **kw) -> bytes:
    f = TermFilter(**kw)
    return b"".join(f.feed(c) for c in chunks) + f.flush()


def test_clipboard_writes_dropped_titles_kept_by_default():
    assert run([STREAM]) == DEFAULT
    assert run([STREAM], clipboard=True) == STREAM
    no_titles = DEFAULT.replace(TITLE, b"").replace(TITLE2, b"")
    assert run([STREAM], titles=False) == no_titles


def test_every_split_gives_the_same_bytes():
    for at in range(len(STREAM) + 1):
        assert run([STREAM[:at], STREAM[at:]]) == DEFAULT, at
        assert run([STREAM[:at], STREAM[at:]], titles=False, clipboard=True) == \
            STREAM.replace(TITLE, b"").replace(TITLE2, b""), at
    assert run([bytes([b]) for b in STREAM]) == DEFAULT  # one byte per read
    rnd = random.Random(35)
    for _ in range(200):
        cuts = sorted(rnd.sample(range(1, len(STREAM)), rnd.randint(1, 12)))
        parts = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)])]
        assert run(parts) == DEFAULT, cuts


def test_plain_chunks_pass_without_a_copy_and_nothing_is_held_long():
    f = TermFilter()
    chunk = b"plain output \x1b[1mbold\x1b[0m\r\n" * 100
    assert f.feed(chunk) is chunk
    assert f.feed(b"x\x1b") == b"x"  # an ESC at the end waits for the next read
    assert f.feed(b"[0m") == b"\x1b[0m"
    assert f.feed(b"\x1b]52;c;" + b"A" * 100_000) == b""  # a long clipboard write: nothing kept
    assert f.feed(b"A" * 100_000 + b"\x07ok") == b"ok"
    assert f.dropped == 1


def test_an_aborted_sequence_ends_the_drop():
    # CAN aborts an OSC; an ESC that is not ST starts the next sequence
    assert run([b"\x1b]52;c;xx\x18after"]) == b"after"
    assert run([b"\x1b]52;c;xx\x1b[31mred"]) == b"\x1b[31mred"
    assert run([b"\x1b]52;c;xx\x1b", b"[31mred"]) == b"\x1b[31mred"
    assert run([b"\x1bPtmux;\x1b", b"\x1b]52;c;x\x07\x1b", b"\\ok"]) == b"ok"
