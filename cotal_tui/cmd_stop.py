"""``cotal stop``: see :mod:`cotal_tui.cmd_control`."""

from cotal_tui.cmd_control import stop_arguments as add_arguments, run_stop as run

__all__ = ["add_arguments", "run"]
