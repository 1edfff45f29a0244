"""Error roots shared by meshview's layers, so a caller catches one kind of refusal however deep
it was raised: :class:`MeshviewError` under every error meshview raises, and below it the roots
two modules share.

Each module keeps its own typed errors (connect's transport errors, the participant's send
errors); where two of them mean the same thing to a caller, they derive from one root here.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Iterator


class MeshviewError(Exception):
    """The root of every error meshview raises; its text is one sentence for a user (the CLI's
    edge prints it as is: ``cotal_tui.cli.failure_sentence``)."""


class PermissionDenied(MeshviewError):
    """The broker refused this credential a publish or a subscription: the root of every
    layer's denial (a connection's :class:`meshview.link.connect.SubjectDenied`, a send's
    :class:`meshview.act.participant.PublishDenied`), so ``except PermissionDenied`` catches each."""


# ---- what a kept ``except Exception`` lets go ------------------------------------------------

_swallowed: Counter[str] = Counter()


def swallowed(site: str) -> None:
    """Count one exception a kept ``except Exception`` let go, by site: such a handler keeps the
    console up past a best-effort step, and the count keeps it from hiding a bug. The counts are
    reported once, at exit, in the ``COTAL_LOG`` file (``cotal_tui.cli.process``)."""
    _swallowed[site] += 1


def swallowed_counts() -> dict[str, int]:
    """Exceptions let go so far in this process, by site."""
    return dict(_swallowed)


@contextmanager
def swallowing(site: str) -> Iterator[None]:
    """``contextlib.suppress(Exception)`` that counts what it lets go (:func:`swallowed`); the
    ``with`` line says why its block is best effort."""
    try:
        yield
    except Exception:  # noqa: BLE001 - the caller's best-effort block [counted: COTAL_LOG]
        swallowed(site)
