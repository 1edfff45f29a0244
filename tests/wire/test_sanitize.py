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


# the invisible code points the old hand list let through (issue 35): each renders as nothing,
# so a name carrying one looked exactly like a real peer's name
MISSED = [0x2061, 0x2062, 0x2063, 0x2064, 0x180E, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0,
          0x17B4, 0x17B5, 0xE0001, 0xE0020, 0xE0041, 0xE007F, 0xFE00, 0xFE0F, 0xE0100, 0xE01EF]


def _shown(cp: int) -> str:
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def test_every_known_missed_invisible_is_escaped_inline_and_in_text():
    for cp in MISSED:
        name = f"ad{chr(cp)}a"
        assert sanitize.inline(name) == f"ad{_shown(cp)}a", hex(cp)
        assert sanitize.text(f"hi {name}\nx", "> ") == f"hi ad{_shown(cp)}a\n> x", hex(cp)


def test_the_rule_is_the_unicode_property_not_a_list():
    import regex

    prop = regex.compile(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}"
                         r"\p{Cs}\p{Cc}]")
    # every code point of the planes text uses, plus the tag/VS plane: escaped iff the property
    for cp in (*range(0x80, 0x30000), *range(0xE0000, 0xE1000)):
        ch = chr(cp)
        want = prop.match(ch) is not None
        assert sanitize.is_unsafe(ch) is want, hex(cp)
        if want and cp not in (0x85, 0x2028, 0x2029):
            assert ch not in sanitize.inline(f"a{ch}b"), hex(cp)


def test_private_use_unassigned_and_lone_surrogates_are_escaped():
    assert sanitize.inline("a\ue000b") == "a\\ue000b"  # private use: the font decides
    assert sanitize.inline("a\U0010fffdb") == "a\\U0010fffdb"
    assert sanitize.inline("a\u0378b") == "a\\u0378b"  # unassigned
    assert sanitize.inline("a\ud800b") == "a\\ud800b"  # a lone surrogate cannot be encoded


def test_visible_unicode_untouched():
    for s in ("🎉 done", "日本語のテキスト", "e\u0301", "a\u00a0b", "عربى", "\U0001f600x",
              "\u20ac 5", "ok\U0001f44d\U0001f3fd"):
        assert sanitize.inline(s) is s and sanitize.text(s) is s, s
