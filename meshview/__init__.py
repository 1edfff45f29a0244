"""The mesh as data: ``wire/`` (every wire rule), connect and auth (targets, credentials), the
observer and the pure model (+ roster, traffic, feedring, snapshot, topology), the participant
(the operator's sends), record and replay, notify and the line stream.

Imports only itself (and msgspec, nats): no Textual or Rich, no attach, widgets or cotal_tui,
no argparse or signal handling (``tests/arch/test_layers.py``). Importing it changes nothing in
the interpreter: the aiohttp deferral for nats-py (:mod:`meshview.link.natsload`) is installed by the
``cotal`` entry point, not here."""
