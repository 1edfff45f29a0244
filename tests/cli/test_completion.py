"""``cotal completion bash|zsh|fish`` and the ``cotal __complete`` query behind it.

The bash script is driven the way bash drives it (COMP_WORDS / COMP_CWORD, then the completion
function, then COMPREPLY), against a real demo manager on the session broker for the names that
come from the mesh. The ``cotal`` it runs is a shim on PATH that starts this interpreter's CLI,
so the test needs no installed script (tests/cli/test_packaging.py covers those).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.manager.spec import PERSONAS

ROOT = Path(__file__).resolve().parents[2]


def _shim(bindir: Path, name: str) -> None:
    """``name`` on PATH: this interpreter's CLI, run under that program name."""
    p = bindir / name
    p.write_text("#!/bin/sh\n"
                 f"exec {sys.executable} -c 'import sys; sys.argv[0] = \"{name}\"; "
                 "from cotal_tui.cli import main; sys.exit(main())' \"$@\"\n")
    p.chmod(0o755)


@pytest.fixture
def env(tmp_path) -> dict:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("cotal", "cotal-tui"):
        _shim(bindir, name)
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "COTAL_HOME": str(home),
            "PYTHONPATH": str(ROOT)}


DRIVE = r'''
source <("$PROG" completion bash) || exit 3
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
fn=$(complete -p "$PROG" | sed -E 's/.*-F ([^ ]+) .*/\1/')
"$fn"
printf '%s\n' "${COMPREPLY[@]}"
'''


