"""The user's configuration: the one loader of ``$COTAL_HOME/config.toml`` and the places under
``$COTAL_HOME`` (:func:`meshview.link.home.cotal_home`) where the console keeps its files.

Every setting is taken from the first of its named sources that has it, strongest first:
a flag, the environment, ``config.toml``, the default (:data:`SOURCES`). A bad file or value never
stops a command: it is reported in one sentence and ignored.

Each key stands alone: an unknown table or key, or a value of the wrong kind, is named (file,
line, key, what was expected) by :func:`config_problems` and the rest of the file still applies.
:data:`KEYS` is every key the file may hold; ``cotal config`` prints the effective value of each
with its source (:func:`settings`).

Settings the console changes at run time (the roster's sort, ``s``) are written back into that
file by editing only their own line, so comments and other tables survive.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

from meshview.link.home import HOME_ENV, cotal_home
from meshview.lines.notify import SETTLE_S, STYLES, NotifySettings
from meshview.model.stalled import DEFAULT_STALL_MINUTES
from meshview.model.roster import ROSTER_LAYOUTS, ROSTER_SORTS
from widgets.fold import DEFAULT_MAX_LINES, MAX_LINES_LIMIT
from widgets.roster_find import GROUPS, MAX_PINS, pins_from, pins_ok, toml_strings

SOURCES = ("flag", "environment", "config.toml", "default")
TRUTHY = ("1", "true", "yes", "on")

T = TypeVar("T")
DEFAULT_THEME = "cotal-dark"  # the console's own dark theme (cotal_tui/themes.py)
THEME_ENV = "COTAL_THEME"  # between --theme and [ui] theme (cotal_tui/themes.py pick_theme)
MAX_SIZE = 100 * 1024 * 1024  # a recording's bound on disk (meshview.record.record.MAX_SIZE)


def _size(v: object) -> int | None:
    from meshview.record.record import parse_size

    if isinstance(v, bool) or not isinstance(v, (int, str)):
        return None
    try:
        return parse_size(str(v))
    except ValueError:
        return None


@dataclass(frozen=True)
class Key:
    """One key ``config.toml`` may hold: what a good value is (``expected``, said when it is
    not one) and the check."""

    expected: str
    ok: Callable[[object], bool]
    doc: str


def _text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


# table -> key -> what it takes: every key the program reads from config.toml
KEYS: dict[str, dict[str, Key]] = {
    "roster": {
        "sort": Key("one of " + ", ".join(ROSTER_SORTS), lambda v: v in ROSTER_SORTS,
                    "the roster's order (the console's s key changes and saves it)"),
        "group": Key("one of " + ", ".join(GROUPS), lambda v: v in GROUPS,
                     "the roster's grouping: by state, role or meta.host (the console's o key "
                     "changes and saves it)"),
        "pins": Key(f"a list of at most {MAX_PINS} agent ids (strings)", pins_ok,
                    "agents pinned to the top of the roster, by principal id (the console's * "
                    "key changes and saves it)"),
        "layout": Key("one of " + ", ".join(ROSTER_LAYOUTS), lambda v: v in ROSTER_LAYOUTS,
                      "the roster's rows: one line per agent (dense), wrapped (full), or dense "
                      "when the full rows would not fit (auto; the roster's L key changes and "
                      "saves it)"),
    },
    "notify": {
        "enabled": Key("true or false", lambda v: isinstance(v, bool),
                       "bell + desktop notification when an agent starts waiting"),
        "command": Key("a command line (a non-empty string)", _text,
                       "a command run per alert, the agent in its environment"),
        "escape": Key("one of " + ", ".join(STYLES), lambda v: v in STYLES,
                      "which notification escape"),
        "settle": Key("a number of seconds, 0 or more",
                      lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
                      "seconds an agent may leave waiting and still be in the same episode"),
        "stalled": Key("true or false", lambda v: isinstance(v, bool),
                       "also alert when a working agent looks stalled (nothing observed for "
                       "stalled_minutes)"),
        "stalled_minutes": Key("a number of minutes, more than 0",
                               lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                               and 0 < v < 1e7,
                               "minutes without any observed activity before working reads "
                               "stalled?"),
        "run_failed": Key("true or false", lambda v: isinstance(v, bool),
                          "also alert when an agent's run fails (RUN_ERROR on its event frames)"),
        "finished": Key("true or false", lambda v: isinstance(v, bool),
                        "also alert when an agent's run closed and it went idle (its event "
                        "frames and presence)"),
    },
    "ui": {
        "theme": Key("a theme name (a non-empty string)", _text, "the console's theme"),
        "show_events": Key("true or false", lambda v: isinstance(v, bool),
                           "the console's feed shows the agents' activity frames (the E key "
                           "toggles and saves it)"),
        "title_counts": Key("true or false", lambda v: isinstance(v, bool),
                            "the terminal title carries the waiting count (2 waiting · cotal main)"),
        "health": Key("true or false", lambda v: isinstance(v, bool),
                      "the console's status bar shows plane health (cotal watch --health): it "
                      "probes the manager and delivery planes every 15 s; off, nothing is sent"),
    },
    "feed": {
        "max_lines": Key(f"a whole number of lines, 0 (never fold) to {MAX_LINES_LIMIT}",
                         lambda v: type(v) is int and 0 <= v <= MAX_LINES_LIMIT,
                         "body lines a feed row shows before it folds to '… +N lines · Enter' "
                         "(the detail card shows all); 0 never folds"),
    },
    "attach": {
        "clipboard": Key("true or false", lambda v: isinstance(v, bool),
                         "raw cotal attach lets the seat write your clipboard (OSC 52; "
                         "cotal attach --clipboard)"),
        "titles": Key("true or false", lambda v: isinstance(v, bool),
                      "raw cotal attach lets the seat change your window title (OSC 0/1/2; "
                      "cotal attach --no-titles)"),
        "detach_keys": Key("detach keys: \"ctrl-]\", \"esc esc\", \"ctrl-b d\", several "
                           "separated by commas (or a list)", lambda v: _detach_ok(v),
                           "what detaches from an agent's terminal in the console and cotal "
                           "attach (COTAL_DETACH_KEY wins); Ctrl-] alone by default"),
        "fit": Key("true or false", lambda v: isinstance(v, bool),
                   "the console's attach pane resizes the seat to the pane (and back on "
                   "detach); the pane's f toggles it"),
    },
    "recordings": {
        "dir": Key("a folder (a non-empty string)", _text,
                   "where the palette's record writes when no file is named"),
        "max_size": Key("a size like \"100M\" (64k or more)", lambda v: _size(v) is not None,
                        "bound of a recording on disk, rotating at half"),
    },
}


def config_path(home: Path | None = None) -> Path:
    return (home or cotal_home()) / "config.toml"


def chat_history_path(home: Path | None = None) -> Path:
    """``cotal chat``'s input history (it holds what was typed: kept private)."""
    return (home or cotal_home()) / "chat_history"


