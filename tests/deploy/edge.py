"""deploy/haproxy/hookinbox.cfg run on loopback in front of one `hookinbox serve`: the shipped
configuration with only its addresses changed, HAProxy in the foreground, stopped after."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.server import ROOT, free_port, stop

SHIPPED = ROOT / "deploy" / "haproxy" / "hookinbox.cfg"


def missing() -> str | None:
    if shutil.which("haproxy") is None:
        return "haproxy is not installed (apt-get install haproxy)"
    return None


def loopback_configuration(port: int, server: str) -> str:
    """The shipped file, listening on 127.0.0.1:`port`, with `server` (host:port) its one host."""
    text = SHIPPED.read_text()
    text = re.sub(r"^(\s*)bind :8080$", rf"\g<1>bind 127.0.0.1:{port}", text, flags=re.MULTILINE)
    servers = re.findall(r"^\s*server app\d .*$", text, flags=re.MULTILINE)
    assert servers, "the shipped configuration names no server"
    text = text.replace(servers[0], re.sub(r"\S+:8000", server, servers[0]))
    for extra in servers[1:]:
        text = text.replace(extra + "\n", "")
    return text


@contextmanager
def haproxy_in_front(server_url: str) -> Iterator[str]:
    """HAProxy with the shipped settings in front of `server_url`; yields its base URL once it
    reaches the server's /healthz."""
    port = free_port()
    server = server_url.removeprefix("http://")
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "haproxy.cfg"
        config.write_text(loopback_configuration(port, server))
        log = (Path(directory) / "haproxy.log").open("w+")
        process = subprocess.Popen(
            ["haproxy", "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT, text=True
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while not _answers(base_url + "/healthz"):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"HAProxy did not come up:\n{log.read()}")
                time.sleep(0.1)
            yield base_url
        finally:
            stop(process)
            log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def status_line(connection: socket.socket, timeout: float) -> bytes:
    """The first line the other side sends, b"" if it closes without a word."""
    connection.settimeout(timeout)
    received = b""
    while b"\r\n" not in received:
        chunk = connection.recv(4096)
        if not chunk:
            break
        received += chunk
    return received.split(b"\r\n", 1)[0]
