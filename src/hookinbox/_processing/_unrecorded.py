"""Outcomes the worker could not write because the database was away, written once it is back.

An attempt ends with a write (an event released for a retry, an outbox message settled). When
that write fails for lack of a database (a failover, a restart), the item stays `processing`
under its lease. Left there it would wait out the whole lease (60 s by default) before the
sweeper gives it back. Instead the write is kept here and tried again before each lease, so
the item is retried as soon as the database answers. The lease still bounds it: past its
expiry the sweeper owns the item, and the kept write is dropped. The writes are conditional
on the lease token, so a late one never overwrites another worker's attempt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger

log = logger("hookinbox.worker")


@dataclass(frozen=True, slots=True)
class _Pending:
    write: Callable[[], object]
    expires_at: datetime
    what: str


class Unrecorded:
    """The writes still owed, oldest first; safe to use from the loop's threads."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def keep(self, write: Callable[[], object], expires_at: datetime, what: str) -> None:
        with self._lock:
            self._pending.append(_Pending(write, expires_at, what))

    def retry(self, now: datetime) -> None:
        """Write what is owed, until the database fails again (the rest waits for next time)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for index, item in enumerate(pending):
            if now >= item.expires_at:
                continue  # the lease ran out: the sweeper gives the item back now
            try:
                item.write()
            except StoreUnavailable:
                with self._lock:
                    self._pending[:0] = pending[index:]
                return
            log.info("recorded the attempt of %s now that the database is back", item.what)
