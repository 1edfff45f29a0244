"""The wire rules, driven through the production path rather than the wire functions alone.

``meshview.wire`` is the single source of truth for channel settings, presence liveness,
heartbeat-only rewrites, tap subjects and the history window. These tests feed the observer's
folds and the model (``RegistryFold`` -> ``MeshModel.effective``/``snapshot``, the observer's
presence callback -> the roster, the observer's tap plan, the history backfill) and compare
what they show with what the wire rule says.
"""

from __future__ import annotations

import itertools
import json

import msgspec
import pytest
from conftest import load_vectors
from nats.aio.client import Client as NATS

import meshview.model.mesh
from meshview import wire
from meshview.observe.buckets import RegistryFold
from meshview.observe.history import History
from meshview.observe.streamorder import Stored
from meshview.observe.kvwatch import KvEntry
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.model.snapshot import PresenceEvent
from meshview.wire import ChannelConfig, ChannelDefaults, Presence, PresenceCondition
from meshview.wire.subjects import parse_subject

PRESENCE = load_vectors("presence.json")
NOW = 1_710_000_600_000.0


def entry(key: str, value: object | None, op: str = "PUT") -> KvEntry:
    raw = b"" if value is None else value if isinstance(value, bytes) else json.dumps(value).encode()
    return KvEntry(key, raw, op, 1)


def observer(model: MeshModel, **kw) -> Observer:
    """A real Observer that is never started: its callbacks and plans are pure."""
    return Observer(NATS(), model.space, model, **kw)


# ---- channel settings: wire.effective_* ---------------------------------------------------

CHANNELS = {  # channel record, or None for a channel known only from traffic
    "bogus-class": {"deliveryClass": "bogus"},
    "live": {"deliveryClass": "live"},
    "no-replay": {"replay": False},
    "own-window": {"replayWindow": "90s"},
    "empty-window": {"replayWindow": ""},
    "bad-window": {"replayWindow": "2w"},
    "bare": {},
    "traffic-only": None,
}
DEFAULTS = [None, {"deliveryClass": "live", "replayWindow": "1h", "replay": True},
            {"deliveryClass": "nonsense", "replayWindow": "1x", "replay": False}]


def registry_model(defaults: dict | None) -> MeshModel:
    m = MeshModel("main", clock=lambda: NOW)
    fold = RegistryFold(m, "cotal_channels_main")
    if defaults is not None:
        fold.on_entry(entry("=defaults", defaults), True)
    for name, cfg in CHANNELS.items():
        if cfg is not None:
            fold.on_entry(entry(name, cfg), True)
    fold.on_ready({"=defaults", *(n for n, c in CHANNELS.items() if c is not None)})
    m.set_retained_counts({"traffic-only": 3})
    return m


def test_bogus_delivery_class_shows_durable():
    m = registry_model(None)
    info = {c.name: c for c in m.snapshot().channels}
    assert wire.effective_class(ChannelConfig(deliveryClass="bogus"), None) == "durable"
    assert info["bogus-class"].delivery_class == "durable"
    assert m.effective("bogus-class").delivery_class == "durable"


@pytest.mark.parametrize("defaults", DEFAULTS, ids=["no-defaults", "defaults", "bad-defaults"])
def test_channel_settings_follow_the_wire_rules(defaults):
    m = registry_model(defaults)
    d = msgspec.convert(defaults, ChannelDefaults) if defaults is not None else None
    info = {c.name: c for c in m.snapshot().channels}
    assert set(info) == set(CHANNELS)
    for name, raw in CHANNELS.items():
        c = msgspec.convert(raw, ChannelConfig) if raw is not None else None
        want = (wire.effective_replay(c, d), wire.effective_class(c, d),
                wire.effective_window(c, d))
        ci, eff = info[name], m.effective(name)
        assert (ci.replay, ci.delivery_class, ci.replay_window) == want, name
        assert (eff.replay, eff.delivery_class, eff.replay_window) == want, name
        assert m.replay_floor(name, NOW) == wire.replay_floor(c, d, NOW), name


# ---- presence: liveness and heartbeat-only rewrites ------------------------------------------

def presence_of(raw: dict, **changes) -> Presence:
    return msgspec.structs.replace(msgspec.convert(raw, Presence), **changes)


def put(obs: Observer, p: Presence) -> None:
    obs.feed_presence(entry(p.card.id, msgspec.json.encode(p)))


