"""PostgreSQL LISTEN: wake idle workers the moment a new event (or outbox message) commits.

Triggers raise `NOTIFY hookinbox_events` on every new event (migration 1) and
`NOTIFY hookinbox_outbox` on every new outbox message (migration 2).
The listener holds one dedicated connection outside the pool, reconnects with backoff when the
server goes away, and wakes the worker after each (re)connect in case it missed something.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from hookinbox._storage._engine import listen_params
from hookinbox._storage._store import Store

CHANNEL = "hookinbox_events"
OUTBOX_CHANNEL = "hookinbox_outbox"

log = logging.getLogger("hookinbox.worker")


class Listener(threading.Thread):
    """Sets a channel's wake-up event whenever PostgreSQL notifies it; stops when `stop` is set."""

    def __init__(
        self, store: Store, channels: Mapping[str, threading.Event], stop: threading.Event
    ) -> None:
        super().__init__(name="hookinbox-listener", daemon=True)
        self._params = listen_params(store.engine, store.options)
        self._channels = dict(channels)
        self._stopping = stop  # not `_stop`: that would shadow Thread._stop, which join() calls

    def run(self) -> None:
        import psycopg  # here: only a PostgreSQL worker needs it, and it costs an import

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
        import psycopg

        with psycopg.connect(autocommit=True, **self._params) as connection:
            for channel in self._channels:
                connection.execute(f"LISTEN {channel}")
            for wake in self._channels.values():
                wake.set()  # anything that arrived while we were not listening
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=1.0, stop_after=1):
                    notified = self._channels.get(notification.channel)
                    if notified is not None:
                        notified.set()


def supports_listen(store: Store) -> bool:
    return store.dialect == "postgresql"
