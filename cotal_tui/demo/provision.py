"""Create a space's canonical streams and KV buckets (wire.md §6), idempotently.

The configs mirror the reference ``backup-config.ts`` so that a space we provision looks to
any Cotal client exactly like one ``cotal up --open`` made.
"""

from __future__ import annotations

import json

from nats.aio.client import Client as NATS
from nats.js.api import (
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, BucketNotFoundError, NotFoundError

from meshview.errors import swallowed
from meshview.wire.names import (
    bucket_names,
    chat_stream,
    dlv_stream,
    dm_stream,
    epc_stream,
    inbox_stream,
    space_token,
    task_stream,
)
from meshview.wire.subjects import kind_pattern, rail_pattern

TWO_MIN = 120.0
TWO_HOURS = 7200.0


def stream_configs(space: str, replicas: int = 1) -> list[StreamConfig]:
    s = space_token(space)
    return [
        StreamConfig(
            name=chat_stream(s),
            subjects=[kind_pattern(s, "chat")],
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1000,
            discard=DiscardPolicy.OLD,
            allow_direct=True,
            duplicate_window=TWO_MIN,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=dm_stream(s),
            subjects=[kind_pattern(s, "inst")],
            retention=RetentionPolicy.LIMITS,
            duplicate_window=TWO_MIN,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=task_stream(s),
            subjects=[kind_pattern(s, "svc")],
            retention=RetentionPolicy.WORK_QUEUE,
            duplicate_window=TWO_MIN,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=inbox_stream(s),
            subjects=[rail_pattern(s, "dinbox")],
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1000,
            duplicate_window=TWO_HOURS,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=dlv_stream(s),
            subjects=[rail_pattern(s, "dlv")],
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1000,
            duplicate_window=TWO_HOURS,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=epc_stream(s),
            subjects=[rail_pattern(s, "epc")],
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            allow_direct=True,
            duplicate_window=TWO_MIN,
            storage=StorageType.FILE,
            num_replicas=replicas,
        ),
    ]


def kv_configs(space: str, replicas: int = 1) -> list[KeyValueConfig]:
    b = bucket_names(space)
    return [
        KeyValueConfig(bucket=b.presence, history=1, ttl=6.0, replicas=replicas),
        KeyValueConfig(bucket=b.channels, history=1, replicas=replicas),
        KeyValueConfig(
            bucket=b.membership, history=1, max_bytes=64 * 1024 * 1024, replicas=replicas
        ),
        KeyValueConfig(bucket=b.members, history=1, replicas=replicas),
        KeyValueConfig(bucket=b.manager, history=1, ttl=10.0, replicas=replicas),
        KeyValueConfig(bucket=b.delivery, history=1, ttl=30.0, replicas=replicas),
        KeyValueConfig(bucket=b.records, history=1, replicas=replicas),
    ]


async def provision_space(
    nc: NATS,
    space: str = "main",
    *,
    replicas: int = 1,
    default_delivery_class: str = "live",
) -> None:
    """Create (or reconcile) every canonical stream and bucket of ``space``."""
    js = nc.jetstream()
    for cfg in stream_configs(space, replicas):
        assert cfg.name is not None  # every canonical stream is named (stream_configs above)
        try:
            await js.stream_info(cfg.name)
            await js.update_stream(cfg)
        except NotFoundError:
            await js.add_stream(cfg)
    for kcfg in kv_configs(space, replicas):
        try:
            await js.key_value(kcfg.bucket)
        except BucketNotFoundError:
            await js.create_key_value(config=kcfg)
    # The channels bucket: discard New + direct + rollup, like the reference.
    b = bucket_names(space)
    info = await js.stream_info(f"KV_{b.channels}")
    cfg = info.config
    cfg.discard = DiscardPolicy.NEW
    cfg.allow_direct = True
    cfg.allow_rollup_hdrs = True
    try:
        await js.update_stream(cfg)
    except BadRequestError:
        pass  # some servers refuse discard changes on an existing bucket; keep it as made
    kv = await js.key_value(b.channels)
    try:
        await kv.create("=defaults", json.dumps({"deliveryClass": default_delivery_class}).encode())
    except Exception:  # noqa: BLE001 - the defaults row exists already [counted: COTAL_LOG]
        swallowed("cotal_tui.demo.provision:provision_space")  # already present: `cotal up` writes it once and never overwrites
