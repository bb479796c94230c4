"""Keeping `hookinbox serve`'s worker process alive beside the HTTP server.

A worker can die on its own: a handler that calls `os._exit`, a segfault in a C extension,
the OOM killer. The server must not go on accepting events that nothing processes, so a
supervisor thread restarts the worker (with backoff, so a crash loop does not spin) until
the server shuts down. A worker that ran for `MAX_BACKOFF` seconds or more before it died was
not in a crash loop: it is restarted after the first, shortest wait again.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from hookinbox._logging import logger

log = logger("hookinbox.serve")

FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0


class WorkerSupervisor(threading.Thread):
    def __init__(self, command: Sequence[str], grace_period: float) -> None:
        super().__init__(name="hookinbox-worker-supervisor", daemon=True)
        self.command = list(command)
        self.grace_period = grace_period
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def run(self) -> None:
        backoff = FIRST_BACKOFF
        while not self._stopping.is_set():
            with self._lock:
                if self._stopping.is_set():
                    return
                # A group of its own: a Ctrl-C on the terminal reaches `serve`, which stops
                # the worker with SIGTERM (and its drain), not a worker still starting up.
                self._process = subprocess.Popen(self.command, process_group=0)
            started = time.monotonic()
            code = self._process.wait()
            if self._stopping.is_set():
                return
            self.restarts += 1
            if time.monotonic() - started >= MAX_BACKOFF:
                backoff = FIRST_BACKOFF  # otherwise every crash ever would stretch the wait
            log.error("worker exited with code %s; restarting in %.1f s", code, backoff)
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def stop(self) -> None:
        """SIGTERM the worker and wait for its drain (grace period), then kill it."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=self.grace_period + 5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
