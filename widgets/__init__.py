"""Textual widgets, one per file: the feed and the terminal pane on the Line API, the roster and
NEEDS-YOU rail on a lazy line list, the lenses, tabs, status bar, tiles and composer.

May import Textual, Rich, ``meshview`` (snapshots are what they draw) and ``attach`` (the mirror
a terminal pane paints, the seat wording); never ``cotal_tui``: a widget knows no App or screen.
"""
