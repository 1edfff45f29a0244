"""What the side buckets say: the channel registry, the membership feed, manager leases.

Each class folds one KV watch (:class:`~meshview.observe.kvwatch.KvWatch` callbacks) into the model;
bad values are counted as rejections, never raised. The presence bucket has its own rules
(``meshview.wire.presence`` and :mod:`meshview.model.roster`).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from meshview.model.mesh import MeshModel
from meshview.model.snapshot import MemberView
from meshview.wire import (
    ChannelConfig,
    ChannelDefaults,
    decode_channel_config,
    decode_channel_defaults,
    decode_membership,
    is_event_channel,
)
from meshview.wire.messages import CHANNEL_DEFAULTS_KEY, MEMBERSHIP_FEED_KEY

MANAGER_TTL_MS = 12_000.0
LEASE_PREFIX = "lease."


class RegistryFold:
    """``cotal_channels_<space>``: channel configs and ``=defaults``, as the wire decodes them."""

    def __init__(self, model: MeshModel, bucket: str) -> None:
        self.model, self.bucket = model, bucket
        self.configs: dict[str, ChannelConfig] = {}
        self.defaults = ChannelDefaults()

    def on_entry(self, e: Any, initial: bool) -> None:
        op = e.operation or "PUT"
        if e.key == CHANNEL_DEFAULTS_KEY:
            d = decode_channel_defaults(e.value) if op == "PUT" else None
            self.defaults = d or ChannelDefaults()
        elif e.key.startswith("="):
            return
        elif op != "PUT":
            self.configs.pop(e.key, None)
        else:
            c = decode_channel_config(e.value)
            if c is None:
                self.model.apply_rejection("registry:malformed", f"$KV.{self.bucket}.{e.key}")
                return
            self.configs[e.key] = c
        if not initial:
            self.model.set_channel_registry(self.configs, self.defaults)

    def on_ready(self, keys: set[str]) -> None:
        for k in list(self.configs):
            if k not in keys:
                del self.configs[k]
        self.model.set_channel_registry(
            {k: v for k, v in self.configs.items() if not is_event_channel(k)}, self.defaults)


class MembershipFold:
    """``cotal_membership_<space>``: per-member subscriptions and the daemon's ``=feed`` stamp.
    Changes are batched: :meth:`flush` hands them to the model (the observer's tick)."""

    def __init__(self, model: MeshModel, connected: Callable[[], bool]) -> None:
        self.model, self.connected = model, connected
        self.members: dict[str, MemberView] = {}
        self.feed_at: float | None = None
        self.dirty = False

    def on_entry(self, e: Any, initial: bool) -> None:
        op = e.operation or "PUT"
        if e.key == MEMBERSHIP_FEED_KEY:
            if op == "PUT":
                try:
                    self.feed_at = float(json.loads(e.value).get("observedAt"))
                except (ValueError, TypeError, AttributeError, RecursionError):
                    self.feed_at = None
            else:
                self.feed_at = None
        elif op != "PUT":
            self.members.pop(e.key, None)
        else:
            mm = decode_membership(e.value)
            if mm is not None:
                self.members[e.key] = MemberView(
                    e.key, tuple(mm.live), tuple(mm.durable),
                    float(mm.observedAt) if mm.observedAt is not None else None)
        if not initial:
            self.dirty = True

    def on_ready(self, keys: set[str]) -> None:
        self.members = {k: v for k, v in self.members.items() if k in keys}
        self.dirty = True

    def on_error(self, reason: str, e: Exception) -> None:
        if reason == "missing":
            self.model.set_membership(None, None)  # no daemon: traffic-only
        elif self.connected():
            self.model.set_membership_unreadable(f"watch: {reason}")

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self.model.set_membership(self.members, self.feed_at)


class ManagerLeases:
    """``cotal_manager_<space>``: ``lease.<instance>`` keys; a lease not renewed within
    :data:`MANAGER_TTL_MS` is down (TTL expiry in the bucket is silent)."""

    def __init__(self, model: MeshModel, bucket: str) -> None:
        self.model, self.bucket = model, bucket
        self.seen: dict[str, float] = {}

    def on_entry(self, e: Any, initial: bool) -> None:
        if not e.key.startswith(LEASE_PREFIX):
            return
        iid = e.key[len(LEASE_PREFIX):]
        op = e.operation or "PUT"
        if op != "PUT":
            self.seen.pop(iid, None)
            self.model.apply_manager(iid, up=False)
            return
        try:
            v = json.loads(e.value)
            if not isinstance(v, dict):
                raise ValueError
        except (ValueError, RecursionError):
            self.model.apply_rejection("manager:malformed", f"$KV.{self.bucket}.{e.key}")
            return
        self.seen[iid] = self.model.clock()
        pid = v.get("pid")
        since = v.get("since")
        self.model.apply_manager(
            iid, up=True, holder=v.get("holder") if isinstance(v.get("holder"), str) else None,
            runtime=v.get("runtime") if isinstance(v.get("runtime"), str) else None,
            pid=pid if isinstance(pid, int) else None,
            since=float(since) if isinstance(since, (int, float)) else None,
        )

    def on_ready(self, keys: set[str]) -> None:
        self.model.manager_resync(k[len(LEASE_PREFIX):] for k in keys if k.startswith(LEASE_PREFIX))

    def expire(self, now: float) -> None:
        for iid, seen in list(self.seen.items()):
            if now - seen > MANAGER_TTL_MS:
                del self.seen[iid]
                self.model.apply_manager(iid, up=False)
