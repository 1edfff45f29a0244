"""The permission sets the callout mints per view on a user mesh (the reference's
``permissionsFor`` arms as ``calloutPermissions`` calls them, ``implementations/auth/src/permissions.ts``).

Every row comes from ``meshview.wire`` builders or the ``meshview.link.auth`` profiles; nothing here
spells a subject. The arms:

- no view: ``agent`` — post/DM/anycast as itself on the row's channel ACL, read those channels and
  its own DMs, put its own presence key, plus the capability-derived ep rows (``spawn``: owner-mode
  lifecycle commands on the manager) and their reply rail;
- ``manager-caller``: the ep caller rows of one caller triple, pinned to **one** manager instance
  (the ``inst`` route with that instance only), owner mode for the targeted commands, never
  ``input`` (operator-only); on ``ep.v1`` with the generation when the connection is issued, plus
  the Direct-Get of its own accepted row;
- ``session-caller``, ``purger``, ``channel-purger``, ``admin``: the static profiles of
  ``meshview.link.auth``; ``channel-writer``: channel-registry writes; ``deployer``: the caller rows on
  every route (the privileged instrument tier, never any-mode).
"""

from __future__ import annotations

from meshview.link.auth import (
    Permissions,
    admin_permissions,
    channel_purger_permissions,
    observer_permissions,
    inbox_prefix,
    purger_permissions,
    session_caller_permissions,
)
from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    goal_pattern,
    reply_pattern,
    request_pattern,
)
from meshview.wire.issued import direct_get_subject
from meshview.wire.liveness import ask_grants
from meshview.wire.names import bucket_names, chat_stream, epc_stream, space_token
from meshview.wire.outbound import inbox_pattern, presence_subject
from meshview.wire.subjects import chat_pattern, chat_subject, rail_pattern, sender_pattern

READS = ("describe", "status", "ps", "inspect", "slots", "models", "list-personas", "show-persona",
         "goal-result")
SPAWN_TARGETED = ("despawn", "attach")  # owner mode: the manager decides own vs admin
RUN_COMMANDS = ("run-start", "run-resume", "run-status", "run-ps")  # untargeted (contract rev 21)
SELF_RUN_COMMANDS = ("run-answer",)  # targeted, modes ["self"] since rev 16


