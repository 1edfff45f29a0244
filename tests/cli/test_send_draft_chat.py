"""``cotal chat`` keeps an unsent line for editing and refuses a live peer's identity: the real command in a real terminal (tmux) against a real broker."""

from __future__ import annotations

import json

import nats

from conftest import until
from cotal_tui.demo.provision import provision_space
from support.observer import Heartbeat
from support.tmux import needs_tmux
from test_chat import PROMPT, _chat_cmd, _env, _prompt_line


@needs_tmux
async def test_a_line_the_broker_did_not_ack_comes_back_and_is_stored_once(fresh_broker, tmux,
                                                                         tmp_path):
    nc = await nats.connect(fresh_broker.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        await provision_space(nc, "chatty")
        await tmux.start(_chat_cmd(fresh_broker, "chatty", "--as", "op", "--connect-timeout",
                                   "1"), _env(tmp_path))
        await tmux.until(lambda s: _prompt_line(s) == PROMPT.strip(), what="the prompt")
        fresh_broker.stop(keep_store=True)
        await tmux.keys("keep this line", "Enter")
        await tmux.until(lambda s: "could not connect" in s
                         and _prompt_line(s) == f"{PROMPT}keep this line", 30,
                         what="the line back on the prompt")
        fresh_broker.start()
        await until(lambda: nc.is_connected, 15, "the broker back")
        await tmux.keys("Enter")  # the same line, unchanged: the same envelope
        js = nc.jetstream()

        async def stored() -> list:
            info = await js.stream_info("CHAT_chatty")
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                if info.state.messages:
                    m = await js.get_msg("CHAT_chatty", seq)
                    out.append(((m.headers or {}).get("Nats-Msg-Id"), json.loads(m.data)))
            return out

        got = await until(stored, 30, "the post stored")
        await tmux.until(lambda s: "op/operator → #general: keep this line" in s,
                         what="the post shown")
        await tmux.keys("C-d")
        await tmux.until(lambda s: "chat-exit=0" in s, 10, what="the exit")
        got = await stored()
        assert len(got) == 1, got
        msg_id, body = got[0]
        assert msg_id == body["id"] and body["parts"][0]["text"] == "keep this line"
    finally:
        await nc.close()


@needs_tmux
async def test_chat_as_a_live_agent_exits_1_naming_it(broker, nc, space, tmux, tmp_path):
    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")
    async with hb:
        await tmux.start(_chat_cmd(broker, space, "--as", "ada"), _env(tmp_path))
        s = await tmux.until(lambda s: "chat-exit=" in s, 20, what="the exit")
    assert "chat-exit=1" in s and "local.ada is held by the agent ada" in s
    assert "Traceback" not in s
    assert (await nc.jetstream().stream_info(f"CHAT_{space}")).state.messages == 0
