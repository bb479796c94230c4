"""Wake-ups between processes of one host: a UNIX datagram socket the worker binds.

`hookinbox serve` on SQLite, where there is no LISTEN/NOTIFY: it makes a private directory
and hands one path in it to its worker (`--wake-socket`) and to its HTTP processes (the
settings' `wake_socket`). The worker binds the path (`WakeSocket`, a thread that sets the
event loop's wake-up on each datagram); each HTTP process sends one empty datagram after each
commit that stored a new event (`WakeSender`, called by the group committer's writer thread).

Best effort on purpose: the send never blocks and ignores every error (no worker bound yet, a
worker restarting, its queue full of wake-ups already), because the worker's poll stays as
the fallback. A lost wake-up costs latency, never an event.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Sequence
from contextlib import suppress

from hookinbox._logging import logger

log = logger("hookinbox.worker")

MAX_PATH_BYTES = 100
"""A socket's path must fit `sockaddr_un.sun_path` (108 bytes on Linux, 104 on macOS)."""

_WAKE = b""
_RECEIVE_TIMEOUT = 1.0
"""Seconds between checks of the stop flag while no datagram arrives."""


def usable_path(path: str) -> bool:
    """Whether a wake-up socket can be bound at `path`: a POSIX system (Windows has no UNIX
    datagram sockets), and a path short enough (a deep $TMPDIR can make it too long)."""
    return os.name == "posix" and len(os.fsencode(path)) <= MAX_PATH_BYTES


class WakeSender:
    """Sends a wake-up to the worker bound at `path`; never blocks, never raises."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def __call__(self) -> None:
        # FileNotFoundError / ConnectionRefusedError: no worker bound (starting, restarting,
        # or killed and not yet rebound); BlockingIOError: its queue is full of wake-ups it has
        # not read yet, so one more would add nothing. The poll covers every case.
        with suppress(OSError):
            self._socket.sendto(_WAKE, self.path)

    def close(self) -> None:
        self._socket.close()


class WakeSocket(threading.Thread):
    """Binds `path` and sets every event of `wakes` on each datagram, until `stop` is set."""

    def __init__(self, path: str, wakes: Sequence[threading.Event], stop: threading.Event) -> None:
        super().__init__(name="hookinbox-wake-socket", daemon=True)
        self.path = path
        self._wakes = list(wakes)
        self._stopping = stop  # not `_stop`: that would shadow Thread._stop, which join() calls
        self._socket: socket.socket | None = None

    def bind(self) -> bool:
        """Bind the path (replacing what a killed worker left there); False if it cannot be,
        and the worker polls alone."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            # A worker killed by SIGKILL leaves its socket file behind, and its restart binds
            # the same path: remove it first. The directory is serve's own (mode 0700).
            with suppress(FileNotFoundError):
                os.unlink(self.path)
            sock.bind(self.path)
        except OSError as error:
            sock.close()
            log.warning("cannot bind the wake-up socket %s (%s); polling only", self.path, error)
            return False
        sock.settimeout(_RECEIVE_TIMEOUT)
        self._socket = sock
        return True

    def run(self) -> None:
        sock = self._socket
        if sock is None:
            return
        while not self._stopping.is_set():
            try:
                sock.recv(16)
            except TimeoutError:
                continue
            except OSError:
                return  # closed under us: the worker is stopping
            # Each datagram sets the events again; a loop busy with the last one's event does
            # not run more often for it (an event stays set until the loop clears it).
            for wake in self._wakes:
                wake.set()

    def close(self) -> None:
        """Once `stop` is set: end the thread (a datagram of our own wakes it at once, rather
        than at its next timeout), then close and remove the socket."""
        sock, self._socket = self._socket, None
        if sock is None:
            return
        if self.is_alive():
            with suppress(OSError):
                sock.sendto(_WAKE, self.path)
            self.join(timeout=2.0)
        sock.close()
        with suppress(OSError):
            os.unlink(self.path)


class Wake(threading.Event):
    """A worker loop's wake-up: a thread's `Event` (the thread worker waits on it), which also
    wakes the async worker's loops on their event loop.

    Whoever wakes (ingest's group-commit thread, the LISTEN thread, the wake-up socket's
    thread, a handler that sent outbox messages) calls `set()` from any thread; an async loop
    `watch`es it from its event loop and waits on the asyncio event it gets. Clearing clears
    the flag of both: a setter that finds the flag set (`if not wake.is_set()`) skips the
    call, so the async side must clear it too before it leases."""

    def __init__(self) -> None:
        super().__init__()
        self._watchers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def set(self) -> None:
        super().set()
        for loop, event in self._watchers:
            with suppress(RuntimeError):  # the loop closed while a thread still sets
                loop.call_soon_threadsafe(event.set)

    def watch(self) -> asyncio.Event:
        """From a running event loop: an asyncio event set whenever this one is."""
        event = asyncio.Event()
        self._watchers = [*self._watchers, (asyncio.get_running_loop(), event)]
        return event

    def unwatch(self, event: asyncio.Event) -> None:
        self._watchers = [(loop, e) for loop, e in self._watchers if e is not event]