def recordings_dir(home: Path | None = None) -> Path:
    """Where the console's palette ``record`` writes when no file is named."""
    return recordings_setting(home)[0]


def recordings_setting(home: Path | None = None) -> tuple[Path, str]:
    """``[recordings] dir`` (``~`` expanded), else ``$COTAL_HOME/recordings``; and its source."""
    v = _good(read_config(home), "recordings", "dir")
    if v is not None:
        return Path(str(v)).expanduser(), "config.toml"
    return (home or cotal_home()) / "recordings", "default"


def recording_max_size(args: argparse.Namespace | None = None,
                       home: Path | None = None) -> tuple[int, str]:
    """``--max-size``, then ``[recordings] max_size``, then 100M; and its source."""
    v = _good(read_config(home), "recordings", "max_size")
    return pick(MAX_SIZE, ("flag", getattr(args, "max_size", None)),
                ("config.toml", _size(v) if v is not None else None))


def attach_terminal(args: argparse.Namespace | None = None, home: Path | None = None
                    ) -> tuple[tuple[bool, str], tuple[bool, str]]:
    """What raw ``cotal attach`` lets a seat do to the operator's terminal, each with its
    source: the clipboard (``--clipboard``, ``[attach] clipboard``; off by default) and the
    window title (``--no-titles``, ``[attach] titles``; kept by default)."""
    cfg = read_config(home)
    clip = pick(False, ("flag", getattr(args, "clipboard", None)),
                ("config.toml", _good_bool(cfg, "attach", "clipboard")))
    titles = pick(True, ("flag", getattr(args, "titles", None)),
                  ("config.toml", _good_bool(cfg, "attach", "titles")))
    return clip, titles


