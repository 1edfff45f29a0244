"""``cotal spawn | stop | input | status``: one control action on the hosting manager each.

    cotal spawn PERSONA [--name N] [--on INSTANCE]   start a seat; waits for it to join the mesh
                [--agent A] [--role R] [--model M]   (presence), its program to exit, or the
                [--prompt P] [--cwd D] ...           manager's readiness deadline, and says which
    cotal stop NAME [--force] [--on INSTANCE]        graceful (SIGHUP + SIGTERM, SIGKILL after the
                                                     manager's grace) or force (SIGKILL)
    cotal input NAME TEXT... [--no-enter]            type TEXT into the seat's terminal (then Enter)
    cotal status NAME [--on INSTANCE] [--json]       the seat's row, from the manager hosting it
    cotal status [--on INSTANCE] [--json]            the managers themselves: runtime, connectors,
                                                     classSpawn, static reconciliation failures
    cotal status --line [--format FMT]               one line of presence counts (cli/status.py)

``spawn`` sends the reference's ``spawn`` fields: PERSONA is the persona ref the manager resolves
under its own root (``name``), ``--name`` the seat-name override (``identity``); every other flag
is sent under its contract key only when given, and the persona file supplies the rest.

Each verb opens its own connection (the usual connection flags), locates the seat across the
registered managers and calls the one hosting it (``attach.control.verbs``). Exit status: 0 when it
happened; 1 with one sentence on stderr when it did not (or its outcome is unknown); 2 for bad
usage (a malformed name, persona, instance id or text). ``COTAL_READ_ONLY`` refuses spawn, stop
and input before anything touches the network.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import sys
from typing import Any, Awaitable, Callable

# the verbs that change something, as the action log names them (cotal_tui/actionlog.py)
LOGGED_VERBS = {"spawn": "spawn", "stop": "stop", "input": "input",
                "deregister-instance": "deregister"}
# what a verb's act says its outcome was (spawn: joined / failed / uncertain), for the log
_OUTCOME: contextvars.ContextVar[tuple[str, str | None, str | None] | None] = contextvars.ContextVar(
    "cotal_verb_outcome", default=None)  # (outcome, detail, goal id)


def _log_target(verb: str, args: argparse.Namespace) -> str:
    for attr in ("name", "persona", "instance"):
        v = getattr(args, attr, None)
        if isinstance(v, str) and v:
            return v
    return verb


def _common(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="the manager instance to address (its id as `cotal ps` prints it, or a unique prefix)")
    add_connection_arguments(p)


def _channels(v: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in v.split(",") if x.strip())


def _share_tools(v: str) -> tuple[str, ...]:
    """``--share-tools``: ``a,b`` names the declared MCP servers the seat gets, ``none`` none."""
    if v.strip() == "none":
        return ()
    names = tuple(x.strip() for x in v.split(","))
    if not names or any(not n for n in names):
        raise argparse.ArgumentTypeError(f"{v!r} is not a list of server names (A,B) or none")
    return names


def spawn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("persona", help="the persona to start, by name (see `cotal personas`)")
    p.add_argument("--name", default=None, help="the seat's name (default: the persona file's own, numbered if taken)")
    g = p.add_argument_group("launch (sent only when given; the persona file supplies the rest)")
    g.add_argument("--agent", default=None, help="the connector (harness) to launch")
    g.add_argument("--role", default=None, help="the seat's anycast role")
    g.add_argument("--model", default=None, help="model pin")
    g.add_argument("--variant", default=None, help="model variant")
    g.add_argument("--config", default=None, metavar="FILE",
                   help="a persona file on the manager's host to load instead of PERSONA's")
    g.add_argument("--prompt", default=None, help="initial prompt")
    g.add_argument("--cwd", default=None, metavar="DIR", help="launch directory on the manager's host")
    g.add_argument("--subscribe", type=_channels, default=None, metavar="A,B", help="channels to join")
    g.add_argument("--allow-subscribe", type=_channels, default=None, metavar="A,B", dest="allow_subscribe",
                   help="channels it may read")
    g.add_argument("--allow-publish", type=_channels, default=None, metavar="A,B", dest="allow_publish",
                   help="channels it may post to")
    g.add_argument("--events", action=argparse.BooleanOptionalAction, default=None,
                   help="arm (or, with --no-events, disarm) the event plane; absent: the manager's default")
    g.add_argument("--share-tools", type=_share_tools, default=None, metavar="A,B", dest="share_tools",
                   help="the manager's declared MCP servers this seat gets (none: no server); absent: all")
    _common(p)


def launch_options(args: argparse.Namespace) -> Any:
    from attach.control.verbs import LaunchOptions

    return LaunchOptions(agent=args.agent, role=args.role, model=args.model, variant=args.variant,
                         config=args.config, prompt=args.prompt, cwd=args.cwd, subscribe=args.subscribe,
                         allow_subscribe=args.allow_subscribe, allow_publish=args.allow_publish,
                         events=args.events, share_tools=args.share_tools)


def stop_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("--force", action="store_true", help="SIGKILL at once instead of a graceful stop")
    _common(p)


def input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("text", nargs="+", help="the text to type (words are joined by one space; "
                   "put -- before text that starts with '-')")
    p.add_argument("--no-enter", action="store_true", dest="no_enter",
                   help="type the text without pressing Enter after it")
    _common(p)


def status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default=None,
                   help="seat name (see `cotal ps`); without one, the managers themselves")
    p.add_argument("--json", action="store_true", help="as the manager sent it")
    p.add_argument("--line", action="store_true",
                   help="one short line of presence counts for a status bar (space ● working ◐ waiting "
                        "○ idle ⨯ offline); reads presence once, asks no manager")
    p.add_argument("--components", action="store_true",
                   help="one row per component (broker, managers, manager and delivery planes, auth "
                        "exchange), each verdict with its source and age; exit 1 unless all are healthy")
    p.add_argument("--format", default=None, metavar="FMT",
                   help="with --line: the line's shape, from the fields {space} {working} {waiting} "
                        "{idle} {offline}")
    _common(p)


def run_verb(verb: str, args: argparse.Namespace, act: Callable[[Any], Awaitable[int]],
             check: Callable[[], None] = lambda: None) -> int:
    """One manager verb as a process: ``check`` (usage and read-only, no network), then the
    space every verb needs, then ``act(target)``; a refusal is one sentence on stderr (exit 2
    for bad usage, else 1), Ctrl-C exits 130."""
    from attach.control import verbs as control
    from attach.control.connection import session_target
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.cli.prefix import PrefixError

    async def main() -> int:
        from meshview.link.connect import ConnectError
        from meshview.observe.spaces import require_space

        target = session_target(target_from_args(args))
        try:
            check()
            try:
                await require_space(target)
            except ConnectError as e:
                print(f"cotal {verb}: {e}", file=sys.stderr)
                return 1
            await _whole_instance(target, args)
            what = LOGGED_VERBS.get(verb)
            if what is None:
                return await act(target)
            from cotal_tui.actionlog import action_log

            log = action_log("cli")
            aid = log.record(what, _log_target(verb, args), "requested", mesh=target.space)
            try:
                rc = await act(target)
            except control.ControlError as e:
                log.settle(aid, "refused" if e.code in ("read-only", "bad-request", "permission-denied")
                           else "failed", detail=e.message)
                raise
            except BaseException:
                log.settle(aid, "uncertain", detail="interrupted before the manager answered")
                raise
            said = _OUTCOME.get()
            outcome, detail, goal = said if said is not None else ("done" if rc == 0 else "failed", None, None)
            log.settle(aid, outcome, detail=detail, goal_id=goal)
            return rc
        except control.ControlError as e:
            print(f"cotal {verb}: {e.message}", file=sys.stderr)
            return 2 if e.code == "bad-request" else 1
        except PrefixError as e:  # a sentence, then the candidates (ids, checked), one per line
            print(f"cotal {verb}: {e}", file=sys.stderr)
            return 2

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130


async def _whole_instance(target: Any, args: argparse.Namespace) -> None:
    """``--on`` (and deregister's INSTANCE) given as a prefix: made the one whole id it starts."""
    from cotal_tui.cli import prefix

    for attr in ("on", "instance"):
        v = getattr(args, attr, None)
        if isinstance(v, str):
            setattr(args, attr, await prefix.instance(target, v))


def _call(verb: str, args: argparse.Namespace, act: Callable[[Any, Any, str | None], Awaitable[int]]) -> int:
    from attach.control import verbs as control
    from cotal_tui.cli.prefix import check_instance_prefix
    from cotal_tui.operator import read_only_from_args

    read_only = read_only_from_args(args)

    def check() -> None:
        # usage and read-only first (no network), then the space every verb checks
        if verb != "status":
            control.refuse_read_only(read_only)
        check_instance_prefix(args.on)
        if verb != "spawn" and not (verb == "status" and args.name is None):
            control.check_seat_name(args.name)

    return run_verb(verb, args, lambda target: act(target, control, read_only), check)


def run_spawn(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        from meshview.wire.sanitize import inline as clean

        r = await control.spawn(target, args.persona, name=args.name, on=args.on, read_only=read_only,
                                progress=lambda line: print(line, flush=True), options=launch_options(args))
        where = f"manager {r.instance_id}"
        seat = clean(r.name, 64)  # the manager's
        _OUTCOME.set(({"joined": "joined", "exited": "failed", "cancelled": "failed"}.get(
            r.outcome, "uncertain"), f"{r.name} on manager {r.instance_id} ({r.state})", r.goal_id or None))
        if r.outcome == "joined":
            print(f"spawned {seat} ({clean(r.persona)}) on {where}: joined the mesh after {r.elapsed_s:.1f} s")
            return 0
        if r.outcome == "exited":
            code = r.data.get("exitCode")
            why = f" (exit status {code})" if isinstance(code, int) else ""
            print(f"cotal spawn: {seat} exited before it joined the mesh{why}.", file=sys.stderr)
        elif r.outcome == "cancelled":
            print(f"cotal spawn: {seat} was stopped before it joined the mesh.", file=sys.stderr)
        else:
            print(f"cotal spawn: {seat} did not join within the {r.readiness_ms / 1000:g} s readiness "
                  f"deadline of {where}; it may still come up (see cotal ps) - do not spawn it again.",
                  file=sys.stderr)
        return 1

    return _call("spawn", args, act)


def run_stop(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        r = await control.stop(target, args.name, force=args.force, on=args.on, read_only=read_only)
        if r.force:
            print(f"force-killed {r.name} (manager {r.instance_id})")
        elif r.graceful:
            print(f"stopped {r.name} (manager {r.instance_id})")
        else:
            print(f"stopped {r.name} (manager {r.instance_id}): it outlived the grace, so it was killed")
        return 0

    return _call("stop", args, act)


def run_input(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        text = " ".join(args.text)
        r = await control.input_text(target, args.name, text, enter=not args.no_enter, on=args.on,
                                     read_only=read_only)
        tail = "" if args.no_enter else " and Enter"
        _OUTCOME.set(("done", f"{r.bytes} bytes{tail}", None))  # how many, never which
        print(f"typed {r.bytes} bytes{tail} into {r.name} (manager {r.instance_id})")
        return 0

    return _call("input", args, act)


def run_status(args: argparse.Namespace) -> int:
    if args.components:
        if args.name is not None or args.line or args.format is not None or args.on is not None:
            print("cotal status: --components takes no seat, --line, --format or --on.", file=sys.stderr)
            return 2
        from cotal_tui.cli.health import run_components

        return run_components(args)
    if args.line or args.format is not None:
        if args.name is not None or args.json or args.on is not None or not args.line:
            print("cotal status: --line takes no seat, --json or --on, and --format needs --line.",
                  file=sys.stderr)
            return 2
        from cotal_tui.cli.status import run_line

        return run_line(args)

    async def act(target, control, read_only) -> int:
        from meshview.wire.sanitize import inline as clean

        if args.name is None:
            from cotal_tui.cli.managers import print_manager_status

            return await print_manager_status(target, args)
        row = await control.status(target, args.name, on=args.on)
        if args.json:
            print(json.dumps({**row.raw, "manager": row.instance_id}, separators=(",", ":")))
        else:
            print(f"{clean(control.status_line(row))} · manager {row.instance_id}")
        return 0

    return _call("status", args, act)
