"""Noticing a handler that blocks the async worker's event loop.

Every task of the async worker shares one thread. A handler that calls blocking code (a sync
HTTP client, `time.sleep`, a CPU-bound loop) stops every other event's attempt, the leases
and the wake-ups with it. A thread of the watchdog's own sees it: the loop ticks every
`TICK` seconds; when no tick came for `threshold` seconds, the watchdog reads the loop
thread's stack, names the handler in it (or the innermost frame outside hookinbox and the
libraries), and calls `on_block` once per stall: the worker logs it and gives back the items
it holds but has not started, so that another worker takes them instead of waiting.
"""

from __future__ import annotations

import asyncio
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CodeType, FrameType

TICK = 0.1
"""Seconds between the loop's ticks."""
CHECK = 0.25
"""Seconds between the watchdog's looks."""
BLOCKED_SECONDS = 1.0
"""A loop that did not tick for this long is blocked (the worker logs it and gives back what
it holds): well past any loop lag under load, well within a lease."""

_STANDARD_LIBRARY = sysconfig.get_paths()["stdlib"]
_HOOKINBOX = str(Path(__file__).parents[1])


class LoopWatchdog:
    def __init__(
        self,
        names: Mapping[CodeType, str],
        on_block: Callable[[float, str], None],
        threshold: float = BLOCKED_SECONDS,
    ) -> None:
        """`names`: the code objects of the handlers (and destinations) -> their names."""
        self.names = names
        self.on_block = on_block
        self.threshold = threshold
        self._last = time.monotonic()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._tick_handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """From the event loop to watch."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._tick()
        self._thread = threading.Thread(target=self._watch, name="hookinbox-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._tick_handle is not None:
            self._tick_handle.cancel()

    def _tick(self) -> None:
        self._last = time.monotonic()
        assert self._loop is not None
        self._tick_handle = self._loop.call_later(TICK, self._tick)

    def _watch(self) -> None:
        reported = False
        while not self._stopping.wait(CHECK):
            stalled = time.monotonic() - self._last
            if stalled < self.threshold:
                reported = False
            elif not reported:
                reported = True
                self.on_block(stalled, self._culprit())

    def _culprit(self) -> str:
        """The handler on the loop thread's stack (`name (file:line)`), else the innermost
        frame of code that is neither hookinbox's nor the standard library's."""
        frame: FrameType | None = sys._current_frames().get(self._loop_thread)
        outside: str | None = None
        while frame is not None:
            name = self.names.get(frame.f_code)
            if name is not None:
                return f"{name} ({frame.f_code.co_filename}:{frame.f_lineno})"
            filename = frame.f_code.co_filename
            if outside is None and not _ours_or_standard(filename):
                outside = f"{frame.f_code.co_qualname} ({filename}:{frame.f_lineno})"
            frame = frame.f_back
        return outside or "unknown code"


def _ours_or_standard(filename: str) -> bool:
    if filename.startswith(_HOOKINBOX):
        return True
    return filename.startswith(_STANDARD_LIBRARY) and "-packages" not in filename


def code_names(functions: Mapping[str, Callable[..., object]]) -> dict[CodeType, str]:
    """name -> function, as the watchdog looks them up (a callable object: its `__call__`)."""
    found: dict[CodeType, str] = {}
    for name, function in functions.items():
        code = getattr(function, "__code__", None) or getattr(
            getattr(function, "__call__", None),  # noqa: B004
            "__code__",
            None,
        )
        if isinstance(code, CodeType):
            found[code] = name
    return found
