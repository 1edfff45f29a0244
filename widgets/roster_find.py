"""Find, group and pin in the roster: the pure part (no Textual), the roster widget calls it.

A query is ``[state:] text``: ``waiting: rev`` keeps waiting agents whose name, role or activity
(presence's activity, or the tool the frames say it runs) holds ``rev``, case-insensitive; a
state alone keeps every agent in it. A state may be shortened to any prefix that names one
state only (``wa:``, ``wo:``, ``i:``, ``o:``); ``w:`` names two and is said so, then matched as
text. What is matched is neutralised first (controls and invisibles escaped, as shown) and
bounded per field, so a peer's bytes can neither break a match nor make one costly.

Grouping (state, role or ``meta.host``) and pins reorder the already-sorted keys in one pass,
with a header row per group; pins are principal ids (identity comes from the delivery path,
never a display name a peer can borrow).
"""

from __future__ import annotations

from typing import Hashable, Iterable, Mapping, NamedTuple

from meshview.model.snapshot import STATUS_ORDER, Peer
from meshview.wire import sanitize

STATES = ("working", "waiting", "idle", "offline")
GROUPS = ("none", "state", "role", "host")  # the roster's group key cycles these
MAX_PINS = 200  # pins kept (config and roster): the oldest beyond are dropped
PIN_ID_CHARS = 256  # a pin longer than any principal id is no pin
FIELD_CHARS = 200  # each matched field is cut here before it is neutralised
QUERY_CHARS = 200  # ... and the query
LABEL_CHARS = 40  # a group's label (a role, a host) as its header shows it
NONE_LABEL = "—"  # the group of agents with no role / no host
PINNED = "pinned"
ENDPOINTS = "endpoints"


class Query(NamedTuple):
    """A parsed query: ``state`` (one of :data:`STATES` or None), ``text`` (casefolded,
    neutralised), ``raw`` as typed, ``problem`` (one sentence: an ambiguous state prefix)."""

    state: str | None
    text: str
    raw: str
    problem: str | None = None

    @property
    def active(self) -> bool:
        return self.state is not None or bool(self.text)


NO_QUERY = Query(None, "", "")


def parse_query(raw: str) -> Query:
    """``"waiting: rev"`` -> state ``waiting``, text ``rev``. A prefix before ``:`` that starts
    exactly one state's name is that state; one that starts two (``w:``) is named as
    ambiguous and the whole query is matched as text; anything else is text too."""
    raw = raw[:QUERY_CHARS]
    head, sep, rest = raw.partition(":")
    word = head.strip().casefold()
    if sep and word:
        hits = [s for s in STATES if s.startswith(word)]
        if len(hits) == 1:
            return Query(hits[0], _norm(rest.strip()), raw)
        if len(hits) > 1:
            return Query(None, _norm(raw.strip()), raw,
                         f"{word}: is {' or '.join(hits)}; type more of it")
    return Query(None, _norm(raw.strip()), raw)


def _norm(s: str) -> str:
    return sanitize.inline(s[:FIELD_CHARS]).casefold()


def haystack(p: Peer, doing: str | None) -> str:
    """What a query's text is looked for in: name, role, activity and what it is doing, each
    bounded and neutralised, casefolded, joined by a character no query holds."""
    return "\n".join(_norm(s) for s in (p.name, p.role or "", p.activity or "", doing or ""))


def group_of(p: Peer, by: str) -> str:
    """The group ``p`` falls in when grouping ``by`` (endpoints: their own group, last)."""
    if p.kind != "agent":
        return ENDPOINTS
    if by == "state":
        return p.status
    if by == "role":
        return sanitize.inline(p.role, LABEL_CHARS) if p.role and p.role.strip() else NONE_LABEL
    host = next((v for k, v in p.meta if k == "host"), None)
    return sanitize.inline(host, LABEL_CHARS) if host and host.strip() else NONE_LABEL


def _group_rank(label: str, by: str) -> tuple:
    if label == PINNED:
        return (0,)
    if label == ENDPOINTS:
        return (3,)
    if by == "state":
        return (1, STATUS_ORDER.get(label, 9), label)
    return (2 if label == NONE_LABEL else 1, label.casefold(), label)


class GroupHeader(NamedTuple):
    """A header row: ``▾ waiting · 3``. Its key (:func:`header_key`) is no principal id."""

    label: str
    n: int

    @property
    def text(self) -> str:
        return f"▾ {self.label} · {self.n}"


def header_key(label: str) -> tuple[str, str]:
    """A header row's key: a tuple, so it never equals a row's (string) principal id."""
    return ("group", label)


def is_header_key(key: Hashable) -> bool:
    return type(key) is tuple


class Arranged(NamedTuple):
    """The rows to show: ``keys`` (ids and header keys, in order), ``headers`` by key,
    ``shown``/``total`` agents (matched / all)."""

    keys: tuple[Hashable, ...]
    headers: Mapping[Hashable, GroupHeader]
    shown: int
    total: int


