"""`hookinbox serve --server granian`: the same app and processes, served by Granian.

Granian parses HTTP and reads and writes the sockets in Rust threads that do not hold
Python's lock, where uvicorn does both on the event loop; the app, its lifespan (the inbox
started in each server process) and the worker beside it are the same. Measured against
uvicorn in the same runs: bench/README.md ("The server under serve").
"""

from __future__ import annotations

from typing import Any


def run_granian(factory: str, host: str, port: int, workers: int, logging: dict[str, Any]) -> None:
    """Serve `factory`'s ASGI app until SIGTERM or SIGINT (Granian's own handlers), with
    `workers` processes; raises `SystemExit` with a non-zero code if a process failed."""
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.log import LogLevels
    from granian.server import Server

    level = logging["loggers"]["hookinbox"]["level"]
    # Granian's own lines (start-up, a worker that died) on hookinbox's handler.
    loggers = {**logging["loggers"], "_granian": {"handlers": ["hookinbox"], "level": level,
                                                  "propagate": False}}  # fmt: skip
    Server(
        factory,
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        workers=workers,
        factory=True,
        http=HTTPModes.http1,  # what providers send; as uvicorn serves
        websockets=False,
        loop=Loops.auto,  # uvloop where it is installed, as uvicorn chooses
        log_enabled=True,
        log_level=LogLevels(level.lower()),
        log_dictconfig={**logging, "loggers": loggers},
        log_access=False,  # hookinbox logs one line per delivery itself
        workers_kill_timeout=10,
    ).serve()
