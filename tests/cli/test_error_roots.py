"""One error root per layer (issue 36): every error meshview, attach and cotal_tui raise derives
from its layer's root, and one that reaches the CLI's edge is said as its own one sentence on
stderr, exit 1, no traceback. Run as a real process: the edge is ``cotal_tui.cli.main``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_errors_space import LEAK

from attach.errors import AttachLayerError
from attach.session.client import AttachError
from attach.terminal.detach import DetachKeyError
from cotal_tui.cli import failure_sentence
from cotal_tui.errors import LAYER_ROOTS, CotalError
from cotal_tui.keymap import KeymapError
from meshview.act.participant import PublishDenied
from meshview.errors import MeshviewError, PermissionDenied
from meshview.link.connect import ConnectError
from meshview.record.replay import RecordingError
from meshview.wire.rail import FrameError

ROOT = Path(__file__).resolve().parents[2]


def test_each_layers_errors_derive_from_its_root_and_keep_their_old_bases():
    assert issubclass(ConnectError, MeshviewError) and issubclass(ConnectError, RuntimeError)
    assert issubclass(FrameError, MeshviewError) and issubclass(FrameError, ValueError)
    assert issubclass(PublishDenied, PermissionDenied) and issubclass(RecordingError, MeshviewError)
    assert issubclass(AttachError, AttachLayerError) and issubclass(DetachKeyError, ValueError)
    assert issubclass(DetachKeyError, AttachLayerError)
    assert issubclass(KeymapError, CotalError) and issubclass(KeymapError, ValueError)
    assert LAYER_ROOTS == (MeshviewError, AttachLayerError, CotalError)


def test_a_root_error_is_its_own_sentence_not_a_bug():
    for e in (RecordingError("x.rec is not a cotal recording"), AttachError("refused", "the seat is taken"),
              KeymapError("line 3: no such key 'ctrl+'\nmore detail")):
        s = failure_sentence(e)
        assert "bug" not in s and s.endswith(".") and "\n" not in s, s
    assert failure_sentence(KeymapError("line 3: no such key\nmore")) == "line 3: no such key."


@pytest.mark.parametrize("root", ["meshview.errors:MeshviewError", "attach.errors:AttachLayerError",
                                  "cotal_tui.errors:CotalError"])
def test_a_raised_root_becomes_one_line_at_the_cli_edge(tmp_path, root):
    mod, cls = root.split(":")
    (tmp_path / "probe_cmd.py").write_text(textwrap.dedent(f"""
        from {mod} import {cls}

        def add_arguments(p):
            pass

        def run(args):
            raise {cls}("the probe refused, as a layer would.")
    """))
    script = ("import sys, cotal_tui.cli as c; c.COMMANDS.clear(); "
              "c.COMMANDS['probe'] = ('probe_cmd', 'a command that raises'); sys.exit(c.main(['probe']))")
    env = {k: v for k, v in os.environ.items() if k not in ("COTAL_DEBUG", "COTAL_LOG")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    env["COTAL_HOME"] = str(tmp_path / "home")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [r.stderr.strip()], r.stderr  # one line
    assert r.stderr.strip().endswith("probe: the probe refused, as a layer would."), r.stderr
    assert not LEAK.search(r.stderr), r.stderr
