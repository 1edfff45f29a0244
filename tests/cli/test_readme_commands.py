"""The README runs as written: every ``cotal`` command in its shell blocks names a subcommand
that exists and only flags that subcommand's ``--help`` lists; a file it passes to ``cotal runs
start`` is shipped (and is a program the demo runs); an environment assignment in front of the
first ``cotal`` of a line is in front of every one (a second command must not lose ``COTAL_HOME``).
A block whose info string says ``sketch`` (```` ```sh sketch ````) is left out."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from functools import lru_cache
from pathlib import Path

import pytest

from cotal_tui.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELLS = ("sh", "bash", "shell", "console")
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", "<(", "$("}


def shell_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each fenced shell block not marked a sketch."""
    out, block, start, keep = [], None, 0, False
    for n, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^```(.*)$", line)
        if fence and block is None:
            info = fence.group(1).split()
            block, start = [], n + 1
            keep = bool(info) and info[0] in SHELLS and "sketch" not in info[1:]
        elif fence:
            if keep:
                out.append((start, block))
            block = None
        elif block is not None:
            block.append(line)
    return out


def commands(line: str) -> list[tuple[list[str], list[str]]]:
    """Each simple command of ``line`` that runs ``cotal``: (its environment assignments, its
    words after ``cotal``). ``<placeholders>`` and ``[optional]`` brackets are read as words."""
    line = re.sub(r"<[^<>()\n]+>", "PLACEHOLDER", line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    words = [w.strip("[]") for w in lex]
    out, cmd = [], []
    for w in words + [";"]:
        if w in SEPARATORS or set(w) <= set(";&|()<>"):
            env = []
            while cmd and re.match(r"^[A-Z_][A-Z0-9_]*=", cmd[0]):
                env.append(cmd.pop(0))
            if cmd and Path(cmd[0]).name == "cotal":
                out.append((env, cmd[1:]))
            cmd = []
        elif w:
            cmd.append(w)
    return out


@lru_cache(maxsize=None)
def help_flags(sub: str) -> frozenset[str]:
    """The flags ``cotal <sub> --help`` prints (run in-process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as e:
        main([sub, "--help"])
    assert e.value.code == 0
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", buf.getvalue()))


def problems(text: str) -> list[str]:
    found = []
    for start, lines in shell_blocks(text):
        for n, line in enumerate(lines, start):
            cmds = commands(line)
            if cmds and cmds[0][0] and any(env != cmds[0][0] for env, _ in cmds[1:]):
                found.append(f"README.md:{n}: a later cotal command drops {' '.join(cmds[0][0])}")
            for _, words in cmds:
                sub = next((w for w in words if not w.startswith("-")), None)
                if sub is None:
                    continue
                if sub not in COMMANDS:
                    found.append(f"README.md:{n}: `cotal {sub}` is no subcommand")
                    continue
                flags = help_flags(sub)
                for w in words[:words.index("--")] if "--" in words else words:
                    if w.startswith("-") and w != "-" and w.split("=", 1)[0] not in flags:
                        found.append(f"README.md:{n}: `cotal {sub}` has no flag {w.split('=', 1)[0]}")
                verb = words[words.index(sub):][1:3]
                if sub == "runs" and verb[:1] in (["journal"], ["answer"], ["resume"]) and len(verb) == 2:
                    from cotal_tui.cli.prefix import PrefixError, check_run_prefix

                    try:
                        check_run_prefix(verb[1])
                    except PrefixError:
                        found.append(f"README.md:{n}: `cotal runs {verb[0]} {verb[1]}`: not a run id or prefix")
                if words[words.index(sub):][1:2] == ["start"] and sub == "runs":
                    program = next(w for w in words[words.index("start") + 1:] if not w.startswith("-"))
                    if not (ROOT / program).is_file():
                        found.append(f"README.md:{n}: `cotal runs start {program}`: no such file is shipped")
    return found


def test_the_extraction_reads_shell_as_a_shell_does():
    line = ("COTAL_HOME=<sam's home> cotal spawn echo --name mine && cotal stop mine  # x --bogus\n")
    assert commands(line) == [(["COTAL_HOME=PLACEHOLDER"], ["spawn", "echo", "--name", "mine"]),
                              ([], ["stop", "mine"])]
    assert commands("git log -1 | cotal send '#releases' -") == [([], ["send", "#releases", "-"])]
    assert commands("source <(cotal completion bash)   # bash") == [([], ["completion", "bash"])]
    assert commands("cotal spawn echo [--on <instance>]") == [([], ["spawn", "echo", "--on", "PLACEHOLDER"])]
    assert commands(".venv/bin/cotal demo") == [([], ["demo"])]


def test_a_wrong_readme_is_caught():
    bad = "\n".join([
        "```sh", "cotal use main", "cotal ps --bogus", "cotal runs start nowhere.cotal",
        "COTAL_HOME=/h cotal spawn echo && cotal stop echo", "cotal runs resume run-d34b…", "```",
        "```sh sketch", "cotal frobnicate --all", "```"])
    assert problems(bad) == [
        "README.md:2: `cotal use` is no subcommand",
        "README.md:3: `cotal ps` has no flag --bogus",
        "README.md:4: `cotal runs start nowhere.cotal`: no such file is shipped",
        "README.md:5: a later cotal command drops COTAL_HOME=/h",
        "README.md:6: `cotal runs resume run-d34b…`: not a run id or prefix",
    ]


def test_every_readme_command_exists_as_printed():
    text = README.read_text(encoding="utf-8")
    assert sum(len(commands(line)) for _, lines in shell_blocks(text) for line in lines) >= 30
    assert problems(text) == []


def test_the_shipped_example_is_a_program_the_demo_runs():
    from cotal_tui.demo.runs import program_of

    assert "examples/release.cotal" in README.read_text(encoding="utf-8")
    assert program_of((ROOT / "examples" / "release.cotal").read_text(encoding="utf-8")).name == "release-checklist"
