"""The detail card renders a Markdown body with Rich's Markdown after neutralisation (issue 38
item 6): no escape sequence, OSC 8 hyperlink or link target from the wire acts; targets stay
visible as text so the operator can judge them."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from conftest import until
from meshview.wire.decode import Applied
from support.console import make_app, pid, screen_text
from widgets.markdown_card import looks_like_markdown, markdown_lines

HOSTILE = """# Release plan
- step **one** \x1b]8;;https://evil.example\x07click me\x1b]8;;\x07 then \x1b[2J
- [click](javascript:alert(1)) or [docs](https://evil.example/x "a title") or <https://auto.example/>
- ![x](file:///etc/passwd) and ![logo](https://img.example/a.png)
- entities: &#27;[31m red, &#x1b;]8;;x&#x07; and &#x202e;

<script>alert(document.cookie)</script>

inline <img src=x onerror=alert(1)> html and bidi \u202eevil\u202c and \u2066isolate\u2069

```bash
echo "\x1b]52;c;aGk=\x07"
```
"""


def _segments(lines) -> list:
    console = Console(width=200, color_system="truecolor", force_terminal=True)
    return [seg for t in lines for seg in t.render(console)]


def _assert_inert(lines) -> None:
    for seg in _segments(lines):
        assert "\x1b" not in seg.text and "\x07" not in seg.text, repr(seg.text)
        assert not any(ch in seg.text for ch in "\u202e\u202c\u2066\u2069"), repr(seg.text)
        assert seg.style is None or not seg.style.link, seg


def test_a_hostile_markdown_body_renders_inert_with_its_targets_visible():
    assert looks_like_markdown(HOSTILE)
    for width in (40, 80, 140):
        lines = markdown_lines(HOSTILE, width)
        _assert_inert(lines)
        shown = " ".join(t.plain for t in lines)
        squashed = "".join(shown.split())
        # the rendering is Markdown's: a heading, bullets, no raw list markers or emphasis
        assert "Release plan" in shown and "•" in shown and "**one**" not in shown
        for target in ("javascript:alert(1)", "https://evil.example/x", "https://auto.example/",
                       "file:///etc/passwd", "https://img.example/a.png"):
            assert target in squashed, (width, target)
        assert "docs(https://evil.example/x)" in squashed  # a link: its text, then its target
        assert "[image:logo](https://img.example/a.png)" in squashed
        assert "<script>alert(document.cookie)</script>" in squashed  # HTML as literal text
        assert "<imgsrc=xonerror=alert(1)>" in squashed
        assert "\\x1b]8;;https://evil.example\\x07clickme" in squashed  # escapes shown
        assert "\\u202eevil" in squashed and "\\u2066isolate" in squashed
        assert "\\x1b]52;c;aGk=\\x07" in squashed  # in the code block too


def test_only_structural_markdown_is_rendered_as_markdown():
    plain = ["a line\nanother line\n\nand a_snake_case name * 2",
             "costs 5 * 3 = 15, see *note*", "- one dash line only", "C# is a language"]
    for text in plain:
        assert not looks_like_markdown(text), text
    md = ["# Title\ntext", "```\ncode\n```", "- a\n- b", "1. a\n2. b", "see [x](https://y.z)",
          "| a | b |\n|---|---|\n| 1 | 2 |"]
    for text in md:
        assert looks_like_markdown(text), text


async def test_the_message_card_renders_a_markdown_body_and_keeps_a_plain_one():
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        scr = app.screen
        model, clk = scr.session.model, app.clock
        clk.advance(1_000)
        model.apply_message(Applied(kind="channel", id="md-1", ts=clk.t, from_id=pid("ada"),
                                    from_name="ada", from_role="planner", channel="general",
                                    text=HOSTILE))
        clk.advance(1_000)
        model.apply_message(Applied(kind="channel", id="plain-1", ts=clk.t, from_id=pid("ada"),
                                    from_name="ada", from_role="planner", channel="general",
                                    text="first line\nsecond line *kept*"))
        await pilot.pause(0.3)
        feed = scr.query_one("#feed")
        rows = {e.id: e for e in feed.visible_entries()}
        scr.open_entry(rows["md-1"])
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        card = app.screen.query_one("#detail-card")
        lines = [line for _, ls in card.items for line in ls]
        _assert_inert(lines)
        text = screen_text(app)
        assert "markdown, rendered" in text and "• step one" in text
        assert "docs (https://evil.example/x)" in text
        # what the card paints on screen carries no hyperlink either
        for y in range(card.size.height):
            for seg in card.render_line(y):
                assert seg.style is None or not seg.style.link, seg
        await pilot.press("m")  # as sent: the raw text (escaped), the card stays open
        await until(pilot, lambda: "- step **one**" in screen_text(app), what="the raw body")
        assert type(app.screen).__name__ == "DetailScreen" and "as sent" in screen_text(app)
        _assert_inert([line for _, ls in card.items for line in ls])
        await pilot.press("m")
        await until(pilot, lambda: "• step one" in screen_text(app), what="rendered again")
        await pilot.press("q")
        await until(pilot, lambda: type(app.screen).__name__ != "DetailScreen")
        scr.open_entry(rows["plain-1"])
        await until(pilot, lambda: "second line *kept*" in screen_text(app), what="plain card")
        text = screen_text(app)
        assert "first line" in text and "markdown, rendered" not in text


def test_a_huge_markdown_body_renders_in_bounded_time():
    import time

    body = "# big\n" + "\n".join(f"- item {k} with [a link](https://x.example/{k})"
                                 for k in range(1500))
    assert len(body) > 50_000
    t = time.process_time()
    lines = markdown_lines(body, 120)
    took = time.process_time() - t
    print(f"{len(body)} chars of Markdown: {took * 1000:.0f} ms, {len(lines)} lines")
    assert len(lines) >= 1500 and took < 5.0
    assert isinstance(lines[0], Text)


def test_markdown_that_would_hide_text_is_shown_as_sent():
    """markdown-it drops what nests past 20 levels and Rich runs out of width for deep
    quotes; a table wider than the card cuts its cells. None of it may hide a word."""
    from meshview.model.mesh import MeshModel
    from widgets.detail_card import message_card

    bodies = [("# h\n" + "> " * 30 + "secret-words", 108), ("# h\n" + "> " * 15 + "secret-words", 30),
              ("# h\n|" + "a|" * 300 + "\n|" + "---|" * 300 + "\n|" + "secret-words|" * 300, 108)]
    assert markdown_lines(bodies[1][0], 108) is not None  # 15 quotes fit in a wide card
    for body, width in bodies:
        assert looks_like_markdown(body) and markdown_lines(body, width) is None
        m = MeshModel("main", burst_ms=0)
        m.apply_message(Applied(kind="channel", id="x", ts=1_700_000_000_000.0,
                                from_id="local.m", from_name="m", text=body, channel="general"))
        snap = m.snapshot()
        e = snap.feed[-1]
        card = [t.plain for _, lines in message_card(e, None, width) for t in lines]
        shown = "".join("".join(card).split())
        assert "secret-words" in shown and "markdown,rendered" not in shown
        assert any("part of it would not show" in line for line in card)
