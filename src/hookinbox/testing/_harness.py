"""A user's inbox under test: its own database and clock, deliveries over the HTTP contract.

`InboxHarness(inbox)` makes a copy of the application's inbox (`Inbox.with_settings`: the same
sources, handlers and destinations) on a database the test owns and a `Clock` it moves. A
delivery is signed as the provider signs it and POSTed to the inbox's own ASGI app in this
process, so it is verified, stored and answered exactly as in production; `run_due()` then
runs the worker's processing here, in this thread.

A copy of an inbox on an async database URL keeps an async driver (`_databases.py`), so it
runs the async worker as the application does: `run_due()` on an event loop of its own, `await
arun_due()` on the test's. The async worker's pool belongs to the loop that opened it, so
`arun_due` releases it before returning, and `close()` releases whatever is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Self

import anyio
import anyio.to_thread

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import Inbox
from hookinbox._model import Event
from hookinbox.testing._asgi import Answer, post
from hookinbox.testing._clock import Clock
from hookinbox.testing._databases import throwaway_database
from hookinbox.testing._signing import Body, sign


class InboxHarness:
    """The application's inbox on a throwaway database, driven by hand.

    `database_url`: a PostgreSQL URL to make a throwaway schema in (its user needs CREATE
    on that database), or a SQLite URL to use as it is; default, a temporary SQLite file.
    The copy of an inbox on an async URL names an async driver there too (aiosqlite, asyncpg
    or the one the inbox names), and so does a `database_url` naming one: the copy then runs
    the async worker, whose `async def` handlers get an `AsyncHandlerContext`.
    `settings` override the inbox's other settings (`retry=...`, `group_commit=False`).
    `transport`: `"asgi"` (the inbox's ASGI app, the default) or `"direct"` (`Inbox.receive`
    in the calling thread, what the Flask and Django adapters call; the default for a
    `DjangoInbox`, which uses Django's test database as it stands).
    Use it as a context manager (`async with` inside an event loop), or call `close()`.
    """

    __test__ = False  # pytest: not a test class, whatever a test module imports

    def __init__(
        self,
        inbox: Inbox,
        *,
        database_url: str | None = None,
        clock: Clock | None = None,
        path: str = "/webhooks",
        transport: str | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(inbox, Inbox):
            raise TypeError(f"InboxHarness takes an Inbox, not {inbox!r}")
        self._stack = ExitStack()
        self.clock = clock or Clock()
        # A DjangoInbox keeps its tables in Django's database: under Django's test runner,
        # that is the test database already, and its connection is per thread, so each
        # delivery is answered in the calling thread (`Inbox.receive`, as Django's view
        # does) rather than by the ASGI app's worker threads.
        self.in_django = inbox.settings.database_url.startswith("django:")
        self.transport = transport or ("direct" if self.in_django else "asgi")
        if self.transport not in ("asgi", "direct"):
            raise ValueError("transport is 'asgi' or 'direct'")
        if not self.in_django:
            like = inbox.settings.database_url  # an async app's copy stays async
            url = self._stack.enter_context(throwaway_database(database_url, like=like))
            settings["database_url"] = url
        self.inbox = self._copy(inbox, clock=self.clock, **settings)
        self._stack.callback(self.inbox.close)
        self.path = path.rstrip("/")
        self.app = self.inbox.asgi(path=self.path)
        if self.in_django:
            self._wipe()
        else:
            # Migrated now, not by the first delivery, whose ack deadline would then include
            # the DDL (seconds on a busy MariaDB, which commits each statement on its own).
            self.inbox.store.ensure_schema()

    def _wipe(self) -> None:
        """Start from an empty inbox: a TransactionTestCase's flush leaves hookinbox's tables
        (they belong to no Django model), so one test's events would be the next one's
        duplicates. Inside a TestCase this is rolled back with the test."""
        self.inbox._operations().empty()

    def _copy(self, inbox: Inbox, **settings: Any) -> Inbox:
        return inbox.with_settings(**settings)

    @property
    def database_url(self) -> str:
        return self.inbox.settings.database_url

    # -- deliveries ------------------------------------------------------------------------

    def sign(self, source: str, payload: Body, **fields: Any) -> tuple[dict[str, str], bytes]:
        """`hookinbox.testing.sign` with the inbox's source of that name, at the clock's time."""
        fields.setdefault("at", self.clock())
        return sign(self.inbox.sources[source], payload, **fields)

    def deliver(
        self, source: str, payload: Body, *, copies: int = 1, concurrently: bool = False,
        **fields: Any,
    ) -> list[Answer]:  # fmt: skip
        """Sign `payload` as `source`'s provider would and POST it `copies` times.

        Each copy is signed at the clock's time with the same ids, as a provider's retry is;
        `concurrently=True` sends them all at once. Returns the answers, in order.
        """
        requests = [(source, *self.sign(source, payload, **fields)) for _ in range(copies)]
        return self.send(requests, concurrently=concurrently)

    async def adeliver(
        self, source: str, payload: Body, *, copies: int = 1, concurrently: bool = False,
        **fields: Any,
    ) -> list[Answer]:  # fmt: skip
        """`deliver`, awaited: for an async test, inside its running event loop."""
        requests = [(source, *self.sign(source, payload, **fields)) for _ in range(copies)]
        if self.transport == "direct":
            return await anyio.to_thread.run_sync(
                lambda: self.send(requests, concurrently=concurrently)
            )
        return await self._send_asgi(requests, concurrently)

    def send(
        self, requests: Sequence[tuple[str, Mapping[str, str], bytes]], *, concurrently: bool
    ) -> list[Answer]:
        """POST each `(source, headers, body)`, one after another or all at once."""
        if self.transport == "direct":
            # In the calling thread, and outside any event loop: Django refuses its ORM
            # inside one. Concurrent deliveries take a thread each.
            if not concurrently or len(requests) < 2:
                return [self._receive(*request) for request in requests]
            with ThreadPoolExecutor(len(requests)) as pool:
                return list(pool.map(lambda request: self._receive(*request), requests))
        return anyio.run(self._send_asgi, requests, concurrently)

    async def _send_asgi(
        self, requests: Sequence[tuple[str, Mapping[str, str], bytes]], concurrently: bool
    ) -> list[Answer]:
        answers: list[Answer | None] = [None] * len(requests)

        async def one(index: int) -> None:
            answers[index] = await self.apost(*requests[index])

        if concurrently:
            async with anyio.create_task_group() as group:
                for index in range(len(requests)):
                    group.start_soon(one, index)
        else:
            for index in range(len(requests)):
                await one(index)
        return [answer for answer in answers if answer is not None]

    def post(self, source: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """POST a delivery as it stands (a forgery, a malformed body, a replayed capture)."""
        return self.send([(source, headers, body)], concurrently=False)[0]

    async def apost(self, source: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """`post`, awaited (inside a running event loop: an async test; not for Django)."""
        if self.transport == "direct":
            return await anyio.to_thread.run_sync(self._receive, source, headers, body)
        return await post(self.app, f"{self.path}/{source}", headers, body)

    def _receive(self, source: str, headers: Mapping[str, str], body: bytes) -> Answer:
        reply = self.inbox.receive(source, headers, body)
        return Answer(reply.status_code, reply.content, dict(reply.headers))

    # -- processing and time ---------------------------------------------------------------

    def run_due(self, *, timeout: float = 60.0) -> int:
        """Process every event and outbox message due at the clock's time, in this thread;
        returns the number of attempts run. Retries scheduled later wait for `advance`.
        On an async inbox, the async worker runs on an event loop of its own (inside a running
        loop, await `arun_due()`)."""
        if self.inbox.is_async and _loop_running():
            raise ConfigurationError(
                "the harness's run_due() was called inside a running event loop: "
                "await its arun_due() instead"
            )
        return self.inbox.process_due(timeout=timeout)

    async def arun_due(self, *, timeout: float = 60.0) -> int:
        """`run_due`, awaited: for an async test, inside its running event loop. On an async
        inbox the async worker runs on this loop, and its pool is released before returning
        (the next call may come from another loop); a sync inbox processes in a thread."""
        if not self.inbox.is_async:
            return await anyio.to_thread.run_sync(partial(self.run_due, timeout=timeout))
        return await self.inbox.aprocess_due(timeout=timeout)

    def advance(self, seconds: float | timedelta) -> int:
        """Move the clock forward, then `run_due()`: what a worker would do meanwhile."""
        self.clock.advance(seconds)
        return self.run_due()

    async def aadvance(self, seconds: float | timedelta) -> int:
        """`advance`, awaited: the clock moved, then `await arun_due()`."""
        self.clock.advance(seconds)
        return await self.arun_due()

    def event(self, source: str, event_id: str) -> Event | None:
        """The stored event, with its status, attempts and delivery count."""
        return self.inbox._operations().event(source, event_id)

    def events(self, source: str | None = None) -> Iterator[Event]:
        """Every stored event (of `source`), oldest first."""
        return iter(self.inbox._operations().all_events(source))

    def reconcile(
        self, source: str, *, since: timedelta = timedelta(days=3), dry_run: bool = False
    ) -> dict[str, int]:
        """Run `hookinbox reconcile` on the copy: list `source`'s events from its provider's
        API (a `FakeStripeAPI`, ...: the source's `api_base`) over the `since` before the copy's
        clock (it starts at the real time, as the API's do), and store what a handler takes and
        the copy lacks, received then (so `run_due()` finds it due).
        The counts are `--json`'s (`listed`, `already_stored`, `missing`, `stored`, ...);
        `run_due()` then processes what was stored."""
        found = self.inbox.sources[source]
        result = self.inbox._operations().reconcile(
            found,
            found.listing(),
            since=since,
            now=datetime.fromtimestamp(self.clock(), UTC),
            takes=lambda event_type: self.inbox._takes(source, event_type),
            dry_run=dry_run,
        )
        return result.counts()

    def close(self) -> None:
        """Release the copy's connections and drop its database."""
        self._stack.close()

    async def aclose(self) -> None:
        """`close()` inside an event loop, without blocking it."""
        await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
