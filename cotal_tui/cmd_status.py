"""``cotal status``: see :mod:`cotal_tui.cmd_control`."""

from cotal_tui.cmd_control import status_arguments as add_arguments, run_status as run

__all__ = ["add_arguments", "run"]
