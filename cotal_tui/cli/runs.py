"""``cotal runs``: the workflow runs a space's manager hosts (SPEC §14), for scripts.

    cotal runs [ps] [--json]                       every run: RUN ENDPOINT STATE HOLDER JOURNAL FORKED-FROM
    cotal runs journal RUN [--json]                the run's journal; an open pause shows what it asks
    cotal runs answer RUN STEPKEY --value JSON     answer the pause at STEPKEY (as journal prints it);
                                  | --text TEXT    --text sends TEXT as a JSON string; --amend re-answers
    cotal runs start FILE [--timeout DUR]          start a program on the manager
    cotal runs resume RUN [--timeout DUR]          take a run over again from its recorded program

The formats are the reference CLI's (``cotal run``): the ``ps`` table, the journal's
``#n  activation …`` / ``#n  step        <key>  <outcome>`` lines, the reply JSON of an answer.
``released`` is its own state, never a failure. The answerer is never named here: the manager
takes it from the credential. Exit status: 0 done; 1 the manager refused (its sentence on stderr)
or a ``ps`` row whose revocation could not be read; 2 bad usage, a program the manager does not
run, or a start/resume whose drive ended ``released``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cotal_tui.errors import CotalError

VERBS = ("ps", "journal", "answer", "start", "resume")
HELD_HINT = ("the run is held: one step is settled `refused`, and a resume on a host that can perform it "
             "continues exactly there")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("verb", nargs="?", default="ps", choices=VERBS, help="what to do (default: ps)")
    p.add_argument("operands", nargs="*", metavar="ARG",
                   help="RUN, RUN STEPKEY or FILE, per verb (RUN: the id or a unique prefix, e.g. run-d34b)")
    p.add_argument("--json", action="store_true", help="ps/journal: as the manager sent it")
    p.add_argument("--value", default=None, metavar="JSON",
                   help="answer: the value, as JSON (a bare string needs its own quotes: '\"yes\"')")
    p.add_argument("--text", default=None, metavar="TEXT", help="answer: TEXT, sent as a JSON string")
    p.add_argument("--amend", action="store_true", help="answer: amend an already answered step")
    p.add_argument("--timeout", default=None, metavar="DUR",
                   help="start/resume: the default checkpoint timeout (e.g. 30m; the manager's default 1h)")
    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="the manager instance to ask (its id as cotal ps prints it, or a unique prefix)")
    add_connection_arguments(p)


class _Usage(CotalError):
    pass


def _operands(args: argparse.Namespace) -> list[str]:
    want = {"ps": (0, 0), "journal": (1, 1), "answer": (2, 2), "start": (1, 1), "resume": (1, 1)}[args.verb]
    ops = list(args.operands)
    if not want[0] <= len(ops) <= want[1]:
        shape = {"ps": "no operand", "journal": "RUN", "answer": "RUN STEPKEY", "start": "FILE",
                 "resume": "RUN"}[args.verb]
        raise _Usage(f"runs {args.verb} takes {shape}")
    if args.verb != "answer" and (args.value is not None or args.text is not None or args.amend):
        raise _Usage("--value, --text and --amend belong to runs answer")
    if args.json and args.verb not in ("ps", "journal"):
        raise _Usage("--json belongs to runs ps and runs journal")
    if args.timeout is not None and args.verb not in ("start", "resume"):
        raise _Usage("--timeout belongs to runs start and runs resume")
    return ops


def answer_value(value: str | None, text: str | None) -> Any:
    """``--value`` parsed as JSON, or ``--text`` as a JSON string; exactly one of them."""
    if (value is None) == (text is None):
        raise _Usage("runs answer takes exactly one of --value JSON or --text TEXT")
    if value is None:  # exactly one of them: the text
        return text
    try:
        return json.loads(value)
    except ValueError:
        raise _Usage(f"--value is not valid JSON: {value}; a bare string needs its own quotes, "
                     "e.g. --value '\"yes\"' (or use --text yes)") from None


def ps_table(rows: list, space: str) -> tuple[list[str], list[str], list[str]]:
    """The reference ``ps`` table (stdout lines), the revocation lines under it, and the
    unchecked rows' lines for stderr."""
    from meshview.wire.sanitize import inline as clean

    if not rows:
        return [f"no workflow runs recorded in space {space}"], [], []
    table = [[clean(r.run_id, 64), clean(r.endpoint, 64), r.display_state, clean(r.holder or "-", 96),
              "-" if r.journal_high is None else str(r.journal_high), clean(r.forked_label, 256)] for r in rows]
    header = ["RUN", "ENDPOINT", "STATE", "HOLDER", "JOURNAL", "FORKED-FROM"]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    out = [line(header), *(line(t) for t in table)]
    under = [f"{clean(r.endpoint)}/{r.run_id}: revoked by {clean(r.revoked.by)} ({clean(r.revoked.reason)}); "
             "the status record is left as its driver last wrote it" for r in rows if r.revoked is not None]
    unchecked = [f"{clean(r.endpoint)}/{r.run_id}: revocation marker could not be read "
                 f"({clean(r.revocation_unreadable)}); its record reads {r.state or '(no status)'}"
                 for r in rows if r.revoked is None and r.revocation_unreadable is not None]
    return out, under, unchecked


