"""A typed name to exactly one principal, or a refusal naming the candidates.

A display name is a label anyone may take, so a name-addressed verb (``send @``, the palette's
``dm``, ``attach``, ``input``, ``stop``, triage) never picks among look-alikes: every peer the
name could mean is a candidate, live or offline (a lapsed namesake is exactly the one an
impostor hopes to replace), and two or more candidates is a refusal listing their ids. The
upstream resolver (Cotal-AI/Cotal ``packages/core`` ``resolvePeer``) lets an id win and refuses
two live or two offline namesakes; here a live plus an offline one is refused too, and a name
that spells another peer's bare actor counts as that peer.

An id always works: the full ``owner.actor`` principal is never compared with names, so a peer
that names itself after another's id cannot take its DMs. A bare actor (a seat's row id on an
open mesh is one, and usually equals its name) is matched like a name: another peer's name that
spells it makes it ambiguous. Names compare NFKC + casefold with
the invisible code points dropped, so ``ada`` and ``ADA`` or an ``ada`` with a zero-width joiner
are the same name to this rule.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from meshview import sanitize

MAX_LISTED = 8  # candidates spelled out in a refusal; the rest are counted


class ResolveError(ValueError):
    """A name that does not resolve to one principal; ``str()`` is one sentence."""


class UnknownName(ResolveError):
    """No candidate at all."""


class AmbiguousName(ResolveError):
    """Two or more candidates; ``candidates`` are what the caller may address instead."""

    def __init__(self, message: str, candidates: tuple["Candidate", ...]) -> None:
        super().__init__(message)
        self.candidates = candidates

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.candidates]


@dataclass(frozen=True)
class Candidate:
    """One thing a name may mean: ``id`` is its address (a principal, or a seat's row id),
    ``where`` what tells two copies of one id apart (a seat's manager instance)."""

    id: str
    name: str
    status: str = ""
    where: str = ""
    item: Any = None

    def label(self) -> str:
        bits = [sanitize.inline(self.id, 80)]
        if self.where:
            bits.append(sanitize.inline(self.where, 80))
        if self.status:
            bits.append(sanitize.inline(self.status, 16))
        return f"{sanitize.inline(self.name, 40)} ({', '.join(bits)})"


def _ignorable(ch: str) -> bool:
    """Default-ignorable and invisible: format characters, variation selectors, Hangul
    fillers, the combining grapheme joiner and the Mongolian vowel separator."""
    cp = ord(ch)
    return (unicodedata.category(ch) in ("Cf", "Cc")
            or 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or 0x180B <= cp <= 0x180F
            or cp in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5))


def fold(name: str) -> str:
    """The comparison form of a name: NFKC, casefold, invisibles dropped, spaces collapsed."""
    s = unicodedata.normalize("NFKC", name).casefold()
    s = "".join(ch for ch in s if not _ignorable(ch))
    return " ".join(unicodedata.normalize("NFKC", s).split())


def _actor(pid: str) -> str | None:
    owner, dot, actor = pid.partition(".")
    return actor if dot and owner and actor else None


def candidates_of(rows: Iterable[Any]) -> list[Candidate]:
    """Roster rows (anything with ``id``, ``name`` and optionally ``status``) as candidates."""
    out = []
    for r in rows:
        pid, name = getattr(r, "id", None), getattr(r, "name", None)
        if isinstance(pid, str) and pid:
            out.append(Candidate(pid, name if isinstance(name, str) else "",
                                 str(getattr(r, "status", "") or ""), "", r))
    return out


def matches(target: str, cands: Iterable[Candidate]) -> list[Candidate]:
    """Every candidate ``target`` may mean (one per ``(id, where)``), without deciding."""
    t = target.strip().removeprefix("@").strip()
    if not t:
        return []
    pool = list(cands)
    if "." in t:  # a full principal is never a name: it wins over every look-alike
        exact = _unique(c for c in pool if c.id == t)
        if exact:
            return exact
    want = fold(t)
    return _unique(c for c in pool if (want and fold(c.name) == want) or _actor(c.id) == t)


def resolve(target: str, cands: Iterable[Candidate], *, what: str = "peer",
            outcome: str = "nothing was done") -> Candidate:
    """The one candidate ``target`` names; raises :class:`UnknownName` or :class:`AmbiguousName`."""
    t = target.strip().removeprefix("@").strip()
    if not t:
        raise UnknownName(f"no {what} named: give a name or an id.")
    hits = matches(t, cands)
    if len(hits) == 1:
        return hits[0]
    shown = sanitize.inline(t, 64)
    if not hits:
        raise UnknownName(f"no {what} named {shown!r}.")
    listed = "; ".join(c.label() for c in hits[:MAX_LISTED])
    more = f"; and {len(hits) - MAX_LISTED} more" if len(hits) > MAX_LISTED else ""
    how = "by its id" if len({c.id for c in hits}) == len(hits) else "by its id and manager instance"
    raise AmbiguousName(f"{shown!r} could mean {len(hits)} {what}s: {listed}{more}; "
                        f"{outcome} - address one {how}.", tuple(hits))


def _unique(cs: Iterable[Candidate]) -> list[Candidate]:
    seen: dict[tuple[str, str], Candidate] = {}
    for c in cs:
        seen.setdefault((c.id, c.where), c)
    return list(seen.values())