def _detach_ok(v: object) -> bool:
    from attach.terminal.detach import DetachKeyError, parse_detach_keys

    if not isinstance(v, (str, list)):
        return False
    try:
        parse_detach_keys(v, source="detach_keys")
    except DetachKeyError:
        return False
    return True


DETACH_ENV = "COTAL_DETACH_KEY"


def detach_keys(home: Path | None = None):
    """What detaches (:class:`attach.terminal.detach.DetachKeys`) and its source:
    ``COTAL_DETACH_KEY``, then ``[attach] detach_keys``, then Ctrl-] alone. A bad value in
    either raises :class:`~attach.terminal.detach.DetachKeyError`, one sentence naming where it
    is (never a silent fall back: a detach key the user did not ask for is worse than none)."""
    from attach.terminal.detach import DEFAULT_KEYS, parse_detach_keys

    raw = os.environ.get(DETACH_ENV)
    if raw is not None:
        return parse_detach_keys(raw, source=DETACH_ENV), "environment"
    cfg = read_config(home)
    t = cfg.tables.get("attach")
    if isinstance(t, dict) and "detach_keys" in t:
        v = t["detach_keys"]
        return parse_detach_keys(v if isinstance(v, (str, list)) else None if v is None else
                                 (v,),  # a number or a table: refused by the parser, by name
                                 source=f"[attach] detach_keys ({cfg.where('attach', 'detach_keys')})"
                                 ), "config.toml"
    return DEFAULT_KEYS, "default"


def attach_fit(home: Path | None = None) -> tuple[bool, str]:
    """``[attach] fit``: the console's attach pane fits the seat to itself (on by default)."""
    return pick(True, ("config.toml", _good_bool(read_config(home), "attach", "fit")))


def ui_theme(flag: str | None = None, home: Path | None = None) -> tuple[str, str]:
    """The console's theme: ``--theme``, then ``[ui] theme``, then :data:`DEFAULT_THEME`; and
    its source. Whether the name is a theme the App has is the App's to check."""
    v = _good(read_config(home), "ui", "theme")
    return pick(DEFAULT_THEME, ("flag", flag or None),
                ("config.toml", str(v).strip() if v is not None else None))


@dataclass(frozen=True)
class ConfigFile:
    """``config.toml`` as read once; ``error`` says why it was ignored (``tables`` then empty)."""

    path: Path
    tables: dict[str, object] = field(default_factory=dict)
    error: str | None = None
    lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, key) -> line

    def where(self, table: str, key: str = "") -> str:
        """``/home/u/.cotal/config.toml:7`` (the line when it is known)."""
        n = self.lines.get((table, key))
        return f"{self.path}:{n}" if n else str(self.path)

    def table(self, name: str) -> dict[str, object]:
        """One ``[name]`` table (empty when absent); ValueError when it is not a table."""
        t = self.tables.get(name, {})
        if not isinstance(t, dict):
            raise ValueError(f"[{name}] must be a table")
        return t


def read_config(home: Path | None = None) -> ConfigFile:
    """The one reader of ``config.toml``: absent is empty, unreadable carries its reason."""
    path = config_path(home)
    if not path.is_file():
        return ConfigFile(path)
    try:
        raw = path.read_text()
        return ConfigFile(path, tomllib.loads(raw), lines=_key_lines(raw))
    except (OSError, ValueError) as e:
        return ConfigFile(path, error=str(e))


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_ASSIGN = re.compile(r'^\s*(?:"([^"]+)"|\'([^\']+)\'|([\w-]+))\s*=')  # a bare or quoted key


