"""TLS: ``cotal watch --server tls://… --tls-ca ca.pem`` against a TLS-only broker, with and
without creds; a wrong or missing CA is one sentence and exit 1, never a traceback."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from support.jwt import AuthSpace, observer_permissions, write_creds
from support.watchproc import WatchProc

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")


def _ca_and_cert(d: Path, name: str) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server cert for 127.0.0.1 signed by it."""
    ca_key, ca = d / f"{name}-ca.key", d / f"{name}-ca.pem"
    key, csr, cert = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.pem"
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*a: str) -> None:
        subprocess.run(["openssl", *a], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(ca_key), "-out", str(ca), "-days", "2", "-subj", f"/CN={name} test CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return ca, cert, key


@pytest.fixture(scope="module")
def tls_mesh(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca, cert, key = _ca_and_cert(d, "good")
    other_ca, _, _ = _ca_and_cert(d, "other")
    auth = AuthSpace("tls")
    obs = auth.mint_user("observer", None)
    obs = auth.mint_user("observer", observer_permissions("tls", obs.public), key=obs.key)
    creds = write_creds(d / "observer.creds", obs.jwt, obs.key.seed)
    tls = f'tls {{\n  cert_file: "{cert}"\n  key_file: "{key}"\n  timeout: 2\n}}'
    b = Broker(name="cotal-tls", extra_config=auth.server_config() + "\n" + tls).start()
    infra = auth.mint_user("infra", None)
    infra_creds = write_creds(d / "infra.creds", infra.jwt, infra.key.seed)

    async def provision() -> None:  # watch refuses a space that is not provisioned
        ctx = ssl.create_default_context(cafile=str(ca))
        nc = await nats.connect(f"tls://127.0.0.1:{b.port}", tls=ctx, user_credentials=str(infra_creds))
        try:
            await provision_space(nc, "tls")
        finally:
            await nc.close()

    asyncio.run(provision())
    yield {"broker": b, "ca": ca, "other_ca": other_ca, "creds": creds,
           "url": f"tls://127.0.0.1:{b.port}"}
    b.stop()


async def test_tls_with_ca_and_creds_connects(tls_mesh):
    w = WatchProc.start("--json", "--server", tls_mesh["url"], "--space", "tls",
                        "--creds", str(tls_mesh["creds"]), "--tls-ca", str(tls_mesh["ca"]))
    try:
        await w.wait_for(lambda: w.objs("state"), 20, "a state line over TLS")
        assert w.objs("state")[0]["connection"] == "connected"
    finally:
        assert w.stop() == 0


@pytest.mark.parametrize("ca", ["other_ca", None])
async def test_untrusted_broker_cert_is_one_sentence(tls_mesh, ca):
    args = ["--json", "--server", tls_mesh["url"], "--space", "tls",
            "--creds", str(tls_mesh["creds"]), "--connect-timeout", "3"]
    if ca:
        args += ["--tls-ca", str(tls_mesh[ca])]
    w = WatchProc.start(*args)
    rc = await asyncio.to_thread(w.wait_exit, 20)
    assert rc == 1
    err = w.stderr_text.strip()
    assert err.count("\n") == 0 and err.startswith("cotal: "), err
    assert "TLS" in err or "certificate" in err, err
    assert "Traceback" not in err
