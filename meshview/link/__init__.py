"""Reaching a mesh: targets, connections, credentials, the user-auth exchange and issuance."""