def journal_lines(st) -> list[str]:
    from meshview.wire.sanitize import inline as clean
    from meshview.wire.runs import Activation

    head = (f"run {st.run_id} on {clean(st.endpoint)}: "
            + ("(no status)" if st.status is None else
               f"{st.state or '(no status)'}, holder {clean(st.holder or '-')}, epoch {st.epoch}"))
    out = [head]
    if not st.journal:
        return out + [f"run {st.run_id}: no journal records (never started, or retired)"]
    for r in st.journal:
        if isinstance(r, Activation):
            out.append(f"#{r.n}  activation  holder={clean(r.holder)} epoch={r.epoch} replayedTo={r.replayed_to}")
            continue
        out.append(f"#{r.n}  step        {clean(r.key, 1024)}  {clean(r.outcome or '')}")
        if r.asks is not None:
            to = f"  (escalates to {clean(r.addressee)})" if r.addressee else ""
            out.append(f"            asks        {clean(r.asks, 2048)}{to}")
    return out


def _refusal(verb: str, e) -> int:
    from meshview.wire.sanitize import inline as clean

    print(f"cotal runs {verb}: {clean(e.message, 2048)}", file=sys.stderr)
    for d in e.details:
        if isinstance(d, dict) and d.get("kind") == "ai.cotal.lang.problem":
            where = d.get("where")
            w = where if isinstance(where, dict) else {}
            at = f"{w.get('file', '<program>')}:{w.get('line', '?')}:{w.get('column', '?')}"
            print(f"  {clean(d.get('code', 'L????'))} {clean(d.get('title', ''))} ({clean(at)})\n"
                  f"    {clean(d.get('cause', ''), 2048)}\n    fix: {clean(d.get('fix', ''), 2048)}", file=sys.stderr)
    return 2 if e.code == "bad-request" else 1


async def _released(target, run_id: str, on: str | None) -> int:
    """After a start or resume: a drive that already ended ``released`` is said, and exit 2."""
    from attach.control import runs

    st = await runs.run_status(target, run_id, on=on)
    if st.state != "released":
        return 0
    refused = next((s for s in st.steps if s.status == "refused"), None)
    why = (f"RunHeld: step {refused.key} settled refused{f' ({refused.error_code})' if refused.error_code else ''}"
           if refused is not None else "the driver stopped holding the run")
    print(f"run {run_id}: released — {why}")
    if refused is not None:
        print(HELD_HINT)
    return 2


def run(args: argparse.Namespace) -> int:
    from cotal_tui.cli.control import run_verb
    from cotal_tui.cli.prefix import PrefixError, check_instance_prefix, check_run_prefix
    from cotal_tui.cli.prefix import run as whole_run

    try:
        ops = _operands(args)
        value = answer_value(args.value, args.text) if args.verb == "answer" else None
        if args.verb in ("journal", "answer", "resume"):
            check_run_prefix(ops[0])
    except (_Usage, PrefixError) as e:
        print(f"cotal runs: {e}", file=sys.stderr)
        return 2
    source = None
    if args.verb == "start":
        try:
            with open(ops[0], encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"cotal runs start: cannot read {ops[0]} ({getattr(e, 'strerror', None) or 'not UTF-8 text'})",
                  file=sys.stderr)
            return 2

    async def act(target) -> int:
        from attach.control import runs
        from meshview.wire.sanitize import inline as clean

        try:
            if args.verb in ("journal", "answer", "resume"):
                ops[0] = await whole_run(target, ops[0], args.on)
            if args.verb == "ps":
                rows = await runs.run_ps(target, on=args.on)
                if args.json:
                    for r in rows:
                        print(json.dumps({**r.raw, "manager": r.instance}, separators=(",", ":")))
                    return 0
                out, under, unchecked = ps_table(rows, clean(target.space))
                print("\n".join(out + under))
                for u in unchecked:
                    print(u, file=sys.stderr)
                return 1 if unchecked else 0
            if args.verb == "journal":
                st = await runs.run_status(target, ops[0], on=args.on)
                print(json.dumps(st.raw, separators=(",", ":")) if args.json else "\n".join(journal_lines(st)))
                return 0
            if args.verb == "answer":
                got = await runs.run_answer(target, ops[0], ops[1], value, amend=args.amend, on=args.on)
                print(json.dumps(got.raw, indent=2))
                return 0
            if args.verb == "start":
                run_id = await runs.run_start(target, source or "", file=ops[0], timeout=args.timeout, on=args.on)
                print(f"started run {run_id} on the manager; it runs there until it completes or is held")
                print(f"  cotal runs journal {run_id}    # follow its steps")
                return await _released(target, run_id, args.on)
            run_id = await runs.run_resume(target, ops[0], timeout=args.timeout, on=args.on)
            print(f"resumed run {run_id} on the manager")
            return await _released(target, run_id, args.on)
        except runs.RunsError as e:
            return _refusal(args.verb, e)
        except PrefixError as e:  # the candidates are run ids, checked against their grammar
            print(f"cotal runs {args.verb}: {e}", file=sys.stderr)
            return 2

    def check() -> None:
        check_instance_prefix(args.on)

    return run_verb("runs", args, act, check)

