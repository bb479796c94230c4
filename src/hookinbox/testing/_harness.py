"""A user's inbox under test: its own database and clock, deliveries over the HTTP contract.

`InboxHarness(inbox)` makes a copy of the application's inbox (`Inbox.with_settings`: the same
sources, handlers and destinations) on a database the test owns and a `Clock` it moves. A
delivery is signed as the provider signs it and POSTed to the inbox's own ASGI app in this
process, so it is verified, stored and answered exactly as in production; `run_due()` then
runs the worker's processing here, in this thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from datetime import timedelta
from typing import Any, Self

import anyio
import anyio.to_thread

from hookinbox._inbox import Inbox
from hookinbox._model import Event
from hookinbox.testing._asgi import Answer, post
from hookinbox.testing._clock import Clock
from hookinbox.testing._databases import throwaway_database
from hookinbox.testing._signing import Body, sign


class InboxHarness:
    """The application's inbox on a throwaway database, driven by hand.

    `database_url`: a PostgreSQL server URL to create a throwaway database on (its user
    needs CREATEDB), or a SQLite URL to use as it is; default, a temporary SQLite file.
    `settings` override the inbox's other settings (`retry=...`, `group_commit=False`).
    Use it as a context manager, or call `close()`.
    """

    __test__ = False  # pytest: not a test class, whatever a test module imports

    def __init__(
        self,
        inbox: Inbox,
        *,
        database_url: str | None = None,
        clock: Clock | None = None,
        path: str = "/webhooks",
        **settings: Any,
    ) -> None:
        if not isinstance(inbox, Inbox):
            raise TypeError(f"InboxHarness takes an Inbox, not {inbox!r}")
        self._stack = ExitStack()
        self.clock = clock or Clock()
        url = self._stack.enter_context(throwaway_database(database_url))
        self.inbox = self._copy(inbox, database_url=url, clock=self.clock, **settings)
        self._stack.callback(self.inbox.close)
        self.path = path.rstrip("/")
        self.app = self.inbox.asgi(path=self.path)

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
        return anyio.run(self._deliver, source, payload, copies, concurrently, fields)

    async def adeliver(
        self, source: str, payload: Body, *, copies: int = 1, concurrently: bool = False,
        **fields: Any,
    ) -> list[Answer]:  # fmt: skip
        """`deliver`, awaited (inside a running event loop: an async test)."""
        return await self._deliver(source, payload, copies, concurrently, fields)

    async def _deliver(
        self, source: str, payload: Body, copies: int, concurrently: bool, fields: dict[str, Any]
    ) -> list[Answer]:
        requests = [self.sign(source, payload, **fields) for _ in range(copies)]
        answers: list[Answer | None] = [None] * copies
        if not concurrently:
            for index, (headers, body) in enumerate(requests):
                answers[index] = await self.apost(source, headers, body)
        else:

            async def one(index: int, headers: dict[str, str], body: bytes) -> None:
                answers[index] = await self.apost(source, headers, body)

            async with anyio.create_task_group() as group:
                for index, (headers, body) in enumerate(requests):
                    group.start_soon(one, index, headers, body)
        return [answer for answer in answers if answer is not None]

    def post(self, source: str, headers: Mapping[str, str], body: bytes) -> Answer:
        """POST a delivery as it stands (a forgery, a malformed body, a replayed capture)."""
        return anyio.run(self.apost, source, headers, body)

    async def apost(self, source: str, headers: Mapping[str, str], body: bytes) -> Answer:
        # The receiver reads the store in threads: the first request must not race its own
        # schema creation, so the store is made ready here, once.
        await anyio.to_thread.run_sync(self.inbox.store.ensure_schema)
        return await post(self.app, f"{self.path}/{source}", headers, body)

    # -- processing and time ---------------------------------------------------------------

    def run_due(self, *, timeout: float = 60.0) -> int:
        """Process every event and outbox message due at the clock's time, in this thread;
        returns the number of attempts run. Retries scheduled later wait for `advance`."""
        return self.inbox.process_due(timeout=timeout)

    def advance(self, seconds: float | timedelta) -> int:
        """Move the clock forward, then `run_due()`: what a worker would do meanwhile."""
        self.clock.advance(seconds)
        return self.run_due()

    def event(self, source: str, event_id: str) -> Event | None:
        """The stored event, with its status, attempts and delivery count."""
        return self.inbox.store.get_event(source, event_id)

    def events(self, source: str | None = None) -> Iterator[Event]:
        """Every stored event (of `source`), oldest first."""
        from hookinbox._storage._schema import events
        from hookinbox._storage._store import event_from_row

        query = events.select().order_by(events.c.id)
        if source is not None:
            query = query.where(events.c.source == source)
        with self.inbox.store.reading() as connection:
            rows = list(connection.execute(query).mappings())
        return iter([event_from_row(row) for row in rows])

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
