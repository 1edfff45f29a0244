"""§13.6 rail frames and flow control, driven frame by frame (no broker needed for the logic)."""

from __future__ import annotations

import asyncio
import json

import pytest

from attach.session.rail import Rail, RailError, open_rail
from meshview.wire.rail import FrameError, encode_frame, parse_frame
from conftest import until


class Wire:
    """Collects what a rail publishes, per subject."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    async def publish(self, subject: str, payload: bytes) -> None:
        self.sent.append((subject, json.loads(payload)))

    def frames(self, t: str | None = None) -> list[dict]:
        return [f for _, f in self.sent if t is None or f["t"] == t]


def make(window=4, on_data=None, **kw):
    wire = Wire()
    got: list = []
    faults: list = []
    closes: list = []

    async def default(data, seq):
        got.append((seq, data))

    rail = Rail(egress="e", ingress="i", publish=wire.publish, window=window,
                on_data=on_data or default, on_fault=lambda r, d: faults.append(r),
                on_close=lambda: closes.append(1), **kw)
    return rail, wire, got, faults, closes


def f(seq, data="x", ack=None):
    d = {"t": "f", "seq": seq, "data": data}
    if ack is not None:
        d["ack"] = ack
    return encode_frame(d)


# ---- codec --------------------------------------------------------------------------------


def test_parse_frame_accepts_the_three_kinds():
    assert parse_frame(b'{"t":"f","seq":1,"data":{"k":"ready"}}')["seq"] == 1
    assert parse_frame(b'{"t":"f","seq":2,"data":null,"ack":0}')["ack"] == 0
    assert parse_frame(b'{"t":"credit","ack":5}')["ack"] == 5
    assert parse_frame(b'{"t":"close"}') == {"t": "close"}


@pytest.mark.parametrize("raw", [
    b"\xff\xfe", b"not json", b"[1]", b'{"t":"x"}', b'{"t":"f","seq":0,"data":1}',
    b'{"t":"f","seq":1}', b'{"t":"f","seq":1,"data":1,"extra":1}', b'{"t":"f","seq":1.5,"data":1}',
    b'{"t":"f","seq":true,"data":1}', b'{"t":"f","seq":1,"data":1,"ack":-1}',
    b'{"t":"credit"}', b'{"t":"credit","ack":1,"x":0}', b'{"t":"close","why":"x"}',
])
def test_parse_frame_refuses_garbled(raw):
    with pytest.raises(FrameError):
        parse_frame(raw)


# ---- receive side ---------------------------------------------------------------------------


async def test_in_order_delivery_and_credit_every_half_window():
    rail, wire, got, faults, _ = make(window=4)
    for s in range(1, 5):
        await rail.feed(f(s, data=s))
    await rail.idle()
    assert [s for s, _ in got] == [1, 2, 3, 4]
    # credit after every ceil(4/2) = 2 accepted frames, absolute watermark
    assert [c["ack"] for c in wire.frames("credit")] == [2, 4]
    assert faults == []


async def test_duplicates_are_dropped():
    rail, wire, got, faults, _ = make()
    await rail.feed(f(1))
    await rail.feed(f(1))
    await rail.feed(f(2))
    await rail.feed(f(2))
    await rail.idle()
    assert [s for s, _ in got] == [1, 2] and faults == []


async def test_gap_breaks_the_rail():
    rail, wire, got, faults, _ = make()
    await rail.feed(f(1))
    await rail.idle()
    await rail.feed(f(3))
    await rail.idle()
    assert faults == ["gap"] and not rail.alive
    await rail.feed(f(2))  # a broken rail delivers nothing more
    assert [s for s, _ in got] == [1]


async def test_garbled_frame_is_a_fault():
    rail, _, _, faults, _ = make()
    await rail.feed(b"{nope")
    assert faults == ["garbled-frame"]


async def test_flood_when_the_peer_ignores_the_window():
    gate = asyncio.Event()

    async def slow(data, seq):
        await gate.wait()

    rail, _, _, faults, _ = make(window=2, on_data=slow)
    await rail.feed(f(1))
    await rail.feed(f(2))
    assert faults == []
    await rail.feed(f(3))  # third unacknowledged frame while the handler holds the first
    assert faults == ["flood"]
    gate.set()


async def test_credit_waits_for_the_handler():
    gate = asyncio.Event()

    async def slow(data, seq):
        await gate.wait()

    rail, wire, _, _, _ = make(window=2, on_data=slow)
    await rail.feed(f(1))
    await asyncio.sleep(0.01)
    assert wire.frames("credit") == []  # nothing credited while the application holds it
    gate.set()
    await rail.idle()
    assert wire.frames("credit")[-1]["ack"] == 1


async def test_handler_error_is_a_fault_and_not_credited():
    async def bad(data, seq):
        raise ValueError("nope")

    rail, wire, _, faults, _ = make(window=2, on_data=bad)
    await rail.feed(f(1))
    await asyncio.sleep(0.01)
    assert faults == ["handler"] and wire.frames("credit") == []


async def test_close_frame_tears_down_once():
    rail, _, _, faults, closes = make()
    await rail.feed(encode_frame({"t": "close"}))
    await rail.feed(encode_frame({"t": "close"}))
    assert closes == [1] and faults == [] and rail.closed


# ---- send side ------------------------------------------------------------------------------


async def test_window_refuses_with_resource_exhausted_then_reopens_on_credit():
    rail, wire, _, faults, _ = make(window=3)
    for _ in range(3):
        await rail.send({"k": "ready"})
    with pytest.raises(RailError) as e:
        await rail.send({"k": "ready"})
    assert e.value.code == "resource-exhausted"
    assert len(wire.frames("f")) == 3  # nothing buffered
    await rail.feed(encode_frame({"t": "credit", "ack": 2}))
    assert await rail.send({"k": "ready"}) == 4
    assert rail.stats().in_flight == 2 and faults == []


async def test_piggybacked_ack_counts_as_credit():
    rail, wire, _, _, _ = make(window=1)
    await rail.send(1)
    await rail.feed(f(1, ack=1))
    await rail.idle()
    assert await rail.send(2) == 2
    assert wire.frames("f")[-1]["ack"] == 1  # our own watermark rides on data


async def test_credit_overrun_is_a_fault():
    rail, _, _, faults, _ = make()
    await rail.send(1)
    await rail.feed(encode_frame({"t": "credit", "ack": 5}))
    assert faults == ["credit-overrun"]
    with pytest.raises(RailError) as e:
        await rail.send(2)
    assert e.value.code == "failed-precondition"


async def test_overrun_piggyback_never_reaches_the_application():
    rail, _, got, faults, _ = make()
    await rail.feed(f(1, ack=3))
    await rail.idle()
    assert faults == ["credit-overrun"] and got == []


async def test_stale_ack_never_narrows_the_window():
    rail, _, _, faults, _ = make(window=2)
    await rail.send(1)
    await rail.send(2)
    await rail.feed(encode_frame({"t": "credit", "ack": 2}))
    await rail.feed(encode_frame({"t": "credit", "ack": 1}))
    assert rail.acked_through == 2 and faults == []


async def test_idle_tick_re_advertises_the_watermark():
    rail, wire, _, _, _ = make(window=8)
    await rail.tick()
    assert wire.frames("credit") == []  # nothing delivered yet: nothing to advertise
    await rail.feed(f(1))
    await rail.idle()
    await rail.send("reply")  # our data carries the ack
    await rail.tick()  # data both ways since the last tick: stay quiet
    assert wire.frames("credit") == []
    await rail.tick()
    await rail.tick()  # quiet peer: re-advertise every tick, even the same watermark
    assert [c["ack"] for c in wire.frames("credit")] == [1, 1]


async def test_a_side_that_only_receives_still_speaks_every_tick():
    """Keys typed into a program that prints nothing: the receiver is heard every tick anyway."""
    now = [0.0]
    rail, wire, _, _, _ = make(window=64, clock=lambda: now[0])
    for seq in range(1, 6):
        now[0] += 1.0
        await rail.feed(f(seq))
        await rail.idle()
        await rail.tick()
    assert [c["ack"] for c in wire.frames("credit")] == [1, 2, 3, 4, 5]


async def test_a_side_sending_steadily_adds_no_keepalives():
    now = [0.0]
    rail, wire, _, _, _ = make(window=64, clock=lambda: now[0])
    for seq in range(1, 6):  # a chatty exchange: keys in, echoes out
        await rail.feed(f(seq, ack=rail.seq))
        await rail.idle()
        now[0] += 0.6
        await rail.send("output")  # our data frames carry the ack and prove we are alive
        now[0] += 0.4
        await rail.tick()
    assert wire.frames("credit") == []


# ---- faults hand the session back --------------------------------------------------------------


async def _garbled(rail):
    await rail.feed(b"{nope")


async def _gap(rail):
    await rail.feed(f(2))


async def _overrun(rail):
    await rail.feed(encode_frame({"t": "credit", "ack": 3}))


@pytest.mark.parametrize("fault,name", [(_garbled, "garbled-frame"), (_gap, "gap"),
                                        (_overrun, "credit-overrun")])
async def test_a_fault_sends_close_to_the_peer_before_tearing_down(fault, name):
    rail, wire, _, faults, _ = make()
    await fault(rail)
    assert faults == [name] and not rail.alive
    assert wire.frames("close") == [{"t": "close"}]  # the frame has no room for a reason
    assert rail.close_sent
    await rail.close()  # abandoning it later sends no second close
    assert len(wire.frames("close")) == 1


async def test_a_stall_sends_close():
    now = [0.0]
    rail, wire, _, faults, _ = make(window=1, stall_timeout_ms=1000, clock=lambda: now[0])
    await rail.send(1)
    now[0] += 1.5
    await rail.tick()
    assert faults == ["stall"] and wire.frames("close") == [{"t": "close"}]


async def test_a_peer_close_is_not_answered_with_a_close():
    rail, wire, _, _, closes = make()
    await rail.feed(encode_frame({"t": "close"}))
    await rail.close()
    assert closes == [1] and rail.peer_closed and wire.frames("close") == []


async def test_a_close_that_never_left_is_retried_on_close():
    fail = [True]
    sent: list[dict] = []

    async def flaky(subject, payload):
        if fail[0]:
            raise OSError("link down")
        sent.append(json.loads(payload))

    faults: list = []
    rail = Rail(egress="e", ingress="i", publish=flaky, on_data=lambda d, s: None,
                on_fault=lambda r, d: faults.append(r))
    with pytest.raises(RailError):
        await rail.send(1)
    assert faults == ["publish"] and not rail.close_sent
    fail[0] = False
    await rail.close()
    assert sent == [{"t": "close"}] and rail.close_sent


# ---- a silent peer ------------------------------------------------------------------------------


async def test_an_idle_session_lives_on_keepalives_for_minutes():
    """No output at all for ten minutes: only the peer's idle credits arrive, and that is enough."""
    now = [0.0]
    rail, wire, _, faults, _ = make(peer_silence_ms=3000, clock=lambda: now[0])
    await rail.feed(f(1))
    for _ in range(600):
        now[0] += 1.0
        await rail.feed(encode_frame({"t": "credit", "ack": 0}))
        await rail.tick()
    assert faults == [] and rail.alive


