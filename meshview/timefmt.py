"""How long ago, or for how long, in the few characters a roster row or log line can spare.

One module for the stream, the console and ``cotal ps``, so a duration reads the same
everywhere it is shown.
"""

from __future__ import annotations


def age(ms: float | None) -> str:
    """Compact floored age, the one spelling of the stream and the console: ``0s``, ``59s``,
    ``40m``, ``9h`` (hours up to two days), ``3d``. Future stamps clamp to 0."""
    if ms is None:
        return "?"
    s = int(max(0.0, ms) // 1000)
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m"
    h = m // 60
    if h < 48:
        return f"{h}h"
    return f"{h // 24}d"


def uptime(ms: int) -> str:
    """A process's uptime as the reference CLI prints it (``running 3.5h``, ``exited after 4m``):
    rounded, one decimal from an hour up."""
    s = ms / 1000
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    if s < 86400:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"