class Finder:
    """Arranges sorted keys by a query, a grouping and pins; keeps each row's haystack while
    what it is made of holds (a heartbeat moves only clocks: no new haystack), and the last
    keys tuple while the result holds (the lazy list re-measures nothing then)."""

    def __init__(self) -> None:
        self._hay: dict[str, tuple[tuple, str]] = {}
        self._labels: dict[str, tuple[object, str]] = {}  # id -> (its role or meta, its group)
        self._labels_by = ""
        self._keys: tuple[Hashable, ...] = ()
        self._headers: dict[Hashable, GroupHeader] = {}

    def _hay_of(self, p: Peer, doing: str | None) -> str:
        sig = (p.name, p.role, p.activity, doing)
        got = self._hay.get(p.id)
        if got is not None and got[0] == sig:
            return got[1]
        h = haystack(p, doing)
        self._hay[p.id] = (sig, h)
        return h

    def _label_of(self, p: Peer, by: str) -> str:
        """:func:`group_of`, kept per row while its role (or meta) reads the same."""
        if by == "state" or p.kind != "agent":
            return group_of(p, by)
        src = p.role if by == "role" else p.meta
        got = self._labels.get(p.id)
        if got is not None and got[0] == src:
            return got[1]
        label = group_of(p, by)
        self._labels[p.id] = (src, label)
        return label

    def arrange(self, keys: Iterable[str], peers: Mapping[str, Peer], query: Query,
                group: str, pins: frozenset[str],
                doing: Mapping[str, str] | None = None) -> Arranged:
        """``keys`` (already sorted) filtered by ``query``, pinned first, then grouped by
        ``group`` (within a group the given order holds), one pass plus a sort of the groups."""
        doing = doing or {}
        state, text = query.state, query.text
        hay_of = self._hay_of
        by = group if group in GROUPS else "none"
        if by != self._labels_by:
            self._labels, self._labels_by = {}, by
        label_of = self._label_of
        groups: dict[str, list[str]] = {}
        total = shown = 0
        n_keys = 0
        for k in keys:
            n_keys += 1
            p = peers.get(k)
            if p is None:
                continue
            agent = p.kind == "agent"
            total += agent
            if state is not None and (not agent or p.status != state):
                continue
            if text and text not in hay_of(p, doing.get(k)):
                continue
            shown += agent
            if k in pins and agent:
                label = PINNED
            elif by == "none":
                label = ""
            else:
                label = label_of(p, by)
            g = groups.get(label)
            if g is None:
                g = groups[label] = []
            g.append(k)
        if len(self._hay) > 2 * n_keys + 64:  # rows that left, forgotten (bounded)
            self._hay = {k: v for k, v in self._hay.items() if k in peers}
        if len(self._labels) > 2 * n_keys + 64:
            self._labels = {k: v for k, v in self._labels.items() if k in peers}
        out: list[Hashable] = []
        headers: dict[Hashable, GroupHeader] = {}
        headed = by != "none" or PINNED in groups
        order = sorted(groups, key=lambda g: _group_rank(g, by)) if by != "none" else \
            [g for g in (PINNED, "") if g in groups]
        for label in order:
            rows = groups[label]
            if headed:
                name = label or "others"
                hk = header_key(name)
                h = self._headers.get(hk)
                if h is None or h.n != len(rows):
                    h = GroupHeader(name, len(rows))
                headers[hk] = h
                out.append(hk)
            out.extend(rows)
        self._headers = headers
        t = tuple(out)
        if t != self._keys:
            self._keys = t
        return Arranged(self._keys, headers, shown, total)


def pins_from(value: object) -> list[str]:
    """A ``[roster] pins`` value as pins: the strings that can be ids, once each, the first
    :data:`MAX_PINS`."""
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for v in value:
        if isinstance(v, str) and v and len(v) <= PIN_ID_CHARS and v not in out:
            out.append(v)
    return out[:MAX_PINS]


def pins_ok(value: object) -> bool:
    """A list of at most :data:`MAX_PINS` non-empty id strings (what config.toml may hold)."""
    return (isinstance(value, list) and len(value) <= MAX_PINS
            and all(isinstance(v, str) and 0 < len(v) <= PIN_ID_CHARS for v in value))


def toml_strings(values: Iterable[str]) -> str:
    """``["a.b", "c"]`` in TOML: each a basic string, controls escaped (``\\uXXXX``)."""
    def one(s: str) -> str:
        out = []
        for ch in s:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
                out.append(f"\\u{ord(ch):04x}")
            elif 0xD800 <= ord(ch) <= 0xDFFF:
                out.append("\\ufffd")  # a lone surrogate: no TOML string holds it
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    return "[" + ", ".join(one(v) for v in values) + "]"