async def test_a_silent_peer_breaks_the_rail_within_the_bound():
    now = [0.0]
    rail, wire, _, faults, _ = make(peer_silence_ms=3000, clock=lambda: now[0])
    await rail.feed(f(1))
    await rail.idle()
    ticks = 0
    while rail.alive and ticks < 10:
        now[0] += 1.0
        ticks += 1
        await rail.tick()
    assert faults == ["peer-silent"] and ticks == 4  # 4 s after the last frame, bound 3 s
    assert wire.frames("close") == [{"t": "close"}]


async def test_our_own_stalled_loop_is_not_blamed_on_the_peer():
    now = [0.0]
    rail, _, _, faults, _ = make(peer_silence_ms=3000, clock=lambda: now[0])
    now[0] += 20.0  # the event loop was blocked: no tick ran, frames may sit unread
    await rail.tick()
    assert faults == []
    for _ in range(4):
        now[0] += 1.0
        await rail.tick()
    assert faults == ["peer-silent"]  # a fresh bound, then the verdict


async def test_stall_watchdog_fires_on_a_full_window_with_no_ack():
    now = [100.0]
    rail, _, _, faults, _ = make(window=2, stall_timeout_ms=30_000, clock=lambda: now[0])
    await rail.send(1)
    await rail.send(2)
    now[0] += 29.0
    await rail.tick()
    assert faults == []
    now[0] += 2.0
    await rail.tick()
    assert faults == ["stall"]


