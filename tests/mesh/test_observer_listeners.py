"""A listener that raises is counted, logged and reported, never swallowed: the other
listeners and the observer go on, the model's status carries the count (the status bar), and
the line stream writes a ``state`` line with ``source: "internal"``."""

from __future__ import annotations

import io
import json
import logging

from conftest import until
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.lines.stream import StreamWriter
from support.observer import now_ms, presence, put_presence


async def test_a_raising_listener_is_counted_logged_and_reported(broker, nc, space, caplog):
    model = MeshModel(space, record_events=True)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0))
    out = io.StringIO()
    writer = StreamWriter("json", out, io.StringIO())
    calls = {"before": 0, "after": 0}

    def before(m: MeshModel) -> None:
        calls["before"] += 1

    def broken(m: MeshModel) -> None:
        raise RuntimeError("listener bug\nsecond line")

    async def after(m: MeshModel) -> None:
        calls["after"] += 1
        writer.write(m.take_events())

    for fn in (before, broken, after):
        obs.add_listener(fn)
    caplog.set_level(logging.ERROR, logger="cotal.observer")
    await obs.start()
    try:
        await until(lambda: obs.listener_errors >= 2, 10.0, "two publishes")
        await put_presence(nc, space, presence("ada", "working", ts=now_ms()))
        await until(lambda: model.peer("local.ada") is not None, 10.0, "the observer goes on")
        await until(lambda: '"source": "internal"' in out.getvalue(), 10.0, "the state line")
    finally:
        await obs.stop()
    assert calls["before"] == calls["after"] >= obs.listener_errors >= 2  # the others all ran
    assert obs.last_listener_error == "test_a_raising_listener_is_counted_logged_and_reported" \
        ".<locals>.broken: RuntimeError: listener bug second line"
    st = model.status
    assert st.listener_errors == obs.listener_errors  # what the status bar reads
    assert st.listener_error == obs.last_listener_error
    logged = [r for r in caplog.records if r.name == "cotal.observer"]
    assert len(logged) == obs.listener_errors and logged[0].exc_info is not None
    internal = [json.loads(x) for x in out.getvalue().splitlines()
                if '"source": "internal"' in x]
    counts = [x["listenerErrors"] for x in internal]
    assert counts == sorted(set(counts)) and counts[0] >= 1  # one line per change of count
    assert internal[0] == {"type": "state", "source": "internal",
                           "listenerErrors": counts[0], "error": obs.last_listener_error}


def test_the_stream_says_an_internal_error_once_per_change():
    model = MeshModel("main", record_events=True)
    model.set_connection("connected")
    out, err = io.StringIO(), io.StringIO()
    js = StreamWriter("json", out, io.StringIO())
    plain = StreamWriter("plain", io.StringIO(), err, colour=False)
    js.write(model.take_events())
    model.set_listener_errors(1, "drain: ValueError: boom")
    model.set_listener_errors(1, "drain: ValueError: boom")  # no change: no event
    model.set_connection("reconnecting")
    events = model.take_events()
    js.write(events)
    plain.write(events)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines == [
        {"type": "state", "connection": "connected", "dmVisible": False, "presenceView": "live"},
        {"type": "state", "source": "internal", "listenerErrors": 1,
         "error": "drain: ValueError: boom"},
        {"type": "state", "connection": "reconnecting", "dmVisible": False,
         "presenceView": "live"},
    ]
    assert "! internal error (1 so far): drain: ValueError: boom" in err.getvalue()
