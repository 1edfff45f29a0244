"""The mesh as data: wire rules, the observer, the model (no UI imports).

Importing it changes nothing in the interpreter: the aiohttp deferral for nats-py
(:mod:`meshview.natsload`) is installed by the ``cotal`` entry point, not here."""
