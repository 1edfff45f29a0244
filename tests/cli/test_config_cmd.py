"""``cotal config`` as a process: each key's value and its source (default, config.toml with
its line, the environment naming its variable), the keymap's rows, what is not used, ``--json``
and ``cotal config path``; and the commented example config is true to the loader."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "fixtures" / "config-example.toml"
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("COTAL_")}


def cotal(home: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from cotal_tui.cli import main; "
                           "sys.exit(main())", *argv],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**CLEAN, "COTAL_HOME": str(home), **env})


def report(home: Path, **env: str) -> dict:
    out = cotal(home, "config", "--json", **env)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return json.loads(out.stdout)


def by_key(rep: dict) -> dict[str, dict]:
    return {s["key"]: s for s in rep["settings"]}


def test_every_key_is_a_default_in_an_empty_home(tmp_path):
    rep = report(tmp_path)
    s = by_key(rep)
    assert rep["config_file"] == {"path": str(tmp_path / "config.toml"), "exists": False}
    assert {k for k, v in s.items() if v["source"] != "default"} == {"COTAL_HOME"}
    assert s["COTAL_HOME"]["origin"] == "COTAL_HOME" and s["COTAL_HOME"]["value"] == str(tmp_path)
    assert (s["roster.sort"]["value"], s["ui.theme"]["value"]) == ("status", "cotal-dark")
    assert s["recordings.dir"]["value"] == str(tmp_path / "recordings")
    assert s["recordings.max_size"]["value"] == 100 * 1024 * 1024
    assert s["chat.history"]["value"] == str(tmp_path / "chat_history")
    for key in ("notify.enabled", "notify.command", "notify.escape", "notify.settle",
                "attach.detach_keys", "attach.fit",
                "COTAL_DETACH_KEY", "COTAL_READ_ONLY", "COTAL_LOG", "COTAL_DEBUG"):
        assert key in s
    assert (s["attach.detach_keys"]["value"], s["attach.fit"]["value"]) == ("ctrl-]", True)
    keymap = {k["id"]: k for k in rep["keymap"]}
    assert keymap["console.dms"]["key"] == keymap["console.dms"]["default"]
    assert not any(k["remapped"] for k in rep["keymap"]) and rep["problems"] == []


def test_each_source_is_named_where_it_came_from(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[roster]\nsort = "role"\n\n[notify]\nescape = "osc777"\nsettle = 2\n'
                   '[recordings]\nmax_size = "1M"\n')
    (tmp_path / "keymap.toml").write_text('[keymap]\n"console.dms" = "x"\n')
    rep = report(tmp_path, COTAL_NOTIFY_ESCAPE="both", COTAL_DETACH_KEY="ctrl-b",
                 COTAL_THEME="nord", COTAL_WEB_TOKEN="hunter2")
    s = by_key(rep)
    assert (s["roster.sort"]["value"], s["roster.sort"]["source"],
            s["roster.sort"]["origin"]) == ("role", "config.toml", f"{cfg}:2")
    assert (s["notify.settle"]["value"], s["notify.settle"]["origin"]) == (2.0, f"{cfg}:6")
    assert s["recordings.max_size"]["value"] == 1024 * 1024
    # the environment wins over the file, and names its variable
    assert (s["notify.escape"]["value"], s["notify.escape"]["source"],
            s["notify.escape"]["origin"]) == ("both", "environment", "COTAL_NOTIFY_ESCAPE")
    assert (s["ui.theme"]["value"], s["ui.theme"]["origin"]) == ("nord", "COTAL_THEME")
    assert (s["COTAL_DETACH_KEY"]["value"], s["COTAL_DETACH_KEY"]["source"]) == ("ctrl-b", "environment")
    assert s["COTAL_WEB_TOKEN"]["value"] == "(set)" and "hunter2" not in json.dumps(rep)
    assert s["notify.escape"]["flag"] == "--notify-escape" and rep["flags_of"] == "cotal watch"
    dms = next(k for k in rep["keymap"] if k["id"] == "console.dms")
    assert (dms["key"], dms["remapped"], dms["source"], dms["origin"]) == (
        "x", True, "keymap.toml", f"{tmp_path / 'keymap.toml'}:2")
    assert rep["problems"] == []
    text = cotal(tmp_path, "config", COTAL_NOTIFY_ESCAPE="both")
    assert text.returncode == 0
    _files, settings_table, keymap_table, *_ = text.stdout.split("\n\n")
    rows = {line.split()[0]: line for line in settings_table.splitlines()}
    assert "config.toml" in rows["roster.sort"] and f"{cfg}:2" in rows["roster.sort"]
    assert "environment (COTAL_NOTIFY_ESCAPE)" in rows["notify.escape"]
    assert rows["notify.settle"].split()[1:3] == ["2.0", "config.toml"]
    keys = {line.split()[0]: line for line in keymap_table.splitlines()}
    assert "keymap.toml" in keys["console.dms"] and keys["feed.follow"].split()[2] == "default"


def test_unknown_keys_and_bad_values_are_named_and_the_rest_applies(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[roster]\nsort = "shoe size"\n[ui]\ncolour = "red"\ntheme = "nosuch"\n'
                   '[notify]\nescape = "both"\nsettle = -1\n[triage]\nconfirm = true\n')
    rep = report(tmp_path)
    s = by_key(rep)
    assert s["roster.sort"]["value"] == "status" and s["roster.sort"]["source"] == "default"
    assert (s["notify.escape"]["value"], s["notify.escape"]["source"]) == ("both", "config.toml")
    assert s["notify.settle"]["source"] == "default"
    problems = rep["problems"]
    assert f"config {cfg}:2: [roster] sort must be one of status, name, role, activity; " \
           'got "shoe size", not used' in problems
    assert f"unknown key [ui] colour in {cfg}:4; known: theme, show_events, title_counts, health" in problems
    assert any(p.startswith(f"config {cfg}:8: [notify] settle must be a number") for p in problems)
    assert any(p.startswith(f"unknown table [triage] in {cfg}:9; known tables: [roster]")
               for p in problems)
    assert any(f"{cfg}:5: [ui] theme must be one of cotal-dark" in p and "'nosuch'" in p
               for p in problems)
    assert len(problems) == 5, problems
    text = cotal(tmp_path, "config").stdout
    assert "Not used (5; the rest of each file applies):" in text
    assert f"  unknown key [ui] colour in {cfg}:4; known: theme, show_events, title_counts, health" in text.splitlines()


def test_a_file_that_does_not_parse_is_named_whole(tmp_path):
    (tmp_path / "config.toml").write_text("[roster\n")
    rep = report(tmp_path)
    assert len(rep["problems"]) == 1
    assert rep["problems"][0].startswith(f"config {tmp_path / 'config.toml'} ignored: ")
    assert by_key(rep)["roster.sort"]["source"] == "default"


def test_config_path(tmp_path):
    out = cotal(tmp_path, "config", "path")
    assert (out.returncode, out.stdout) == (0, f"{tmp_path / 'config.toml'}\n")
    assert "does not exist yet" in out.stderr
    (tmp_path / "config.toml").write_text("")
    out = cotal(tmp_path, "config", "path", "--json")
    assert json.loads(out.stdout) == {"path": str(tmp_path / "config.toml"), "exists": True}
    assert cotal(tmp_path, "config", "nonsense").returncode == 2


def test_the_example_config_is_every_key_and_parses_clean(tmp_path):
    """The README's commented example: the loader reads it with nothing to say, it sets every
    key the program reads from config.toml (commented-out ones included), and what it sets is
    what ``cotal config`` then reports from config.toml."""
    from cotal_tui.config import KEYS, config_problems, read_config

    shutil.copy(EXAMPLE, tmp_path / "config.toml")
    cfg = read_config(tmp_path)
    assert cfg.error is None and config_problems(cfg) == []
    text = EXAMPLE.read_text()
    for table, keys in KEYS.items():
        assert f"[{table}]" in text
        for key in keys:
            assert f"\n{key} = " in text or f"\n# {key} = " in text, (table, key)
    uncommented = (tmp_path / "config.toml").read_text().replace("\n# dir = ", "\ndir = ") \
        .replace("\n# command = ", "\ncommand = ")
    (tmp_path / "config.toml").write_text(uncommented)
    assert config_problems(read_config(tmp_path)) == []
    rep = report(tmp_path)
    assert rep["problems"] == []
    s = by_key(rep)
    assert all(s[f"{t}.{k}"]["source"] == "config.toml" for t in KEYS for k in KEYS[t]
               if f"{t}.{k}" in s), [(k, v["source"]) for k, v in s.items()]


def test_detach_keys_and_fit_are_reported_with_their_source(tmp_path):
    """``[attach] detach_keys`` and ``fit`` from the file (normalised, with the line);
    ``COTAL_DETACH_KEY`` wins; a bad value is shown as refused, naming where it is."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('[attach]\ndetach_keys = ["Ctrl-]", "ESC esc"]\nfit = false\n')
    s = by_key(report(tmp_path))
    assert (s["attach.detach_keys"]["value"], s["attach.detach_keys"]["origin"]) == (
        "ctrl-], esc esc", f"{cfg}:2")
    assert (s["attach.fit"]["value"], s["attach.fit"]["origin"]) == (False, f"{cfg}:3")
    s = by_key(report(tmp_path, COTAL_DETACH_KEY="ctrl-b d"))
    assert (s["attach.detach_keys"]["value"], s["attach.detach_keys"]["origin"]) == (
        "ctrl-b d", "COTAL_DETACH_KEY")
    cfg.write_text('[attach]\ndetach_keys = "d"\n')
    rep = report(tmp_path)
    value = by_key(rep)["attach.detach_keys"]["value"]
    assert value.startswith("(refused: [attach] detach_keys") and "'d' is not a key" in value
    assert any(p.startswith(f"config {cfg}:2: [attach] detach_keys must be detach keys")
               for p in rep["problems"])
