"""``cotal completion bash|zsh|fish``: a completion script for the shell, and the hidden
``cotal __complete agents|personas|spaces`` query it calls.

The two layers of Cobra, Click and the reference CLI's ``completion``: a script printed once
(``source <(cotal completion bash)``) and a dispatcher the script runs on <TAB>. Here the verbs
and each verb's flags (with their choices, and which take a file) are generated into the script
from the argparse parsers, so a <TAB> on them starts no process; only the mesh's names go through
the query: agent names for ``attach``/``stop``/``input``/``status`` (one bounded ``ps``),
personas for ``spawn``/``personas`` (``list-personas``), ``--space`` values (the registry in
``$COTAL_HOME``, and the spaces the broker holds). The script passes along the connection flags
already typed on the line (``--server``, ``--space``, ``--creds`` …).

The query is bounded (:data:`QUERY_BUDGET_S` after it starts, or ``$COTAL_COMPLETE_BUDGET``,
enforced by a timer that ends the process) and says nothing on failure: no output, no traceback, exit 0, so a dead broker
costs the <TAB> a moment and shows no candidates. Every name it prints passes the wire grammar
of its kind (seat name, persona ref, space token): a hostile manager cannot put shell syntax
into a completion.

The script is generated for the name the program was run as (``cotal`` or ``cotal-tui``), and
asks the command the user is completing (the line's first word) for the dynamic names.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field

from meshview.errors import swallowed

SHELLS = ("bash", "zsh", "fish")
KINDS = ("agents", "personas", "spaces")
QUERY_BUDGET_S = 1.2  # the query's whole run after its start (the interpreter's start comes first)
BUDGET_ENV = "COTAL_COMPLETE_BUDGET"  # seconds, for a mesh farther away than a <TAB> should wait
CONNECT_TIMEOUT_S = 0.8
PS_DEADLINE_MS = 800
# the connection flags the script forwards to the query (cotal_tui/cli/connection.py)
CONNECTION_FLAGS = ("--server", "--space", "--creds", "--nkey", "--tls-ca", "--bearer-file",
                    "--sentinel-creds")
# (verb, positional dest or flag) -> the dynamic kind of its value; "*": any verb
DYNAMIC = {
    ("attach", "name"): "agents", ("attach", "--name"): "agents",
    ("stop", "name"): "agents", ("input", "name"): "agents", ("status", "name"): "agents",
    ("spawn", "persona"): "personas", ("personas", "name"): "personas",
    ("*", "--space"): "spaces",
}
FILE_METAVARS = {"FILE": "files", "DIR": "dirs"}
FILE_DESTS = {"file": "files"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to print the script for")


def program_name() -> str:
    from cotal_tui.cli import program_name as prog

    return prog()


# ---- what the parsers say -----------------------------------------------------------------------


@dataclass
class Option:
    flags: tuple[str, ...]
    help: str
    kind: str | None  # None: takes no value; "": a value we do not complete; else its kind
    repeat: bool = False


@dataclass
class Verb:
    name: str
    help: str
    options: list[Option] = field(default_factory=list)
    positionals: list[tuple[str, str, str]] = field(default_factory=list)  # (dest, kind, nargs)


def _static_choices(key: str) -> str | None:
    """Values a flag takes from a list the program knows when the script is made (``--theme``:
    the console's themes, which the parser leaves open for names a later version adds)."""
    if key == "--theme":
        try:
            from cotal_tui.themes import theme_names
        except ImportError:  # a build without the console: nothing to offer
            return None
        return "choice:" + " ".join(n for n in theme_names()
                                    if n and n.isascii() and all(c.isalnum() or c in "._-" for c in n))
    return None


def _kind(verb: str, key: str, action: argparse.Action) -> str:
    if (static := _static_choices(key)) is not None:
        return static
    if (verb, key) in DYNAMIC:
        return DYNAMIC[(verb, key)]
    if ("*", key) in DYNAMIC:
        return DYNAMIC[("*", key)]
    if action.choices:
        return "choice:" + " ".join(str(c) for c in action.choices)
    if isinstance(action.metavar, str) and action.metavar in FILE_METAVARS:
        return FILE_METAVARS[action.metavar]
    return FILE_DESTS.get(action.dest, "")


def _short_help(action: argparse.Action) -> str:
    text = action.help if isinstance(action.help, str) and action.help != argparse.SUPPRESS else ""
    text = re.split(r"(?<=[a-z)])[;(]| \(", text, maxsplit=1)[0].strip() if text else ""
    return text[:70]


def verbs(parser: argparse.ArgumentParser) -> list[Verb]:
    """Every subcommand's flags and positionals, from the parsers ``build_parser(None)`` built."""
    from cotal_tui.cli import COMMANDS

    out = []
    for name, sp in parser.get_default("_subparsers").items():
        v = Verb(name, COMMANDS[name][1] if name in COMMANDS else "")
        for a in sp._actions:  # argparse keeps its actions private
            if a.help == argparse.SUPPRESS:
                continue
            if a.option_strings:
                takes = a.nargs != 0
                key = next((f for f in a.option_strings if f.startswith("--")), a.option_strings[0])
                v.options.append(Option(tuple(a.option_strings), _short_help(a),
                                        _kind(name, key, a) if takes else None,
                                        repeat=isinstance(a, argparse._AppendAction)))
            else:
                v.positionals.append((a.dest, _kind(name, a.dest, a), str(a.nargs)))
        out.append(v)
    return out


# ---- the scripts ------------------------------------------------------------------------------


def _fn(prog: str) -> str:
    """The shell function's name: ``_cotal``, ``_cotal_tui``."""
    return "_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in prog)


def _sq(s: str) -> str:
    """A single-quoted shell word."""
    return "'" + s.replace("'", "'\\''") + "'"


def bash_script(prog: str, vs: list[Verb]) -> str:
    fn = _fn(prog)
    arms = []
    for v in vs:
        flags = " ".join(f for o in v.options for f in o.flags)
        valued = " ".join(f for o in v.options if o.kind is not None for f in o.flags)
        cases: dict[str, list[str]] = {}
        for o in v.options:
            if o.kind:
                cases.setdefault(o.kind, []).extend(o.flags)
        prev = "".join(f"                {'|'.join(fl)}) kind={_sq(k)} ;;\n" for k, fl in cases.items())
        fixed = [k for _, k, n in v.positionals if n not in ("+", "*")]
        rest = next((k for _, k, n in v.positionals if n in ("+", "*")), "")
        pos = " ".join(_sq(k) for k in fixed)
        arms.append(
            f"        {v.name})\n"
            f"            flags={_sq(flags)}; valued={_sq(' ' + valued + ' ')}; pos=({pos}); rest={_sq(rest)}\n"
            + (f"            case \"$prev\" in\n{prev}            esac\n" if prev else "")
            + "            ;;\n")
    verb_words = " ".join(v.name for v in vs)
    conn = "|".join(CONNECTION_FLAGS)
    return f"""# {prog} completion for bash and zsh's bashcompinit: source <({prog} completion bash)
# Verbs and flags are in this script; agent names, personas and spaces come from the mesh through
# a bounded `{prog} __complete` query that prints nothing when the mesh does not answer.
{fn}_rejoin() {{
    # words/cword: COMP_WORDS with the pieces bash split at ':' (COMP_WORDBREAKS) joined back,
    # so `--server nats://host:4222` is one word, as the program will see it; '=' stays split
    local line="$COMP_LINE" i w rest gap
    words=(); cword=$COMP_CWORD
    if [[ -z "$line" ]]; then words=("${{COMP_WORDS[@]}}"); return; fi
    for ((i=0; i<${{#COMP_WORDS[@]}}; i++)); do
        w="${{COMP_WORDS[i]}}"
        rest="${{line#"${{line%%[![:blank:]]*}}"}}"
        gap=$(( ${{#rest}} != ${{#line}} ))
        line="${{rest#"$w"}}"
        if (( i > 0 && !gap )) && [[ "$w" == :* || "${{words[${{#words[@]}}-1]}}" == *: ]]; then
            words[${{#words[@]}}-1]+="$w"
            (( i <= COMP_CWORD )) && cword=$((cword-1))
        else
            words+=("$w")
        fi
    done
    (( cword < 0 )) && cword=0
    return 0
}}
{fn}_query() {{
    # $1: agents|personas|spaces; the connection flags already on the line go along
    local -a conn=()
    local i j w
    for ((i=1; i<cword; i++)); do
        w="${{words[i]}}"
        case "$w" in
            {conn})
                j=$((i+1)); [[ "${{words[j]}}" == "=" ]] && j=$((j+1))
                (( j < cword )) && conn+=("$w" "${{words[j]}}") ;;
            --*=*)
                case "${{w%%=*}}" in {conn}) conn+=("${{w%%=*}}" "${{w#*=}}") ;; esac ;;
        esac
    done
    "${{words[0]}}" __complete "$1" "${{conn[@]}}" 2>/dev/null
}}
{fn}_words() {{
    # the words of $1 that start with $cur, taken literally (compgen -W would expand them)
    local w
    for w in $1; do [[ "$w" == "$cur"* ]] && COMPREPLY+=("$w"); done
}}
{fn}_kind() {{
    local line
    case "$1" in
        agents|personas|spaces)
            while IFS= read -r line; do
                line="${{line%%$'\\t'*}}"
                [[ -n "$line" && "$line" == "$cur"* ]] && COMPREPLY+=("$line")
            done < <({fn}_query "$1") ;;
        files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
        dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
        choice:*) {fn}_words "${{1#choice:}}" ;;
    esac
}}
{fn}() {{
    COMPREPLY=()
    local -a words=() pos=()
    local cword=0
    {fn}_rejoin
    {fn}_main
    # bash replaces only the piece after the last ':' of the word: offer that piece
    # (bash-completion's __ltrim_colon_completions)
    local word="${{words[cword]}}"
    if [[ "$word" == *:* && "$COMP_WORDBREAKS" == *:* ]]; then
        local colon="${{word%"${{word##*:}}"}}" k
        for k in "${{!COMPREPLY[@]}}"; do COMPREPLY[k]="${{COMPREPLY[k]#"$colon"}}"; done
    fi
    return 0
}}
{fn}_main() {{
    local cur="${{words[cword]}}" prev="" pi=$((cword-1)) verb="" vi=0 i w n=0 skip=0
    local flags="" valued="" rest="" kind=""
    # `--space=ma`: bash splits at = (COMP_WORDBREAKS), the flag is the word before the =
    [[ "$cur" == "=" ]] && cur=""
    [[ "${{words[pi]}}" == "=" ]] && pi=$((pi-1))
    (( pi > 0 )) && prev="${{words[pi]}}"
    for ((i=1; i<cword; i++)); do
        w="${{words[i]}}"
        if [[ "$w" != -* ]]; then verb="$w"; vi=$i; break; fi
    done
    if [[ -z "$verb" ]]; then
        if [[ "$cur" == -* ]]; then {fn}_words "--help --version"; else {fn}_words {_sq(verb_words)}; fi
        return 0
    fi
    case "$verb" in
{''.join(arms)}        *) return 0 ;;
    esac
    if [[ "$cur" == -* ]]; then {fn}_words "$flags"; return 0; fi
    if [[ -n "$prev" && "$valued" == *" $prev "* ]] && (( pi > vi )); then
        {fn}_kind "$kind"
        return 0
    fi
    for ((i=vi+1; i<cword; i++)); do
        w="${{words[i]}}"
        if [[ "$w" == "=" ]]; then skip=1; continue; fi
        if (( skip )); then skip=0; continue; fi
        if [[ "$w" == -* ]]; then [[ "$w" != *=* && "$valued" == *" $w "* ]] && skip=1; continue; fi
        n=$((n+1))
    done
    kind="$rest"
    (( n < ${{#pos[@]}} )) && kind="${{pos[n]}}"
    {fn}_kind "$kind"
    return 0
}}
complete -F {fn} {prog}
"""


def _zesc(s: str) -> str:
    """Text inside an _arguments spec: no brackets or colons (they delimit its fields)."""
    return s.replace("[", "(").replace("]", ")").replace(":", " -").replace("\\", "")


def _zaction(kind: str | None, fn: str) -> str:
    if kind in KINDS:
        return f"{fn}_names {kind}"
    if kind == "files":
        return "_files"
    if kind == "dirs":
        return "_files -/"
    if kind and kind.startswith("choice:"):
        return "(" + kind.removeprefix("choice:") + ")"
    return " "


def zsh_script(prog: str, vs: list[Verb]) -> str:
    fn = _fn(prog)
    arms = []
    for v in vs:
        specs = []
        for o in v.options:
            desc = _zesc(o.help)
            for f in o.flags:
                star = "*" if o.repeat else ""
                if o.kind is None:
                    specs.append(f"{star}{f}[{desc}]")
                else:
                    label = f.lstrip("-")
                    specs.append(f"{star}{f}=[{desc}]:{label}:{_zaction(o.kind, fn)}")
        for i, (dest, kind, nargs) in enumerate(v.positionals, 1):
            action = _zaction(kind, fn)
            if nargs in ("+", "*"):
                specs.append(f"*:{dest}:{action}")
            elif nargs == "?":
                specs.append(f"{i}::{dest}:{action}")
            else:
                specs.append(f"{i}:{dest}:{action}")
        body = " \\\n                ".join(_sq(s) for s in specs)
        arms.append(f"        {v.name})\n            _arguments -s \\\n                {body} ;;\n")
    verb_list = "\n".join(f"        {_sq(v.name + ':' + _zesc(v.help))}" for v in vs)
    conn = "|".join(CONNECTION_FLAGS)
    return f"""#compdef {prog}
# {prog} completion for zsh: source <({prog} completion zsh)  (or save it as _{prog} on $fpath)
# Verbs and flags are in this script; agent names, personas and spaces come from the mesh through
# a bounded `{prog} __complete` query that prints nothing when the mesh does not answer.
{fn}_names() {{
    local -a conn items
    local i w
    for ((i=2; i<CURRENT; i++)); do
        w="${{words[i]}}"
        case "$w" in
            {conn}) (( i + 1 < CURRENT )) && conn+=("$w" "${{words[i+1]}}") ;;
            --*=*) case "${{w%%=*}}" in {conn}) conn+=("${{w%%=*}}" "${{w#*=}}") ;; esac ;;
        esac
    done
    items=("${{(@f)$("${{words[1]}}" __complete "$1" "${{conn[@]}}" 2>/dev/null)}}")
    items=("${{(@)items//$'\\t'/:}}")
    items=("${{(@)items:#}}")
    (( ${{#items}} )) && _describe -t "$1" "$1" items
}}
{fn}() {{
    local -a verbs
    verbs=(
{verb_list}
    )
    if (( CURRENT == 2 )); then
        if [[ "${{words[2]}}" == -* ]]; then
            compadd -- --help --version
        else
            _describe -t commands command verbs
        fi
        return
    fi
    local verb="${{words[2]}}"
    local -a all_words=("${{words[@]}}")
    local all_current=$CURRENT
    shift words
    (( CURRENT-- ))
    case "$verb" in
{''.join(arms)}    esac
    words=("${{all_words[@]}}")
    CURRENT=$all_current
}}
if [[ "$funcstack[1]" == "{fn}" ]]; then
    {fn} "$@"
else
    compdef {fn} {prog}
fi
"""


def fish_script(prog: str, vs: list[Verb]) -> str:
    fn = "_" + _fn(prog)  # fish: __cotal…
    conn = " ".join(CONNECTION_FLAGS)
    lines = [
        f"# {prog} completion for fish: {prog} completion fish | source",
        f"#   (or save it as ~/.config/fish/completions/{prog}.fish)",
        "# Verbs and flags are in this script; agent names, personas and spaces come from the mesh",
        f"# through a bounded `{prog} __complete` query that prints nothing when the mesh does not answer.",
        f"function {fn}_names",
        "    set -l tokens (commandline -opc)",
        "    set -l conn",
        "    set -l n (count $tokens)",
        "    for i in (seq 2 $n)",
        "        set -l w $tokens[$i]",
        f"        if contains -- $w {conn}",
        "            set -l j (math $i + 1)",
        "            if test $j -le $n",
        "                set -a conn $w $tokens[$j]",
        "            end",
        "        else if string match -qr -- '^--[a-z-]+=' $w",
        "            set -l kv (string split -m1 = -- $w)",
        f"            if contains -- $kv[1] {conn}",
        "                set -a conn $kv[1] $kv[2]",
        "            end",
        "        end",
        "    end",
        "    $tokens[1] __complete $argv[1] $conn 2>/dev/null",
        "end",
        f"function {fn}_no_verb",
        "    set -l tokens (commandline -opc)",
        "    for w in $tokens[2..-1]",
        "        if not string match -q -- '-*' $w",
        "            return 1",
        "        end",
        "    end",
        "    return 0",
        "end",
        f"complete -c {prog} -f",
        f"complete -c {prog} -n {fn}_no_verb -l help -d 'show help and exit'",
        f"complete -c {prog} -n {fn}_no_verb -l version -d 'print which cotal this is and exit'",
    ]

    def fish_value(kind: str | None) -> str:
        if kind is None:
            return ""
        if kind in KINDS:
            return f" -x -a {_sq(f'({fn}_names {kind})')}"
        if kind in ("files", "dirs"):
            return " -r -F"
        if kind.startswith("choice:"):
            return f" -x -a {_sq(kind.removeprefix('choice:'))}"
        return " -x"

    for v in vs:
        lines.append(f"complete -c {prog} -n {fn}_no_verb -a {v.name} -d {_sq(v.help[:70])}")
        cond = f"-n {_sq('__fish_seen_subcommand_from ' + v.name)}"
        for o in v.options:
            names = " ".join(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in o.flags)
            lines.append(f"complete -c {prog} {cond} {names}{fish_value(o.kind)} -d {_sq(o.help)}")
        for _, kind, _ in v.positionals[:1]:
            if kind in KINDS:
                lines.append(f"complete -c {prog} {cond} -a {_sq(f'({fn}_names {kind})')}")
            elif kind in ("files", "dirs"):
                lines.append(f"complete -c {prog} {cond} -F")
            elif kind.startswith("choice:"):
                lines.append(f"complete -c {prog} {cond} -a {_sq(kind.removeprefix('choice:'))}")
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}


