"""Error roots shared by meshview's layers, so a caller catches one kind of refusal however deep
it was raised.

Each module keeps its own typed errors (connect's transport errors, the participant's send
errors); where two of them mean the same thing to a caller, they derive from one root here.
"""

from __future__ import annotations


class PermissionDenied(Exception):
    """The broker refused this credential a publish or a subscription: the root of every
    layer's denial (a connection's :class:`meshview.link.connect.SubjectDenied`, a send's
    :class:`meshview.act.participant.PublishDenied`), so ``except PermissionDenied`` catches each."""
