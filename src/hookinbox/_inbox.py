"""`Inbox`: the object users configure. It holds three things, each in its own module:

- its settings (`_settings.Settings`), checked once, by the constructor;
- its registry (`_registry.Registry`): sources, handlers, destinations, migration hooks;
- its runtime (`_runtime.Runtime`): the store, receiver, processor, relay and workers, built
  on first use.

`BaseInbox` is what every inbox shares (sources, handlers, answering deliveries); the SQL
`Inbox` adds storage, the worker and the outbox; `hookinbox.claims.ClaimInbox`, its sibling,
claims events in Redis and keeps no database.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import getpass
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from sqlalchemy import Connection

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError, StoreUnavailable
from hookinbox._logging import logger
from hookinbox._operations._prune import (
    DEFAULT_RETENTION,
    PruneResult,
    Retentions,
    check_retention,
)
from hookinbox._processing._business import BusinessKey
from hookinbox._processing._handlers import ANY_TYPE, Handler, is_async_function
from hookinbox._processing._policy import RetryPolicy
from hookinbox._processing._worker import Worker, WorkerOptions
from hookinbox._receiver import BaseReceiver, Reply, Request
from hookinbox._records import Actor
from hookinbox._registry import Registry, check_handler_source
from hookinbox._runtime import Runtime, StoreFactory, open_store
from hookinbox._settings import (
    DEFAULT_ACK_DEADLINE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_RETRY_AFTER,
    MAX_RETENTION,
    Settings,
    current_overrides,
    resolve_database_url,
    resolve_group_commit,
    resolve_prune_at,
    resolve_receiver,
    resolve_store_options,
)
from hookinbox._storage import GroupCommit, Store, StoreOptions, async_url, parse_url
from hookinbox.outbox._destinations import CallableDestination, Destination
from hookinbox.sources import Source

if TYPE_CHECKING:
    from hookinbox._operations._service import Operations
    from hookinbox._processing._async_worker import AsyncWorker
    from hookinbox.http._probes import Readiness
    from hookinbox.http._types import ASGIApp

log = logger("hookinbox.worker")

F = TypeVar("F", bound=Callable[..., Any])
G = TypeVar("G", bound=Callable[[Connection], None])
D = TypeVar("D", bound=Callable[..., Any])
S = TypeVar("S", bound=Source)


class BaseInbox(ABC):
    """What every inbox does: keep sources and handlers, and answer deliveries.

    The HTTP adapters (`hookinbox.http`, FastAPI, Flask, Django) take any `BaseInbox`.
    """

    _registry: Registry
    _readiness: Readiness | None = None

    SETTINGS: ClassVar[frozenset[str]] = frozenset({
        "database_url", "store_options", "max_body_size", "body_timeout", "retry_after",
        "ack_deadline", "retry", "outbox_retry", "retention", "allow_short_retention",
        "prune_at", "auto_migrate", "group_commit", "clock", "in_progress_status",
    })  # fmt: skip
    """Arguments of the constructor: assigning one to a built inbox would change nothing."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.SETTINGS:
            raise ConfigurationError(
                f"inbox.{name} cannot be set on a built inbox: pass {name}= to its constructor"
            )
        super().__setattr__(name, value)

    @property
    def sources(self) -> Mapping[str, Source]:
        """The sources added, by name (read-only)."""
        return MappingProxyType(self._registry.sources)

    @abstractmethod
    def _receiver(self) -> BaseReceiver:
        """The receiver deliveries go through; building it starts the inbox."""

    @property
    @abstractmethod
    def started(self) -> bool:
        """True once the inbox has answered, processed or migrated: its sources are fixed."""

    def _register_handler(
        self, source: str, event_type: str, function: Any, **handler: Any
    ) -> None:
        self._registry.add_handler(
            Handler(
                source=source,
                event_type=event_type,
                function=function,
                is_async=is_async_function(function),
                **handler,
            ),
            started=self.started,
        )

    def _takes(self, source: str, event_type: str | None) -> bool:
        """Whether a handler takes events of `event_type` from `source`: reconcile stores no
        event that nothing would process."""
        return bool(self._registry.handlers.for_event(source, event_type))

    def _check_not_started(self) -> None:
        if self.started:
            raise ConfigurationError("configure the inbox before it is first used")

    def check(self) -> None:
        """Raise `ConfigurationError` if a handler's source was never added.

        Runs by itself when the inbox starts (its first delivery, `migrate`, `serve`,
        `worker`, `process_due`); call it in your own start-up or tests to fail earlier.
        """
        self._registry.check()

    def receive(
        self,
        source: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        body: bytes,
        *,
        query: str | bytes = "",
    ) -> Reply:
        """Framework-neutral ingest: verify, store, and say what to answer.

        Pass the raw body bytes exactly as received, and the raw query string as `query`
        where a source reads it (Microsoft Graph's `validationToken`; the others ignore it).
        Answer with `reply.status_code`, `reply.content` (JSON, or a handshake's text) and
        `reply.headers`. To read a body from a stream with the size cap, or to answer a GET
        or HEAD (a provider's handshake), hand a `hookinbox.http.Request` to `handle` instead.
        """
        return self._receiver().receive(source, headers, body, query=query)

    def handle(self, request: Request) -> Reply:
        """The `Reply` to one request on a source's path, blocking: what a WSGI adapter (or
        any framework that hands over a stream) is written on.

        `request.body` is the body's bytes or a blocking `read(n)`, read with the inbox's cap
        (413 before a byte is read when Content-Length announces too much). A `POST` is
        verified and stored; a `GET` or `HEAD` is the source's handshake (405 where it has
        none). Errors raised by `read` itself (a client that hung up) propagate.
        """
        return self._receiver().handle(request)

    async def ahandle(self, request: Request) -> Reply | None:
        """`handle` on an event loop, for ASGI adapters: `request.body` may be the ASGI
        `receive` callable, read within the inbox's `body_timeout` (408 past it); the write is
        awaited until the ack deadline (503 past it). None: the client left before its body
        arrived, and nobody is left to answer.
        """
        return await self._receiver().ahandle(request)

    async def readiness(self) -> Reply:
        """Whether the inbox can take a delivery now, as `GET /readyz` answers: 200 when its
        database takes a write within the ack deadline (3 s without one), else 503 with
        `Retry-After` (so too when the inbox cannot start: its configuration is wrong). The
        first call starts the inbox. One database check at a time, however often it is asked:
        a database gone silent holds one check, not one per probe."""
        if self._readiness is None:
            from hookinbox.http._probes import Readiness

            self._readiness = Readiness(self._receiver)
        return await self._readiness.readiness()

    def asgi(self, *, path: str = "/webhooks") -> ASGIApp:
        """An ASGI app: `POST {path}/{source}`, `GET /healthz`, `GET /readyz`, `GET /metrics`.

        The inbox starts on the app's first request, so handlers may still be registered
        after this call.
        """
        from hookinbox.http._app import create_app

        return create_app(self._receiver, path=path)

    @abstractmethod
    def close(self) -> None:
        """Finish what is in flight and release connections."""


