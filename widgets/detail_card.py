"""Detail cards for a message and for an agent: every fact the wire carries, wrapped."""

from __future__ import annotations

import json

from rich.text import Text

from meshview.model.frames import Activity
from meshview.model.snapshot import FeedEntry, Peer, Snapshot
from meshview.model.stalled import Stalled
from meshview.wire.messages import ArtifactPart, BrokenPart, DataPart, ExtensionPart, Part, TextPart
from widgets.doing import doing_of, doing_text
from widgets.line_list import Item, LineList
from widgets.markdown_card import looks_like_markdown, markdown_lines
from widgets.presentation import (
    activity_line, age, clock, drawing_look, drawing_with, harness_tag, look_of, peer_facts, safe,
    safe_body, status_glyph, who, wrap_offsets,
)

DELIVERY = {"channel": "multicast (channel)", "dm": "unicast (DM)", "anycast": "anycast (service)",
            "lifecycle": "lifecycle (inferred by the observer)"}


#: SPEC §6's reserved meta keys for where an agent works: the card shows them as one block.
CODE_KEYS = ("repo", "branch", "head", "cwd")


def code_context(meta: dict) -> list[tuple[str, str]]:
    """An agent's code context from its card's reserved meta keys, terminal-safe and bounded (a
    meta value is a peer's string; the wire already caps it at 256 bytes): ``repo``, ``branch``,
    ``head`` (the commit, whole: a prefix is the reader's choice), ``cwd``. Absent keys are not shown."""
    out = []
    for k in CODE_KEYS:
        v = meta.get(k)
        if isinstance(v, str) and v.strip():
            out.append((k, safe(v, 200)))
    return out


def _field(label: str, value: Text | str, width: int) -> list[Text]:
    v = value if isinstance(value, Text) else Text(value)
    line = Text(f"{label:>10}  ", style="bold")
    line.append_text(v)
    out: list[Text] = []
    plain_room = max(8, width - 12)
    if line.cell_len <= width:
        return [line]
    for s, e in wrap_offsets(v.plain, plain_room, plain_room):
        row = Text((f"{label:>10}  " if not out else " " * 12), style="bold" if not out else "")
        row.append_text(v[s:e])
        out.append(row)
    return out


def _body(text: str, width: int, indent: int = 2) -> list[Text]:
    out = []
    for line in safe_body(text):
        for s, e in wrap_offsets(line, width - indent, width - indent):
            out.append(Text(" " * indent + line[s:e]))
    return out


def _part_lines(parts: tuple[Part, ...], width: int) -> list[Text]:
    info = drawing_look().info
    out: list[Text] = []
    for p in parts:
        # a tagged part's kind is its type; an extension (or broken) part names its own
        kind = p.kind if isinstance(p, (ExtensionPart, BrokenPart)) else type(p).__name__
        if kind == "text" or isinstance(p, TextPart):
            continue
        data = p.data if isinstance(p, DataPart) else None
        if data is not None:
            try:
                body = json.dumps(data, ensure_ascii=False, sort_keys=True)[:2000]
            except (TypeError, ValueError):
                body = repr(data)[:2000]
            out.append(Text("  data part", style=info))
            out.extend(_body(body, width, 4))
        elif isinstance(p, ArtifactPart) and p.digest:
            out.append(Text(f"  artifact {safe(p.name, 80)} · {safe(p.mediaType, 60)} · "
                            f"{p.size} B · {safe(p.digest, 80)}", style=info))
        else:
            out.append(Text(f"  part {safe(kind, 60)}", style=info))
    return out