@pytest.mark.parametrize("case", PRESENCE, ids=[c["name"] for c in PRESENCE])
def test_presence_vectors_through_the_roster(case):
    """The observer's presence callback and the model's reducer show what the wire decides."""
    m = MeshModel("main", clock=lambda: float(case["now"]))
    obs = observer(m)
    if "previous" in case:  # the record the roster held for the key before this one
        put(obs, presence_of(case["previous"]))
    value = case.get("value")
    obs.feed_presence(entry(case["key"], value.encode() if isinstance(value, str) else value,
                            case["operation"]))
    exp = case["expect"]
    peer = m.peer(case["key"])
    if exp["action"] in ("apply", "mark-offline"):
        assert peer is not None and peer.status == exp["derivedStatus"]
    elif exp["action"] == "drop":
        assert peer is None and m.rejection_count(f"presence:{exp['reason']}") == 1
    else:
        assert peer is None and m.rejection_count() == 0
    assert m.ttl_ms == wire.PRESENCE_TTL_MS
    assert meshview.model.mesh.PRESENCE_TTL_MS is wire.PRESENCE_TTL_MS  # one definition


def _live_records() -> list[Presence]:
    """Every fresh, non-offline record of the vectors, with variants that change one thing an
    operator sees (condition text, card description/tags/name) besides the ts."""
    out = []
    for c in PRESENCE:
        for raw in (c.get("previous"), c.get("value") if c["expect"]["action"] == "apply" else None):
            if isinstance(raw, dict) and raw.get("status") in ("idle", "waiting", "working"):
                out.append(presence_of(raw, ts=NOW - 3000))
    base = out[0]
    cond = PresenceCondition("approval", "permission_prompt", "allow write?", NOW - 9000)
    waiting = msgspec.structs.replace(base, status="waiting", condition=cond)
    out += [
        waiting,
        msgspec.structs.replace(waiting, condition=msgspec.structs.replace(cond, message="deploy?")),
        msgspec.structs.replace(base, card=msgspec.structs.replace(base.card, description="new")),
        msgspec.structs.replace(base, card=msgspec.structs.replace(base.card, tags=["py"])),
        msgspec.structs.replace(base, card=msgspec.structs.replace(base.card, name="alicia")),
        msgspec.structs.replace(base, activitySince=NOW - 5000, activeAt=NOW - 4000),  # clocks
    ]
    return out


PAIRS = [(a, b) for a, b in itertools.product(_live_records(), repeat=2)
         if a.card.id == b.card.id]


@pytest.mark.parametrize("prev,new", PAIRS)
def test_heartbeat_only_agrees_with_the_wire(prev, new):
    """A second record makes a roster event exactly when the wire says it is not only a
    heartbeat (the observer's callback, the bounded record, the model's reducer)."""
    m = MeshModel("main", clock=lambda: NOW, record_events=True)
    obs = observer(m)
    put(obs, prev)
    m.take_events()
    put(obs, msgspec.structs.replace(new, ts=NOW - 1000))
    events = [e for e in m.take_events() if isinstance(e, PresenceEvent)]
    assert bool(events) is not wire.is_heartbeat_only(prev, new)
    assert m.peer(prev.card.id).ts == NOW - 1000  # the heartbeat itself always lands


# ---- subjects: wire.tap_subjects and the builders ---------------------------------------------

TAP_CASES = [  # (options, has_credential) -> (admin, open_mesh) of the wire call
    (dict(tap="auto"), False, dict(admin=True, open_mesh=True)),
    (dict(tap="auto"), True, dict(admin=True)),
    (dict(tap="open"), True, dict(admin=True, open_mesh=True)),
    (dict(tap="admin"), False, dict(admin=True)),
    (dict(tap="chat"), False, dict(admin=False)),
    (dict(tap="open", dms=False), False, dict(admin=False)),
]


@pytest.mark.parametrize("opts,cred,rule", TAP_CASES)
@pytest.mark.parametrize("root", ["cotal", "xcotal"])
def test_observer_taps_are_wire_tap_subjects(opts, cred, rule, root, monkeypatch):
    """The observer's taps and DM visibility come from the wire (a changed root follows)."""
    monkeypatch.setattr("meshview.wire.subjects.ROOT", root)
    obs = observer(MeshModel("t-1"), options=ObserverOptions(**opts), has_credential=cred)
    plan = obs.tap_plan()
    assert plan == wire.tap_subjects("t-1", **rule) and plan[0].startswith(root + ".t-1.")
    obs._subs = dict.fromkeys(plan)
    obs._publish_tap()
    assert obs.model.status.tap == tuple(plan)
    assert obs.model.status.dm_visible is wire.dm_visible(plan, "t-1") is (rule["admin"])


