"""The one home resolver and the one ``config.toml`` loader (flag > environment > file >
default)."""

from __future__ import annotations

import argparse

from cotal_tui.config import (
    chat_history_path,
    config_problems,
    config_path,
    load_config,
    notify_settings,
    read_config,
    recordings_dir,
)
from cotal_tui.keymap import load_keymap


def test_every_file_is_under_the_one_home_with_the_tilde_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COTAL_HOME", "~/ch")
    home = tmp_path / "ch"
    assert config_path() == home / "config.toml"
    assert chat_history_path() == home / "chat_history"
    assert recordings_dir() == home / "recordings"
    home.mkdir()
    (home / "keymap.toml").write_text('"feed.follow" = "f"\n')
    assert load_keymap() == ({"feed.follow": "f"}, None)
    (home / "config.toml").write_text('[roster]\nsort = "role"\n[notify]\nenabled = true\n')
    assert load_config().roster_sort == "role"
    assert notify_settings(None).terminal is True


def test_sources_strongest_first(tmp_path, monkeypatch):
    for k in ("COTAL_NOTIFY", "COTAL_NOTIFY_CMD", "COTAL_NOTIFY_ESCAPE"):
        monkeypatch.delenv(k, raising=False)
    s = notify_settings(None, home=tmp_path)
    assert set(s.sources.values()) == {"default"} and not s.enabled
    (tmp_path / "config.toml").write_text('[notify]\nescape = "osc777"\n')
    assert notify_settings(None, home=tmp_path).sources["style"] == "config.toml"
    monkeypatch.setenv("COTAL_NOTIFY_ESCAPE", "both")
    s = notify_settings(None, home=tmp_path)
    assert (s.style, s.sources["style"]) == ("both", "environment")
    s = notify_settings(argparse.Namespace(notify_escape="bell"), home=tmp_path)
    assert (s.style, s.sources["style"]) == ("bell", "flag")


def test_an_unreadable_file_is_one_sentence_for_each_reader(tmp_path):
    (tmp_path / "config.toml").write_text("[roster\n")
    cfg = read_config(tmp_path)
    assert cfg.error and cfg.tables == {}
    assert load_config(tmp_path).warning.startswith(f"config {tmp_path / 'config.toml'} ignored: ")
    assert notify_settings(None, home=tmp_path).warning.startswith("notifications: ")


def test_show_events_is_saved_beside_the_theme_and_read_back(tmp_path):
    """``[ui] show_events`` (the console's E key): written into the existing ``[ui]`` table,
    every other line kept; read back by the console's loader; a non-boolean is not used."""
    from cotal_tui.config import save_show_events

    assert load_config(tmp_path).show_events is False  # the default: frames hidden
    (tmp_path / "config.toml").write_text('# mine\n[ui]\ntheme = "nord"\n[roster]\nsort = "role"\n')
    save_show_events(True, tmp_path)
    assert load_config(tmp_path).show_events is True
    save_show_events(False, tmp_path)
    assert (tmp_path / "config.toml").read_text() == (
        '# mine\n[ui]\nshow_events = false\ntheme = "nord"\n[roster]\nsort = "role"\n')
    assert load_config(tmp_path).show_events is False
    (tmp_path / "config.toml").write_text('[ui]\nshow_events = "yes"\n')
    assert load_config(tmp_path).show_events is False
    assert any("[ui] show_events must be true or false" in p
               for p in config_problems(read_config(tmp_path)))