def message_card(e: FeedEntry, snap: Snapshot | None, width: int,
                 markdown: bool | None = None) -> list[Item]:
    """Every fact of a message, and its whole body: rendered as Markdown when ``markdown``
    (None: when the body is Markdown by its structure, :func:`looks_like_markdown`)."""
    lines: list[Text] = [Text("message", style="bold reverse")]
    lines += _field("delivery", DELIVERY.get(e.kind, e.kind) + (" · event channel" if e.event else "")
                    + (" · history" if e.historical else " · live"), width)
    lines += _field("time", f"{clock(e.ts)}  (received {clock(e.received)})", width)
    if snap is not None:
        sender = snap.sender(e)
        src = who(sender.label, sender.role, drawing_look())
        if sender.claim is not None:  # the envelope's name: shown as said, never believed
            src.append(f' (claims "{safe(sender.claim, 80)}")', style="italic")
    else:
        src = who(e.from_name, e.from_role, drawing_look())
    src.append(f"  {safe(e.from_id, 80)}", style="dim")
    lines += _field("from", src, width)
    if e.kind == "channel":
        lines += _field("to", "#" + safe(e.channel, 120), width)
    elif e.kind == "anycast":
        lines += _field("to", "@" + safe(e.to_service, 120), width)
    elif e.kind == "dm":
        to = Text()
        names = ([snap.labels.label(i) or "" for i in e.to_ids] if snap is not None
                 else e.to_names or e.to_ids)
        for k, (n, i) in enumerate(zip(names, e.to_ids)):
            if k:
                to.append(", ", style="dim")
            if n and n != i:
                to.append_text(who(n, None, drawing_look()))
                to.append(" ")
            to.append(safe(i, 200), style="dim")  # the whole id: the card wraps, never cuts
        if e.count > 1:
            to.append(f"  ({e.count}× burst)", style="dim")
        lines += _field("to", to, width)
    if e.lifecycle:
        lines += _field("event", e.lifecycle, width)
    if e.id:
        ident = Text(safe(e.id, 120))
        if e.conflict:
            ident.append("  ⚠ reused: another sender used this id first (both are shown)",
                         style="bold yellow")
        lines += _field("id", ident, width)
    lines += _thread_lines(e, snap, width)
    lines.append(Text(""))
    md = looks_like_markdown(e.text) if markdown is None else markdown
    rendered = markdown_lines(e.text, width) if e.kind != "lifecycle" and md else None
    if rendered is not None:
        lines.append(Text("  markdown, rendered · links and images shown as plain text · "
                          "m: as sent", style="dim italic"))
        lines += rendered
    else:
        if md and e.kind != "lifecycle":
            lines.append(Text("  as sent: as markdown, part of it would not show (nested too "
                              "deep, or a table too wide)", style="dim italic"))
        elif markdown is False or (e.kind != "lifecycle" and looks_like_markdown(e.text)):
            lines.append(Text("  as sent · m: rendered as markdown", style="dim italic"))
        lines += _body(e.text, width)
    lines += _part_lines(e.parts, width)
    return [("card", lines)]


def _thread_lines(e: FeedEntry, snap: Snapshot | None, width: int) -> list[Text]:
    """replyTo (with the original's first line when known), contextId and mentions, as the
    envelope carries them; ``-`` when absent, so a reader sees the fields exist."""
    if e.kind == "lifecycle":
        return []
    out: list[Text] = []
    if e.reply_to:
        reply = Text(safe(e.reply_to, 200))
        original = snap.original_of(e) if snap is not None else None
        excerpt = original.text if original is not None else e.reply_excerpt
        if excerpt is not None:
            first = safe(excerpt.lstrip().split("\n", 1)[0], 120)
            src = (f"{safe(snap.sender(original).text(), 64)}: "
                   if original is not None and snap is not None else "")
            reply.append(f"  ({src}{first})", style="dim")
        if original is not None:
            reply.append("  enter jumps to it", style="bold")
        elif e.reply_ambiguous or (snap is not None and snap.original_ambiguous(e)):
            reply.append("  ambiguous: several senders used this id, none in this "
                         "conversation", style="bold yellow")
        else:
            reply.append("  not in the feed", style="dim italic")
        out += _field("replyTo", reply, width)
    else:
        out += _field("replyTo", Text("-", style="dim"), width)
    out += _field("contextId", safe(e.wire_context_id, 200) if e.wire_context_id
                  else Text("-", style="dim"), width)
    out += _field("mentions", ", ".join("@" + safe(m, 64) for m in e.mentions) if e.mentions
                  else Text("-", style="dim"), width)
    return out


