"""On the demo's user-auth mesh each scripted agent may publish its own event channel and no
other agent's (events.md §1.2): the grant the demo writes, through the real exchange and callout."""

from __future__ import annotations

import json

from conftest import until
from support.userplane import post, user_plane  # noqa: F401

from cotal_tui.demo.activity import FRAME_KIND, PROTOCOL, event_channel
from cotal_tui.demo.mesh import grant_team_agent
from cotal_tui.demo.team import Team
from meshview.wire.subjects import chat_subject


def _frame(a, seq: int) -> bytes:
    part = {"kind": FRAME_KIND, "protocol": PROTOCOL, "threadId": "t1", "runId": "r1", "epoch": "e1",
            "seq": seq, "events": [{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}]}
    return json.dumps({"id": f"frame-{a.name}-{seq}", "ts": 1, "space": "ua", "channel": event_channel(a),
                       "from": {"id": a.id, "name": a.name}, "parts": [part]}).encode()


async def test_a_demo_agent_publishes_its_own_event_channel_only(user_plane):  # noqa: F811
    u = user_plane.add_user("evie", ("spawn",))
    team = Team(object(), user_plane.space, seed=1, agents=2, owners=(u.owner,))  # construction only
    ada, bram = team.members
    secret = grant_team_agent(user_plane.plane, ada)
    grant_team_agent(user_plane.plane, bram)
    s, b = await post(user_plane.exchange_url + "/exchange",
                      {"owner": u.owner, "actor": ada.name, "actorToken": secret})
    assert s == 200, b
    errors: list[str] = []

    async def on_error(e):
        errors.append(str(e))

    nc = await user_plane.connect(b["token"], error_cb=on_error)
    infra = await user_plane.service_nc()
    try:
        own = chat_subject(user_plane.space, ada.id, event_channel(ada))
        ack = await nc.jetstream().publish(own, _frame(ada, 1), headers={"Nats-Msg-Id": "frame-ada-1"})
        assert ack.seq > 0  # stored: the agent's own channel is granted

        other = chat_subject(user_plane.space, bram.id, event_channel(bram))
        await nc.publish(other, _frame(ada, 2))  # posing as bram on bram's channel
        await nc.flush()
        await until(lambda: any("permissions violation" in e.lower() and other in e for e in errors),
                    5, "the broker refusing the other agent's event subject")

        js = infra.jetstream()
        got = await js.get_last_msg(f"CHAT_{user_plane.space}", own)
        assert json.loads(got.data)["parts"][0]["seq"] == 1
        info = await js.stream_info(f"CHAT_{user_plane.space}", subjects_filter=other)
        assert not (info.state.subjects or {}).get(other)  # nothing landed on bram's channel
    finally:
        await nc.close()
        await infra.close()
