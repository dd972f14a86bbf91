"""wss:// without a proxy: noughts serve --tls-cert/--tls-key, with a certificate made here."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from protocol import PROTOCOL_VERSION, Hello, Welcome, decode_server, encode


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_a_client_speaks_wss_to_noughts_serve(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server", "--port", "0", "--workers", "0",
        "--db", str(tmp_path / "g.db"), "--tls-cert", str(cert), "--tls-key", str(key),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 120)).decode()
        assert line.startswith("noughts server listening on wss://127.0.0.1:")
        url = line.split()[4]
        trusting = ssl.create_default_context(cafile=str(cert))
        async with websockets.connect(url, ssl=trusting) as ws:
            await ws.send(encode(Hello(rid=1, version=PROTOCOL_VERSION, name="ada")))
            assert isinstance(decode_server(await ws.recv()), Welcome)
        # A client that does not trust the certificate is refused by TLS itself.
        with pytest.raises(ssl.SSLCertVerificationError):
            await websockets.connect(url, ssl=ssl.create_default_context())
    finally:
        process.terminate()
        await process.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "nope.pem", "--tls-key", "nope.key"], "cannot load the TLS certificate"),
    ],
)
async def test_bad_tls_options_are_one_line_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "server", "--port", "0", "--db", str(tmp_path / "g.db"), *args,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
