"""A link to PostgreSQL that can go silent: packets dropped, no reset, as when a host is lost.

Loopback cannot do it (the kernel answers for both ends), so the path crosses a veth pair:

    client (this process) --> 10.231.x.2:6543, a relay in its own network namespace
        --> 10.231.x.1:P, a relay in this process --> PostgreSQL at 127.0.0.1:5432

`silence()` takes the namespace's end of the veth down: the client's packets are dropped at
the veth, nothing answers and nothing resets; its kernel retransmits until a timeout gives
up (libpq's tcp_user_timeout and keepalives when set, the kernel's ~15 minutes otherwise).
`restore()` brings it back. Everything is created per use and removed afterwards: the
namespace (its relay with it), the veth pair, and the /30 on the root side. Needs root.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.tcp_proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]
RELAY_PORT = 6543


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass
class SilentLink:
    namespace: str
    inner: str
    address: str
    port: int

    def silence(self) -> None:
        _ip("-n", self.namespace, "link", "set", self.inner, "down")

    def restore(self) -> None:
        _ip("-n", self.namespace, "link", "set", self.inner, "up")


def available() -> str | None:
    """Why a silent link cannot be made here, or None."""
    if os.geteuid() != 0:
        return "a silent link needs root (network namespaces)"
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as error:
        return f"a silent link needs iproute2 with network namespaces: {error}"
    return None


@contextmanager
def silent_link(target: tuple[str, int]) -> Iterator[SilentLink]:
    tag = uuid.uuid4().hex[:6]
    namespace, outer, inner = f"hbx-{tag}", f"hbx{tag}a", f"hbx{tag}b"
    # A /30 of its own, picked at random among 16384 in 10.231.0.0/16, so that links made at
    # once (parallel test processes, other helpers) do not share addresses.
    block = random.randrange(16384) * 4
    here, there = (
        f"10.231.{block // 256}.{block % 256 + 1}",
        f"10.231.{block // 256}.{block % 256 + 2}",
    )
    relay: subprocess.Popen[str] | None = None
    proxy: Proxy | None = None
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", namespace)
        _ip("addr", "add", f"{here}/30", "dev", outer)
        _ip("link", "set", outer, "up")
        _ip("-n", namespace, "addr", "add", f"{there}/30", "dev", inner)
        _ip("-n", namespace, "link", "set", inner, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        proxy = Proxy(target, (here, 0))
        command = [sys.executable, "-m", "tests.support.tcp_proxy", there, str(RELAY_PORT)]
        relay = subprocess.Popen(
            ["ip", "netns", "exec", namespace, *command, here, str(proxy.port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert relay.stdout is not None and relay.stdout.readline().strip() == "ready"
        yield SilentLink(namespace, inner, there, RELAY_PORT)
    finally:
        if relay is not None:
            relay.terminate()
            relay.wait(timeout=10)
            if relay.stdout is not None:
                relay.stdout.close()
        if proxy is not None:
            proxy.close()
        subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=10)
