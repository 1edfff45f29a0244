"""A keymap with bad entries: each bad one (not a key, an id no binding has, a key its
neighbours keep, a value of the wrong kind) is named with its file and line and dropped; the
good ones still apply, and the console starts with them and says what it dropped."""

from __future__ import annotations

from support.console import StaticSession, build_model

from conftest import until
from cotal_tui.cli.config import console_start, known_bindings
from cotal_tui.keymap import check_bindings, key_problem, read_keymap

WIDE = (120, 40)
KEYMAP = '''[keymap]
"console.dms" = "x"
"console.topo" = "ctrl+shft+t"
"no.such-binding" = "z"
"feed.follow" = 3
"console.search" = "ctrl+f"
'''


def test_one_bad_value_keeps_the_good_ones_and_names_the_bad_one(tmp_path):
    path = tmp_path / "keymap.toml"
    path.write_text(KEYMAP)
    km = read_keymap(tmp_path)
    assert km.entries == {"console.dms": "x", "no.such-binding": "z", "console.search": "ctrl+f"}
    assert km.problems == [
        f"keymap {path}:3: console.topo = \"ctrl+shft+t\" dropped: 'shft' is not a modifier "
        "(modifiers: shift, alt, ctrl, super, hyper, meta)",
        f"keymap {path}:5: feed.follow = 3 dropped: expected a key like \"ctrl+d\" or a list of keys",
    ]
    keymap, notice = console_start(tmp_path)
    assert keymap == {"console.dms": "x", "console.search": "ctrl+f"}
    assert notice == f"{km.problems[0]} (+2 more: `cotal config` lists them)"


def test_an_unknown_binding_id_and_a_taken_key_are_named(tmp_path):
    known = known_bindings()
    where = f"keymap {tmp_path / 'keymap.toml'}"
    good, problems = check_bindings({"no.such-binding": "z", "console.dms": "t",
                                     "console.quit": "Q"}, known, where, {"no.such-binding": 4})
    assert good == {"console.quit": "Q"}
    assert problems == [
        f"{where}:4: no.such-binding dropped: no binding has that id; "
        "`cotal config` lists the binding ids",
        f"{where}: console.dms = \"t\" dropped: t is already console.topo in ConsoleScreen",
    ]
    # a near id is offered from the same prefix
    _, (said,) = check_bindings({"console.dm": "x"}, known)
    assert "console.* ids: console.activity, console.back," in said
    # two remaps that swap keys are no clash; one half dropped leaves the other clashing
    good, problems = check_bindings({"console.dms": "t", "console.topo": "d"}, known)
    assert good == {"console.dms": "t", "console.topo": "d"} and problems == []
    (tmp_path / "keymap.toml").write_text('"console.dms" = "t"\n"console.topo" = "bogus"\n')
    keymap, notice = console_start(tmp_path)
    assert keymap == {} and "(+1 more" in notice


def test_keys_textual_knows():
    for ok in ("d", "D", "ctrl+d", "?", "question_mark", "space", "enter", "f5", "pageup",
               "shift+tab", "left_square_bracket", "slash", "plus", "+"):
        assert key_problem(ok) is None, ok
    assert "not a key name Textual knows" in key_problem("ctrl+foo")
    assert "not a modifier" in key_problem("cmd+x")
    assert key_problem("ctrl++") == "write the + key as plus (ctrl+plus)"
    assert key_problem("ctrl+ctrl+x") == "a modifier given twice"


def test_a_file_that_does_not_parse_is_named_whole(tmp_path):
    (tmp_path / "keymap.json").write_text("{not json")
    keymap, notice = console_start(tmp_path)
    assert keymap == {} and notice.startswith(f"keymap {tmp_path / 'keymap.json'} ignored: ")


async def test_the_console_starts_with_the_good_bindings_and_says_what_it_dropped(
        tmp_path, monkeypatch):
    from cotal_tui.app import CotalApp
    from cotal_tui.screens.console import ConsoleScreen

    (tmp_path / "keymap.toml").write_text(KEYMAP)
    (tmp_path / "config.toml").write_text('[ui]\ncolour = "red"\n')
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    keymap, notice = console_start()
    model, _ = build_model()
    app = CotalApp(session=StaticSession(model), keymap=keymap, notice=notice)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: app.last_notice == notice, what="the start-up notice")
        assert notice.startswith(f"unknown key [ui] colour in {tmp_path / 'config.toml'}:2")
        assert notice.endswith("(+3 more: `cotal config` lists them)")
        scr = next(s for s in app.screen_stack if isinstance(s, ConsoleScreen))
        await pilot.press("d")  # remapped away: d no longer opens the DM lens
        assert scr.lens == "body"
        await pilot.press("x")
        await until(pilot, lambda: scr.lens == "dms", what="x opens the DM lens")
        await pilot.press("escape", "t")  # the bad remap was dropped: t is still the topology
        await until(pilot, lambda: scr.lens == "topo", what="t opens the topology lens")
