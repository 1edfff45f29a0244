"""Screens of the console: the space view and its compose keys, lenses, detail cards, NEEDS YOU,
attach and tile, control verbs, help, the space picker and the replay screens.

May import widgets, attach, meshview, each other and the support modules (session, shell,
operator, seats, config); never the App, the palette or the cli: they reach the App through
the typed shell (``cotal_tui/shell.py``).
"""