def script(shell: str, prog: str | None = None) -> str:
    from cotal_tui.cli import build_parser

    return SCRIPTS[shell](prog or program_name(), verbs(build_parser(None)))


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell))
    return 0


# ---- the query the scripts call ---------------------------------------------------------------


class _QuietParser(argparse.ArgumentParser):
    """Junk on the line is no candidates, never a usage message on the terminal."""

    def error(self, message: str):
        raise ValueError(message)


def _query_parser() -> argparse.ArgumentParser:
    from cotal_tui.cli.connection import add_connection_arguments

    p = _QuietParser(add_help=False)
    p.add_argument("kind")
    add_connection_arguments(p)
    return p


async def _agents(target) -> list[tuple[str, str]]:
    from attach.control import verbs as control
    from attach.control.connection import session_target
    from meshview.wire.endpoint import is_seat_name

    result = await control.ps(session_target(target), deadline_ms=PS_DEADLINE_MS)
    return seat_words([r for r in result.rows if is_seat_name(r.name)])


def seat_words(rows: list) -> list[tuple[str, str]]:
    """A seat's name, or its ids when two seats share the name (a name the verbs would refuse
    as ambiguous is no completion); an id passes the identity grammar or is left out."""
    from meshview.model.resolve import fold
    from meshview.wire.subjects import is_identity_token, split_principal

    count: dict[str, int] = {}
    for r in rows:
        count[fold(r.name)] = count.get(fold(r.name), 0) + 1
    out = []
    for r in rows:
        desc = f"{r.agent} · {r.process} · {r.instance_id}"
        if count[fold(r.name)] == 1:
            out.append((r.name, desc))
        elif is_identity_token(r.id) or split_principal(r.id) is not None:
            out.append((r.id, f"{r.name} (shared name) · {desc}"))
    return out