async def test_demo_team_publishes_on_wire_subjects(monkeypatch):
    from cotal_tui.demo.team import Team

    monkeypatch.setattr("meshview.wire.subjects.ROOT", "xcotal")
    team = Team(NATS(), space="demo")
    sent: list[tuple[str, dict]] = []

    async def capture(subject: str, msg: dict, wait_ack: bool = True) -> None:
        sent.append((subject, msg))

    team._publish = capture  # type: ignore[method-assign]
    a, b = team.members[0], team.members[1]
    await team.post(a, "team.backend", "hi")
    await team.dm(a, b, "psst")
    await team.anycast(a, b.role, "help")
    assert [s for s, _ in sent] == [
        wire.chat_subject("demo", a.id, "team.backend"),
        wire.inst_subject("demo", b.id, a.id),
        wire.svc_subject("demo", b.role, a.id),
    ]
    monkeypatch.setattr("meshview.wire.subjects.ROOT", "cotal")
    parse_subject.cache_clear()
    for subject, msg in sent:  # and a reader accepts each one once the root is the real one
        d = wire.decode_delivery(subject.replace("xcotal.", "cotal.", 1), json.dumps(msg).encode())
        assert type(d) is wire.Delivery and d.sender == a.id, d


# ---- history: the window floor is wire.replay_floor ---------------------------------------------

class CannedHistory(History):
    """History whose broker read is replaced by rows decoded by the real wire decoder."""

    def __init__(self, model: MeshModel, stored: dict[str, list[float]]) -> None:
        super().__init__(None, "main", model)
        self.stored, self.filters = stored, []

    async def read_stored(self, stream: str, filt: str, limit: int) -> list[Stored]:
        self.filters.append(filt)
        ch = next((c for c in self.stored if filt == wire.chat_pattern("main", c)), None)
        out = []
        for i, ts in enumerate(self.stored.get(ch, [])[-limit:]):
            body = {"id": f"{ch}-{i}", "ts": ts, "space": "main", "channel": ch,
                    "from": {"id": "local.ada", "name": "ada"}, "parts": [{"kind": "text", "text": "x"}]}
            d = wire.decode_delivery(f"cotal.main.chat.local.ada.{ch}", json.dumps(body).encode(),
                                     history=True)
            assert type(d) is wire.Delivery
            out.append(Stored(stream, i + 1, ts, d))
        return out


@pytest.mark.parametrize("defaults", DEFAULTS, ids=["no-defaults", "defaults", "bad-defaults"])
async def test_history_window_floor_is_the_wire_rule(defaults):
    m = registry_model(defaults)
    d = msgspec.convert(defaults, ChannelDefaults) if defaults is not None else None
    ages_ms = [30 * 86_400_000, 2 * 3_600_000, 50 * 60_000, 60_000, 5_000]
    stored = {name: [NOW - a for a in ages_ms] for name in CHANNELS}
    h = CannedHistory(m, stored)
    rows = (await h.backfill(sorted(CHANNELS), limit=50)).rows
    assert sorted(set(h.filters)) == sorted(wire.chat_pattern("main", c) for c in CHANNELS
                                            if wire.effective_replay(_cfg(c), d))
    for name in CHANNELS:
        c = _cfg(name)
        floor = wire.replay_floor(c, d, NOW)
        want = [] if not wire.effective_replay(c, d) else [
            ts for ts in stored[name] if floor is None or ts >= floor]
        got = [r.message.ts for r in rows if r.target == name]
        assert got == want, (name, floor)


def _cfg(name: str) -> ChannelConfig | None:
    raw = CHANNELS[name]
    return msgspec.convert(raw, ChannelConfig) if raw is not None else None


async def test_history_since_floor_and_dm_filter():
    """A catch-up keeps rows from ``since_ts`` on, and reads DMs on the wire's inst pattern."""
    m = registry_model(None)
    h = CannedHistory(m, {"bare": [NOW - 10_000, NOW - 1_000]})
    rows = (await h.backfill(["bare"], limit=10, since_ts=NOW - 5_000, dm_limit=5)).rows
    assert [r.message.ts for r in rows] == [NOW - 1_000]
    assert wire.kind_pattern("main", "inst") in h.filters


async def test_a_channel_whose_read_fails_leaves_the_others_rows_and_is_said():
    """One channel's history read fails (a timeout while the cluster elects): the other
    channels' rows are returned, and the failure is said, so the start-up prefill can tell a
    short history from a whole one and ask again."""

    class OneFails(CannedHistory):
        async def read_stored(self, stream: str, filt: str, limit: int) -> list[Stored]:
            if filt == wire.chat_pattern("main", "down"):
                raise TimeoutError("no answer")
            return await super().read_stored(stream, filt, limit)

    m = registry_model(None)
    h = OneFails(m, {"up": [NOW - 2_000, NOW - 1_000], "down": [NOW - 1_500]})
    read = await h.backfill(["down", "up"], limit=10)
    assert [r.message.ts for r in read.rows] == [NOW - 2_000, NOW - 1_000]
    assert isinstance(read.failed, TimeoutError)
    whole = await CannedHistory(m, {"up": [NOW - 2_000]}).backfill(["up"], limit=10)
    assert whole.failed is None and len(whole.rows) == 1
