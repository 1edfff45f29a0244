"""A stand-in of the reference auth plane for user-auth meshes (SPEC §9, §10, App. B): an IdP
stand-in, the actors ledger, the exchange (HTTP ``POST /exchange``) and the auth callout on an
operator-mode ``nats-server``. It ships with the demo and backs the tests; ``meshview`` never
imports it (a console only ever holds a bearer and the sentinel creds)."""