def complete_sync(env: dict, *words: str, prog: str = "cotal") -> list[str]:
    """COMPREPLY for the line ``words`` with the cursor on its last word."""
    out = subprocess.run(["bash", "-c", DRIVE, "_", *words], env={**env, "PROG": prog},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


# on a live mesh the tests allow more than a <TAB>'s 1.2 s: CI's two cores run a second worker
LIVE = {"COTAL_COMPLETE_BUDGET": "6"}


async def complete(env: dict, *words: str) -> list[str]:
    """The same, without blocking the loop a demo manager answers on."""
    p = await asyncio.create_subprocess_exec("bash", "-c", DRIVE, "_", *words,
                                             env={**env, **LIVE, "PROG": "cotal"},
                                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 30)
    assert p.returncode == 0, err.decode()
    return [w for w in out.decode().splitlines() if w]


def test_the_bash_script_loads(env):
    out = subprocess.run(["bash", "-c", "source <(cotal completion bash) && complete -p cotal"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "complete -F _cotal cotal"


def test_the_script_is_for_the_name_it_was_run_as(env):
    out = subprocess.run(["bash", "-c", "source <(cotal-tui completion bash) && complete -p cotal-tui"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "complete -F _cotal_tui cotal-tui", out.stderr
    assert complete_sync(env, "cotal-tui", "ver", prog="cotal-tui") == ["version"]


def test_verbs_flags_and_choices_come_from_the_parsers(env):
    assert complete_sync(env, "cotal", "at") == ["attach"]
    assert set(complete_sync(env, "cotal", "s")) == {"spawn", "stop", "status", "send"}
    assert complete_sync(env, "cotal", "--ver") == ["--version"]
    assert complete_sync(env, "cotal", "watch", "--no-d") == ["--no-dms"]
    assert complete_sync(env, "cotal", "watch", "--read-only", "--notify-escape", "osc") == ["osc9", "osc777"]
    assert complete_sync(env, "cotal", "watch", "--notify-escape", "=", "b") == ["both", "bell"]
    assert complete_sync(env, "cotal", "watch", "--plain", "--events", "") == ["full", "summary", "off"]
    assert complete_sync(env, "cotal", "completion", "") == ["bash", "zsh", "fish"]
    assert "--version" in complete_sync(env, "cotal", "ps", "--")
    # a flag's value is not a positional: the seat name after `--on X` is still the first one
    assert complete_sync(env, "cotal", "input", "--on", "x", "alice", "") == []


def test_a_file_flag_completes_files(env, tmp_path):
    (tmp_path / "my.creds").write_text("")
    assert complete_sync(env, "cotal", "watch", "--creds", str(tmp_path / "my.")) == [str(tmp_path / "my.creds")]


@pytest.fixture
async def demo(broker, nc, space):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice"), SeatSpec("alfred", "local.alfred"),
                                SeatSpec("bob", "local.bob")])
    await m.start()
    yield m
    await m.stop()


async def test_names_from_a_live_mesh(demo, broker, space, env):
    conn = ["--server", broker.url, "--space", space]
    assert sorted(await complete(env, "cotal", "attach", *conn, "al")) == ["alfred", "alice"]
    assert sorted(await complete(env, "cotal", "stop", *conn, "--force", "")) == ["alfred", "alice", "bob"]
    assert await complete(env, "cotal", "input", *conn, "b") == ["bob"]
    assert await complete(env, "cotal", "attach", "--server", broker.url, f"--space={space}", "--name", "bo") == ["bob"]
    personas = await complete(env, "cotal", "spawn", *conn, "")
    assert sorted(personas) == sorted(PERSONAS)
    # --space values: what the broker holds (the space being typed is not a filter)
    spaces = await complete(env, "cotal", "watch", "--server", broker.url, "--space", space[:1])
    assert space in spaces


async def test_the_query_prints_name_and_description(demo, broker, space, env):
    p = await asyncio.create_subprocess_exec("cotal", "__complete", "agents", "--server", broker.url,
                                             "--space", space, env={**env, **LIVE}, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 10)
    rows = dict(line.split("\t", 1) for line in out.decode().splitlines())
    assert sorted(rows) == ["alfred", "alice", "bob"] and err == b"" and p.returncode == 0
    assert demo.instance_id in rows["alice"]


def test_a_dead_broker_is_silent_and_quick(env):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"nats://127.0.0.1:{port}"
    for kind in ("agents", "personas", "spaces"):
        t0 = time.monotonic()
        out = subprocess.run(["cotal", "__complete", kind, "--server", url], env=env,
                             capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
        assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), kind
        assert took < 2.0, f"{kind}: {took:.2f}s"
    # a broker that never answers (TCP accepted, no INFO): the bound holds too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        t0 = time.monotonic()
        out = subprocess.run(["cotal", "__complete", "agents", "--server",
                              f"nats://127.0.0.1:{s.getsockname()[1]}"], env=env,
                             capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "") and took < 2.0, took
    t0 = time.monotonic()
    assert complete_sync(env, "cotal", "attach", "--server", url, "") == []
    # the bash side adds its own interpreter start; still a <TAB>, not a hang
    assert time.monotonic() - t0 < 4.0


def test_unknown_kind_and_junk_are_silent(env):
    for argv in (["__complete"], ["__complete", "bogus"], ["__complete", "agents", "--connect-timeout", "x"]):
        out = subprocess.run(["cotal", *argv], env=env, capture_output=True, text=True, timeout=30)
        assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), argv


def test_names_from_the_query_are_never_expanded(env, tmp_path):
    """What the query prints is offered literally: shell syntax in it is not run."""
    script = subprocess.run(["cotal", "completion", "bash"], env=env, capture_output=True, text=True,
                            timeout=30).stdout
    fake = tmp_path / "fakebin"
    fake.mkdir()
    marker = tmp_path / "PWNED"
    (fake / "cotal").write_text(f"#!/bin/sh\nprintf 'a$(touch {marker})\\tx\\nab`touch {marker}`\\n'\n")
    (fake / "cotal").chmod(0o755)
    drive = script + 'COMP_WORDS=(cotal stop a); COMP_CWORD=2; _cotal; printf "%s\\n" "${COMPREPLY[@]}"'
    out = subprocess.run(["bash", "-c", drive], env={**env, "PATH": f"{fake}:{env['PATH']}"},
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.splitlines() == [f"a$(touch {marker})", f"ab`touch {marker}`"]
    assert not marker.exists()


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(env, shell):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (apt-get install {shell}); the script is not syntax-checked")
    text = subprocess.run(["cotal", "completion", shell], env=env, capture_output=True, text=True,
                          timeout=30).stdout
    assert "__complete" in text and "attach" in text
    out = subprocess.run([shell, "-n"], input=text, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_zsh_script_registers(env):
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (apt-get install zsh)")
    out = subprocess.run(["zsh", "-fc", "autoload -Uz compinit && compinit -u -D && "
                          "source <(cotal completion zsh) && print -r -- ${_comps[cotal]}"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "_cotal", out.stderr


def test_fish_script_registers(env):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (apt-get install fish)")
    out = subprocess.run(["fish", "--no-config", "-c", "cotal completion fish | source; complete -C 'cotal at'"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout.split("\t")[0].strip() == "attach", out.stderr


def test_a_bad_shell_is_a_usage_error(env):
    out = subprocess.run(["cotal", "completion", "tcsh"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "invalid choice: 'tcsh'" in out.stderr and "Traceback" not in out.stderr


# ---- words bash splits at ':' (COMP_WORDBREAKS) -------------------------------------------------

LINE_DRIVE = r'''
source <("$PROG" completion bash) || exit 3
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
fn=$(complete -p "$PROG" | sed -E 's/.*-F ([^ ]+) .*/\1/')
"$fn"
printf '%s\n' "${COMPREPLY[@]}"
'''


def bash_words(line: str, breaks: str = ":=") -> list[str]:
    """COMP_WORDS as readline splits ``line``: at blanks, and each run of COMP_WORDBREAKS
    characters (default ``"'><=;|&(:``, here the two a command line uses) a word of its own."""
    import re

    words: list[str] = []
    for token in line.split():
        words.extend(w for w in re.split(f"([{re.escape(breaks)}]+)", token) if w)
    if line.endswith(" "):
        words.append("")
    return words


def complete_line(env: dict, line: str, budget: str | None = None) -> list[str]:
    """COMPREPLY for ``line`` typed into an interactive bash, the cursor at its end."""
    extra = {"COTAL_COMPLETE_BUDGET": budget} if budget else {}
    out = subprocess.run(["bash", "-c", LINE_DRIVE, "_", line, *bash_words(line)],
                         env={**env, **extra, "PROG": "cotal"}, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


def test_the_helper_splits_as_bash_does():
    assert bash_words("cotal runs --server nats://h:4222 ") == [
        "cotal", "runs", "--server", "nats", ":", "//h", ":", "4222", ""]
    assert bash_words("cotal watch --space=ma") == ["cotal", "watch", "--space", "=", "ma"]


def test_a_url_with_colons_is_one_word(env):
    # split at ':', the URL counted as four positionals and `runs` offered no verb
    assert complete_line(env, "cotal runs --server nats://127.0.0.1:4222 j") == ["journal"]
    assert complete_line(env, "cotal runs --server=nats://127.0.0.1:4222 --space m ") == [
        "ps", "journal", "answer", "start", "resume"]
    assert complete_line(env, "cotal watch --server nats://h:1 --no-d") == ["--no-dms"]
    # the word under the cursor holds a ':': bash replaces only what follows the last one
    assert complete_line(env, "cotal watch --server nats://h:1 --events=su") == ["summary"]


def test_themes_complete(env):
    from cotal_tui.themes import theme_names

    got = complete_line(env, "cotal watch --server nats://h:4222 --theme cotal-")
    assert got == ["cotal-dark", "cotal-light"]
    assert set(complete_line(env, "cotal watch --theme ")) == set(theme_names())


async def test_names_from_a_live_mesh_through_a_url_with_colons(demo, broker, space, env):
    # the query gets the whole URL (split at ':' it got `nats`, reached nothing and offered nothing)
    line = f"cotal stop --server {broker.url} --space {space} al"
    got = await asyncio.to_thread(complete_line, env, line, LIVE["COTAL_COMPLETE_BUDGET"])
    assert sorted(got) == ["alfred", "alice"]
