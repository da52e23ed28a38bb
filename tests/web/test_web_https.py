"""HTTPS against a local server with a certificate made by the test (openssl CLI)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _web_httpd import FakeDNS, LocalServer

from execengine.errors import ConnectionFailedError
from execengine.web.fetch import Fetcher
from execengine.web.guard import AddressPolicy

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command is needed to make a test certificate")


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    key, crt = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=secure.test",
         "-addext", "subjectAltName=DNS:secure.test"],
        check=True, capture_output=True, timeout=30,
    )
    return key, crt


@pytest.fixture
def tls_server(cert: tuple[Path, Path]) -> Iterator[LocalServer]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert[1], cert[0])
    with LocalServer(tls=ctx) as srv:
        srv.static("/", "<title>Secure</title><p>over TLS</p>")
        yield srv


def _fetcher(cert: Path | None) -> Fetcher:
    ctx = ssl.create_default_context(cafile=str(cert)) if cert else None
    return Fetcher(timeout=5, resolver=FakeDNS({"secure.test": ["127.0.0.1"]}),
                   policy=AddressPolicy(allowed_hosts=("secure.test",)), ssl_context=ctx)


def test_https_fetch_sends_sni_and_verifies_the_name(tls_server: LocalServer,
                                                      cert: tuple[Path, Path]) -> None:
    resp = _fetcher(cert[1]).fetch(f"https://secure.test:{tls_server.port}/")
    assert resp.status == 200 and b"over TLS" in resp.body
    seen = tls_server.requests[0]
    assert seen.sni == "secure.test"
    assert seen.headers["host"] == f"secure.test:{tls_server.port}"


def test_untrusted_certificate_is_refused(tls_server: LocalServer) -> None:
    with pytest.raises(ConnectionFailedError, match="TLS certificate of secure.test not trusted"):
        _fetcher(None).fetch(f"https://secure.test:{tls_server.port}/")
    assert tls_server.requests == []


def test_certificate_for_another_name_is_refused(tls_server: LocalServer,
                                                 cert: tuple[Path, Path]) -> None:
    fetcher = Fetcher(timeout=5, resolver=FakeDNS({"other.test": ["127.0.0.1"]}),
                      policy=AddressPolicy(allow_private=True),
                      ssl_context=ssl.create_default_context(cafile=str(cert[1])))
    with pytest.raises(ConnectionFailedError, match="not trusted"):
        fetcher.fetch(f"https://other.test:{tls_server.port}/")
