"""PostgreSQL LISTEN: wake idle workers the moment a new event (or outbox message) commits.

Triggers raise `NOTIFY hookinbox_events` on every new event (migration 1) and
`NOTIFY hookinbox_outbox` on every new outbox message (migration 2).
The listener holds one dedicated connection outside the pool, reconnects with backoff when the
server goes away, and wakes the worker after each (re)connect in case it missed something.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from hookinbox._logging import logger

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

CHANNEL = "hookinbox_events"
OUTBOX_CHANNEL = "hookinbox_outbox"

log = logger("hookinbox.worker")

SETUP_TIMEOUT = 10.0
"""Seconds the LISTEN statements may take once connected, before the connection is given up."""

FIRST_RETRY = 0.5
LAST_RETRY = 30.0
"""Seconds before reconnecting: doubling from the first to the last, while attempts fail."""


class Listener(threading.Thread):
    """Sets a channel's wake-up event whenever PostgreSQL notifies it; stops when `stop` is set."""

    EVENTS = CHANNEL
    """New events (and replays) are notified here."""
    OUTBOX = OUTBOX_CHANNEL
    """New outbox messages are notified here."""

    def __init__(
        self, store: StoreSeam, channels: Mapping[str, threading.Event], stop: threading.Event
    ) -> None:
        super().__init__(name="hookinbox-listener", daemon=True)
        self._params = store.dialect.listen_params(store.engine, store.options)
        self._channels = dict(channels)
        self._stopping = stop  # not `_stop`: that would shadow Thread._stop, which join() calls
        self._failures = 0
        """Connection attempts failed (or connections lost) since the last LISTEN."""

    def run(self) -> None:
        import psycopg  # here: only a PostgreSQL worker needs it, and it costs an import

        while not self._stopping.is_set():
            try:
                self._listen()
            except psycopg.Error as error:
                delay = min(FIRST_RETRY * 2**self._failures, LAST_RETRY)
                self._failures += 1
                log.warning(
                    "LISTEN connection lost (%s); polling, next try in %.1f s",
                    str(error).strip().splitlines()[0] if str(error).strip() else error,
                    delay,
                )
                self._stopping.wait(delay)

    def _listen(self) -> None:
        import psycopg

        with psycopg.connect(autocommit=True, **self._params) as connection:
            with _watchdog(connection, SETUP_TIMEOUT):
                for channel in self._channels:
                    connection.execute(f"LISTEN {channel}")
            # Listening again: the outage is over, and the next one starts from the first
            # back-off (kept, a worker that lived through a few failovers would wait the
            # longest one before its first try, polling all the while).
            self._failures = 0
            for wake in self._channels.values():
                wake.set()  # anything that arrived while we were not listening
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=1.0, stop_after=1):
                    notified = self._channels.get(notification.channel)
                    if notified is not None:
                        notified.set()


@contextmanager
def _watchdog(connection: Any, seconds: float) -> Iterator[None]:
    """Shut the connection's socket down if the block takes longer than `seconds`.

    connect_timeout bounds the connection, and TCP timeouts a peer that stops acknowledging;
    neither bounds a statement that a peer acknowledges and never answers: a proxy or pooler
    between us and PostgreSQL that accepted the connection but lost its own upstream. The
    shutdown wakes the blocked read with an error, and the listener reconnects as after any
    loss."""

    def shut_down() -> None:
        with suppress(OSError), socket.socket(fileno=os.dup(connection.pgconn.socket)) as dup:
            dup.shutdown(socket.SHUT_RDWR)  # the socket, not just this descriptor of it

    timer = threading.Timer(seconds, shut_down)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
