"""The Cotal wire contract, the one place each wire rule lives: what the console reads, sends
and serves.

- ``subjects``: the §3 subject grammar (parse, build, read patterns); ``names``: streams and buckets.
- ``messages``/``decode``/``parts``/``presence``: envelopes, cards and presence, with reject codes.
- ``outbound``: what a sender publishes (envelopes, ids, mentions, presence records).
- ``endpoint``: the §13.2 endpoint, goal and session-rail subjects and their permission patterns;
  ``envelope``: §13.3 requests, replies and the error catalog; ``canonical``: §13.7 digests;
  ``frames``: the §13.6 terminal-session frames.

Pure and import-light (msgspec only): no Textual or Rich, no network. Nothing outside this
package spells a subject or a token grammar (``tests/arch/test_layers.py`` checks it); it
imports nothing of ours outside itself.
"""

from meshview.wire.decode import (
    Applied,
    Delivery,
    Rejection,
    decode_applied,
    decode_delivery,
    parts_to_text,
)
from meshview.wire.messages import (
    PRESENCE_CANARY_KEY,
    AgentCard,
    ArtifactPart,
    BrokenPart,
    ChannelConfig,
    ChannelDefaults,
    ChannelMembership,
    CotalMessage,
    DataPart,
    EndpointRef,
    ExtensionPart,
    Part,
    Presence,
    PresenceCondition,
    Skill,
    TextPart,
    decode_agent_card,
    decode_channel_config,
    decode_channel_defaults,
    decode_membership,
    effective_class,
    effective_replay,
    effective_window,
    effective_window_ms,
    encode_message,
    encode_presence,
    parse_replay_window,
    replay_floor,
)
from meshview.wire.names import bucket_names, space_token
from meshview.wire.parts import part_text
from meshview.wire.presence import (
    PRESENCE_TTL_MS,
    PresenceDecision,
    bound_presence,
    clock_template,
    decode_presence,
    is_heartbeat_only,
    is_stale,
    match_clocks,
    offline_view,
)
from meshview.wire.subjects import (
    ParsedSubject,
    chat_pattern,
    chat_subject,
    dm_visible,
    inst_subject,
    event_channel,
    is_event_channel,
    is_principal_id,
    is_principal_owner,
    kind_pattern,
    parse_subject,
    sanitize_channel,
    sanitize_token,
    sender_pattern,
    space_pattern,
    split_principal,
    subject_matches,
    svc_subject,
    tap_subjects,
)

__all__ = [
    "PRESENCE_CANARY_KEY", "PRESENCE_TTL_MS", "AgentCard", "Applied", "ArtifactPart", "BrokenPart",
    "ChannelConfig",
    "ChannelDefaults", "ChannelMembership", "CotalMessage", "DataPart", "Delivery",
    "EndpointRef", "ExtensionPart", "ParsedSubject", "Part", "Presence", "PresenceCondition",
    "PresenceDecision", "Rejection", "Skill", "TextPart", "bucket_names", "chat_pattern",
    "chat_subject", "clock_template", "decode_agent_card", "decode_channel_config",
    "decode_channel_defaults",
    "bound_presence", "decode_applied", "decode_delivery", "decode_membership", "decode_presence", "dm_visible",
    "effective_class",
    "effective_replay", "effective_window", "effective_window_ms", "encode_message",
    "encode_presence", "inst_subject", "event_channel", "is_event_channel", "is_heartbeat_only",
    "is_principal_id", "is_principal_owner", "is_stale", "kind_pattern", "match_clocks",
    "offline_view",
    "parse_replay_window", "parse_subject", "part_text", "parts_to_text", "replay_floor", "sanitize_channel",
    "sanitize_token", "sender_pattern", "space_pattern", "space_token", "split_principal", "subject_matches",
    "svc_subject", "tap_subjects",
]
