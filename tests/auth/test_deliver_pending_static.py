"""``cotal deliver pending`` on a static-auth mesh: the space's read view (an admin view minted
from the seed, the grant the reference's verb rides) reads an agent's DM durable and its held
DMs, with no broker violation; a per-user-auth mesh is refused by name before the network."""

from __future__ import annotations

import json

from nats.js import api

from conftest import until
from test_auth_static_actions import SPACE, cli, infra, mesh, violations  # noqa: F401 (fixture)
from meshview.wire.messages import EndpointRef, encode_message
from meshview.wire.names import bucket_names
from meshview.wire.outbound import build_message


async def test_the_read_view_reads_an_agents_dm_durable(mesh):  # noqa: F811
    nc = await infra(mesh)
    try:
        js = nc.jetstream()
        kv = await js.key_value(bucket_names(SPACE).presence)
        agent = mesh.team.members[0]

        async def record():
            e = await kv.get(agent.id)
            return json.loads(e.value) if e and e.value else None

        await until(record, 10, "the agent's presence record")
        uid = (await record())["lifecycleUid"]
        owner, actor = agent.id.split(".")
        durable = f"dm_{owner}-{actor}-{uid}"
        await js.add_consumer(f"DM_{SPACE}", api.ConsumerConfig(
            durable_name=durable, filter_subject=f"cotal.{SPACE}.inst.{agent.id}.>",
            ack_policy=api.AckPolicy.EXPLICIT, ack_wait=60,
            deliver_policy=api.DeliverPolicy.NEW))
        msg = build_message(SPACE, EndpointRef(id="local.stager", name="stager"), "held",
                            to=agent.id)
        await js.publish(f"cotal.{SPACE}.inst.{agent.id}.local.stager", encode_message(msg))
        before = len(violations(mesh))
        r = cli(mesh, "deliver", "pending", agent.name, "--json")
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["durable"] == durable and got["pending"] == 1
        assert [(c["id"], c["from"]) for c in got["candidates"]] == [(msg.id, "local.stager")]
        assert violations(mesh)[before:] == []
        await js.delete_consumer(f"DM_{SPACE}", durable)
    finally:
        await nc.close()


def test_a_user_auth_mesh_is_refused_by_name_before_the_network(tmp_path):
    import os
    import subprocess
    import sys
    import time

    bearer = tmp_path / "bearer"
    bearer.write_text("not-a-real-bearer")
    bearer.chmod(0o600)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "deliver", "pending", "bram",
                        "--server", "nats://127.0.0.1:1", "--space", "ua",
                        "--bearer-file", str(bearer), "--connect-timeout", "5"],
                       capture_output=True, text=True, timeout=30,
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("COTAL_")},
                            "COTAL_HOME": str(tmp_path / "home")})
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "per-user-auth mesh" in r.stderr and "nothing was read" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 5  # no connect attempt waited out
