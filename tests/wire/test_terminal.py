"""§13.6 terminal-session profile: closed schema, strict base64, reason grammar."""

from __future__ import annotations

import base64

import pytest

from meshview.wire import frames as tf


def test_all_256_byte_values_survive():
    raw = bytes(range(256))
    enc = tf.encode(tf.Data(raw))
    assert enc == {"k": "data", "b": base64.b64encode(raw).decode()}
    assert tf.decode(enc) == tf.Data(raw)


@pytest.mark.parametrize("raw,b64", [(b"", ""), (b"f", "Zg=="), (b"fo", "Zm8="), (b"foo", "Zm9v"),
                                     (b"foob", "Zm9vYg=="), (b"fooba", "Zm9vYmE="), (b"foobar", "Zm9vYmFy")])
def test_rfc4648_vectors(raw, b64):
    assert tf.encode(tf.Data(raw))["b"] == b64
    assert tf.decode({"k": "data", "b": b64}).payload == raw


@pytest.mark.parametrize("b", ["Zg=", "Zm9v\n", "Zm-v", "Zm_v", "Z===", "Zm 9v", "Zg==Zg==", 5, None, "é123"])
def test_non_strict_base64_is_refused(b):
    with pytest.raises(tf.TerminalFrameError):
        tf.decode({"k": "data", "b": b})


def test_oversized_base64_is_refused():
    with pytest.raises(tf.TerminalFrameError):
        tf.decode({"k": "data", "b": "AAAA" * (tf.MAX_B64_CHARS // 4 + 1)})


@pytest.mark.parametrize("reason", ["process-exit", "closed", "expired", "target-despawn",
                                    "manager-restart", "a", "x" + "-" * 47])
def test_reason_grammar_accepts(reason):
    assert tf.decode({"k": "end", "reason": reason}) == tf.End(reason)


@pytest.mark.parametrize("reason", ["", "Process-exit", "1abc", "-x", "a_b", "a b", "x" * 49, 3, None,
                                    "exit\n"])
def test_reason_grammar_refuses(reason):
    with pytest.raises(tf.TerminalFrameError):
        tf.decode({"k": "end", "reason": reason})
    with pytest.raises(tf.TerminalFrameError):
        tf.encode(tf.End(reason))  # type: ignore[arg-type]


def test_roundtrip_every_kind():
    for frame in (tf.Ready(), tf.Data(b"\x1b[31mhi"), tf.Resize(120, 32), tf.End("closed"), tf.Drop(17)):
        assert tf.decode(tf.encode(frame)) == frame


@pytest.mark.parametrize("data", [
    {"k": "resize", "cols": 0, "rows": 0},          # the degenerate 0x0 resize
    {"k": "resize", "cols": 80, "rows": 100_001},
    {"k": "resize", "cols": 80.0, "rows": 24},
    {"k": "resize", "cols": True, "rows": 24},
    {"k": "resize", "cols": 80},
    {"k": "drop", "bytes": 0},
    {"k": "ready", "x": 1},
    {"k": "data", "b": "", "extra": 1},
    {"k": "b", "b": "Zg=="},                        # the older build's kind is not ours
    {"k": "nope"},
    [1, 2],
    "ready",
])
def test_closed_schema_refuses(data):
    with pytest.raises(tf.TerminalFrameError):
        tf.decode(data)


def test_reason_classes():
    assert {"detached", "process-exit", "target-despawn", "manager-restart", "expired"} == tf.FINAL_REASONS
    for r in ("gap", "stall", "flood", "credit-overrun", "garbled-frame", "peer-closed", "closed",
              "connection-closed"):
        assert r in tf.TRANSIENT_REASONS
    assert not tf.FINAL_REASONS & tf.TRANSIENT_REASONS
