"""The roster's find / group / pin logic (widgets/roster_find.py), without a console: query
parsing (each status prefix, the short forms, the ambiguous ``w:``), matching on name, role,
activity and what the frames say it does, hostile text, grouping with counts, pins first and
keyed by principal id, and the keys tuple kept while the result holds."""

from __future__ import annotations

import time

from support.console import build_model, pid

from cotal_tui.config import (
    config_problems, load_config, read_config, save_roster_group, save_roster_pins, settings,
)
from meshview.model.snapshot import Peer
from widgets.roster_find import (
    MAX_PINS, NO_QUERY, Finder, GroupHeader, header_key, is_header_key, parse_query, pins_from,
)


def peers():
    model, _ = build_model()
    snap = model.snapshot()
    return snap.order, {p.id: p for p in snap.peers}


def ids(keys) -> list:
    return [k if is_header_key(k) else k.split(".")[-1] for k in keys]


def test_each_status_prefix_and_its_short_forms():
    for state in ("working", "waiting", "idle", "offline"):
        q = parse_query(f"{state}: rev")
        assert (q.state, q.text, q.problem) == (state, "rev", None)
        assert parse_query(f"{state}:").state == state and parse_query(f"{state}:").text == ""
    assert parse_query("wo:").state == "working" and parse_query("wa: x").state == "waiting"
    assert parse_query("i:").state == "idle" and parse_query("o:").state == "offline"
    assert parse_query("WAITING: Rev").text == "rev"  # case-insensitive
    amb = parse_query("w: x")
    assert amb.state is None and amb.text == "w: x" and "working or waiting" in (amb.problem or "")
    plain = parse_query("PR 42")
    assert plain.state is None and plain.text == "pr 42"
    assert parse_query("team: x").state is None  # not a state: all of it is text
    assert not NO_QUERY.active


def test_matching_name_role_activity_and_doing():
    order, by_id = peers()
    f = Finder()

    def find(raw, doing=None):
        return ids(f.arrange(order, by_id, parse_query(raw), "none", frozenset(), doing).keys)

    assert find("waiting:") == ["bram", "dax"]
    assert find("working:") == ["ada", "eve"]
    assert find("offline:") == ["finn"]
    assert find("idle:") == ["cleo", "gus"]  # the idle endpoint is no agent
    assert find("waiting: rev") == ["dax"]  # role reviewer
    assert find("review") == ["eve", "dax"]  # in status order: role and activity
    assert find("EPIC") == ["ada"]  # activity, case-insensitive
    assert find("wo: pr 42") == ["eve"]
    assert find("bash") == []
    assert find("bash", {pid("gus"): "Bash"}) == ["gus"]  # the tool its frames say it runs
    got = f.arrange(order, by_id, parse_query("waiting:"), "none", frozenset())
    assert (got.shown, got.total) == (2, 7)


def test_hostile_text_is_neutralised_and_bounded():
    order, by_id = peers()
    evil = Peer(id="local.mallory", name="mal\u202elory\x1b[31m", kind="agent", status="idle",
                reported_status="idle", ts=0, seen_at=0, role="r" * 10_000,
                activity=("\u200b" * 5000) + "x" * 10_000 + "needle")
    by_id = {**by_id, evil.id: evil}
    order = (*order, evil.id)
    f = Finder()
    # the needle past the bound is not found; the name matches as shown (escaped)
    assert ids(f.arrange(order, by_id, parse_query("needle"), "none", frozenset()).keys) == []
    assert ids(f.arrange(order, by_id, parse_query("mal"), "none", frozenset()).keys) == [
        "mallory"]
    # a query that holds a control character cannot match across a field's end either
    assert ids(f.arrange(order, by_id, parse_query("rrr\nx"), "none", frozenset()).keys) == []
    t0 = time.perf_counter()
    for _ in range(50):
        f.arrange(order, by_id, parse_query("idle: zz"), "none", frozenset())
    assert time.perf_counter() - t0 < 1.0
    head = f.arrange(order, by_id, NO_QUERY, "role", frozenset()).headers
    assert all(len(h.label) <= 41 and "\x1b" not in h.label for h in head.values())


def test_group_headers_counts_and_order():
    order, by_id = peers()
    f = Finder()
    got = f.arrange(order, by_id, NO_QUERY, "state", frozenset())
    assert ids(got.keys) == [header_key("working"), "ada", "eve", header_key("waiting"), "bram",
                             "dax", header_key("idle"), "cleo", "gus", header_key("offline"),
                             "finn", header_key("endpoints"), "opsdesk"]
    assert got.headers[header_key("waiting")] == GroupHeader("waiting", 2)
    assert GroupHeader("waiting", 3).text == "▾ waiting · 3"
    roles = [h.text for h in f.arrange(order, by_id, NO_QUERY, "role", frozenset()).headers.values()]
    assert roles[:2] == ["▾ backend · 1", "▾ frontend · 1"] and "▾ reviewer · 2" in roles
    hosts = f.arrange(order, by_id, NO_QUERY, "host", frozenset())
    assert [h.text for h in hosts.headers.values()] == ["▾ demo · 7", "▾ endpoints · 1"]


def test_pins_go_first_by_principal_id_not_by_name():
    order, by_id = peers()
    namesake = Peer(id="local.mallory", name="gus", kind="agent", status="working",
                    reported_status="working", ts=0, seen_at=0)
    by_id = {**by_id, namesake.id: namesake}
    order = (namesake.id, *order)
    f = Finder()
    got = f.arrange(order, by_id, NO_QUERY, "none", frozenset({pid("gus")}))
    assert ids(got.keys)[:3] == [header_key("pinned"), "gus", header_key("others")]
    assert got.headers[header_key("pinned")].n == 1
    grouped = f.arrange(order, by_id, NO_QUERY, "state", frozenset({pid("gus")}))
    assert ids(grouped.keys)[:4] == [header_key("pinned"), "gus", header_key("working"), "mallory"]


def test_same_result_same_keys_object():
    order, by_id = peers()
    f = Finder()
    a = f.arrange(order, by_id, parse_query("idle:"), "state", frozenset()).keys
    b = f.arrange(order, dict(by_id), parse_query("idle:"), "state", frozenset()).keys
    assert a is b


def test_pins_and_group_in_config(tmp_path):
    (tmp_path / "config.toml").write_text('# mine\n[roster]\nsort = "name"\n')
    save_roster_group("role", tmp_path)
    save_roster_pins(["local.ada", 'we"ird\\id\x07', "local.ada"], tmp_path)
    cfg = load_config(tmp_path)
    assert cfg.roster_group == "role" and cfg.roster_sort == "name"
    assert cfg.roster_pins == ("local.ada", 'we"ird\\id\x07') and cfg.warning is None
    rows = {s.key: s for s in settings(home=tmp_path)}
    assert rows["roster.group"].value == "role" and rows["roster.group"].source == "config.toml"
    assert rows["roster.pins"].value == ["local.ada", 'we"ird\\id\x07']
    save_roster_pins([f"local.a{i}" for i in range(MAX_PINS + 50)], tmp_path)
    assert len(load_config(tmp_path).roster_pins) == MAX_PINS
    (tmp_path / "config.toml").write_text('[roster]\ngroup = "shoe"\npins = [1, 2]\n')
    cfg = load_config(tmp_path)
    assert cfg.roster_group == "none" and cfg.roster_pins == ()
    problems = config_problems(read_config(tmp_path))
    assert any("group must be one of" in p for p in problems)
    assert any("pins must be a list" in p for p in problems)
    assert pins_from(["", "x" * 1000, "ok", 3]) == ["ok"]
