"""``cotal spawn``: see :mod:`cotal_tui.cmd_control`."""

from cotal_tui.cmd_control import spawn_arguments as add_arguments, run_spawn as run

__all__ = ["add_arguments", "run"]
