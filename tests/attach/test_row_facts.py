"""A manager's row read as the contract types it (attach/control/row_facts.py): a new key is a newer
manager's fact and passes; a known key of another JSON type is one named rejection; what a lying
row's numbers and strings can do to the words is bounded (pure: the broker tests are
tests/cli/test_ps_facts.py and tests/console/test_card_facts.py)."""

from __future__ import annotations

import math

import pytest

from attach.control.managed import seat_from_row
from attach.control.row_facts import RowRejected, check_row, row_facts
from attach.control.seat_text import detail_lines, mesh_words, ref_age

NOW = 1_800_000_000_000.0


def row(**kw) -> dict:
    r = {"name": "w", "id": "w1", "agent": "echo", "space": "main", "mode": "pty", "status": "running",
         "uptimeMs": 1000, "mesh": "working", "lifecycleUid": "u" * 26}
    r.update(kw)
    return r


@pytest.mark.parametrize("kw,field,want,got", [
    ({"pid": "4242"}, "pid", "integer", "string"),
    ({"pid": True}, "pid", "integer", "boolean"),
    ({"pid": 0}, "pid", "integer >= 1", "integer 0"),
    ({"uptimeMs": 1.5}, "uptimeMs", "integer", "number"),
    ({"model": ["opus"]}, "model", "string", "array"),
    ({"condition": "rate_limit"}, "condition", "object", "string"),
    ({"condition": {"code": "x", "since": "yesterday"}}, "condition.since", "number", "string"),
    ({"resume": {"source": 7}}, "resume.source", "string", "integer"),
    ({"offlineSince": -5}, "offlineSince", "integer >= 0", "a negative integer"),
    ({"meshView": "blurry"}, "meshView", "one of current|stale|unpopulated", "another string"),
    ({"host": None}, "host", "string", "null"),
])
def test_a_changed_type_is_named(kw, field, want, got):
    with pytest.raises(RowRejected) as e:
        check_row(row(**kw))
    assert (e.value.field, e.value.want, e.value.got, e.value.code) == (field, want, got, "row-field-type")
    assert str(e.value) == f"field {field!r} is {got}, the row schema says {want}"


def test_new_fields_and_whole_floats_pass():
    check_row(row(gpu={"count": 8}, pid=4242.0, activeAt=NOW - 1.5, condition={"code": "c", "extra": 1}))
    f = row_facts(row(pid=4242.0))
    assert f.pid == 4242 and isinstance(f.pid, int)


def test_the_console_seat_of_a_rejected_row_says_why_and_reads_no_facts():
    seat = seat_from_row(row(pid="4242", model="opus"), "m" * 26, now=1.0)
    assert seat is not None and seat.facts.model is None
    lines = dict(detail_lines(seat, "working", now=1.0))
    assert lines["row"] == "rejected (row-field-type: field 'pid' is string, the row schema says integer)"


def test_lying_stamps_and_huge_strings_stay_bounded():
    huge = row(model="m" * 1_000_000, condition={"code": "c" * 10_000, "since": -1e300}, activeAt=1e300,
               mesh="waiting")
    check_row(huge)
    f = row_facts(huge)
    assert len(f.model or "") <= 512 and len(f.condition_code or "") <= 64
    words = mesh_words("waiting", f, NOW)
    assert words.endswith("for ?) · active 0s ago") and len(words) < 120
    assert row_facts(row(activeAt=math.inf)).active_at is None  # no stamp, as presence-ages.ts
    gone = row_facts(row(mesh="offline", offlineSince=0))
    assert mesh_words("offline", gone, NOW) == "mesh offline for 20833.3d"  # 1970: a real age, bounded
    assert ref_age(-5) == "0s" and ref_age(40 * 60_000 + 59_000) == "40m" and ref_age(3 * 86400_000) == "3d"