async def test_ack_progress_resets_the_stall_watchdog():
    now = [0.0]
    rail, _, _, faults, _ = make(window=1, stall_timeout_ms=1000, clock=lambda: now[0])
    await rail.send(1)
    now[0] += 0.9
    await rail.feed(encode_frame({"t": "credit", "ack": 1}))
    await rail.send(2)
    now[0] += 0.9
    await rail.tick()
    assert faults == []


async def test_oversized_frame_is_refused_not_sent():
    rail, wire, _, _, _ = make(max_payload=100)
    with pytest.raises(RailError) as e:
        await rail.send("x" * 200)
    assert e.value.code == "contract-invalid" and wire.sent == [] and rail.seq == 0


async def test_publish_failure_breaks_the_rail():
    async def broken(subject, payload):
        raise OSError("link down")

    faults = []
    rail = Rail(egress="e", ingress="i", publish=broken, on_data=lambda d, s: None,
                on_fault=lambda r, d: faults.append(r))
    with pytest.raises(RailError):
        await rail.send(1)
    assert faults == ["publish"]


async def test_seq_exhausted():
    rail, _, _, faults, _ = make()
    rail.seq = 2**53 - 2
    rail.acked_through = rail.seq
    with pytest.raises(RailError):
        await rail.send(1)
    assert faults == ["seq-exhausted"]


