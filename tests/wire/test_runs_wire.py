"""Runs on the wire (meshview/wire/runs.py): run-ps and run-status replies read into rows, steps
and open pauses; shapes outside contract revision 21 refused by name; the §14.5 derived ids; step
keys kept verbatim; released never read as failed."""

from __future__ import annotations

import base64
import hashlib
import json

import jsonschema
import pytest

from conftest import load_vectors
from meshview.wire.runs import (
    DISPLAY_STATES,
    RUN_STATES,
    RunShapeError,
    addressee_id,
    answer_id,
    derived_id,
    is_run_id,
    journal_subject,
    migration_id,
    mint_run_id,
    notice_id,
    parse_journal_record,
    parse_run_key,
    parse_run_ps,
    parse_run_status,
    run_spec_key,
    step_key_kind,
)

COMMANDS = {c["name"]: c for c in load_vectors("manager-contract.json")["commands"]}
RID = "run-" + "ab" * 16
PS_ROWS = [
    {"runId": RID, "endpoint": "manager", "state": "running", "holder": "mgr-1", "epoch": 1, "journalHigh": 3,
     "startedAt": 1_700_000_000_000, "programHash": "sha256:00"},
    {"runId": "run-" + "cd" * 16, "endpoint": "manager", "state": "released", "holder": "mgr-1", "epoch": 2,
     "journalHigh": 5, "forkedFrom": {"run": RID, "step": "/checkpoint:approve#0"}},
    {"runId": "run-" + "ef" * 16, "endpoint": "manager", "state": "running",
     "revoked": {"by": "ops", "reason": "wrong release"}},
    {"runId": "run-" + "01" * 16, "endpoint": "manager", "state": "completed", "revocationUnreadable": "timeout"},
    {"runId": "run-" + "23" * 16, "endpoint": "manager"},
    {"runId": "run-" + "45" * 16, "endpoint": "manager", "state": "failed", "journalHigh": -1},
]
KEY = "/fanOut:lanes#0/b:1877/ask:opened#0"
STATUS = {
    "runId": RID, "endpoint": "manager", "spec": {"v": 1, "run": RID},
    "status": {"v": 1, "state": "running", "holder": "mgr-1", "epoch": 1, "journalHigh": 4},
    "journal": [
        {"n": 0, "kind": "activation", "holder": "mgr-1", "epoch": 1, "replayedTo": 0},
        {"n": 1, "kind": "step", "step": "/checkpoint:approve#0", "effect": "checkpoint", "state": "pending",
         "outcome": "pending", "asks": "ship release 1.8?", "deadlineAt": 1_700_000_060_000, "onExpiry": "fail",
         "startedAt": 1_700_000_000_000},
        {"n": 2, "kind": "step", "step": KEY, "state": "pending", "outcome": "pending", "asks": "which lane?",
         "addressee": "reviewer"},
        {"n": 3, "kind": "step", "step": "/checkpoint:approve#0", "effect": "checkpoint", "state": "settled",
         "outcome": "resumed", "endedAt": 1_700_000_030_000,
         "answer": {"answerId": "A" * 43, "value": "yes", "by": "local.ops", "at": 1_700_000_030_000}},
        {"n": 4, "kind": "step", "step": "/step:notify#0", "effect": "step", "state": "settled", "outcome": "ok"},
    ],
}


def test_the_fixtures_are_replies_the_contract_allows():
    jsonschema.validate(PS_ROWS, COMMANDS["run-ps"]["outputSchema"])
    jsonschema.validate(STATUS, COMMANDS["run-status"]["outputSchema"])


def test_ps_rows_read_with_display_states_and_released_is_not_failed():
    rows = parse_run_ps(PS_ROWS)
    assert [r.display_state for r in rows] == ["running", "released", "revoked", "unchecked", "(no status)", "failed"]
    assert rows[1].display_state != rows[5].display_state  # released and failed are different facts
    assert rows[1].forked_label == f"{RID}@/checkpoint:approve#0" and rows[0].forked_label == "-"
    assert rows[0].epoch == 1 and rows[0].journal_high == 3 and rows[4].journal_high is None
    assert rows[5].journal_high == -1
    assert rows[2].state == "running" and rows[2].revoked.by == "ops"  # the record stays as written
    assert rows[0].age_s(1_700_000_005_000) == 5.0 and rows[1].age_s(0) is None
    assert set(RUN_STATES).isdisjoint(DISPLAY_STATES)


@pytest.mark.parametrize("bad, word", [
    ({"rows": []}, "not a list"),
    ([{"runId": RID}], "lacks 'endpoint'"),
    ([{"runId": RID, "endpoint": "manager", "state": "paused"}], "'paused'"),
    ([{"runId": RID, "endpoint": "manager", "owner": "x"}], "unknown field 'owner'"),
    ([{"runId": RID, "endpoint": "manager", "epoch": -1}], "'epoch'"),
    ([{"runId": RID, "endpoint": "manager", "epoch": True}], "'epoch'"),
    ([{"runId": RID, "endpoint": "manager", "holder": None}], "null"),
    ([{"runId": RID, "endpoint": "manager", "forkedFrom": {"run": RID}}], "lacks 'step'"),
    (["run-1"], "not a JSON object"),
])
def test_ps_refuses_unknown_shapes_by_name(bad, word):
    with pytest.raises(RunShapeError, match=word.replace("(", r"\(").replace(")", r"\)")):
        parse_run_ps(bad)