def agent_card(p: Peer, snap: Snapshot, width: int, cards: dict | None = None,
               managed: list[tuple[str, str]] | None = None, *, stalled: Stalled | None = None,
               viewers: str | None = None, activity: Activity | None = None) -> list[Item]:
    """``managed``: the label/value lines of the seat a manager hosts for this agent
    (``widgets.seat_text.detail_lines``), shown as their own section. ``stalled``: the model's
    verdict (``MeshModel.stalled()``); ``viewers``: ``attach.control.viewers.viewers_label`` of its seat;
    ``activity``: the frame ledger's facts of this principal (``model.frames.agent(id, now)``)."""
    now = snap.now
    look = drawing_look()
    glyph, style = status_glyph(p.status, look)
    title = Text(f" {glyph} ", style=style)
    title.append_text(who(snap.name_of(p.id), p.role, look))  # suffixed when the name is shared
    lines: list[Text] = [Text("agent" if p.kind == "agent" else "endpoint", style="bold reverse"),
                         title]
    lines += _field("name", safe(p.name, 120), width)
    lines += _field("role", safe(p.role or "-", 120), width)
    lines += _field("kind", safe(p.kind, 40), width)
    lines += _field("id", safe(p.id, 120), width)
    facts = peer_facts(p, now)
    status = Text(glyph + " ", style=style)
    status.append(" · ".join(facts))
    lines += _field("status", status, width)
    if stalled is not None and p.status == "working":
        lines += _field("stalled", Text(f"working · {stalled.label()}", style="bold yellow"), width)
    if viewers:
        lines += _field("viewers", safe(viewers, 300), width)
    if p.condition and p.condition.message:
        lines += _field("condition", f"{safe(p.condition.code, 24)}: {safe(p.condition.message, 400)}",
                        width)
    act = activity_line(p, now)
    lines += _field("activity", act or "-", width)
    if p.description:
        lines += _field("about", safe(p.description, 400), width)
    if p.tags:
        lines += _field("tags", ", ".join(safe(t, 40) for t in p.tags), width)
    meta = dict(p.meta)
    runs = " · ".join(x for x in (safe(meta.get("connector", ""), 40), harness_tag(p.meta) or "",
                                  safe(meta.get("runtime", ""), 40)) if x)
    lines += _field("runs", runs or "-", width)
    lines += _field("model", safe(meta.get("model", "-"), 80), width)
    skills = (cards or {}).get(p.id) or _skills_from_meta(meta)
    if skills:
        lines.append(Text(f"{'skills':>10}", style="bold"))
        for name, desc in skills:
            row = Text(" " * 12 + safe(name, 40), style=look.info)
            if desc:
                row.append(f" - {safe(desc, 200)}", style="dim")
            lines.append(row)
    else:
        lines += _field("skills", "-", width)
    code = code_context(meta)
    if code:
        lines.append(Text(f"{'code':>10}", style="bold"))
        for k, v in code:
            lines += _field(k, v, width)
    other = {k: v for k, v in meta.items() if k not in ("connector", "model", "runtime", "skills", *CODE_KEYS)}
    for k in sorted(other):
        lines += _field(safe(k, 10), safe(other[k], 200), width)
    lines += _field("lifecycle", f"{safe(p.lifecycle_uid or '-', 40)} · incarnation {p.incarnations}",
                    width)
    lines += _field("heartbeat", f"{age(now - p.ts)} ago", width)
    if managed:
        lines.append(Text(""))
        head = Text("managed seat", style="bold")
        head.append("  a attach · p peek", style="dim")
        lines.append(head)
        labw = max(len(k) for k, _ in managed)
        for k, v in managed:
            row = Text(f"  {k:>{labw}}  ", style="bold")
            row.append(safe(v, 200))
            row.truncate(width, overflow="ellipsis")
            lines.append(row)
    if activity is not None:
        lines += _activity_lines(activity, now, width)
    # recent traffic: last 6 rows sent or received (its activity frames are not traffic)
    recent = []
    for e in reversed(snap.feed):
        if e.kind == "lifecycle" or e.event:
            continue
        if e.from_id == p.id:
            recent.append(("→", e))
        elif p.id in e.to_ids:
            recent.append(("←", e))
        if len(recent) >= 6:
            break
    lines.append(Text(""))
    lines.append(Text("recent traffic", style="bold"))
    if not recent:
        lines.append(Text("  none in the feed window", style="dim italic"))
    for arrow, e in recent:
        row = Text(f"  {clock(e.ts)} {arrow} ")
        if e.kind == "channel":
            row.append("#" + safe(e.channel, 40), style=look.info)
        elif e.kind == "anycast":
            row.append("@" + safe(e.to_service, 40), style=look.service)
        elif arrow == "→":
            row.append(", ".join(safe(snap.name_of(t), 24) for t in e.to_ids))
        else:
            row.append(safe(snap.sender(e).text(), 48), style="")
        row.append(": " + safe(e.text.split("\n", 1)[0], 200), style="dim")
        row.truncate(width, overflow="ellipsis")
        lines.append(row)
    return [("card", lines)]