# ---- two rails over the real broker -----------------------------------------------------------


async def test_two_rails_over_nats_flow_both_ways(nc):
    got_a, got_b = [], []
    a = await open_rail(nc, egress="t.rail.ab", ingress="t.rail.ba", window=4,
                        on_data=lambda d, s: got_a.append(d))
    b = await open_rail(nc, egress="t.rail.ba", ingress="t.rail.ab", window=4,
                        on_data=lambda d, s: got_b.append(d))
    for i in range(20):  # 5x the window: only possible if credits come back
        while True:
            try:
                await a.send(i)
                break
            except RailError as e:
                assert e.code == "resource-exhausted"
                assert await a.wait_credit(2.0)
    await b.send("hi")

    await until(lambda: len(got_b) == 20 and got_a == ["hi"], 2, "the window to drain")
    assert got_b == list(range(20))
    await a.close()
    await until(lambda: b.closed, 2, "the close")


async def test_idle_rails_over_nats_stay_up_and_a_vanished_peer_is_noticed(nc):
    """Keepalives alone keep an idle pair alive past the silence bound; when one side vanishes
    without a close, the other breaks with ``peer-silent`` within the bound."""
    heard: list[str] = []
    faults: list[str] = []
    a = await open_rail(nc, egress="t.live.ab", ingress="t.live.ba", window=4, idle_credit_ms=100,
                        peer_silence_ms=1000, on_data=lambda d, s: None,
                        on_fault=lambda r, d: faults.append(r))
    b = await open_rail(nc, egress="t.live.ba", ingress="t.live.ab", window=4, idle_credit_ms=100,
                        peer_silence_ms=1000, on_data=lambda d, s: None)

    async def listen(msg):
        heard.append(json.loads(msg.data)["t"])

    tap = await nc.subscribe("t.live.ba", cb=listen)
    await a.send("ready")
    await b.send("snapshot")

    await until(lambda: heard.count("credit") >= 25, 10)  # 2.5 s of idleness, bound 1 s
    assert a.alive and b.alive and faults == []
    b.stop()  # vanishes without a close (kill -9)
    t0 = asyncio.get_running_loop().time()
    await until(lambda: not a.alive, 5)
    assert faults == ["peer-silent"]
    assert asyncio.get_running_loop().time() - t0 < 1.5
    await tap.unsubscribe()


# ---- consumer credit ------------------------------------------------------------------------


async def test_consumer_credit_delivers_at_once_and_credits_only_what_is_released():
    rail, wire, got, faults, _ = make(window=4, consumer_credit=True)
    for s in range(1, 5):
        await rail.feed(f(s, data=s))
    await rail.idle()
    assert [s for s, _ in got] == [1, 2, 3, 4]  # every frame handed over at once...
    assert wire.frames("credit") == [] and rail.peer_window_full  # ...none credited: the peer is blocked
    rail.release(1)
    await asyncio.sleep(0)
    assert wire.frames("credit") == []  # less than half a window released
    rail.release(3)
    await until(lambda: wire.frames("credit"))
    assert [c["ack"] for c in wire.frames("credit")] == [3] and not rail.peer_window_full
    await rail.send("key")  # a piggybacked ack says no more than what was released
    assert wire.frames("f")[-1]["ack"] == 3
    await rail.tick()  # nor does the idle re-advertisement
    assert wire.frames("credit")[-1]["ack"] == 3
    rail.release_all()
    await until(lambda: wire.frames("credit")[-1]["ack"] == 4)
    rail.release(99)  # never past what arrived
    await asyncio.sleep(0)
    assert rail.released == 4 and not faults


async def test_send_json_frames_exactly_like_send():
    """The serving side's pre-encoded data frames are byte for byte what ``send`` would publish."""
    from meshview.wire import frames as tf

    payloads = [b"", b"x", bytes(range(256)) * 3, "\u4e2d\u6587 \x1b[31m".encode()]
    for ack in (0, 5):
        a, wa, *_ = make(window=8)
        b, wb, *_ = make(window=8)
        for r in (a, b):
            r.expected = ack + 1
        raw_a: list[bytes] = []
        raw_b: list[bytes] = []

        async def pa(_s, p):
            raw_a.append(p)

        async def pb(_s, p):
            raw_b.append(p)

        a._publish, b._publish = pa, pb
        for p in payloads:
            await a.send(tf.encode(tf.Data(p)))
            await b.send_json(tf.data_json(p))
        assert raw_a == raw_b
        assert [tf.decode(json.loads(r)["data"]).payload for r in raw_b] == payloads
