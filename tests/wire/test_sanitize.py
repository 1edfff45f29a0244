"""Untrusted text is escaped visibly before it reaches a terminal."""

from meshview import sanitize


def test_escapes_controls_visibly():
    s = sanitize.inline("a\x1b[2Jb\x07c\x9bd\x7f")
    assert "\x1b" not in s and "\x07" not in s and "\x9b" not in s
    assert s == "a\\x1b[2Jb\\x07c\\x9bd\\x7f"


def test_osc_and_bidi():
    s = sanitize.inline("x\x1b]52;c;ZXZpbA==\x07y \u202eevil\u2066z\u2069")
    assert "\x1b" not in s and "\u202e" not in s and "\u2066" not in s
    assert "\\u202e" in s and "\\x1b]52" in s


def test_newlines_inline_vs_text():
    assert sanitize.inline("a\nb") == "a\\nb"
    assert sanitize.text("a\nb\r\nc", "  ") == "a\n  b\\x0d\n  c"
    assert sanitize.text("line\u2028next", ">") == "line\n>next"


def test_clean_text_untouched():
    s = "plain ünïcödé text → #chan"
    assert sanitize.text(s) is s and sanitize.inline(s) is s


def test_tab_and_limit():
    assert sanitize.inline("a\tb") == "a b"
    assert sanitize.inline("x" * 10, limit=4) == "xxxx…"