def _key_lines(raw: str) -> dict[tuple[str, str], int]:
    """Where each ``[table]`` header (key ``""``) and each key sits, for ``file:line``."""
    out: dict[tuple[str, str], int] = {}
    table = ""
    for n, line in enumerate(raw.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = m.group(1).strip().strip('"')
            out.setdefault((table, ""), n)
            continue
        m = _ASSIGN.match(line)
        if m:
            out.setdefault((table, next(g for g in m.groups() if g is not None)), n)
    return out


def _good(cfg: ConfigFile, table: str, key: str) -> object | None:
    """``[table] key`` when it is there and a good value (else None: the next source)."""
    t = cfg.tables.get(table)
    if not isinstance(t, dict) or key not in t:
        return None
    v = t[key]
    return v if KEYS[table][key].ok(v) else None


def _good_bool(cfg: ConfigFile, table: str, key: str) -> bool | None:
    """:func:`_good` for a key whose check takes only true or false, typed so."""
    v = _good(cfg, table, key)
    return v if isinstance(v, bool) else None


def _good_str(cfg: ConfigFile, table: str, key: str) -> str | None:
    """:func:`_good` for a key whose check takes only a string, typed so."""
    v = _good(cfg, table, key)
    return v if isinstance(v, str) else None


def _good_num(cfg: ConfigFile, table: str, key: str) -> float | None:
    """:func:`_good` for a key whose check takes only a number (never a bool), typed so."""
    v = _good(cfg, table, key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _shown(v: object) -> str:
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return type(v).__name__


def config_problems(cfg: ConfigFile) -> list[str]:
    """One sentence per thing in ``config.toml`` that is not used: the file when it does not
    parse; else each unknown table or key and each value of the wrong kind (file:line, key, what
    was expected). Everything else in the file applies."""
    if cfg.error is not None:
        return [f"config {cfg.path} ignored: {cfg.error}"]
    out: list[str] = []
    tables = ", ".join(f"[{t}]" for t in KEYS)
    for name, t in cfg.tables.items():
        known = KEYS.get(name)
        if known is None:
            what, at = (f"table [{name}]", cfg.where(name)) if isinstance(t, dict) else \
                (f"key {name}", cfg.where("", name))
            out.append(f"unknown {what} in {at}; known tables: {tables}")
            continue
        if not isinstance(t, dict):
            out.append(f"config {cfg.where('', name)}: {name} must be a table ([{name}]);"
                       " not used")
            continue
        for key, v in t.items():
            k = known.get(key)
            if k is None:
                out.append(f"unknown key [{name}] {key} in {cfg.where(name, key)}; known: "
                           + ", ".join(known))
            elif not k.ok(v):
                out.append(f"config {cfg.where(name, key)}: [{name}] {key} must be {k.expected};"
                           f" got {_shown(v)}, not used")
    return out


def pick(default: T, *layers: tuple[str, T | None]) -> tuple[T, str]:
    """The value of the strongest layer that has one (``layers`` strongest first, each a
    ``(source, value or None)``), and the name of its source."""
    for source, value in layers:
        if value is not None:
            return value, source
    return default, "default"


@dataclass(frozen=True)
class ConsoleConfig:
    """The console's own settings from ``config.toml`` (defaults when absent)."""

    roster_sort: str = "status"
    roster_group: str = "none"  # ``[roster] group``
    roster_pins: tuple[str, ...] = ()  # ``[roster] pins``: principal ids
    roster_layout: str = "auto"  # ``[roster] layout``: auto | dense | full
    show_events: bool = False  # ``[ui] show_events``: activity frames in the feed
    feed_max_lines: int = DEFAULT_MAX_LINES  # ``[feed] max_lines``: a row folds past them
    warning: str | None = None  # one sentence when the file was unreadable (then ignored)


def load_config(home: Path | None = None) -> ConsoleConfig:
    """The console's settings: ``[roster] sort = "status" | "name" | "role" | "activity"``,
    ``[ui] show_events = true | false``, ``[feed] max_lines = 6``."""
    cfg = read_config(home)
    if cfg.error is not None:
        return ConsoleConfig(warning=f"config {cfg.path} ignored: {cfg.error}")
    sort, _ = roster_sort(cfg)
    group, _ = roster_group(cfg)
    pins, _ = roster_pins(cfg)
    layout, _ = roster_layout(cfg)
    events, _ = ui_show_events(cfg)
    fold, _ = feed_max_lines(cfg)
    bad = [p for p in config_problems(cfg) if "[roster]" in p]
    return ConsoleConfig(roster_sort=sort, roster_group=group, roster_pins=pins, roster_layout=layout,
                         show_events=events, feed_max_lines=fold, warning=bad[0] if bad else None)


def feed_max_lines(cfg: ConfigFile) -> tuple[int, str]:
    """``[feed] max_lines`` when it is a good count, else :data:`DEFAULT_MAX_LINES`; and its
    source."""
    v = _good(cfg, "feed", "max_lines")
    return pick(DEFAULT_MAX_LINES, ("config.toml", v if type(v) is int else None))


def ui_title_counts(cfg: ConfigFile) -> tuple[bool, str]:
    """``[ui] title_counts`` when it is a boolean, else on; and its source."""
    return pick(True, ("config.toml", _good_bool(cfg, "ui", "title_counts")))


def ui_show_events(cfg: ConfigFile) -> tuple[bool, str]:
    """``[ui] show_events`` when it is a boolean, else off; and its source."""
    return pick(False, ("config.toml", _good_bool(cfg, "ui", "show_events")))


def ui_health(args: argparse.Namespace | None = None, home: Path | None = None) -> tuple[bool, str]:
    """``--health``, then ``[ui] health`` when it is a boolean, else off; and its source. Off means
    the console sends no probe at all (it stays invisible until the operator acts)."""
    return pick(False, ("flag", True if getattr(args, "health", False) else None),
                ("config.toml", _good_bool(read_config(home), "ui", "health")))


def roster_sort(cfg: ConfigFile) -> tuple[str, str]:
    """``[roster] sort`` when it is a sort, else ``status``; and its source."""
    v = _good(cfg, "roster", "sort")
    return pick("status", ("config.toml", str(v) if v is not None else None))


def roster_group(cfg: ConfigFile) -> tuple[str, str]:
    """``[roster] group`` when it is a grouping, else ``none``; and its source."""
    v = _good(cfg, "roster", "group")
    return pick("none", ("config.toml", str(v) if v is not None else None))


def roster_pins(cfg: ConfigFile) -> tuple[tuple[str, ...], str]:
    """``[roster] pins`` (principal ids) when it is a good list, else none; and its source."""
    v = _good(cfg, "roster", "pins")
    return pick((), ("config.toml", tuple(pins_from(v)) if v is not None else None))
def roster_layout(cfg: ConfigFile) -> tuple[str, str]:
    """``[roster] layout`` when it is a layout, else ``auto``; and its source."""
    v = _good(cfg, "roster", "layout")
    return pick("auto", ("config.toml", str(v) if v is not None else None))


def notify_settings(args: argparse.Namespace | None = None,
                    home: Path | None = None) -> NotifySettings:
    """``--notify``/``--notify-cmd``/``--notify-escape``, then ``COTAL_NOTIFY``/``COTAL_NOTIFY_CMD``
    /``COTAL_NOTIFY_ESCAPE``, then ``config.toml``'s ``[notify]`` table: ``enabled = true``,
    ``command = "..."``, ``escape = "osc777"``, ``settle = 5`` (seconds an agent may leave
    waiting and still be in the same episode). The environment and flags only switch on."""
    cfg = read_config(home)
    problems = [p for p in config_problems(cfg) if "[notify]" in p or cfg.error is not None]
    warning = f"notifications: {problems[0]}" if problems else None
    env = os.environ
    sources: dict[str, str] = {}
    enabled, stalled = _good_bool(cfg, "notify", "enabled"), _good_bool(cfg, "notify", "stalled")
    command, escape = _good_str(cfg, "notify", "command"), _good_str(cfg, "notify", "escape")
    settle, minutes = _good_num(cfg, "notify", "settle"), _good_num(cfg, "notify", "stalled_minutes")
    terminal, sources["terminal"] = pick(
        False,
        ("flag", True if getattr(args, "notify", False) else None),
        ("environment", True if env.get("COTAL_NOTIFY", "").strip().lower() in TRUTHY else None),
        ("config.toml", enabled))
    cmd, sources["command"] = pick(
        None,
        ("flag", getattr(args, "notify_cmd", None) or None),
        ("environment", env["COTAL_NOTIFY_CMD"]
         if env.get("COTAL_NOTIFY_CMD", "").strip() else None),
        ("config.toml", command))
    style, sources["style"] = pick(
        "osc9",
        ("flag", _style(getattr(args, "notify_escape", None))),
        ("environment", _style(env.get("COTAL_NOTIFY_ESCAPE"))),
        ("config.toml", escape))
    settle_s, sources["settle_s"] = pick(
        SETTLE_S, ("config.toml", float(settle) if settle is not None else None))
    stall_src: dict[str, str] = {}  # kept apart: ``sources`` is the waiting alerts' own
    alert_stalled, stall_src["stalled"] = pick(
        False, ("flag", True if getattr(args, "notify_stalled", False) else None),
        ("config.toml", stalled))
    flag_minutes = getattr(args, "stalled_minutes", None)
    stalled_minutes, stall_src["stalled_minutes"] = pick(
        DEFAULT_STALL_MINUTES,
        ("flag", float(flag_minutes) if flag_minutes is not None else None),
        ("config.toml", float(minutes) if minutes is not None else None))
    if alert_stalled and not terminal and not cmd:
        terminal, sources["terminal"] = True, stall_src["stalled"]  # --notify-stalled implies --notify
    # the runs of the event frames: each opted into as --notify-stalled is (and implies --notify)
    run_src: dict[str, str] = {}
    run_failed, run_src["run_failed"] = pick(
        False, ("flag", True if getattr(args, "notify_run_failed", False) else None),
        ("config.toml", _good_bool(cfg, "notify", "run_failed")))
    finished, run_src["finished"] = pick(
        False, ("flag", True if getattr(args, "notify_finished", False) else None),
        ("config.toml", _good_bool(cfg, "notify", "finished")))
    for on, src in ((run_failed, run_src["run_failed"]), (finished, run_src["finished"])):
        if on and not terminal and not cmd:
            terminal, sources["terminal"] = True, src
    return NotifySettings(terminal=terminal, command=cmd, style=style, settle_s=settle_s,
                          warning=warning, sources=sources, stalled=alert_stalled,
                          stalled_minutes=stalled_minutes, stalled_sources=stall_src,
                          run_failed=run_failed, finished=finished, run_sources=run_src)


def _style(v: object) -> str | None:
    return v if isinstance(v, str) and v in STYLES else None


_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def save_roster_sort(sort: str, home: Path | None = None) -> None:
    """Persist ``[roster] sort = "<sort>"``, touching no other line of the file."""
    if sort not in ROSTER_SORTS:
        raise ValueError(f"unknown roster sort {sort!r}")
    _save_key("roster", "sort", f'"{sort}"', home)


def save_roster_group(group: str, home: Path | None = None) -> None:
    """Persist ``[roster] group = "<group>"`` (the console's o key), touching no other line."""
    if group not in GROUPS:
        raise ValueError(f"unknown roster grouping {group!r}")
    _save_key("roster", "group", f'"{group}"', home)


def save_roster_pins(pins: list[str] | tuple[str, ...], home: Path | None = None) -> None:
    """Persist ``[roster] pins = [...]`` (principal ids, the console's * key), bounded to
    :data:`MAX_PINS`, touching no other line."""
    _save_key("roster", "pins", toml_strings(pins_from(list(pins))), home)
def save_roster_layout(layout: str, home: Path | None = None) -> None:
    """Persist ``[roster] layout = "<layout>"`` (the roster's L key), touching no other line."""
    if layout not in ROSTER_LAYOUTS:
        raise ValueError(f"unknown roster layout {layout!r}")
    _save_key("roster", "layout", f'"{layout}"', home)


def save_show_events(show: bool, home: Path | None = None) -> None:
    """Persist ``[ui] show_events = true|false`` (the console's E key), touching no other line."""
    _save_key("ui", "show_events", "true" if show else "false", home)


def _save_key(table_name: str, key: str, value: str, home: Path | None) -> None:
    """Set ``key = value`` (TOML text) in ``[table_name]``, adding the table when missing."""
    path = config_path(home)
    lines = path.read_text().splitlines() if path.is_file() else []
    entry = f"{key} = {value}"
    key_re = re.compile(rf"^\s*{re.escape(key)}\s*=")
    table = None
    at = None  # index of the table's header
    for i, line in enumerate(lines):
        m = _TABLE.match(line)
        if m:
            table = m.group(1).strip()
            if table == table_name:
                at = i
            continue
        if table == table_name and key_re.match(line):
            lines[i] = entry
            break
    else:
        if at is None:
            if lines and lines[-1].strip():
                lines.append("")
            lines += [f"[{table_name}]", entry]
        else:
            lines.insert(at + 1, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# -- the effective configuration, as `cotal config` prints it ----------------------------------

@dataclass(frozen=True)
class Setting:
    """One key's effective value: ``source`` one of :data:`SOURCES` (or ``keymap.toml``),
    ``origin`` which flag, variable or ``file:line`` gave it (None for a default)."""

    key: str
    value: object
    source: str
    origin: str | None
    doc: str
    flag: str | None = None  # the `cotal watch` flag that would win, when there is one
    env: str | None = None  # the environment variable read, when there is one


# environment-only keys: variable -> (the flag that wins over it, what it does, its default)
ENVIRONMENT: dict[str, tuple[str | None, str, str | None]] = {
    HOME_ENV: (None, "the Cotal home: config.toml, keymaps, mesh registry, history, logs",
               "~/.cotal"),
    "COTAL_DETACH_KEY": (None, "what detaches from an agent's terminal: ctrl-<c>, ^<c>, esc, "
                         "sequences such as \"esc esc\" or \"ctrl-b d\", separated by commas "
                         "(wins over [attach] detach_keys)", "ctrl-]"),
    "COTAL_READ_ONLY": ("--read-only", "the console never sends (1, true, yes or on)", None),
    "COTAL_LOG": (None, "log to $COTAL_HOME/log/ at this level (debug, info...; 0 is off)", None),
    "COTAL_DEBUG": (None, "show the traceback of an internal error (1)", None),
    "COTAL_BEARER_FILE": ("--bearer-file", "user-auth mesh: the file holding your bearer", None),
    "COTAL_SENTINEL_CREDS": ("--sentinel-creds", "user-auth mesh: the deny-all sentinel creds",
                             None),
    "COTAL_WEB_TOKEN": ("--web-token", "cotal watch --web refuses browsers without it "
                        "(its value is never printed; unset, one is generated and printed "
                        "once in the URL)", None),
}
SECRET = ("COTAL_WEB_TOKEN",)


def settings(args: argparse.Namespace | None = None, home: Path | None = None) -> list[Setting]:
    """Every setting the program reads, each with its value and where it came from. ``args``
    are ``cotal watch``'s flags (None: no flag given)."""
    cfg = read_config(home)
    env = os.environ
    home_dir = home or cotal_home()

    def file_origin(table: str, key: str, source: str) -> str | None:
        return cfg.where(table, key) if source == "config.toml" else None

    rows: list[Setting] = []
    sort, src = roster_sort(cfg)
    rows.append(Setting("roster.sort", sort, src, file_origin("roster", "sort", src),
                        KEYS["roster"]["sort"].doc))
    group, src = roster_group(cfg)
    rows.append(Setting("roster.group", group, src, file_origin("roster", "group", src),
                        KEYS["roster"]["group"].doc))
    pins, src = roster_pins(cfg)
    rows.append(Setting("roster.pins", list(pins), src, file_origin("roster", "pins", src),
                        KEYS["roster"]["pins"].doc))
    layout, src = roster_layout(cfg)
    rows.append(Setting("roster.layout", layout, src, file_origin("roster", "layout", src),
                        KEYS["roster"]["layout"].doc))
    n = notify_settings(args, home)
    for key, attr, source_key, flag, var in (
            ("notify.enabled", "terminal", "terminal", "--notify", "COTAL_NOTIFY"),
            ("notify.command", "command", "command", "--notify-cmd", "COTAL_NOTIFY_CMD"),
            ("notify.escape", "style", "style", "--notify-escape", "COTAL_NOTIFY_ESCAPE"),
            ("notify.settle", "settle_s", "settle_s", None, None),
            ("notify.stalled", "stalled", "stalled", "--notify-stalled", None),
            ("notify.stalled_minutes", "stalled_minutes", "stalled_minutes", "--stalled-minutes",
             None),
            ("notify.run_failed", "run_failed", "run_failed", "--notify-run-failed", None),
            ("notify.finished", "finished", "finished", "--notify-finished", None)):
        src = (n.sources.get(source_key) or n.stalled_sources.get(source_key)
               or n.run_sources[source_key])
        table_key = key.split(".")[1]
        origin = {"flag": flag, "environment": var,
                  "config.toml": cfg.where("notify", table_key)}.get(src)
        rows.append(Setting(key, getattr(n, attr), src, origin, KEYS["notify"][table_key].doc,
                            flag, var))
    theme, src = ui_theme(None, home)  # the order of cotal_tui.themes.pick_theme
    theme, src = pick(theme if src == "config.toml" else DEFAULT_THEME,
                      ("flag", getattr(args, "theme", None) or None),
                      ("environment", env.get(THEME_ENV, "").strip() or None),
                      (src, theme if src == "config.toml" else None))
    rows.append(Setting("ui.theme", theme, src, {"flag": "--theme", "environment": THEME_ENV}.get(
        src, file_origin("ui", "theme", src)), KEYS["ui"]["theme"].doc, "--theme", THEME_ENV))
    show, src = ui_show_events(cfg)
    rows.append(Setting("ui.show_events", show, src, file_origin("ui", "show_events", src),
                        KEYS["ui"]["show_events"].doc))
    counts, src = ui_title_counts(cfg)
    rows.append(Setting("ui.title_counts", counts, src, file_origin("ui", "title_counts", src),
                        KEYS["ui"]["title_counts"].doc))
    fold, src = feed_max_lines(cfg)
    rows.append(Setting("feed.max_lines", fold, src, file_origin("feed", "max_lines", src),
                        KEYS["feed"]["max_lines"].doc))
    health_on, src = ui_health(args, home)
    rows.append(Setting("ui.health", health_on, src, "--health" if src == "flag" else
                        file_origin("ui", "health", src), KEYS["ui"]["health"].doc, "--health"))
    rdir, src = recordings_setting(home)
    rows.append(Setting("recordings.dir", str(rdir), src, file_origin("recordings", "dir", src),
                        KEYS["recordings"]["dir"].doc))
    size, src = recording_max_size(args, home)
    rows.append(Setting("recordings.max_size", size, src,
                        "--max-size" if src == "flag" else file_origin("recordings", "max_size", src),
                        KEYS["recordings"]["max_size"].doc, "--max-size"))
    (clip, src), (titles, tsrc) = attach_terminal(args, home)
    rows.append(Setting("attach.clipboard", clip, src,
                        "--clipboard" if src == "flag" else file_origin("attach", "clipboard", src),
                        KEYS["attach"]["clipboard"].doc))
    rows.append(Setting("attach.titles", titles, tsrc,
                        "--no-titles" if tsrc == "flag" else file_origin("attach", "titles", tsrc),
                        KEYS["attach"]["titles"].doc))
    try:
        keys, ksrc = detach_keys(home)
        kval: object = keys.spec
    except ValueError as e:  # DetachKeyError: shown as the problem it is
        kval, ksrc = f"(refused: {e})", "environment" if os.environ.get(DETACH_ENV) is not None \
            else "config.toml"
    rows.append(Setting("attach.detach_keys", kval, ksrc,
                        DETACH_ENV if ksrc == "environment"
                        else file_origin("attach", "detach_keys", ksrc),
                        KEYS["attach"]["detach_keys"].doc, None, DETACH_ENV))
    fit, fsrc = attach_fit(home)
    rows.append(Setting("attach.fit", fit, fsrc, file_origin("attach", "fit", fsrc),
                        KEYS["attach"]["fit"].doc))
    rows.append(Setting("chat.history", str(chat_history_path(home_dir)), "default", None,
                        "cotal chat's input history (under the Cotal home)"))
    for var, (flag, doc, default) in ENVIRONMENT.items():
        raw = env.get(var)
        if raw is None or (var != "COTAL_DETACH_KEY" and not raw.strip()):
            value: object = default
            src, origin = "default", None
        else:
            value = "(set)" if var in SECRET else raw
            src, origin = "environment", var
        if var == HOME_ENV:
            value = str(home_dir)
        if flag and args is not None and getattr(args, flag[2:].replace("-", "_"), None):
            value = "(set)" if var in SECRET else getattr(args, flag[2:].replace("-", "_"))
            src, origin = "flag", flag
        rows.append(Setting(var, value, src, origin, doc, flag, var))
    return rows
