"""The feed part of a snapshot: O(1) to take, immutable once handed out, absolute indices."""

from __future__ import annotations

import pytest

from meshview.model.mesh import MeshModel
from meshview.wire.decode import Applied


def msg(m: MeshModel, i: int) -> None:
    m.apply_message(Applied(kind="channel", id=f"id{i}", ts=1.0 + i, from_id="local.a",
                            from_name="a",
                            text=f"t{i}", channel="general"))


def test_snapshot_feed_shares_the_buffer():
    m = MeshModel("main", feed_cap=10_000)
    for i in range(10_000):
        msg(m, i)
    s = m.snapshot()
    assert s.feed._buf is m._ring._buf  # no per-snapshot copy of the ring
    assert (s.feed_base, s.feed_len, s.feed_end) == (0, 10_000, 10_000)


def test_old_snapshots_never_change_across_eviction_and_compaction():
    m = MeshModel("main", feed_cap=100)
    for i in range(150):
        msg(m, i)
    old = m.snapshot()
    before = list(old.feed)
    assert [e.index for e in before] == list(range(50, 150))
    for i in range(150, 2000):  # many evictions and several compactions
        msg(m, i)
    ring = m._ring
    assert ring._off > 150 and len(ring._buf) < 100 + ring._compact_at + 1  # memory stays bounded
    assert list(old.feed) == before and all(a is b for a, b in zip(old.feed, before))
    assert (old.feed_base, old.feed_end) == (50, 150)
    assert old.entry(149).text == "t149"
    new = m.snapshot()
    assert (new.feed_base, new.feed_end, new.feed_len) == (1900, 2000, 100)
    assert [e.index for e in new.feed] == list(range(1900, 2000))
    assert new.entry(1900).text == "t1900" and m.entry(1999).index == 1999
    with pytest.raises(IndexError):
        new.entry(1899)
    with pytest.raises(IndexError):
        m.entry(2000)


def test_feed_rows_sequence_api():
    m = MeshModel("main", feed_cap=5)
    for i in range(8):
        msg(m, i)
    f = m.snapshot().feed
    assert len(f) == 5 and f[0].index == 3 and f[-1].index == 7
    assert [e.index for e in f[1:3]] == [4, 5] and isinstance(f[1:3], tuple)
    assert [e.index for e in reversed(f)] == [7, 6, 5, 4, 3]
    assert [e.index for e in f.since(5)] == [5, 6, 7] and [e.index for e in f.since(0)] == [3, 4, 5, 6, 7]
    assert f == tuple(f) and f.at(4).text == "t4"
    with pytest.raises(IndexError):
        f[5]
    with pytest.raises(IndexError):
        f.at(2)
    assert not m.seen("id2") and m.seen("id3")  # the dedupe set follows the ring


def test_backlog_status_is_counted_once_and_flags_lagging():
    m = MeshModel("main", record_events=True)
    m.set_backlog(lagging=True, dropped=7)
    m.set_backlog(lagging=True, dropped=3)
    s = m.snapshot()
    assert s.status.lagging and s.status.dropped == 10
    v = m.version
    m.set_backlog(lagging=True, dropped=0)  # no change: no new snapshot
    assert m.version == v
    m.set_backlog(lagging=False)
    assert not m.snapshot().status.lagging and m.snapshot().status.dropped == 10
    states = [e for e in m.take_events() if hasattr(e, "lagging")]
    assert [(e.lagging, e.dropped) for e in states] == [(True, 7), (False, 10)]


def test_line_stream_reports_lagging_once_per_change():
    import io

    from meshview.lines.stream import StreamWriter

    m = MeshModel("main", record_events=True)
    m.set_connection("connected")
    m.set_backlog(lagging=True, dropped=5)
    m.set_backlog(lagging=True, dropped=5)
    m.set_backlog(lagging=False)
    out, err = io.StringIO(), io.StringIO()
    StreamWriter("text", out, err, colour=False).write(m.take_events())
    lines = err.getvalue().splitlines()
    assert lines == ["! lagging behind the mesh: 5 messages dropped so far",
                     "! caught up: 10 messages dropped so far"]
    m.set_backlog(lagging=True, dropped=1)
    js = io.StringIO()
    StreamWriter("json", js, io.StringIO()).write(m.take_events())
    assert '"lagging": true' in js.getvalue() and '"dropped": 11' in js.getvalue()


def test_ring_is_bounded_in_bytes_and_the_stream_still_gets_exact_text(monkeypatch):
    import meshview.model.feedring as mm

    monkeypatch.setattr(mm, "FEED_TEXT_BUDGET", 1_000_000)
    m = MeshModel("main", feed_cap=10_000, record_events=True, burst_ms=0)
    big = "A" * 300_000
    for i in range(20):
        m.apply_message(Applied(kind="channel", id=f"m{i}", ts=i, from_id="local.a", from_name="a",
                                text=f"{i:02d}" + big, channel="general", received=i))
    events = [e for e in m.take_events() if getattr(e, "kind", None) == "channel"]
    assert len(events) == 20 and all(len(e.text) == 300_002 for e in events)  # exact text out
    feed = m.snapshot().feed
    kept = sum(len(e.text) for e in feed)
    assert kept <= 1_000_000 and len(feed) < 20  # oldest rows went to honour the budget
    last = feed[-1]
    assert last.text.startswith("19") and "more characters not kept" in last.text
    assert len(last.text) < mm.KEPT_TEXT + 100 and last.parts == ()
