"""PostgreSQL LISTEN: wake idle workers the moment a new event (or outbox message) commits.

Triggers raise `NOTIFY hookinbox_events` on every new event (migration 1) and
`NOTIFY hookinbox_outbox` on every new outbox message (migration 2).
The listener holds one dedicated connection outside the pool, reconnects with backoff when the
server goes away, and wakes the worker after each (re)connect in case it missed something.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hookinbox._logging import logger
from hookinbox._storage._dialects._base import ListenLost

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
    """Sets a channel's wake-up event whenever the database notifies it (the dialect listens:
    `Dialect.listen`); stops when `stop` is set."""

    EVENTS = CHANNEL
    """New events (and replays) are notified here."""
    OUTBOX = OUTBOX_CHANNEL
    """New outbox messages are notified here."""

    def __init__(
        self, store: StoreSeam, channels: Mapping[str, threading.Event], stop: threading.Event
    ) -> None:
        super().__init__(name="hookinbox-listener", daemon=True)
        self._dialect = store.dialect
        self._params = store.dialect.listen_params(store.engine, store.options)
        self._channels = dict(channels)
        self._stopping = stop  # not `_stop`: that would shadow Thread._stop, which join() calls
        self._failures = 0
        """Connection attempts failed (or connections lost) since the last LISTEN."""

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._dialect.listen(
                    self._params,
                    list(self._channels),
                    setup_timeout=SETUP_TIMEOUT,
                    listening=self._listening,
                    notified=self._notified,
                    stopping=self._stopping,
                )
            except ListenLost as lost:
                error = lost.__cause__ or lost
                delay = min(FIRST_RETRY * 2**self._failures, LAST_RETRY)
                self._failures += 1
                log.warning(
                    "LISTEN connection lost (%s); polling, next try in %.1f s",
                    str(error).strip().splitlines()[0] if str(error).strip() else error,
                    delay,
                )
                self._stopping.wait(delay)

    def _listening(self) -> None:
        # Listening again: the outage is over, and the next one starts from the first
        # back-off (kept, a worker that lived through a few failovers would wait the
        # longest one before its first try, polling all the while).
        self._failures = 0
        for wake in self._channels.values():
            wake.set()  # anything that arrived while we were not listening

    def _notified(self, channel: str) -> None:
        notified = self._channels.get(channel)
        if notified is not None:
            notified.set()
