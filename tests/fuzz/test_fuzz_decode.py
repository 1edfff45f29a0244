"""The hostile corpus against the pure reader rules (no broker): nothing raises, every item
gets a verdict, and the verdict matches what the generator says the SPEC requires."""

from __future__ import annotations

import collections
import time

import pytest

from support.hostile import ACCEPT, CLIENT_KILLERS, EITHER, FAMILIES, REJECT, generate
from meshview.wire.decode import Delivery, Rejection, decode_delivery
from meshview.wire.presence import decode_presence

SPACE = "fz"
N = 12_000


def _verdict(item):
    subject = item.subject.decode("utf-8", "replace")
    if item.target == "presence":
        key = subject.split(".", 2)[2]
        op = dict(item.headers).get(b"KV-Operation", b"PUT").decode()
        d = decode_presence(key, op, item.payload, int(time.time() * 1000))
        accepted = d.action == "apply" and d.reason == "ok"
        return accepted, d.reason
    if item.is_kv:
        return None, None
    r = decode_delivery(subject, item.payload)
    if isinstance(r, Delivery):
        return True, "ok"
    assert isinstance(r, Rejection)
    return False, r.reason


def test_generator_is_deterministic_and_covers_every_family():
    now = 1_760_000_000_000
    a = [(h.subject, h.payload, h.headers) for h in generate(SPACE, 400, seed=3, now_ms=now,
                                                            include_killers=True)]
    b = [(h.subject, h.payload, h.headers) for h in generate(SPACE, 400, seed=3, now_ms=now,
                                                            include_killers=True)]
    assert a == b
    c = [(h.subject, h.payload, h.headers) for h in generate(SPACE, 400, seed=4, now_ms=now,
                                                            include_killers=True)]
    assert a != c
    fams = {h.family for h in generate(SPACE, 2 * len(FAMILIES), include_killers=True)}
    assert fams == set(FAMILIES)
    assert all(not h.kills_nats_py for h in generate(SPACE, 500))
    assert not {h.family for h in generate(SPACE, 500)} & CLIENT_KILLERS


@pytest.mark.slow
def test_ten_thousand_hostile_items_never_raise_and_match_expectations():
    by_reason: collections.Counter = collections.Counter()
    wrong: list[str] = []
    t0 = time.perf_counter()
    n = 0
    for item in generate(SPACE, N, seed=7, include_killers=True):
        n += 1
        accepted, reason = _verdict(item)  # must not raise
        if accepted is None:
            continue
        by_reason[(item.target if item.is_kv else "msg", reason)] += 1
        if item.expect == REJECT and accepted:
            wrong.append(f"{item.family}#{item.index}: accepted, expected {item.reasons}")
        elif item.expect == REJECT and item.reasons and reason not in item.reasons:
            wrong.append(f"{item.family}#{item.index}: {reason}, expected {item.reasons}")
        elif item.expect == ACCEPT and not accepted:
            wrong.append(f"{item.family}#{item.index}: rejected {reason}, expected accept")
        elif item.expect == EITHER and not accepted and item.reasons and reason not in item.reasons:
            wrong.append(f"{item.family}#{item.index}: {reason} not in {item.reasons}")
    elapsed = time.perf_counter() - t0
    assert n == N
    assert not wrong, "\n".join(wrong[:30])
    print("\nverdicts by reason:", dict(sorted(by_reason.items())), f"in {elapsed:.2f}s")
    assert elapsed < 60


@pytest.mark.parametrize("depth", [10_000, 100_000, 1_000_000])
def test_pathological_nesting_is_bounded(depth):
    payload = (b'{"id":"x","ts":1,"space":"fz","from":{"id":"local.a","name":"a"},'
               b'"channel":"general","parts":[{"kind":"data","data":' + b"[" * depth
               + b"]" * depth + b"}]}")
    t0 = time.perf_counter()
    r = decode_delivery("cotal.fz.chat.local.a.general", payload)
    assert time.perf_counter() - t0 < 2.0
    assert isinstance(r, (Delivery, Rejection))
