"""The trust chain of a static-auth mesh the demo (and the tests) stand up: an operator, its
system account and one data account with a signing key, as ``nats-server`` preloads them.

A real mesh's operator material is made by the reference CLI; a console only ever reads the
account signing seed (``meshview.link.auth.load_root_seed``), so none of this ships in ``meshview``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from meshview.link.auth import UNLIMITED, NKey, RootSeed, auth_file, encode_jwt, new_nkey
from meshview.wire.names import space_token


def operator_jwt(op: NKey, *, name: str, system_account: str) -> str:
    nats = {"type": "operator", "version": 2, "system_account": system_account}
    return encode_jwt({"name": name, "sub": op.public, "nats": nats}, op)


def account_limits(*, jetstream: bool) -> dict:
    lim = {"subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED, "imports": UNLIMITED,
           "exports": UNLIMITED, "wildcards": True, "conn": UNLIMITED, "leaf": UNLIMITED}
    if jetstream:  # JetStream is on for an account iff a storage limit is non-zero
        lim.update({"mem_storage": UNLIMITED, "disk_storage": UNLIMITED,
                    "streams": UNLIMITED, "consumer": UNLIMITED})
    return lim


def account_jwt(acct: NKey, operator: NKey, *, name: str, jetstream: bool = True,
                signing_keys: list[str] | None = None, revocations: dict[str, int] | None = None,
                authorization: dict | None = None) -> str:
    nats: dict = {"type": "account", "version": 2, "limits": account_limits(jetstream=jetstream),
                  "default_permissions": {"pub": {}, "sub": {}}}
    if signing_keys:
        nats["signing_keys"] = list(signing_keys)
    if revocations:
        nats["revocations"] = dict(revocations)
    if authorization:
        nats["authorization"] = authorization
    return encode_jwt({"name": name, "sub": acct.public, "nats": nats}, operator)


@dataclass(repr=False)
class SpaceTrust:
    """Operator + system account + one data account (with a signing key) for ``space``."""

    space: str
    operator_name: str = "cotal"
    operator: NKey = field(default_factory=lambda: new_nkey("operator"))
    system: NKey = field(default_factory=lambda: new_nkey("account"))
    account: NKey = field(default_factory=lambda: new_nkey("account"))
    signing: NKey = field(default_factory=lambda: new_nkey("account"))
    revocations: dict[str, int] = field(default_factory=dict)
    extra_accounts: dict[str, str] = field(default_factory=dict)  # pub -> JWT (e.g. a callout account)

    def __repr__(self) -> str:
        return f"SpaceTrust({self.space}, {self.account.public})"

    @property
    def operator_jwt(self) -> str:
        return operator_jwt(self.operator, name=self.operator_name, system_account=self.system.public)

    @property
    def system_jwt(self) -> str:
        return account_jwt(self.system, self.operator, name="SYS", jetstream=False)

    @property
    def account_jwt(self) -> str:
        return account_jwt(self.account, self.operator, name=space_token(self.space), jetstream=True,
                           signing_keys=[self.signing.public], revocations=self.revocations)

    @property
    def root_seed(self) -> RootSeed:
        return RootSeed(self.space, self.account.public, self.signing)

    def server_config(self) -> str:
        """``nats-server`` config lines: operator mode with a preloaded MEMORY resolver."""
        extra = [f"  {pub}: {jwt}" for pub, jwt in self.extra_accounts.items()]
        return "\n".join([
            f"operator: {self.operator_jwt}", f"system_account: {self.system.public}",
            "resolver: MEMORY", "resolver_preload: {",
            f"  {self.system.public}: {self.system_jwt}", f"  {self.account.public}: {self.account_jwt}",
            *extra, "}",
        ])

    def save(self, root: str | os.PathLike) -> Path:
        """Write ``<root>/.cotal/auth/auth.json`` (0600 in a 0700 dir), the reference layout."""
        path = auth_file(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        doc = {
            "space": self.space,
            "operator": {"seed": self.operator.seed.decode(), "jwt": self.operator_jwt},
            "sys": {"pub": self.system.public, "jwt": self.system_jwt},
            "account": {"pub": self.account.public, "seed": self.account.seed.decode(),
                        "jwt": self.account_jwt, "signingSeed": self.signing.seed.decode(),
                        "signingPub": self.signing.public},
        }
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(doc, indent=2).encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path
