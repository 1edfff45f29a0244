"""Unique prefixes wherever the command line asks for an id: run ids (``cotal runs journal
run-d34b``) and manager instance ids (``--on 01hx``, ``cotal deregister-instance 01hx``).

One rule for every site (:func:`unique`): a whole id is taken as it is, without asking the mesh;
a shorter one is matched against the ids the mesh holds, and must name exactly one. No match is
one named sentence; an ambiguous prefix is one sentence and the candidates, one per line (the
ids come from the wire: each is checked against its grammar before it is printed).
"""

from __future__ import annotations

from typing import Any, Iterable

from cotal_tui.errors import CotalError

MAX_LISTED = 20  # candidates an ambiguous prefix lists (the rest are counted)


class PrefixError(CotalError):
    """A prefix that names no id, or several; the message is the sentence (and the list)."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


def unique(prefix: str, ids: Iterable[str], what: str, *, where: str = "") -> str:
    """The one id of ``ids`` that is ``prefix`` or starts with it. ``what`` names the kind
    (``run``, ``manager instance``), ``where`` the place looked in (``in space main``)."""
    known = sorted(set(ids))
    if prefix in known:
        return prefix
    hits = [i for i in known if i.startswith(prefix)]
    if len(hits) == 1:
        return hits[0]
    at = f" {where}" if where else ""
    if not hits:
        raise PrefixError(f"{prefix!r} is not a {what} id, nor the start of one{',' + at if at else ''} "
                          f"({len(known)} known).")
    shown = hits[:MAX_LISTED]
    more = f"\n  … and {len(hits) - len(shown)} more" if len(hits) > len(shown) else ""
    raise PrefixError(f"{prefix!r} names {len(hits)} {what}s{at}; give more of the id:\n"
                      + "\n".join(f"  {h}" for h in shown) + more, tuple(hits))


def check_instance_prefix(on: str | None) -> None:
    """Usage, before the network: ``--on`` is a manager instance id or a prefix of one."""
    from attach.control.verbs import ControlError

    from meshview.wire.endpoint import is_lifecycle_prefix

    if on is not None and not is_lifecycle_prefix(on):
        raise ControlError("bad-request", f"{on[:80]!r} is not a manager instance id or a prefix of one "
                           "(lowercase letters and digits, as cotal ps prints it)")


def check_run_prefix(run: str) -> None:
    """Usage, before the network: a run id (``run-`` and 32 lowercase hex) or a prefix of one."""
    from meshview.wire.runs import is_run_id_prefix

    if not is_run_id_prefix(run):
        raise PrefixError(f"{run[:80]!r} is not a run id or a prefix of one (run- and lowercase hex, "
                          "as cotal runs ps prints it)")


async def instance(target: Any, on: str | None) -> str | None:
    """``on`` made whole: as it is when it already is a whole instance id (or None), else the
    one registered manager instance of the space it starts (:class:`PrefixError` when none or
    several do)."""
    from attach.control import verbs as control
    from meshview.link.connect import ConnectError, connect
    from meshview.wire.endpoint import is_lifecycle_token

    if on is None or is_lifecycle_token(on):
        return on
    try:
        nc, _ = await connect(target)
    except ConnectError as e:
        raise control.ControlError("unavailable", str(e)) from None
    try:
        regs = await control.registrations(nc, target.space)
    finally:
        try:
            await nc.close()
        except Exception:  # noqa: BLE001 - the ids are read; a slow close changes nothing [counted: COTAL_LOG]
            from meshview.errors import swallowed

            swallowed("cotal_tui.cli.prefix:instance")
    return unique(on, [i for i in regs if is_lifecycle_token(i)], "manager instance",
                  where=f"in space {target.space}")


async def run(target: Any, run_id: str, on: str | None = None) -> str:
    """``run_id`` made whole: as it is when whole, else the one run the manager lists that it
    starts (:class:`PrefixError` when none or several do)."""
    from attach.control import runs
    from meshview.wire.runs import is_run_id

    if is_run_id(run_id):
        return run_id
    check_run_prefix(run_id)
    rows = await runs.run_ps(target, on=on)
    return unique(run_id, [r.run_id for r in rows if is_run_id(r.run_id)], "run", where=f"in space {target.space}")
