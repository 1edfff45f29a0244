"""``python -m cotal_tui``: the same CLI as the installed ``cotal`` and ``cotal-tui`` scripts."""

import sys

from cotal_tui.cli import main

sys.exit(main())
