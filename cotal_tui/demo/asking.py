"""The demo seat that really asks: ``migrator`` runs programs/migrate_ask.py on a managed pty,
asks ``Proceed with the migration? [y/N]``, heartbeats ``waiting`` on ``approval`` while it waits
(the manager reads the condition file the program writes) and acts on the answer. It is what
the triage screen (``T``) unblocks in place within a minute of ``cotal demo``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cotal_tui.demo.manager import SeatSpec
from cotal_tui.demo.personas import PROGRAMS
from meshview.wire.outbound import DEV_OWNER

ASKING_NAME = "migrator"


def asking_seat(state_dir: str, *, name: str = ASKING_NAME, owner: str = DEV_OWNER,
                question: str = "", pause_s: float = 30.0) -> SeatSpec:
    """A managed seat whose program asks ``question`` (default: the migration prompt) and waits;
    its condition file lives in ``state_dir``."""
    argv = [sys.executable, str(Path(PROGRAMS) / "migrate_ask.py"), name, question, str(pause_s)]
    return SeatSpec(name=name, principal_id=f"{owner}.{name}", kind="line", argv=argv, role="migrations",
                    presence=True, description="asks before it migrates",
                    condition_file=os.path.join(state_dir, f"{name}.condition"))
