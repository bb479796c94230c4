"""The heartbeat a worker or relay process writes while it runs (its liveness, for operators).

A thread of its own, so that a beat waiting for the database (SQLite's write lock, held by a
slow handler) never delays the loops, and a loop stuck in a handler does not stop the beats:
the heartbeat says the process is alive and connected, not that every handler is quick (the
oldest pending event's age says that).
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger
from hookinbox._records import Beat

if TYPE_CHECKING:
    from hookinbox._processing._service import Processing

log = logger("hookinbox.worker")

MISSED_BEATS = 3
"""A process counts as alive until this many intervals pass without a beat."""


class Heartbeat:
    """Beats every `interval` seconds from `start()` to `stop()`; `forget()` deletes the row."""

    def __init__(self, processing: Processing, kind: str, interval: float) -> None:
        self.processing = processing
        self.interval = interval
        self.me = Beat(
            worker_id=uuid.uuid4().hex,
            kind=kind,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=datetime.now(UTC),
        )
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hookinbox-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating. Waits a moment only: a beat blocked on the database is a daemon."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def forget(self) -> None:
        """A clean stop: delete the row. Not after a cut-off shutdown: on SQLite the attempts
        still running hold the write lock, and the row expires on its own anyway."""
        try:
            self.processing.forget(self.me.worker_id)
        except StoreUnavailable as error:
            log.warning("could not remove this worker's heartbeat: %s", error)

    def beat_once(self) -> None:
        alive_for = timedelta(seconds=self.interval * MISSED_BEATS)
        self.processing.beat(self.me, alive_for=alive_for)  # at the database's time

    def _run(self) -> None:
        while True:
            try:
                self.beat_once()
            except StoreUnavailable as error:
                # Not alive as far as operators can tell: the alarm is right to fire.
                log.warning("heartbeat not written: %s", error)
            if self._stopping.wait(self.interval):
                return
