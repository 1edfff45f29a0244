"""The one parser and matcher of detach keys (attach/terminal/detach.py), as pure values: what
``COTAL_DETACH_KEY`` and ``[attach] detach_keys`` accept, the one sentence a bad value gets, and
which reads detach, which are held and which are data."""

from __future__ import annotations

import pytest

from attach.terminal.detach import (DEFAULT_KEYS, ESC_WINDOW_S, PREFIX_WINDOW_S, DetachKeyError,
                                    parse_detach_key, parse_detach_keys)


def test_grammar_and_normal_form():
    assert parse_detach_keys(None) == DEFAULT_KEYS and DEFAULT_KEYS.label == "Ctrl-]"
    assert parse_detach_keys("^]") == DEFAULT_KEYS  # today's single-key values stay valid
    assert parse_detach_key("ctrl-b") == 0x02 and parse_detach_key("^B") == 0x02
    k = parse_detach_keys(" Ctrl-] ,  ESC   escape ")
    assert (k.spec, k.label, k.key) == ("ctrl-], esc esc", "Ctrl-] or Esc Esc", 0x1D)
    k = parse_detach_keys(["ctrl-b d", "ctrl-]"])
    assert k.sequences == ((0x02, ord("d")), (0x1D,)) and k.spec == "ctrl-b d, ctrl-]"
    assert parse_detach_keys("esc esc").key is None  # no single key: no prefix either
    assert parse_detach_keys("ctrl-], ctrl-]") == DEFAULT_KEYS  # a repeat is one sequence


@pytest.mark.parametrize("value, says", [
    ("", "is set but empty"),
    ("ctrl-1", "'ctrl-1' is not a key"),
    ("d esc", "'d' is not a key (a sequence starts with a control key or esc)"),
    ("ctrl-b dd", "'dd' is not a key"),
    ("ctrl-], ", "has an empty sequence"),
    ("esc esc esc esc", "a sequence is at most 3 presses"),
    ("ctrl-b, ctrl-b d", "Ctrl-B d can never detach, Ctrl-B detaches first"),
    ("^a, ^b, ^c, ^d, ^e", "at most 4 sequences"),
    ("ctrl-]" + " " * 300, "longer than 200 characters"),
    (42, "must be a string or a non-empty list of strings"),
    ([], "must be a string or a non-empty list of strings"),
])
def test_a_bad_value_is_one_named_sentence(value, says):
    with pytest.raises(DetachKeyError) as e:
        parse_detach_keys(value, source="[attach] detach_keys (/h/config.toml:2)")
    text = str(e.value)
    assert says in text and text.count("\n") == 0
    assert text.startswith("[attach] detach_keys")


def test_the_default_holds_nothing_and_a_paste_is_data():
    m = DEFAULT_KEYS.matcher()
    assert m.feed(b"\x1b") == (b"\x1b", False) and not m.holding  # Esc: at once, unchanged
    assert m.feed(b"\x1b\x1b") == (b"\x1b\x1b", False)
    assert m.feed(b"ab\x1dcd") == (b"ab\x1dcd", False)  # the key inside a read is data
    for form in (b"\x1d", b"\x1b[93;5u", b"\x1b[27;5;93~"):  # lone, kitty, modifyOtherKeys
        assert m.feed(form) == (b"", True)


def test_a_sequence_holds_its_presses_and_gives_them_back():
    m = parse_detach_keys("ctrl-], esc esc").matcher()
    assert m.feed(b"\x1b") == (b"", False) and m.holding and m.window == ESC_WINDOW_S
    assert m.flush() == b"\x1b" and not m.holding  # the window passed: it was a key
    assert m.feed(b"\x1b") == (b"", False)
    assert m.feed(b"x") == (b"\x1bx", False)  # broken: both go, in order
    assert m.feed(b"\x1b") == (b"", False)
    assert m.feed(b"\x1b") == (b"", True) and m.completed == (0x1B, 0x1B)
    assert m.feed(b"\x1b\x1b") == (b"", True)  # the terminal delivered both in one read
    assert m.feed(b"\x1b") == (b"", False)
    assert m.feed(b"\x1d") == (b"\x1b", True) and m.completed == (0x1D,)  # the held Esc first
    t = parse_detach_keys("ctrl-b d").matcher()
    assert t.feed(b"\x02") == (b"", False) and t.window == PREFIX_WINDOW_S
    assert t.feed(b"\x02") == (b"\x02", False) and t.holding  # a second Ctrl-B: the first was a key
    assert t.feed(b"d") == (b"", True)
    assert t.feed(b"d") == (b"d", False)  # d alone is a letter
