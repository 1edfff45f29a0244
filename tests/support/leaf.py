"""A hub cluster (3 real nats-server nodes, JetStream on) and a leaf node that joins it.

The hub is :class:`cotal_tui.demo.broker.Broker` nodes with a ``leafnodes { listen }`` block
added through ``extra_config``; the leaf is a Broker whose config has no JetStream at all and a
``leafnodes { remotes }`` block naming every hub node (so it re-solicits a surviving node when
the one it is on dies). No accounts or auth: both sides bind the default account, so the leaf's
clients and the hub's share one subject space, and the leaf's JetStream API requests
(``$JS.API.>``) travel over the leaf connection to the hub's JetStream, which answers them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass, field

from cotal_tui.demo.broker import Broker, Cluster, free_port


HUB_DOMAIN = "hub"


class HubBroker(Broker):
    """A hub node: the Broker's config with the JetStream domain named."""

    def _write_config(self) -> str:
        path = super()._write_config()
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("jetstream {\n", f'jetstream {{\n  domain: "{HUB_DOMAIN}"\n', 1))
        return path


class LeafBroker(Broker):
    """A leaf node: no JetStream of its own, one remote listing every hub node's leaf port."""

    hub_leaf_ports: list[int]

    def __init__(self, hub_leaf_ports: list[int], **kw):
        super().__init__(**kw)
        self.hub_leaf_ports = hub_leaf_ports

    def _write_config(self) -> str:
        lines = [
            f'server_name: "{self.name}"',
            "listen: 127.0.0.1:%d" % self.port,
            "http: 127.0.0.1:%d" % self.monitor_port,
            "max_control_line: 65536",
            "leafnodes {",
            "  reconnect: \"1s\"",
            "  remotes: [ { urls: [",
            *[f"    nats-leaf://127.0.0.1:{p}" for p in self.hub_leaf_ports],
            "  ] } ]",
            "}",
            # the hub's JetStream API under its plain name, so clients need no domain option
            "mappings {",
            f'  "$JS.API.>": "$JS.{HUB_DOMAIN}.API.>"',
            "}",
        ]
        assert self.store_dir is not None
        path = os.path.abspath(os.path.join(self.store_dir, "..", f"{self.name}.conf"))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def leafz(self) -> list[dict]:
        """The leaf connections this node holds (its monitor's /leafz)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor_port}/leafz",
                                    timeout=2) as r:
            return json.loads(r.read()).get("leafs") or []


@dataclass
class HubAndLeaf:
    """Three routed hub nodes (JetStream, leaf listeners) and one leaf soliciting all three."""

    size: int = 3
    hub: Cluster | None = None
    leaf: LeafBroker | None = None
    leaf_ports: list[int] = field(default_factory=list)
    base_dir: str | None = None

    @property
    def nodes(self) -> list[Broker]:
        return self.hub.nodes if self.hub is not None else []

    @property
    def hub_urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self, timeout: float = 30.0) -> "HubAndLeaf":
        self.leaf_ports = [free_port() for _ in range(self.size)]
        ports = self.leaf_ports
        self.hub = Cluster(self.size, node_cls=HubBroker, prefix="h", cluster_name="cotal-hub",
                           extra_config=lambda i: f"leafnodes {{\n  listen: 127.0.0.1:{ports[i]}\n}}")
        self.base_dir = tempfile.mkdtemp(prefix="cotal-leaf-")
        ok = False
        try:
            self.hub.start(timeout)
            store = os.path.join(self.base_dir, "store")
            os.makedirs(store)
            self.leaf = LeafBroker(self.leaf_ports, store_dir=store, name="cotal-leaf").start(timeout)
            ok = True
        finally:
            if not ok:
                self.stop()
        return self

    def stop(self) -> None:
        if self.leaf is not None:
            self.leaf.stop()  # its store is the harness's own: kept
        if self.hub is not None:
            self.hub.stop()
        if self.base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> "HubAndLeaf":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
