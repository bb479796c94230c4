"""Workers in the test process, whichever driver the inbox's URL names: the thread worker on a
sync URL, the async worker (on an event loop of its own, in a thread) on an async one. The
tests of `ASYNC_TESTS` (tests/conftest.py) run both through these."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hookinbox import Inbox, WorkerOptions


def build_worker(inbox: Inbox, options: WorkerOptions, **arguments: Any) -> Any:
    if inbox.is_async:
        return inbox.async_worker(options, **arguments)
    return inbox.worker(options, **arguments)


def run_until_idle(inbox: Inbox, options: WorkerOptions | None = None, **arguments: Any) -> int:
    """`worker.run_until_idle()` on either worker (`arguments`: `prune=`, `relay=`, ...)."""
    worker = build_worker(inbox, options or WorkerOptions(handle_signals=False), **arguments)
    if not inbox.is_async:
        return int(worker.run_until_idle())

    async def idle() -> int:
        try:
            return int(await worker.run_until_idle())
        finally:
            await worker.astore.dispose()  # its pool belongs to this loop

    return asyncio.run(idle())


@contextmanager
def worker_in_thread(
    inbox: Inbox, options: WorkerOptions, *, settle: float = 0.0, **arguments: Any
) -> Iterator[Any]:
    """A worker running in a thread until the block ends (then stopped and joined); yields it.
    `settle`: seconds to let it reach its idle wait first."""
    worker = build_worker(inbox, options, **arguments)
    result: dict[str, bool] = {}

    def run() -> None:
        if inbox.is_async:
            result["drained"] = asyncio.run(worker.run())
        else:
            result["drained"] = worker.run()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if settle:
        time.sleep(settle)
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=15)
        assert not thread.is_alive(), "the worker did not stop"
