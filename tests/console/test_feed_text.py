"""Every message's text is on screen: what a feed row renders (the strips produced for the
height the view measured) holds the whole sanitised text, at every panel width and for every
name/role/channel length the wire allows, wide characters included."""

from __future__ import annotations

import random

from rich.cells import cell_len
from textual.app import App, ComposeResult

from meshview.model.mesh import MeshModel
from meshview.wire.sanitize import elide_id
from widgets.feed import FeedView, layout_rows, thread_marker
from widgets.presentation import safe, safe_body
from meshview.wire.decode import Applied

WIDE = "日本語テキスト😀🎉한국어"
ALPHA = "abcdefghijklmnopqrstuvwxyz0123456789-_"


class FeedApp(App):
    def compose(self) -> ComposeResult:
        yield FeedView(id="feed")


def _word(rng: random.Random, n: int, wide: bool) -> str:
    pool = ALPHA + (WIDE if wide else "")
    return "".join(rng.choice(pool) for _ in range(n))


def _texts(rng: random.Random) -> list[str]:
    return ["x", "hello there", "ok", "", "日本", "😀", "a b c d e f g h",
            " ".join(_word(rng, rng.randint(1, 12), rng.random() < 0.4)
                     for _ in range(rng.randint(1, 30))),
            _word(rng, rng.randint(30, 200), True),  # one long word: cut, never lost
            "line one\nline two 漢字\n\nlast", "tab\there \x1b[2J esc"]


def _model(rng: random.Random) -> MeshModel:
    m = MeshModel("main", burst_ms=0)
    k = 0
    lengths = [1, 2, 8, 20, 48, 64, 128]
    for nl in lengths:
        for rl in (0, 1, 16, 64):
            for cl in (1, 7, 32, 64):
                for text in rng.sample(_texts(rng), 3):
                    k += 1
                    name = _word(rng, nl, rng.random() < 0.3)
                    role = _word(rng, rl, rng.random() < 0.3) or None
                    chan = _word(rng, cl, False)
                    kind = rng.choice(("channel", "channel", "dm", "anycast"))
                    reply = f"orig-{k - 1}" if rng.random() < 0.25 else None
                    m.apply_message(
                        Applied(kind=kind, id=f"orig-{k}", ts=1_700_000_000_000.0 + k,
                                from_id=f"local.{name[:20] or 'a'}", from_name=name, from_role=role,
                                text=text, channel=chan if kind == "channel" else None,
                                to=f"u_{'a' * 26}.{chan}" if kind == "dm" else None,
                                to_service=chan if kind == "anycast" else None,
                                historical=rng.random() < 0.2, reply_to=reply))
    m.flush_bursts()
    return m


def _squash(s: str) -> str:
    return "".join(s.split())


def _expected_body(e) -> str:
    body = "\n".join(safe_body(e.text))
    if e.reply_to:
        mark = thread_marker(e)
        body = mark + (" · " + body if body else "")
    return body


async def test_every_row_shows_all_of_its_text_at_every_width():
    rng = random.Random(19)
    m = _model(rng)
    snap = m.snapshot()
    widths = sorted({2, 3, 5, 8, 11, 12, 13, 20, 21, 22, 30, 40, 45, 50, 54, 55, 56, 60, 70, 80,
                     100, 119, 120, 160, *rng.sample(range(2, 200), 20)})
    app = FeedApp()
    async with app.run_test(size=(120, 40)):
        feed = app.query_one(FeedView)
        feed.max_lines = 0  # never fold: every row shows all of its text (folds: below)
        feed.update_snapshot(snap)
        checked = 0
        for e in snap.feed:
            want_body = _squash(_expected_body(e))
            want_name = _squash(safe(e.from_name, 48))
            for w in widths:
                height = feed.row_height(e, w)
                strips = feed.row_strips(e.index, w)
                # what render_line shows: the strips for the measured height, nothing more
                assert len(strips) == height, (w, e.from_name, e.text, height, len(strips))
                for st in strips:
                    assert st.cell_length == w
                shown = "".join(st.text for st in strips[:height])
                got = _squash(shown)
                assert want_body in got, (w, e.text, [st.text for st in strips])
                assert want_name in got, (w, e.from_name, [st.text for st in strips])
                if e.kind == "dm" and e.to_names == e.to_ids:  # unknown recipient: elided id
                    assert _squash(elide_id(e.to_ids[0], 24)) in got
                checked += 1
        assert checked > 5000


async def test_a_folded_row_is_the_unfolded_one_cut_with_a_true_count():
    """Folded at 3 lines, a row is its unfolded display rows up to its third body row, then
    ``… +k lines``, where k is exactly how many display rows were cut (bodies this short are
    laid out whole), at every width, for every name, role and text of the model above."""
    rng = random.Random(23)
    snap = _model(rng).snapshot()
    app = FeedApp()
    async with app.run_test(size=(120, 40)):
        feed = app.query_one(FeedView)
        feed.update_snapshot(snap)
        widths = (8, 12, 20, 30, 45, 60, 80, 120)
        feed.max_lines = 0
        wholes = {(e.index, w): [st.text for st in feed.row_strips(e.index, w)]
                  for e in snap.feed for w in widths}
        feed.max_lines = 3
        folded = 0
        for e in snap.feed:
            for w in widths:
                whole = wholes[e.index, w]
                strips = feed.row_strips(e.index, w)
                assert len(strips) == feed.row_height(e, w)
                got = [st.text for st in strips]
                if got == whole:
                    continue
                folded += 1
                assert got[:-1] == whole[:len(got) - 1], (w, e.text)
                label = got[-1].strip()
                assert label.startswith("… +") and "≈" not in label, label
                assert int(label[3:].split(" ")[0]) == len(whole) - len(got) + 1, (w, label)
                assert len(whole) - len(got) + 1 >= 2  # never a fold line hiding one line
        assert folded > 50


def test_the_reported_row_keeps_its_text():
    """The report: ``19:42:18 root-console/operator → #general:`` and no text after it, where
    the head leaves fewer than 12 cells: the measured height is now the laid-out one."""
    head = "19:42:18 root-console/operator → #general: "
    for text in ("x", "hello there"):
        for w in range(cell_len(head), cell_len(head) + 14):
            rows = layout_rows(head, [text], w)
            body = "".join(text[s:t] for *_, li, s, t in rows if li == 0)
            assert body.replace(" ", "") == text.replace(" ", ""), (w, rows)


def test_a_head_wider_than_the_panel_wraps_and_the_body_follows():
    head = "19:42:18 " + "n" * 40 + "/" + "r" * 30 + " → #" + "c" * 60 + ": "
    rows = layout_rows(head, ["the text"], 30)
    shown = "".join(head[hs:he] for hs, he, *_ in rows)
    assert _squash(shown) == _squash(head)
    assert any(li == 0 for *_, li, _s, _t in rows)
