"""End to end: the real ``cotal watch`` console in a real terminal (tmux) against the real
broker and the scripted team. Keys go in with ``send-keys``; what the terminal shows comes
back with ``capture-pane``. Hostile text published by the test must appear escaped and must
not clear the screen or retitle the pane."""

from __future__ import annotations

import re

import pytest

from conftest import until
from support.team import steady_team
from support.tmux import needs_tmux

pytestmark = needs_tmux

HOSTILE = ("hostile \x1b[2J\x1b]0;pwned-title\x07 \u202eesrever\u202c in\u2061vis\u3164ible"
           "\U000e0041 end")


@pytest.fixture
async def team(nc, space):
    async with steady_team(nc, space, seed=3, agents=5, chat_interval=0.7) as t:
        yield t


async def test_console_in_tmux_keys_and_hostile_text(broker, space, team, tmux, tmp_path):
    await tmux.watch(broker.url, space, tmp_path)
    first = team.members[0]
    # the console comes up with the team's roster, tabs and status bar
    await tmux.until(lambda s: "roster ·" in s and "connected" in s and "1:all" in s,
                     what="console up")
    await tmux.until(lambda s: f"{first.name}/{first.role}" in s, what="roster rows")
    # the console titles the pane itself once a second (``2 waiting · cotal t1``); the waiting
    # count moves with the team, so the title is checked by its shape, not by one value
    own_title = re.compile(rf"(\d+ waiting · )?cotal {re.escape(space)}")

    async def titled() -> bool:
        return own_title.fullmatch(await tmux.title()) is not None

    await until(titled, 10.0, "the console's own pane title")

    # hostile text: escaped visibly, and the screen survives it
    await team.post(first, "general", HOSTILE)
    s = await tmux.until(lambda s: "hostile" in s and "end" in s and "esrever" in s,
                         what="hostile row")
    assert "\\x1b[2J" in s and "\\x1b]0;pwned-title\\x07" in s and "\\u202eesrever\\u202c" in s
    assert "in\\u2061vis\\u3164ible\\U000e0041 end" in s  # invisibles: escaped, by property
    assert "roster ·" in s and "1:all" in s and "msg/s" in s  # nothing was cleared
    assert "pwned-title" not in await tmux.title()
    assert own_title.fullmatch(await tmux.title()), await tmux.title()

    # d: DM lens (the team DMs within a few beats)
    await tmux.keys("d")
    await tmux.until(lambda s: "direct messages ·" in s, what="DM lens")
    await tmux.keys("Escape")
    await tmux.until(lambda s: "roster ·" in s, what="back from DMs")

    # t: topology lens, then each view
    await tmux.keys("t")
    await tmux.until(lambda s: "topology · ① sequence ② matrix ③ map" in s, what="topology")
    await tmux.until(lambda s: "membership: traffic-only" in s, what="membership pill")
    await tmux.keys("2")
    await tmux.until(lambda s: "heat ░▒▓█" in s, what="matrix")
    await tmux.keys("Escape")

    # /: search narrows the feed to the hostile row's sender text
    await tmux.until(lambda s: "roster ·" in s, what="body")
    await tmux.keys("/")
    await tmux.until(lambda s: "search: sender" in s, what="search box")
    await tmux.keys("esrever", "Enter")
    s = await tmux.until(lambda s: "/esrever" in s, what="filtered feed")
    assert "hostile" in s
    await tmux.keys("Escape", "Escape")

    # ?: help for the focused panel, a pager: other keys do nothing, G goes to the end, q closes
    await tmux.keys("?")
    await tmux.until(lambda s: "cotal console - help" in s and "context: feed panel" in s
                     and "help · lines 1-" in s, what="help")
    await tmux.keys("x")
    await tmux.keys("G")
    s = await tmux.until(lambda s: "· END ·" in s, what="help at its end")
    assert "cotal console - help" in s and "terminal panes (attach, peek, tile)" in s
    assert "contract rev" in s and "q back" in s  # the last rows, none cut
    await tmux.keys("q")
    await tmux.until(lambda s: "cotal console - help" not in s, what="help closed")

    # q: quits with 0 and restores the terminal (no console left on screen)
    await tmux.keys("q")
    s = await tmux.until(lambda s: "console-exit=0" in s, what="exit")
    assert "roster ·" not in s and "msg/s" not in s


async def test_console_in_tmux_sends_as_the_operator_only_when_asked(broker, nc, space, team,
                                                                    tmux, tmp_path):
    """Invisible until the first send: nothing from the console on the wire while it watches;
    ``c`` + text + Enter posts once, as the operator; after ``q`` its presence goes offline."""
    import json

    seen: list[tuple[str, dict]] = []

    async def probe(m):
        try:
            seen.append((m.subject, json.loads(m.data)))
        except ValueError:
            pass

    await nc.subscribe(f"cotal.{space}.>", cb=probe)
    await nc.subscribe(f"$KV.cotal_presence_{space}.>", cb=probe)
    await nc.flush()
    team_ids = {m.id for m in team.members}

    def foreign() -> list[dict]:
        return [b for _, b in seen if isinstance(b, dict)
                and (b.get("from") or b.get("card") or {}).get("id") not in team_ids]

    await tmux.watch(broker.url, space, tmp_path, "--as tmux-op")
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, what="console up")
    # watching only: walk, open the DM and topology lenses (each Esc settles before the next key,
    # or the terminal would read Esc + key as Alt-key)
    await tmux.keys("j", "k", "t")
    await tmux.until(lambda s: "topology ·" in s, what="topology")
    await tmux.keys("Escape")
    await tmux.until(lambda s: "roster ·" in s, what="body again")
    assert foreign() == []
    await tmux.keys("c")
    # the composer's own hint line: a feed row also reads "ada → #general"
    await tmux.until(lambda s: "→ #general   enter send" in s, what="the composer")
    await tmux.keys("-l", "from tmux ✓")
    # a user sends what they see typed: on a loaded machine the draft can paint after Enter
    await tmux.until(lambda s: "from tmux ✓" in s, what="the draft in the composer")
    await tmux.keys("Enter")
    # the wire, not the 3 s receipt notice (a loaded machine can paint past it)
    await until(lambda: [b for b in foreign() if b.get("channel") == "general"], 20,
                "the post on the wire")
    posts = [b for b in foreign() if b.get("channel") == "general"]
    assert len(posts) == 1 and posts[0]["parts"][0]["text"] == "from tmux ✓"
    me = posts[0]["from"]["id"]
    assert me.endswith(".tmux_op") or me.endswith(".tmux-op") or "tmux" in me
    await tmux.until(lambda s: "from tmux ✓" in s, what="the post in the feed")
    await tmux.keys("q")
    await tmux.until(lambda s: "console-exit=0" in s, what="exit")
    offline = [b for _, b in seen if isinstance(b, dict) and (b.get("card") or {}).get("id") == me
               and b.get("status") == "offline"]
    assert offline, "the operator's offline record"
