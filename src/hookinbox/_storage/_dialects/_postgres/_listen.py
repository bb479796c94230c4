"""PostgreSQL's wake-ups as the listener receives them: LISTEN on a psycopg connection of its
own, outside the pool, and each NOTIFY handed on as it arrives (`listen`).

The listener's thread, its reconnections and their back-off are the storage's (`_notify.py`);
what is psycopg's (the connection, its errors, its socket) is here. psycopg is imported on the
first listen only: only a PostgreSQL worker needs it, and it costs an import.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from hookinbox._storage._dialects._base import ListenLost


def listen(
    params: Mapping[str, Any],
    channels: Sequence[str],
    *,
    setup_timeout: float,
    listening: Callable[[], None],
    notified: Callable[[str], None],
    stopping: threading.Event,
) -> None:
    """Connect with `params`, LISTEN on `channels` (given up after `setup_timeout` seconds),
    call `listening()`, then `notified(channel)` for each notification until `stopping` is
    set; `ListenLost` (from psycopg's error) when the connection fails or is lost."""
    import psycopg

    try:
        with psycopg.connect(autocommit=True, **params) as connection:
            with _watchdog(connection, setup_timeout):
                for channel in channels:
                    connection.execute(f"LISTEN {channel}")
            listening()
            while not stopping.is_set():
                for notification in connection.notifies(timeout=1.0, stop_after=1):
                    notified(notification.channel)
    except psycopg.Error as error:
        raise ListenLost(str(error)) from error


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
