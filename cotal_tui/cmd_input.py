"""``cotal input``: see :mod:`cotal_tui.cmd_control`."""

from cotal_tui.cmd_control import input_arguments as add_arguments, run_input as run

__all__ = ["add_arguments", "run"]