def _ep_commands(scopes: frozenset[str] | set[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(untargeted commands, owner-mode targeted commands) the ledger scope derives."""
    plain = list(READS)
    targeted: list[str] = []
    if "spawn" in scopes or "admin" in scopes:
        plain.append("spawn")
        targeted += SPAWN_TARGETED
    if "run" in scopes:
        plain += RUN_COMMANDS
    return tuple(plain), tuple(targeted)


def _caller_rows(space: str, caller: Caller, scopes, *, routes: tuple[str, ...], instance_id: str | None,
                 generation: str | None) -> list[str]:
    plain, targeted = _ep_commands(scopes)
    selfs = SELF_RUN_COMMANDS if "run" in scopes else ()
    rows: list[str] = []
    for route in routes:
        pin = {"instance_id": instance_id} if route == "inst" and instance_id is not None else {}
        for cmd in plain:
            rows.append(request_pattern(space, MANAGER, cmd, caller, route=route, generation=generation, **pin))
        for cmd in targeted:
            rows.append(request_pattern(space, MANAGER, cmd, caller, route=route, mode="owner",
                                        generation=generation, **pin))
        for cmd in selfs:
            rows.append(request_pattern(space, MANAGER, cmd, caller, route=route, mode="self",
                                        generation=generation, **pin))
    return rows


def manager_caller_permissions(space: str, caller: Caller, conn_id: str, *, scopes, instance_id: str,
                               generation: str | None = None, accepted_token: str | None = None) -> Permissions:
    s = space_token(space)
    pub = _caller_rows(s, caller, scopes, routes=("inst",), instance_id=instance_id, generation=generation)
    pub += [f"$JS.API.DIRECT.GET.{epc_stream(s)}.{rail_pattern(s, 'epc')}", "$JS.FC.>"]
    if accepted_token is not None:
        pub.append(direct_get_subject(s, accepted_token))
    sub = [f"{inbox_prefix(conn_id)}.>", reply_pattern(s, caller, generation=generation),
           goal_pattern(s, MANAGER, caller)]
    ask, hear = ask_grants(s, caller.owner, caller.actor)  # §6.1 liveness: ask as itself
    dkv = f"KV_{bucket_names(s).delivery}"  # and read the delivery lease, as an observer may (App. B)
    pub += [ask, f"$JS.API.STREAM.INFO.{dkv}", f"$JS.API.STREAM.MSG.GET.{dkv}", f"$JS.API.DIRECT.GET.{dkv}.>"]
    sub.append(hear)
    return Permissions(pub_allow=tuple(pub), sub_allow=tuple(sub))


def deployer_permissions(space: str, caller: Caller, conn_id: str, *, scopes) -> Permissions:
    s = space_token(space)
    pub = _caller_rows(s, caller, scopes, routes=("one", "all", "inst"), instance_id=None, generation=None)
    pub += [f"$JS.API.DIRECT.GET.{epc_stream(s)}.{rail_pattern(s, 'epc')}", "$JS.FC.>"]
    sub = (f"{inbox_prefix(conn_id)}.>", reply_pattern(s, caller), goal_pattern(s, MANAGER, caller))
    return Permissions(pub_allow=tuple(pub), sub_allow=sub)


def channel_writer_permissions(space: str, conn_id: str) -> Permissions:
    """Channel-registry writes (create/edit a channel record) and their reads; nothing else."""
    s = space_token(space)
    b = bucket_names(s)
    chkv = f"KV_{b.channels}"
    pub = ("$JS.API.INFO", f"$KV.{b.channels}.>", f"$JS.API.STREAM.INFO.{chkv}",
           f"$JS.API.STREAM.MSG.GET.{chkv}", f"$JS.API.DIRECT.GET.{chkv}.>")
    return Permissions(pub_allow=pub, sub_allow=(f"{inbox_prefix(conn_id)}.>",))


def agent_permissions(space: str, caller: Caller, conn_id: str, *, scopes, allow_subscribe, allow_publish) -> Permissions:
    """The baseline of a user-mesh principal with no view (App. B ``agent``): what a watching
    console of an ordinary user holds too."""
    s = space_token(space)
    b = bucket_names(s)
    pid = caller.principal
    pres, chkv = f"KV_{b.presence}", f"KV_{b.channels}"
    pub: list[str] = []
    for ch in allow_publish:
        pub.append(sender_pattern(s, "chat", pid) if ch in (">", "*") else chat_subject(s, pid, ch))
    pub += [sender_pattern(s, "inst", pid), sender_pattern(s, "svc", pid), presence_subject(s, pid),
            "$JS.API.INFO",
            f"$JS.API.STREAM.INFO.{chat_stream(s)}",
            f"$JS.API.STREAM.INFO.{pres}", f"$JS.API.CONSUMER.CREATE.{pres}.>",
            f"$JS.API.CONSUMER.INFO.{pres}.>", f"$JS.API.CONSUMER.DELETE.{pres}.>",
            f"$JS.API.STREAM.INFO.{chkv}", f"$JS.API.STREAM.MSG.GET.{chkv}", f"$JS.API.DIRECT.GET.{chkv}.>",
            "$JS.FC.>"]
    # channel history, the roster watch, the registry and membership reads (the reference keys
    # them to lifecycle-named durables; a stand-in grants the observer's reads of them)
    pub += [r for r in observer_permissions(s, conn_id).pub_allow if r not in pub]
    pub += _caller_rows(s, caller, scopes, routes=("one", "inst"), instance_id=None, generation=None)
    sub = [f"{inbox_prefix(conn_id)}.>", inbox_pattern(s, pid)]
    for ch in allow_subscribe:
        sub.append(chat_pattern(s) if ch in (">", "*") else chat_pattern(s, ch))
    sub += [reply_pattern(s, caller), goal_pattern(s, MANAGER, caller)]
    ask, hear = ask_grants(s, caller.owner, caller.actor)  # §6.1 liveness: ask as itself
    pub.append(ask)
    sub.append(hear)
    return Permissions(pub_allow=tuple(pub), sub_allow=tuple(sub))


def view_permissions(view: str, space: str, conn_id: str) -> Permissions:
    """The profiles that depend on nothing but the space and the connection."""
    if view == "admin":
        return admin_permissions(space, conn_id)
    if view == "purger":
        return purger_permissions(space, conn_id)
    if view == "channel-purger":
        return channel_purger_permissions(space, conn_id)
    if view == "channel-writer":
        return channel_writer_permissions(space, conn_id)
    if view == "transfer-writer":  # the carried-transcript upload rows are not modelled: inbox only
        return Permissions(pub_allow=(), sub_allow=(f"{inbox_prefix(conn_id)}.>",))
    raise ValueError(f"no static profile for view {view!r}")


__all__ = ["agent_permissions", "channel_writer_permissions", "deployer_permissions",
           "manager_caller_permissions", "session_caller_permissions", "view_permissions"]
