"""Hosts as Linux network namespaces on one bridge: the multi-host test bed's network.

One namespace (the hub) holds a bridge; each host is a namespace with one veth (`eth0`) on it
and an address in a private /24 that exists only inside these namespaces (no default route,
nothing added to the root namespace, so no test can reach or disturb anything else). Faults
are the network's own: a link taken down (packets dropped, no reset), a path to some hosts
pinned to a MAC address nobody has (a partition), every process of a host SIGKILLed.
Everything made is removed by `close()`, including processes still running in a host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

SUBNET = "10.77.0"
NOWHERE = "02:00:00:00:00:01"
"""A locally administered MAC address no host of the bed has."""


def run(*args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=timeout)


def available() -> str | None:
    """Why the test bed cannot be built here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        run("ip", "netns", "list")
    except (OSError, subprocess.SubprocessError) as error:
        return f"iproute2 with network namespaces is needed: {error}"
    return None


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    network: Network
    _partitioned: list[Host] = field(default_factory=list)

    def exec_args(self, command: Sequence[str], *, user: str | None = None) -> list[str]:
        prefix = ["ip", "netns", "exec", self.namespace]
        if user is not None:
            prefix += ["runuser", "-u", user, "--"]
        return [*prefix, *command]

    def spawn(
        self,
        command: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a daemon in this host; its output goes to `log`."""
        handle: IO[bytes] = log.open("ab")
        # runuser drops the environment it is not given: pass it on the command line.
        wrapped = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *command]
        process = subprocess.Popen(
            self.exec_args(wrapped, user=user),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
        )
        handle.close()
        self.network.processes.append(process)
        return process

    def call(
        self,
        command: Sequence[str],
        *,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        wrapped = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *command]
        return run(*self.exec_args(wrapped, user=user), timeout=timeout, check=check)

    def pids(self) -> list[int]:
        found = run("ip", "netns", "pids", self.namespace, check=False).stdout.split()
        return [int(pid) for pid in found]

    def kill_all(self) -> int:
        """SIGKILL every process of this host, as a host lost with its power would leave them
        (the kernel still resets their connections: see `link_down` for a silent loss)."""
        killed = 0
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        return killed

    def link_down(self) -> None:
        run("ip", "-n", self.namespace, "link", "set", "eth0", "down")

    def link_up(self) -> None:
        run("ip", "-n", self.namespace, "link", "set", "eth0", "up")

    def partition_from(self, others: Sequence[Host]) -> None:
        """Drop every packet between this host and `others`, both ways, silently, as a firewall
        or a broken route does; other peers (the load balancer) still reach it.

        Each side's neighbour entry for the other is pinned to a MAC address nobody has: the
        bridge floods those frames and every port drops them. (This machine's kernel has no
        traffic-control classifiers or netfilter to load, so no filter can do it.)"""
        for other in others:
            self._pin(other.address)
            other._pin(self.address)
            self._partitioned.append(other)

    def _pin(self, address: str) -> None:
        run(
            "ip", "-n", self.namespace, "neigh", "replace", address,
            "lladdr", NOWHERE, "dev", "eth0", "nud", "permanent",
        )  # fmt: skip

    def heal(self) -> None:
        for other in self._partitioned:
            run("ip", "-n", self.namespace, "neigh", "del", other.address, "dev", "eth0",
                check=False)  # fmt: skip
            run("ip", "-n", other.namespace, "neigh", "del", self.address, "dev", "eth0",
                check=False)  # fmt: skip
        self._partitioned.clear()


@dataclass
class Network:
    """The hub and its hosts; `close()` removes them all."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:4])
    hosts: dict[str, Host] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def hub(self) -> str:
        return f"hib{self.tag}-hub"

    def open(self) -> None:
        run("ip", "netns", "add", self.hub)
        run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.hub, "link", "set", "br0", "up")

    def add_host(self, name: str, number: int) -> Host:
        namespace = f"hib{self.tag}-{name}"
        address = f"{SUBNET}.{number}"
        outer = f"v-{name}"
        run("ip", "netns", "add", namespace)
        host = Host(name, namespace, address, self)
        self.hosts[name] = host
        run(
            "ip", "-n", self.hub, "link", "add", outer, "type", "veth",
            "peer", "name", "eth0", "netns", namespace,
        )  # fmt: skip
        run("ip", "-n", self.hub, "link", "set", outer, "master", "br0", "up")
        run("ip", "-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        run("ip", "-n", namespace, "link", "set", "eth0", "up")
        run("ip", "-n", namespace, "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            host.heal()
            host.kill_all()
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        for host in self.hosts.values():
            while host.pids() and time.monotonic() < deadline:
                host.kill_all()
                time.sleep(0.1)
            run("ip", "netns", "del", host.namespace, check=False)
        run("ip", "netns", "del", self.hub, check=False)  # takes the bridge and veths with it
