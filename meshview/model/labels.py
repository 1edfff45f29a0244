"""Who a sender is on screen: the roster's name for its principal, disambiguated, plus a claim.

Identity comes from the delivery path (DESIGN.md "Identity"): a sender is its principal, and
what is shown for it is the roster (presence) entry of that principal. The envelope's
``from.name`` is only a claim: shown marked (``mallory (claims "ada")``) when it differs from
the roster's name, and alone beside the elided principal when the roster does not know it.

Two roster peers whose names fold to one key (NFKC, case-folded, invisible code points
removed), or a name that spells another peer's id, are told apart by a short principal
suffix: ``ada·3f2ac1``. Every display reads :class:`Labels` (built once per change of the
roster's names, not per snapshot), so the roster, feed, DM lens, NEEDS-YOU, triage, tiles,
status bar and ``--plain`` all show the same label for one principal.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, NamedTuple

from meshview.wire.sanitize import elide_id

SEP = "·"
SUFFIX_MIN = 6  # principal characters in a disambiguator, more when needed to be unique
CLAIM_CAP = 128  # characters of a claimed name or role kept per row (the SPEC's name bound)
ID_CELLS = 24  # an unknown principal shown in at most this many cells

# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties) plus every format (Cf)
# character: nothing a reader can see, so nothing that may tell two names apart.
_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_DROP = re.compile(f"[{_IGNORABLE}]")
_SPACE = re.compile(r"\s+")


def fold(name: str) -> str:
    """The comparison key of a display name: ``Ada``, fullwidth ``ＡＤＡ`` and ``ada`` with a
    zero-width space inside are one."""
    if name.isascii() and name.isprintable():  # most names: nothing to normalize or drop
        return " ".join(name.lower().split())
    return _fold(name)


@lru_cache(maxsize=4096)
def _fold(name: str) -> str:
    s = unicodedata.normalize("NFKC", name)
    s = "".join(ch for ch in _DROP.sub("", s) if unicodedata.category(ch) != "Cf")
    s = unicodedata.normalize("NFKC", s.casefold())
    return _SPACE.sub(" ", s).strip()


class Sender(NamedTuple):
    """A sender as shown: ``label`` (roster name, disambiguated, or the elided principal),
    the roster's ``role``, and the envelope's differing ``claim`` (None when it agrees)."""

    label: str
    role: str | None
    claim: str | None
    known: bool  # the principal has a roster entry

    def text(self) -> str:
        """``label`` or ``label (claims "x")``, unsanitized (callers escape for a terminal)."""
        return self.label if self.claim is None else f'{self.label} (claims "{self.claim}")'


class Labels:
    """Principal -> display label, from the roster's (principal, name, role) entries.

    Immutable once built; the model builds a new one when a name or role changes."""

    __slots__ = ("_label", "_name", "_role", "_shared", "_folds", "_ids")

    def __init__(self, entries: Iterable[tuple[str, str, str | None]] = ()) -> None:
        names: dict[str, str] = {}
        roles: dict[str, str | None] = {}
        groups: dict[str, list[str]] = {}
        for pid, name, role in entries:
            names[pid] = name
            roles[pid] = role
            groups.setdefault(fold(name), []).append(pid)
        ids = {_id_key(pid): pid for pid in names}
        label = dict(names)
        shared: set[str] = set()
        for key, pids in groups.items():
            other = ids.get(key)
            spells = other is not None and (len(pids) > 1 or pids[0] != other)
            if len(pids) < 2 and not spells:
                continue
            shared.update(pids)
            for pid, suffix in _suffixes(pids).items():
                label[pid] = f"{names[pid]}{SEP}{suffix}"
        self._label, self._name, self._role = label, names, roles
        self._shared = frozenset(shared)
        self._folds, self._ids = set(groups), ids  # what :meth:`changed` checks a change by

    def changed(self, ops: Iterable[tuple[str, str | None, str | None]]) -> Labels | None:
        """These labels after ``ops``, in order: ``(pid, name, role)`` a newcomer shown by its
        own name, ``(pid, None, None)`` a principal forgotten. None when one of them touches a
        name that must be told apart (a newcomer's name folds as another's or spells an id, its
        id is spelled by a name; a forgotten one shared its name or had its id spelled): the
        caller builds anew. Copies the maps (C-speed) instead of folding every name again
        (a 30k-agent start-up, where peers join between every two snapshots, spent ~5 % of the
        observer's samples in full builds)."""
        new = Labels.__new__(Labels)
        label, names, roles = dict(self._label), dict(self._name), dict(self._role)
        folds, ids, shared = set(self._folds), dict(self._ids), self._shared
        for pid, name, role in ops:
            idkey = _id_key(pid)
            if name is None:  # forgotten
                old = names.pop(pid, None)
                if old is None or pid in shared or idkey in folds:  # (its own name, too: rare)
                    return None
                del label[pid], roles[pid], ids[idkey]
                folds.discard(fold(old))
                continue
            key = fold(name)
            if pid in names or key in folds or key in ids or idkey in folds or idkey in ids:
                return None
            label[pid] = names[pid] = name
            roles[pid] = role
            folds.add(key)
            ids[idkey] = pid
        new._label, new._name, new._role, new._shared = label, names, roles, shared
        new._folds, new._ids = folds, ids
        return new

    def __len__(self) -> int:
        return len(self._label)

    def diff(self, other: Labels) -> set[str]:
        """The principals whose label differs between ``other`` and this (added, gone or
        changed): what a view drawn with ``other`` must draw again."""
        return {pid for pid, _ in self._label.items() ^ other._label.items()}

    def label(self, pid: str) -> str | None:
        """The roster label of ``pid`` (None: no roster entry)."""
        return self._label.get(pid)

    def shown(self, pid: str) -> str:
        """The label, else the principal elided in the middle."""
        return self._label.get(pid) or elide_id(pid, ID_CELLS)

    def name(self, pid: str) -> str | None:
        """The roster's name as the peer wrote it (no disambiguator)."""
        return self._name.get(pid)

    def role(self, pid: str) -> str | None:
        return self._role.get(pid)

    def ambiguous(self, pid: str) -> bool:
        """True when another roster peer shares this peer's name (or its name spells an id)."""
        return pid in self._shared

    def sender(self, pid: str, claimed: str | None, claimed_role: str | None = None) -> Sender:
        """How a row from ``pid`` whose envelope said ``claimed`` (/``claimed_role``) is shown."""
        name = self._name.get(pid)
        if name is None:
            claim = claimed[:CLAIM_CAP] if claimed else None
            return Sender(elide_id(pid, ID_CELLS), None, claim, False)
        claim = None
        if claimed and claimed != name and fold(claimed) != fold(name):
            claim = claimed[:CLAIM_CAP]
        return Sender(self._label[pid], self._role.get(pid), claim, True)


def _id_key(pid: str) -> str:
    """A principal as a name that spells it folds (what tells a name that spells an id)."""
    return pid.lower() if pid.isascii() else fold(pid)


def _suffixes(pids: list[str]) -> dict[str, str]:
    """The shortest tails (at least :data:`SUFFIX_MIN` characters) that tell every peer of one
    group apart: of the actor (``owner.actor``'s last token) when that suffices, else of the
    whole principal. One shorter than that is shown whole."""
    actors = {p: p.rsplit(".", 1)[-1] for p in pids}
    for whole in (actors, {p: p for p in pids}):
        longest = max(len(v) for v in whole.values())
        n = SUFFIX_MIN
        while True:
            tails = {p: v[-n:] for p, v in whole.items()}
            if len(set(tails.values())) == len(pids):
                return tails
            if n >= longest:
                break
            n += 1
    return {p: p for p in pids}  # unreachable: principals are unique


EMPTY = Labels()
