"""The mesh as data: wire rules, the observer, the model (no UI imports)."""

from meshview import natsload as _natsload

_natsload.install()
