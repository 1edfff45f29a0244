"""The terminal profile's strict base64 (one C pass) refuses exactly what the §13.6 rule refuses:
standard alphabet, at most two "=" and only at the end, a length that is a multiple of 4."""

from __future__ import annotations

import base64
import random
import re

import pytest

from meshview.wire import frames as tf

RULE = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def by_the_rule(s: str) -> bytes | None:
    if len(s) % 4 or not RULE.fullmatch(s):
        return None
    return base64.b64decode(s, validate=True)


def ours(s: str) -> bytes | None:
    try:
        return tf.b64decode_strict(s)
    except tf.TerminalFrameError:
        return None


@pytest.mark.parametrize("seed", range(4))
def test_strict_base64_matches_the_rule(seed):
    r = random.Random(seed)
    alphabet = "ABCab01+/=\n =é-_\x00"
    for _ in range(40_000):
        s = "".join(r.choice(alphabet) for _ in range(r.randint(0, 14)))
        assert ours(s) == by_the_rule(s), repr(s)


def test_every_byte_value_round_trips():
    data = bytes(range(256)) * 3
    for n in range(0, 40):
        assert tf.b64decode_strict(tf.b64encode(data[:n])) == data[:n]
    for bad in ("QUFB====", "babC=", "QQ=", "Q===", "QU=B", "QUFB\n", " QQ==", "QQ==QQ=="):
        assert ours(bad) is None
