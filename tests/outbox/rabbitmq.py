"""RabbitMQ for the destination's tests: queues of their own, read back, and a private node.

The system RabbitMQ is never stopped: a test that must cut the broker starts its own node
(`rabbitmq-server` with its own node name, ports, data and log directories) and removes it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika

SERVER = shutil.which("rabbitmq-server") or "/usr/sbin/rabbitmq-server"


def unique_queue() -> str:
    return f"hookinbox-test-{uuid.uuid4().hex[:12]}"


async def _declare(url: str, name: str, arguments: dict[str, Any] | None) -> None:
    connection = await aio_pika.connect(url, timeout=5)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(name, durable=True, arguments=arguments)


def declare(url: str, name: str, arguments: dict[str, Any] | None = None) -> None:
    asyncio.run(_declare(url, name, arguments))


async def _drain(url: str, name: str, delete: bool) -> list[aio_pika.IncomingMessage]:
    connection = await aio_pika.connect(url, timeout=5)
    got: list[aio_pika.IncomingMessage] = []
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(name, durable=True, passive=True)
        while (message := await queue.get(fail=False, no_ack=True)) is not None:
            got.append(message)
        if delete:
            await queue.delete(if_unused=False, if_empty=False)
    return got


def drain(url: str, name: str, *, delete: bool = False) -> list[aio_pika.IncomingMessage]:
    """Every message in the queue, in order, taken off it (the test's consumer)."""
    return asyncio.run(_drain(url, name, delete))


def delete(url: str, name: str) -> None:
    drain(url, name, delete=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reachable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@dataclass
class PrivateNode:
    """A RabbitMQ node of the test's own: its data survives `stop()` and `start()`."""

    base: Path
    port: int = field(default_factory=free_port)
    launcher: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.base),  # its own Erlang cookie
            "RABBITMQ_NODENAME": f"hookinbox-{self.port}@localhost",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.base / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),  # none
            "RABBITMQ_PID_FILE": str(self.base / "pid"),
        }

    def start(self, timeout: float = 60) -> None:
        (self.base / "mnesia").mkdir(parents=True, exist_ok=True)
        (self.base / "log").mkdir(exist_ok=True)
        (self.base / "enabled_plugins").write_text("[].\n")
        (self.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nloopback_users.guest = false\n"
        )
        (self.base / "pid").unlink(missing_ok=True)
        if os.geteuid() == 0:  # the script runs the node as the rabbitmq user
            shutil.chown(self.base, "rabbitmq", "rabbitmq")
            for path in self.base.rglob("*"):
                shutil.chown(path, "rabbitmq", "rabbitmq")
        with (self.base / "out.log").open("ab") as log:
            self.launcher = subprocess.Popen(
                [SERVER],
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base,  # where a crash dump would go
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not reachable(self.port):
            if self.launcher.poll() is not None or time.monotonic() > deadline:
                log = (self.base / "out.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the private RabbitMQ node did not start:\n{log}")
            time.sleep(0.1)

    def _beam(self) -> int | None:
        try:
            return int((self.base / "pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Kill the node (SIGKILL: a crash; SIGTERM: a clean stop) and wait until it is gone."""
        beam = self._beam()
        if beam is not None:
            try:
                os.kill(beam, sig)
            except ProcessLookupError:
                pass
        if self.launcher is not None:
            try:
                self.launcher.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.launcher.pid, signal.SIGKILL)
                self.launcher.wait(timeout=10)
        while reachable(self.port):
            time.sleep(0.05)


@contextmanager
def private_node() -> Iterator[PrivateNode]:
    # Not under pytest's tmp_path: the node runs as the rabbitmq user, which must reach it.
    base = Path(tempfile.mkdtemp(prefix="hookinbox-rabbitmq-"))
    node = PrivateNode(base)
    try:
        node.start()
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)


class Proxy:
    """A loopback TCP proxy to the broker whose connections a test can cut (a lost connection
    without stopping any broker); with `silent`, it accepts and never answers (a stalled one)."""

    def __init__(self, target: tuple[str, int], *, silent: bool = False) -> None:
        self.target = target
        self.silent = silent
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.sockets.append(client)
            if self.silent:
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """Reset every connection through the proxy; returns how many there were."""
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # RST: the far side sees a reset connection
        return len(sockets)

    def close(self) -> None:
        self.server.close()
        self.cut()