def _activity_lines(a: Activity, now: float, width: int) -> list[Text]:
    """What the agent's event frames say: its open run (id, who began it, how long ago), the
    last tool it started ("last tool": nothing on the wire says a tool ended), what it last
    said, its last failed run, and runs / tools in the last hour."""
    look = drawing_look()
    out = [Text(""), Text("activity · from its event frames", style="bold")]
    if a.run_id is not None:
        run = Text(safe(a.run_id, 64))
        run.append(f" · {safe(a.turn_source or 'turn source unknown', 24)}", style="dim")
        if a.run_started is not None:
            run.append(f" · open {age(max(0.0, now - a.run_started))}")
        out += _field("run", run, width)
    else:
        out += _field("run", Text("none open", style="dim"), width)
    if a.tool is not None and a.tool_at is not None:
        d = doing_of(a)
        said = (doing_text(d, now, card=True).removeprefix("last tool ") if d is not None and d.kind == "tool"
                else f"⚙ {safe(a.tool, 64) or '(unnamed)'} {age(max(0.0, now - a.tool_at))} ago"
                     " (in an earlier run)")
        out += _field("last tool", Text(said, style=look.info), width)
    if a.text:
        when = f"  {age(max(0.0, now - a.text_at))} ago" if a.text_at is not None else ""
        t = Text(safe(a.text, 200), style="italic")
        t.append(when, style="dim")
        out += _field("last text", t, width)
    if a.error_at is not None:
        err = Text(f"✗ {safe(a.error or 'run failed', 120)} {age(max(0.0, now - a.error_at))} ago",
                   style=f"bold {look.error}")
        out += _field("last error", err, width)
    def n(k: int, what: str) -> str:
        return f"{k} {what}{'' if k == 1 else 's'}"

    hour = f"{n(a.runs_hour, 'run')} · {n(a.tools_hour, 'tool')} in the last hour · " \
           f"{n(a.frames, 'frame')}"
    if a.faulted:
        hour += " · frames missing"
    out += _field("runs/h", hour, width)
    return out


def _skills_from_meta(meta: dict) -> list[tuple[str, str]]:
    raw = meta.get("skills")
    if not raw:
        return []
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return [(s.strip(), "") for s in str(raw).split(",") if s.strip()]
    out = []
    for s in data if isinstance(data, list) else []:
        if isinstance(s, dict):
            out.append((str(s.get("name") or s.get("id") or "?"), str(s.get("description") or "")))
        else:
            out.append((str(s), ""))
    return out


class DetailCard(LineList):
    """A scrollable card; the screen around it closes on any other key."""

    show_cursor = False

    def __init__(self, builder, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._builder = builder

    def build(self, width: int) -> list[Item]:
        with drawing_with(look_of(self)):  # the builder's cards draw in this theme's colours
            return self._builder(width)

    def on_mount(self) -> None:
        self.rebuild()