def test_status_folds_steps_by_key_and_lists_the_open_pauses():
    st = parse_run_status(STATUS)
    assert (st.state, st.holder, st.epoch) == ("running", "mgr-1", 1)
    assert len(st.journal) == 5 and [a.n for a in st.activations] == [0]
    keys = [s.key for s in st.steps]
    assert keys == ["/checkpoint:approve#0", KEY, "/step:notify#0"]  # verbatim, first-seen order
    approve = st.step("/checkpoint:approve#0")
    assert approve.state == "settled" and approve.answer.value == "yes" and approve.answer.has_value
    [p] = st.pauses  # the settled checkpoint is no longer open; the ask is
    assert (p.step_key, p.kind, p.prompt, p.addressee) == (KEY, "ask", "which lane?", "reviewer")


def test_status_pause_carries_deadline_and_expiry():
    only_pending = dict(STATUS, journal=STATUS["journal"][:2])
    [p] = parse_run_status(only_pending).pauses
    assert (p.kind, p.deadline_at, p.on_expiry, p.run_id) == ("checkpoint", 1_700_000_060_000, "fail", RID)


@pytest.mark.parametrize("mutate, word", [
    (lambda d: d.pop("spec"), "lacks 'spec'"),
    (lambda d: d.update(extra=1), "unknown field 'extra'"),
    (lambda d: d["journal"].append({"n": 9, "kind": "marker"}), "'marker'"),
    (lambda d: d["journal"].append({"n": 9, "kind": ["step"]}), "not activation or step"),  # unhashable
    (lambda d: d["journal"].append({"n": 9, "kind": "step"}), "without its key"),
    (lambda d: d["journal"].append({"n": 9, "kind": "step", "step": "/x:y#0", "state": "open"}), "'open'"),
    (lambda d: d["journal"].append({"n": 9, "kind": "step", "step": "/x:y#0", "answer": {}}), "lacks 'answerId'"),
    (lambda d: d["journal"].append({"n": 9, "kind": "step", "step": "/x:y#0", "schema": {}}), "'schema'"),
    (lambda d: d["status"].update(state="paused"), "'paused'"),
    (lambda d: d.update(journal={}), "not a list"),
])
def test_status_refuses_unknown_shapes_by_name(mutate, word):
    d = json.loads(json.dumps(STATUS))
    mutate(d)
    with pytest.raises(RunShapeError, match=word):
        parse_run_status(d)


def _independent_id(obj: dict) -> str:
    # ASCII-only keys and values: RFC 8785 is then sorted keys, no whitespace
    raw = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=")


def test_derived_ids_are_unpadded_base64url_sha256_of_the_canonical_json():
    a = answer_id("tok-1", "local.ops", "yes")
    assert a == _independent_id({"token": "tok-1", "by": "local.ops", "value": "yes", "artifact": None})
    assert len(a) == 43 and "=" not in a
    # value ?? null: an absent value and an explicit null are the same answer
    assert answer_id("tok-1", "local.ops") == answer_id("tok-1", "local.ops", None)
    assert answer_id("tok-1", "local.ops", "no") != a and answer_id("tok-1", "local.other", "yes") != a
    assert addressee_id("reviewer") == _independent_id({"agent": "reviewer"})
    assert notice_id("r1", "x") == _independent_id({"requestId": "r1", "addressee": "x"})
    assert migration_id({"v": 1, "run": RID, "at": 5}) == migration_id({"v": 1, "run": RID, "at": 6})
    assert derived_id({"b": 1, "a": 2}) == derived_id({"a": 2, "b": 1})


def test_run_ids_keys_and_step_kinds():
    r = mint_run_id()
    assert is_run_id(r) and r != mint_run_id() and not is_run_id("run-ABC")
    assert parse_run_key(run_spec_key("manager", r)) == ("manager", r, "spec")
    assert parse_run_key("svc.manager.x.spec") is None
    assert journal_subject("s1", r) == f"cotal.s1.wfj.{r}"
    with pytest.raises(RunShapeError):
        journal_subject("s1", "run-1.>")
    assert step_key_kind(KEY) == "ask" and step_key_kind("/checkpoint:approve#0") == "checkpoint"
    assert step_key_kind("approve") is None


def test_journal_records_are_closed():
    act = {"v": 1, "kind": "activation", "run": RID, "n": 0, "holder": "h", "fencingToken": 1, "epoch": 1,
           "replayedTo": 0, "at": 1}
    assert parse_journal_record(act, run_id=RID) is act
    with pytest.raises(RunShapeError, match="unknown field 'x'"):
        parse_journal_record(dict(act, x=1))
    with pytest.raises(RunShapeError, match="'note'"):
        parse_journal_record(dict(act, kind="note"))
    with pytest.raises(RunShapeError, match="names run"):
        parse_journal_record(act, run_id="run-" + "00" * 16)
    step = {"v": 1, "kind": "step", "run": RID, "n": 1, "at": 2, "entry": {"key": "/checkpoint:approve#0"}}
    assert parse_journal_record(step)["entry"]["key"] == "/checkpoint:approve#0"
