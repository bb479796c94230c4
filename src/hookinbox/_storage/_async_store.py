"""`AsyncStore`: the store's statements on an async driver, for the async worker.

An async database URL (`postgresql+asyncpg://`, `postgresql+psycopg_async://`,
`sqlite+aiosqlite:///`) gives an inbox two engines on one database. hookinbox's own work that
runs in threads (ingest's group commit, migrations, the commands, the heartbeat, the pruner)
stays on the sync driver; the worker leases, claims, runs handlers and commits on the async one,
so that a handler's `AsyncSession` writes in the claim's transaction.

Nothing here repeats a statement: `AsyncStore.store` is a `Store` over the async engine's sync
facade, and its gateways run through `run` (SQLAlchemy's greenlet bridge, `_awaiting.py`):
every await happens inside the driver. Only the processing transaction is opened here, as an
`AsyncConnection`, because the handler must hold it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from hookinbox._storage._awaiting import await_here, in_greenlet
from hookinbox._storage._dialects import dialect_for_url
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._store import Store

if TYPE_CHECKING:
    from sqlalchemy.engine import URL
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")


class AsyncStore:
    """The async worker's door to the database; `sync` is the inbox's own store."""

    def __init__(self, sync: Store, url: URL, *, engine: AsyncEngine | None = None) -> None:
        """`url`: the async URL (`Dialect.async_url`); `engine`: one the application built
        on it instead, to share its pool."""
        self.sync = sync
        self.dialect = dialect_for_url(url)
        options = sync.options
        self.engine: AsyncEngine = engine or self.dialect.build_async_engine(url, options)
        self.writer = LoopWriter() if self.dialect.single_writer else None
        self.store = Store(
            url, options, auto_migrate=False, engine=self.engine.sync_engine, writer=self.writer
        )
        self._schema_ready = False

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)`: sync code on `store` (a gateway call), awaited."""
        return await in_greenlet(function, *args, **kwargs)

    async def ensure_schema(self) -> None:
        """Migrate (or check) once, on the sync store, in a thread: alembic's work and the
        migrations' locks are the sync driver's."""
        if self._schema_ready:
            return
        await asyncio.to_thread(self.sync.ensure_schema)
        self.store.assume_schema()
        self._schema_ready = True

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction on an `AsyncConnection`: committed on success, rolled back on any
        exception (a cancellation included); "unavailable" errors become `StoreUnavailable`."""
        await self.ensure_schema()
        async with self._writing():
            with translate_errors():
                async with self.engine.begin() as connection:
                    yield connection

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        if self.writer is None:
            yield
            return
        await self.writer.turn(self.sync.options.busy_timeout)
        try:
            yield
        finally:
            self.writer.release()

    async def dispose(self) -> None:
        await self.engine.dispose()


class LoopWriter:
    """SQLite's one writer among the tasks of one event loop (the thread lock of a sync
    store is useless there: every task runs on the loop's thread).

    Re-entrant per task, as the sync store's `RLock` is per thread. Taken by `AsyncStore` for
    the processing transaction, and by the gateways' transactions through `acquire` (called
    inside `AsyncStore.run`, it waits on the event loop). Between processes, SQLite's lock is
    polled for as ever, the polls yielding to the loop."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner: asyncio.Task[Any] | None = None
        self._depth = 0

    async def turn(self, timeout: float) -> None:
        from hookinbox._errors import StoreUnavailable

        if not await self._acquire(timeout):
            raise StoreUnavailable("database unavailable: the SQLite write lock is busy")

    async def _acquire(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        if loop is not self._loop and self._owner is None:
            # A new event loop (`inbox.process_due()` runs one per call): asyncio's lock
            # belongs to the loop it first waited in.
            self._lock, self._loop = asyncio.Lock(), loop
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            self._depth += 1
            return True
        try:
            await asyncio.wait_for(self._lock.acquire(), timeout if timeout >= 0 else None)
        except TimeoutError:
            return False
        self._owner, self._depth = task, 1
        return True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return bool(await_here(self._acquire(timeout if blocking else 0)))

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()
