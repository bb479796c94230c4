"""NATS JetStream for tests: streams made and read from plain test code, and a private server.

The system server (HOOKINBOX_TEST_NATS_URL, 127.0.0.1:4222 by default) keeps its storage across
runs and is shared: each test makes a stream of its own, uniquely named, and deletes it. A test
that must stop a server starts a private `nats-server -js` on a free port, its storage in the
test's directory so that a restart finds the stream again.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from tests.support.server import free_port

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


@dataclass(frozen=True)
class Stored:
    """One message as the stream holds it."""

    sequence: int
    msg_id: str | None
    payload: Any


async def _create(url: str, name: str, subject: str, window: float) -> None:
    client = await nats.connect(url)
    try:
        config = StreamConfig(name=name, subjects=[subject], duplicate_window=window)
        await client.jetstream().add_stream(config)
    finally:
        await client.close()


async def _delete(url: str, name: str) -> None:
    client = await nats.connect(url)
    try:
        await client.jetstream().delete_stream(name)
    except NotFoundError:
        pass
    finally:
        await client.close()


async def _read(url: str, name: str) -> list[Stored]:
    client = await nats.connect(url)
    try:
        jetstream = client.jetstream()
        info = await jetstream.stream_info(name)
        stored = []
        for sequence in range(info.state.first_seq, info.state.last_seq + 1):
            message = await jetstream.get_msg(name, sequence)
            msg_id = (message.headers or {}).get("Nats-Msg-Id")
            stored.append(Stored(sequence, msg_id, json.loads(message.data or b"null")))
        return stored
    finally:
        await client.close()


@dataclass(frozen=True)
class Stream:
    """A stream on the server at `url`, taking `subject` only."""

    url: str
    name: str
    subject: str

    def messages(self) -> list[Stored]:
        return asyncio.run(_read(self.url, self.name))

    def keys(self) -> list[str | None]:
        return [stored.msg_id for stored in self.messages()]

    def delete(self) -> None:
        asyncio.run(_delete(self.url, self.name))


def unique_subject() -> str:
    return f"hookinbox.test.{uuid.uuid4().hex[:12]}"


@contextmanager
def made_stream(url: str, *, window: float = 120.0) -> Iterator[Stream]:
    """A stream with a unique name and subject, deleted afterwards."""
    token = uuid.uuid4().hex[:12]
    stream = Stream(url, f"HOOKINBOX_TEST_{token}", f"hookinbox.test.{token}")
    asyncio.run(_create(url, stream.name, stream.subject, window))
    try:
        yield stream
    finally:
        stream.delete()


def reachable(url: str, timeout: float = 2.0) -> str | None:
    """None if a JetStream server answers at `url`, else why not."""

    async def ask() -> None:
        client = await nats.connect(url, connect_timeout=timeout, allow_reconnect=False)
        try:
            await client.jetstream().account_info()
        finally:
            await client.close()

    try:
        asyncio.run(asyncio.wait_for(ask(), timeout * 2))
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


class PrivateServer:
    """`nats-server -js` on a free port with its storage in `directory`: kill and start it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "nats-server.log"

    def start(self) -> None:
        command = [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        command += ["-sd", str(self.directory / "jetstream"), "-l", str(self.log)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 20
        while (why := self._answers()) is not None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nats-server did not start ({why}): {self.tail()}")
            time.sleep(0.1)

    def _answers(self) -> str | None:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError as error:
            return str(error)
        return reachable(self.url)

    def kill(self) -> None:
        """SIGKILL: the server has no chance to flush or say goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def tail(self) -> str:
        return self.log.read_text()[-2000:] if self.log.exists() else "(no log)"

    def close(self) -> None:
        self.kill()


@contextmanager
def private_server(directory: Path) -> Iterator[PrivateServer]:
    server = PrivateServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.close()