async def _personas(target) -> list[tuple[str, str]]:
    from attach.control.connection import session_target
    from attach.control.instances import list_personas
    from meshview.wire.endpoint import is_persona

    _, items = await list_personas(session_target(target))
    return [(p["name"], str(p.get("role") or p.get("description") or "")) for p in items
            if is_persona(p["name"])]


def _registered() -> list[tuple[str, str]]:
    from meshview.link.connect import load_registry
    from meshview.wire.names import space_token

    return [(s, "registered") for e in load_registry() if space_token(s := str(e["space"])) == s]


async def _spaces(target) -> list[tuple[str, str]]:
    from meshview.link.connect import connect
    from meshview.observe.spaces import list_spaces
    from meshview.wire.names import space_token

    nc, _ = await connect(target)
    try:
        return [(s.space, f"{s.agents} present · {s.messages} messages") for s in await list_spaces(nc)
                if space_token(s.space) == s.space]
    finally:
        try:
            await nc.close()
        except Exception:  # noqa: BLE001 - a completion never reports [counted: COTAL_LOG]
            swallowed("cotal_tui.cli.completion:_spaces")


def _lines(pairs: list[tuple[str, str]]) -> str:
    """One ``name<TAB>description`` line per name (names already checked by their source)."""
    from meshview.wire.sanitize import inline

    seen, out = set(), []
    for name, desc in pairs:
        if name in seen:
            continue
        seen.add(name)
        desc = inline(desc, 60).replace("\t", " ")
        out.append(f"{name}\t{desc}" if desc else name)
    return "".join(line + "\n" for line in out)


