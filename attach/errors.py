"""The attach layer's error root, so the CLI's edge and a caller catch every refusal of the
control plane, a session or a terminal as one kind."""

from __future__ import annotations


class AttachLayerError(Exception):
    """The root of every error attach raises; its text is one sentence for a user (the CLI's
    edge prints it as is: ``cotal_tui.cli.failure_sentence``). Not ``AttachError``, which is one
    refused or failed attach (attach.session.client)."""