class Inbox(BaseInbox):
    """Verified, deduplicated, durable webhook ingest, and exactly-once processing.

    `database_url` defaults to `$HOOKINBOX_DATABASE_URL`, then to `sqlite:///hookinbox.db`.
    Nothing connects until the inbox is first used, so an `Inbox` can be built at import time
    in every server process. Every argument is checked here: a wrong one raises
    `ConfigurationError` at once. `inbox.settings` holds the result.

    `sources`, if given, are added at once (as `add_source` would).
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        sources: Iterable[Source] = (),
        store_options: StoreOptions | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        retry_after: int = DEFAULT_RETRY_AFTER,
        ack_deadline: float | None = DEFAULT_ACK_DEADLINE,
        retry: RetryPolicy | None = None,
        outbox_retry: RetryPolicy | None = None,
        retention: timedelta = DEFAULT_RETENTION,
        allow_short_retention: bool = False,
        prune_at: str | None = "04:00",
        auto_migrate: bool = True,
        group_commit: GroupCommit | bool = True,
        clock: Callable[[], float] = time.time,
        in_progress_status: int | None = None,
    ) -> None:
        if in_progress_status is not None:
            raise ConfigurationError("in_progress_status applies to an inbox with Redis claims")
        self.settings = Settings(
            database_url=self._database_url(database_url),
            receiver=resolve_receiver(
                max_body_size=max_body_size,
                body_timeout=body_timeout,
                retry_after=retry_after,
                ack_deadline=ack_deadline,
                clock=clock,
            ),
            store_options=resolve_store_options(store_options),
            retry=retry or RetryPolicy(),
            outbox_retry=outbox_retry or RetryPolicy(),
            retention=retention,
            allow_short_retention=allow_short_retention,
            prune_at=resolve_prune_at(prune_at),
            auto_migrate=auto_migrate,
            group_commit=resolve_group_commit(group_commit),
            wake_socket=current_overrides().wake_socket,
        )
        self._registry = Registry()
        self._runtime = Runtime(self.settings, self._registry, self._store_factory())
        for source in sources:
            self.add_source(source)

    def _database_url(self, argument: str | None) -> str:
        url = resolve_database_url(argument)
        parse_url(url)  # a malformed or unsupported URL fails here, not at first use
        async_url(url)  # an async driver that is not installed, likewise
        return url

    def _store_factory(self) -> StoreFactory:
        return open_store

    # -- configuration -------------------------------------------------------------------

    def add_source(
        self,
        source: S,
        *,
        inline: bool = False,
        retry: RetryPolicy | None = None,
        retention: timedelta | None = None,
        allow_short_retention: bool = False,
        auto_pause_after: int | None = None,
    ) -> S:
        """Receive deliveries for `source` at `POST /webhooks/{source.name}`.

        `inline=True` runs the handlers inside the request, in the insert's transaction: the
        provider gets 200 only once they committed, and 503 (nothing kept) if they raised.
        `retry` overrides the inbox's retry policy for this source's events. `retention`
        overrides the inbox's for this source's events and delivery log (longer or shorter;
        not shorter than the source's redelivery window unless `allow_short_retention`).
        `auto_pause_after=N` pauses the source (as `pause` does, audited by "auto-pause")
        when a worker process sees N attempts at its events fail in a row (off by default).
        """
        self._check_not_started()
        if retention is not None and not (
            isinstance(retention, timedelta) and timedelta(0) < retention <= MAX_RETENTION
        ):
            raise ConfigurationError(
                f"retention must be a positive timedelta of at most {MAX_RETENTION.days} days, "
                f"not {retention!r}"
            )
        ranges.AUTO_PAUSE_AFTER.check_optional("auto_pause_after", auto_pause_after)
        if isinstance(source, Source):
            own = {source.name: retention} if retention is not None else {}
            check_retention(
                Retentions(self.settings.retention, own),
                [source],
                force=self.settings.allow_short_retention or allow_short_retention,
            )
        self._registry.add_source(
            source, inline=inline, retry=retry, auto_pause_after=auto_pause_after
        )
        if retention is not None:
            self._registry.source_retention[source.name] = retention
        return source

    @property
    def retentions(self) -> Retentions:
        """How long each source's done events are kept: the inbox's `retention`, and the
        sources' own (`add_source(..., retention=...)`)."""
        return self._runtime.retentions

    def handler(
        self,
        source: str,
        event_type: str = ANY_TYPE,
        *,
        max_attempts: int | None = None,
        retry: RetryPolicy | None = None,
        business_key: str | tuple[str, ...] = (),
    ) -> Callable[[F], F]:
        """Register `function(event, ctx)`, sync or async, for `source` events of `event_type`.

        `event_type="*"` matches any type. Handlers of one event run in registration order in
        one transaction. `max_attempts` and `retry` override the source's policy.
        `business_key` names unique constraints (`"orders.payment_id"`) whose violation means
        the effect already exists: the event is then processed as `business_duplicate`.

        Mistakes are refused here, or when the inbox starts: a function that cannot take
        `(event, ctx)`, one registered twice for the same events, a source never added.
        """
        check_handler_source(source, event_type)
        keys = (business_key,) if isinstance(business_key, str) else business_key
        policy = retry or RetryPolicy()
        if max_attempts is not None:
            policy = RetryPolicy(max_attempts=max_attempts).over(policy)
        business_keys = tuple(BusinessKey.parse(key) for key in keys)

        def register(function: F) -> F:
            self._register_handler(
                source,
                event_type,
                function,
                retry=policy if policy != RetryPolicy() else None,
                business_keys=business_keys,
            )
            return function

        return register

    def add_destination(self, destination: Destination) -> Destination:
        """Deliver outbox messages sent to `destination.name` (e.g. an `HTTPDestination`)."""
        self._check_not_started()
        self._registry.add_destination(destination)
        return destination

    def destination(
        self, name: str, *, max_attempts: int | None = None, retry: RetryPolicy | None = None
    ) -> Callable[[D], D]:
        """Register `function(message)`, sync or async, to deliver the messages sent to `name`.

        Raise `DeliveryError` (or anything) to retry later, `Undeliverable` to give up.
        """
        policy = retry or RetryPolicy()
        if max_attempts is not None:
            policy = RetryPolicy(max_attempts=max_attempts).over(policy)

        def register(function: D) -> D:
            if not callable(function):
                raise ConfigurationError(f"a destination must be a function, not {function!r}")
            self.add_destination(CallableDestination(name, function, policy))
            return function

        return register

    def after_migrate(self, function: G) -> G:
        """Run `function(connection)` after hookinbox's migrations, in their transaction.

        For applications that keep their own tables beside the inbox and create them with
        `metadata.create_all(connection)`; applications with their own migrations do not need it.
        """
        if self._runtime.store_opened:
            raise ConfigurationError("configure the inbox before it is first used")
        self._registry.add_after_migrate(function)
        return function

    def with_settings(self, **changes: Any) -> Self:
        """A new inbox with this one's sources, handlers and destinations, and other settings.

        Takes the constructor's setting arguments (`database_url`, `clock`, `retry`,
        `ack_deadline`, `group_commit`, ...). The registry is shared, not copied: the new
        inbox runs the same handlers, on its own database connections, workers and clock.
        For tests (`hookinbox.testing`) and for tools that run an application's inbox
        against another database. Nothing connects until the new inbox is first used.
        """
        unknown = sorted(set(changes) - (self.SETTINGS - {"in_progress_status"}))
        if unknown:
            raise ConfigurationError(f"with_settings() takes no {', '.join(unknown)}")
        settings = self.settings
        receiver = {k: changes.pop(k) for k in RECEIVER_FIELDS if k in changes}
        if receiver:
            settings = replace(settings, receiver=replace(settings.receiver, **receiver))
        if "database_url" in changes:
            parse_url(changes["database_url"])
        if "group_commit" in changes:
            changes["group_commit"] = resolve_group_commit(changes["group_commit"])
        if "prune_at" in changes:
            changes["prune_at"] = resolve_prune_at(changes["prune_at"])
        for name in ("retry", "outbox_retry", "store_options"):
            if changes.get(name, 0) is None:
                changes.pop(name)
        twin = copy.copy(self)
        twin.settings = replace(settings, **changes)
        twin._runtime = Runtime(twin.settings, self._registry, self._store_factory())
        return twin

    # -- running -------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._runtime.started

    def _receiver(self) -> BaseReceiver:
        return self._runtime.receiver

    @property
    def store(self) -> Store:
        """The storage, opened on first access (the schema is created on first query)."""
        return self._runtime.store

    def _operations(self) -> Operations:
        """What operators and observers ask of this inbox's data (the command line, the
        dashboard, the test kit): the runtime's one operations service."""
        return self._runtime.operations

    def worker(
        self,
        options: WorkerOptions | None = None,
        *,
        prune: bool = True,
        relay: bool = True,
        reconcile_every: timedelta | None = None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> Worker:
        """A worker for this inbox; call `run()` to process until SIGTERM or `stop()`.

        It processes events and, unless `relay=False`, delivers outbox messages. Unless
        `prune=False` or the inbox's `prune_at` is None, it also runs the daily pruner (once
        per day across all workers on the database). With `reconcile_every`, it reconciles
        every source configured with its provider's API credentials that often (once per
        period across all workers, each source on a thread of its own), each run within
        `reconcile_timeout` (default 30 minutes) and each request within
        `reconcile_page_timeout` (default 60 seconds; docs/reconcile.md).
        """
        return self._runtime.worker(
            options or WorkerOptions(),
            prune=prune,
            relay=relay,
            reconcile_every=reconcile_every,
            reconcile_timeout=reconcile_timeout,
            reconcile_page_timeout=reconcile_page_timeout,
        )

    def relay_only(self, options: WorkerOptions | None = None) -> Worker:
        """A worker that only delivers outbox messages (`hookinbox relay`)."""
        return self._runtime.relay_only(options or WorkerOptions())

    @property
    def is_async(self) -> bool:
        """True when the database URL names an async driver (`postgresql+asyncpg://`,
        `postgresql+psycopg_async://`, `sqlite+aiosqlite:///`): the worker then runs on an
        event loop, and `async def` handlers get an `AsyncHandlerContext` (docs/async.md)."""
        return self._runtime.is_async

    def async_worker(
        self,
        options: WorkerOptions | None = None,
        *,
        events: bool = True,
        prune: bool = True,
        relay: bool = True,
        reconcile_every: timedelta | None = None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> AsyncWorker:
        """The worker of an inbox on an async database URL: `await worker.run()` processes
        events (and outbox messages) as tasks on the running event loop until `stop()`, or
        SIGTERM when it installs signal handlers (`WorkerOptions.handle_signals`; the loop
        must run in the main thread). `events=False`: only the relay (`hookinbox relay`).
        The other arguments are `worker()`'s, and mean the same. `async with
        inbox.running():` runs it inside an application's own loop."""
        options = options or WorkerOptions()
        if not events:
            return self._runtime.async_relay_only(options)
        return self._runtime.async_worker(
            options,
            prune=prune,
            relay=relay,
            reconcile_every=reconcile_every,
            reconcile_timeout=reconcile_timeout,
            reconcile_page_timeout=reconcile_page_timeout,
        )

    @asynccontextmanager
    async def running(
        self,
        options: WorkerOptions | None = None,
        *,
        prune: bool = True,
        relay: bool = True,
        reconcile_every: timedelta | None = None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> AsyncIterator[AsyncWorker | Worker]:
        """Process events in the background while the block runs: an application's lifespan.

        On an async database URL, the async worker runs as a task of the running event loop;
        on a sync one, the thread worker runs in a thread. Signals stay the application's
        (the worker installs no handler). Leaving the block stops the worker: the attempts
        in flight finish within the grace period (`WorkerOptions.grace_period`), and what is
        cut off is rolled back and given back, never doubled. A database that cannot be
        reached when the block starts is waited for (logged, tried again every few seconds):
        the application starts and answers as it can meanwhile. Any other error of the
        worker itself (not a handler's: those are retries) is logged at once and raised when
        the block ends.

            @asynccontextmanager
            async def lifespan(app):
                async with inbox.running():
                    yield
        """
        options = replace(options or WorkerOptions(), handle_signals=False)
        arguments: dict[str, Any] = {
            "prune": prune,
            "relay": relay,
            "reconcile_every": reconcile_every,
            "reconcile_timeout": reconcile_timeout,
            "reconcile_page_timeout": reconcile_page_timeout,
        }
        worker: AsyncWorker | Worker
        if self.is_async:
            worker = self.async_worker(options, **arguments)
            run: Callable[[], Awaitable[bool]] = worker.run
        else:
            worker = self.worker(options, **arguments)
            run = functools.partial(asyncio.to_thread, worker.run)
        task = asyncio.create_task(_when_reachable(run, worker), name="hookinbox-worker")
        task.add_done_callback(_log_failure)
        try:
            yield worker
        finally:
            worker.stop()
            await task

    def trust(self, source: str, *, window: timedelta = timedelta(minutes=10)) -> datetime:
        """Believe `source`'s next first handshake for `window` (at most a day): a source that
        learns its secret on first use (Asana) keeps the secret of the first one, then the
        window closes. Call it right before creating the webhook; returns when it closes.
        `hookinbox trust [APP] SOURCE --for 10m` is the same from the command line."""
        found = self.sources.get(source)
        if found is None or not found.learns_secrets:
            raise ConfigurationError(f"no source named {source!r} learns a secret on first use")
        if not timedelta(0) < window <= timedelta(days=1):
            raise ConfigurationError("window must be more than 0 and at most a day")
        return self._operations().open_trust_window(source, window)

    def pause(self, source: str, *, actor: str | None = None, reason: str | None = None) -> int:
        """Pause `source`'s processing: its deliveries are still verified, stored and
        answered, none of its events is processed until `resume`. Once this returns no
        attempt at one of them starts; one that had already claimed its event has ended.
        Audited (`actor`: by default the OS user; `reason`). Pausing a paused source is
        fine. Returns how many open events it parked. `hookinbox pause [APP] SOURCE` is the
        same from the command line."""
        self._check_source(source)
        who = Actor(actor or getpass.getuser(), reason)
        return self._operations().pause(source, datetime.now(UTC), actor=who).events

    def resume(self, source: str, *, actor: str | None = None, reason: str | None = None) -> int:
        """Resume `source`: its parked events are due again, each processed once, at the time
        each was due. Audited as `pause` is. Returns how many events it made due;
        `hookinbox resume [APP] SOURCE` is the same from the command line."""
        self._check_source(source)
        who = Actor(actor or getpass.getuser(), reason)
        return self._operations().resume(source, datetime.now(UTC), actor=who).events

    def paused_sources(self) -> list[str]:
        """The names of the paused sources."""
        return [paused.source for paused in self._operations().paused_sources()]

    def _check_source(self, source: str) -> None:
        if source not in self.sources:
            raise ConfigurationError(f"no source is named {source!r}")

    def prune(self, *, dry_run: bool = False) -> PruneResult:
        """Delete done events older than the retention, in small batches."""
        return self._runtime.prune(dry_run=dry_run)

    def process_due(self, *, timeout: float = 60.0) -> int:
        """Process every due event now, in this thread; returns the number of attempts run.

        Retries scheduled for later are left for later. Handy in tests, scripts and cron jobs.
        On an async database URL it runs `aprocess_due` on an event loop of its own; inside a
        running loop, await `aprocess_due()` instead. `timeout`: seconds, more than 0 and at
        most 7 days.
        """
        ranges.RUN_TIMEOUT.check("timeout", timeout)  # before the store is opened
        if self.is_async:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(self._process_due_on_own_loop(timeout))
            raise ConfigurationError(
                "inbox.process_due() was called inside a running event loop: "
                "await inbox.aprocess_due() instead"
            )
        worker = self.worker(WorkerOptions(handle_signals=False), prune=False)
        return worker.run_until_idle(timeout=timeout)

    async def aprocess_due(self, *, timeout: float = 60.0) -> int:
        """`process_due` on the running event loop (an async database URL): every due event
        processed now, one at a time; returns the number of attempts run."""
        ranges.RUN_TIMEOUT.check("timeout", timeout)
        worker = self.async_worker(WorkerOptions(handle_signals=False), prune=False)
        try:
            return await worker.run_until_idle(timeout=timeout)
        finally:
            await worker.astore.dispose()  # its pool belongs to this loop

    async def _process_due_on_own_loop(self, timeout: float) -> int:
        return await self.aprocess_due(timeout=timeout)

    def migrate(self) -> tuple[int, int]:
        """Create or upgrade hookinbox's tables; returns (version before, version after)."""
        self.check()
        return self.store.migrate()

    def close(self) -> None:
        """Store what group commit holds, then release pooled connections."""
        self._runtime.close()

    async def aclose(self) -> None:
        """`close()` from an event loop, without blocking it."""
        await self._runtime.aclose()

    def __repr__(self) -> str:
        given = self.settings.async_url or parse_url(self.settings.database_url)
        url = given.render_as_string(hide_password=True)
        return f"Inbox({url!r}, sources={sorted(self.sources)})"


WAIT_FOR_DATABASE = (1.0, 30.0)
"""`running()`: seconds before the first try again at a database unreachable at start, and
the most it grows to (doubling)."""


async def _when_reachable(run: Callable[[], Awaitable[bool]], worker: AsyncWorker | Worker) -> bool:
    """`run()`, tried again while it fails at once for a database it cannot reach (both
    workers check the schema before anything else), until the worker is stopped."""
    delay, longest = WAIT_FOR_DATABASE
    while True:
        try:
            return await run()
        except StoreUnavailable as error:
            if worker.stopping:
                return True
            log.warning("the worker cannot start yet (%s); trying again in %.0f s", error, delay)
        deadline = time.monotonic() + delay
        while not worker.stopping and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if worker.stopping:
            return True
        delay = min(delay * 2, longest)


def _log_failure(task: asyncio.Task[bool]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the worker stopped with an error", exc_info=task.exception())


RECEIVER_FIELDS = ("max_body_size", "body_timeout", "retry_after", "ack_deadline", "clock")


def check_body_limit(inbox: BaseInbox) -> None:
    """Refuse an inbox whose body limit its database cannot store in one statement (MariaDB's
    `max_allowed_packet`): `hookinbox serve` asks before its server starts, as the inbox
    itself does when it starts receiving."""
    if isinstance(inbox, Inbox):
        inbox._runtime.check_body_limit()


def check_encryption(inbox: BaseInbox) -> None:
    """Refuse, before `serve` or `worker` starts, keys that cannot read the newest encrypted
    event (or malformed ones, or none when events are stored encrypted): one line, exit 2,
    rather than a server that stores deliveries and a worker that fails on each it reads."""
    if isinstance(inbox, Inbox):
        inbox.check()  # a registration mistake first, before the database is opened
        inbox._runtime.store.encryption.check_keys()


def check_overrides_applied(inbox: BaseInbox) -> None:
    """Refuse an inbox built before the command line's settings could apply (its module was
    imported earlier in this process), rather than silently serve another database."""
    overrides = current_overrides()
    if not isinstance(inbox, Inbox) or not overrides.database_url:
        return
    if overrides.database_url != inbox.settings.database_url:
        raise ConfigurationError(
            "the app's inbox was built before --database-url could apply (its module was "
            "imported earlier in this process)"
        )
