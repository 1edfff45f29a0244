"""``python -m cotal_tui.cli``: the same entry point as the installed ``cotal`` script."""

import sys

from cotal_tui.cli import main

sys.exit(main())
