"""``cotal demo``: the embedded mesh, then the console (or ``--headless``: the mesh only)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def _positive(kind):
    def parse(v: str):
        try:
            x = kind(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {v!r}") from None
        if x <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {v}")
        return x
    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--headless", action="store_true",
                   help="run the mesh only; print the server URL and space")
    p.add_argument("--space", default="main", help="space name (default: main)")
    p.add_argument("--seed", type=int, default=1, help="seed of the scripted team (default: 1)")
    p.add_argument("--agents", type=_positive(int), default=6, help="team size (default: 6)")
    p.add_argument("--rate", type=_positive(float), default=None,
                   help="extra channel traffic in msgs/s, for load tests")
    p.add_argument("--shell", action="store_true", help="managed seats run bash")
    p.add_argument("--port", type=int, default=0, help="broker port (default: a free one)")
    p.add_argument("--plain", action="store_true", help="line stream instead of the console")
    p.add_argument("--json", action="store_true", help="JSON Lines instead of the console")
    p.add_argument("--auth", choices=("open", "static", "user"), default="open",
                   help="open (default): no credentials; static: an operator-mode broker, the seed "
                        "in a temp COTAL_HOME's project root and a registry entry, so every command "
                        "mints its own credentials; user: a user-auth mesh (auth callout, exchange, "
                        "IdP stand-in) with two signed-in users, one temp COTAL_HOME each")
    p.add_argument("--delivery-down", action="store_true", dest="delivery_down",
                   help="the demo's stand-in delivery plane does not answer its liveness probe, so "
                        "`cotal status --components` shows it unbound")
    p.add_argument("--as-user", metavar="NAME", default=None,
                   help="--auth user: act as this demo user (olivia: admin; sam: spawn); default olivia")


def run(args: argparse.Namespace) -> int:
    from cotal_tui.demo.broker import BrokerError
    from cotal_tui.demo.mesh import DemoMesh

    if args.as_user is not None and args.auth != "user":
        print("cotal demo: --as-user needs --auth user.", file=sys.stderr)
        return 2
    try:
        mesh = DemoMesh(space=args.space, seed=args.seed, agents=args.agents, rate=args.rate,
                        shell=args.shell, port=args.port, auth=args.auth, as_user=args.as_user,
                        delivery_down=args.delivery_down)
    except ValueError as e:
        print(f"cotal demo: {e}.", file=sys.stderr)
        return 2
    try:
        mesh.start()
    except BrokerError as e:
        print(f"cotal demo: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one sentence, never a traceback
        print(f"cotal demo: could not start the mesh: {e}", file=sys.stderr)
        return 1
    try:
        acting = mesh.home_for_user if mesh.home is not None else None
        if acting is not None:  # static/user auth: this process and its children use the registry
            os.environ["COTAL_HOME"] = acting
        if args.headless:
            done = threading.Event()  # before anything is printed: a reader may stop us at once
            signal.signal(signal.SIGTERM, lambda *_: done.set())
            print(f"server: {mesh.url}\nspace:  {mesh.space}", flush=True)
            if mesh.user_homes:  # one home per user, the one acted as first
                for name, scopes, home in mesh.user_order():
                    print(f"user:   {name} (scopes {', '.join(scopes)})\nhome:   {home}", flush=True)
                print(f"connect with: COTAL_HOME={mesh.home_for_user} cotal watch   (or ps, attach, spawn...; "
                      "the other home acts as the other user; Ctrl-C stops the mesh)", file=sys.stderr, flush=True)
            elif mesh.home is not None:
                print(f"home:   {mesh.home}", flush=True)
                print(f"connect with: COTAL_HOME={mesh.home} cotal watch   (or ps, attach, spawn...; "
                      "Ctrl-C stops the mesh)", file=sys.stderr, flush=True)
            else:
                print("connect with: cotal watch --server "
                      f"{mesh.url} --space {mesh.space}   (Ctrl-C stops the mesh)",
                      file=sys.stderr, flush=True)
            try:
                while not done.wait(0.5):
                    pass
            except KeyboardInterrupt:
                pass
            return 0
        from cotal_tui.cli import main as cli_main

        argv = ["watch"] if mesh.home is not None else ["watch", "--server", mesh.url, "--space", mesh.space]
        if args.plain:
            argv.append("--plain")
        if args.json:
            argv.append("--json")
        return cli_main(argv)
    finally:
        mesh.stop()