def run_query(argv: list[str]) -> int:
    """``cotal __complete KIND [connection flags]``: candidates one per line (``name<TAB>what``),
    or nothing at all; always exit 0, within :data:`QUERY_BUDGET_S`."""
    started = time.monotonic()
    budget = query_budget()
    timer = threading.Timer(budget + 0.2, os._exit, (0,))  # the bound, whatever blocks
    timer.daemon = True
    timer.start()
    try:
        text = _query(argv, started + budget)
    except BaseException:  # noqa: BLE001 - a <TAB> shows nothing rather than a traceback
        text = ""
    if text:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError:
            pass
    timer.cancel()
    return 0


def query_budget() -> float:
    """:data:`QUERY_BUDGET_S`, or ``$COTAL_COMPLETE_BUDGET`` (0.1 to 10 s)."""
    try:
        return min(10.0, max(0.1, float(os.environ[BUDGET_ENV])))
    except (KeyError, ValueError):
        return QUERY_BUDGET_S


def _query(argv: list[str], deadline: float) -> str:
    import asyncio
    import dataclasses

    args, _ = _query_parser().parse_known_args(argv)
    if args.kind not in KINDS:
        return ""
    from cotal_tui.cli.connection import connect_request
    from cotal_tui.cli.process import quiet_library_logs
    from meshview.link.connect import none_current, resolve_target

    quiet_library_logs()
    local = _registered() if args.kind == "spaces" else []
    if args.kind == "spaces":
        args.space = None  # the space being completed is not a filter
    target = resolve_target(connect_request(args), pick=none_current)
    if target.problem:
        return _lines(local)
    target = dataclasses.replace(target, timeout=CONNECT_TIMEOUT_S)
    ask = {"agents": _agents, "personas": _personas, "spaces": _spaces}[args.kind]

    async def bounded() -> list[tuple[str, str]]:
        left = deadline - time.monotonic()
        return await asyncio.wait_for(ask(target), max(0.05, left))

    try:
        remote = asyncio.run(bounded())
    except BaseException:  # noqa: BLE001 - the mesh did not answer: the local names only
        remote = []
    return _lines(local + remote)
