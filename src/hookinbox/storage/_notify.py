"""PostgreSQL LISTEN: wake idle workers the moment a new event commits.

A trigger on `hookinbox_events` (migration 1) raises `NOTIFY hookinbox_events` on every insert.
The listener holds one dedicated connection outside the pool, reconnects with backoff when the
server goes away, and wakes the worker after each (re)connect in case it missed something.
"""

from __future__ import annotations

import logging
import threading

import psycopg

from hookinbox.storage._store import Store

CHANNEL = "hookinbox_events"

log = logging.getLogger("hookinbox.worker")


class Listener(threading.Thread):
    """Sets `wake` whenever PostgreSQL announces a new event; stops when `stop` is set."""

    def __init__(self, store: Store, wake: threading.Event, stop: threading.Event) -> None:
        super().__init__(name="hookinbox-listener", daemon=True)
        url = store.url.set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self._connect_timeout = max(1, round(store.options.connect_timeout))
        self._wake = wake
        self._stopping = stop  # not `_stop`: that would shadow Thread._stop, which join() calls

    def run(self) -> None:
        backoff = 0.5
        while not self._stopping.is_set():
            try:
                self._listen()
                backoff = 0.5
            except psycopg.Error as error:
                log.warning("LISTEN connection lost (%s); polling until it is back", error)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _listen(self) -> None:
        with psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
        ) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            self._wake.set()
            while not self._stopping.is_set():
                for _notification in connection.notifies(timeout=1.0, stop_after=1):
                    self._wake.set()


def supports_listen(store: Store) -> bool:
    return store.dialect == "postgresql"
