"""The CLI edge's last word: a failure no command handled becomes one sentence, in
words for a known transport failure, and for anything else "a bug" with the way to see the
traceback (COTAL_DEBUG=1); never a class name, an errno or a repr. Real exception objects as
the transport raises them (no broker needed to construct them)."""

from __future__ import annotations

import socket

from nats import errors as ne
from nats.js import errors as je
from test_errors_space import LEAK

from cotal_tui.cli import failure_sentence


def test_known_transport_failures_are_words():
    cases = [
        (ConnectionResetError(104, "Connection reset by peer"), "the broker hung up"),
        (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "host name could not be resolved"),
        (TimeoutError(), "did not answer in time"),
        (ne.TimeoutError(), "did not answer in time"),
        (je.NoStreamResponseError(), "is the space provisioned"),
        (ne.NoRespondersError(), "nothing on the mesh answered"),
        (je.NotFoundError(), "no such stream"),
        (ne.ConnectionClosedError(), "connection to the broker was lost"),
        (OSError(28, "No space left on device"), "no space left on device"),
    ]
    for e, words in cases:
        s = failure_sentence(e)
        assert words in s and s.endswith(".") and not LEAK.search(s), (e, s)
        assert "COTAL_DEBUG=1" in s  # the way to more, should it persist


def test_a_bug_is_said_as_one_with_the_way_to_its_traceback():
    for e in (KeyError("x"), AttributeError("'NoneType' object has no attribute 'y'"),
              ValueError(b"# ")):
        s = failure_sentence(e)
        assert "bug" in s and "COTAL_DEBUG=1" in s and not LEAK.search(s), s
        assert "NoneType" not in s and "'x'" not in s
