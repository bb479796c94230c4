"""Sync code that awaits underneath: SQLAlchemy's greenlet bridge, used in this one module.

SQLAlchemy's asyncio extension runs its sync Core over an async driver by switching greenlets:
a sync call made inside `greenlet_spawn` that reaches the driver suspends there, and the event
loop runs other tasks until the driver answers (the same mechanism behind the public
`AsyncConnection.run_sync`). hookinbox's gateways are that sync Core: run through `in_greenlet`
on an async engine's sync facade, every statement of theirs is shared by the thread worker and
the async worker, and only the waiting differs (docs/architecture.md, "One logic, two ways to
wait"). `run_sync` needs a connection first; the gateways open their own transactions, hence
`greenlet_spawn` itself, which SQLAlchemy exports from `sqlalchemy.util` in 2.0 and 2.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def in_greenlet(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)`, whose database calls on an async engine are awaited."""
    from sqlalchemy.util import greenlet_spawn

    return await greenlet_spawn(function, *args, **kwargs)


def await_here(awaitable: Any) -> Any:
    """Inside `in_greenlet`: wait for `awaitable` on the event loop, letting other tasks run."""
    from sqlalchemy.util import await_only

    return await_only(awaitable)


def sleep_in_event_loop(seconds: float) -> None:
    """`time.sleep` for code running inside `in_greenlet`: other tasks run meanwhile."""
    await_here(asyncio.sleep(seconds))
