"""What an `Inbox` runs on, built in one place from its settings and registry, on first use.

Nothing connects when an inbox is constructed (it is built at import time in every server
and worker process); the store opens on first access, and the operations service (what
operators and observers ask of the store), the processing service (what the worker and the
relay ask of it), receiver, processor and relay are built the first time something needs
them. Once the receiver or processor exists, the
inbox has started: the registry is checked (`Registry.check`) and sources can no longer be
added.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import CodeType
from typing import TYPE_CHECKING, Any

from hookinbox._errors import ConfigurationError, MissingExtra, StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import count_auto_pause
from hookinbox._operations._prune import PruneResult, Retentions
from hookinbox._operations._schedule import DailyJob
from hookinbox._operations._service import Operations
from hookinbox._processing._loop import WorkQueue
from hookinbox._processing._processor import Processor
from hookinbox._processing._queues import EventQueue
from hookinbox._processing._service import Processing
from hookinbox._processing._wakeup import Wake, WakeSender
from hookinbox._processing._watchdog import code_names
from hookinbox._processing._worker import BackgroundJob, Worker, WorkerOptions
from hookinbox._receiver import Receiver
from hookinbox._records import Actor
from hookinbox._registry import Registry
from hookinbox._settings import Settings
from hookinbox._storage import AsyncStore, GroupCommitter, Listener, Store
from hookinbox.outbox._relay import MessageQueue, Relay

if TYPE_CHECKING:
    from hookinbox._operations._reconcile_schedule import PeriodicReconcile
    from hookinbox._processing._async_loop import AsyncQueue
    from hookinbox._processing._async_worker import AsyncWorker
    from hookinbox.sources._base import Source

StoreFactory = Callable[[Settings, Registry], Store]

log = logger("hookinbox.worker")

AUTO_PAUSE_ACTOR = "auto-pause"
"""The audit trail's actor of a pause the worker made (`add_source(auto_pause_after=...)`)."""


def open_store(settings: Settings, registry: Registry) -> Store:
    """The default store: the settings' database URL, migrated on first use if allowed."""
    return Store(
        settings.database_url,
        settings.store_options,
        auto_migrate=settings.auto_migrate,
        after_migrate=registry.after_migrate,
    )


class Runtime:
    """The store, its operations and processing services, receiver, processor, relay and
    workers of one inbox; each built once."""

    def __init__(
        self, settings: Settings, registry: Registry, store_factory: StoreFactory = open_store
    ) -> None:
        self.settings = settings
        self.registry = registry
        self._store_factory = store_factory
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._receiver: Receiver | None = None
        self._processor: Processor | None = None
        self._relay: Relay | None = None
        self._operations: Operations | None = None
        self._processing: Processing | None = None
        self.wake = Wake()  # set on each new event: an in-process worker starts at once
        self.relay_wake = Wake()
        self._wake_worker: WakeSender | None = None
        """Wakes `hookinbox serve`'s worker process (settings.wake_socket), once receiving."""

    @property
    def started(self) -> bool:
        return self._receiver is not None or self._processor is not None

    @property
    def store_opened(self) -> bool:
        return self._store is not None

    @property
    def store(self) -> Store:
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._store_factory(self.settings, self.registry)
        return self._store

    @property
    def operations(self) -> Operations:
        """What operators and observers ask of this inbox's data: over the store, built once
        (the one place that hands an inbox's store to the operations service)."""
        if self._operations is None:
            with self._lock:
                if self._operations is None:
                    self._operations = Operations(self.store)
        return self._operations

    @property
    def processing(self) -> Processing:
        """What the worker and the relay ask of this inbox's data: over the store, built once
        (the one place that hands an inbox's store to the processing service; an async
        worker's store gets its own, `async_worker`)."""
        if self._processing is None:
            with self._lock:
                if self._processing is None:
                    self._processing = Processing(self.store)
        return self._processing

    @property
    def is_async(self) -> bool:
        """The database URL names an async driver: the worker is the async one."""
        return self.settings.async_url is not None

    def new_async_store(self) -> AsyncStore:
        """A store on the async URL for one async worker (an async URL only). Each worker
        has its own: an async pool belongs to the event loop that opened its connections,
        and two workers may run on two loops at once (`process_due()` from several
        threads), or one after the other (each `asyncio.run`)."""
        url = self.settings.async_url
        if url is None:
            raise ConfigurationError(_NOT_ASYNC.format(url=self.settings.database_url))
        return AsyncStore(self.store, url)

    @property
    def receiver(self) -> Receiver:
        if self._receiver is None:
            with self._lock:
                if self._receiver is None:
                    self.registry.check()
                    self.prepare_schema()
                    self.check_body_limit()
                    settings = self.settings
                    registry = self.registry
                    if settings.wake_socket is not None and not self.store.dialect.listens:
                        # SQLite (on PostgreSQL, NOTIFY wakes serve's worker already)
                        self._wake_worker = WakeSender(settings.wake_socket)
                    committer = (
                        GroupCommitter(
                            self.store,
                            settings.group_commit,
                            statement_timeout=settings.statement_timeout,
                            on_new_event=self._wake_worker,  # once per commit
                        )
                        if settings.group_commit
                        else None
                    )
                    self._receiver = Receiver(
                        self.store,
                        registry.sources,
                        settings.receiver,
                        inline={name: self.processor.inline for name in registry.inline_sources},
                        on_new_event=self._on_new_event,
                        retention=settings.retention,
                        source_retention=dict(registry.source_retention),
                        committer=committer,
                        gauges=self.operations,
                    )
        return self._receiver

    def prepare_schema(self) -> None:
        """Migrate (or check the version) when receiving starts, before any delivery's ack
        deadline runs: a first delivery to a new database would otherwise spend its deadline
        on the tables and be answered 503. A schema this code cannot run on stops the start
        with its one line (`ConfigurationError`), as the lifespan shows it; a database that
        cannot be asked now is not refused for it: the first delivery tries again (503)."""
        try:
            self.store.ensure_schema()
        except StoreUnavailable:
            return

    def check_body_limit(self) -> None:
        """Refuse, when receiving starts, a body limit the database cannot store in one
        statement (MariaDB's `max_allowed_packet`), rather than answer each such delivery 503
        for as long as its provider retries. A database that cannot be asked now is not
        refused for it: each write checks its own row then (413)."""
        try:
            self.store.check_body_limit(self.settings.receiver.max_body_size)
        except StoreUnavailable:
            return

    def _on_new_event(self) -> None:
        """A delivery stored a new event: wake a worker of this process, and serve's worker
        unless the group committer did already (once for its whole commit)."""
        if not self.wake.is_set():  # set() takes a lock and notifies: once per wake-up
            self.wake.set()
        if self._wake_worker is not None and self.settings.group_commit is None:
            self._wake_worker()  # each delivery is a commit of its own

    @property
    def processor(self) -> Processor:
        if self._processor is None:
            with self._lock:
                if self._processor is None:
                    self._processor = self._processor_on(self.processing)
        return self._processor

    @property
    def relay(self) -> Relay:
        if self._relay is None:
            with self._lock:
                if self._relay is None:
                    self._relay = Relay(
                        self.processing,
                        self.registry.destinations,
                        policy=self.settings.outbox_retry,
                        clock=self.settings.clock,
                    )
        return self._relay

    def worker(
        self,
        options: WorkerOptions,
        *,
        prune: bool,
        relay: bool,
        reconcile_every: timedelta | None = None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> Worker:
        if self.is_async:
            raise ConfigurationError(_ASYNC_URL)
        queues: list[tuple[WorkQueue[Any], int, threading.Event]] = [
            (EventQueue(self.processor, options.lease_seconds), options.concurrency, self.wake)
        ]
        channels = {Listener.EVENTS: self.wake}
        if relay:
            queue = MessageQueue(self.relay, options.lease_seconds)
            queues.append((queue, options.relay_concurrency, self.relay_wake))
            channels[Listener.OUTBOX] = self.relay_wake
        jobs = self._jobs(prune, reconcile_every, reconcile_timeout, reconcile_page_timeout)
        return Worker(self.processing, queues, options, jobs=jobs, channels=channels)

    def async_worker(
        self,
        options: WorkerOptions,
        *,
        prune: bool,
        relay: bool,
        reconcile_every: timedelta | None = None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> AsyncWorker:
        """The worker of an async URL: the same queues and jobs, on one event loop."""
        from hookinbox._processing._async_loop import AsyncEventQueue
        from hookinbox._processing._async_processor import AsyncProcessor
        from hookinbox._processing._async_worker import AsyncWorker

        astore = self.new_async_store()
        processing = Processing(astore.store)  # its calls run through the bridge
        processor = self._processor_on(processing)
        leasing = EventQueue(processor, options.lease_seconds)
        queues: list[tuple[AsyncQueue[Any], int, Wake]] = [
            (AsyncEventQueue(leasing, AsyncProcessor(processor, astore)), options.concurrency,
             self.wake)
        ]  # fmt: skip
        channels: dict[str, threading.Event] = {Listener.EVENTS: self.wake}
        if relay:
            queues.append((self._async_messages(options, astore, processing),
                           options.relay_concurrency, self.relay_wake))  # fmt: skip
            channels[Listener.OUTBOX] = self.relay_wake
        jobs = self._jobs(prune, reconcile_every, reconcile_timeout, reconcile_page_timeout)
        return AsyncWorker(astore, queues, options, processing=processing,
                           in_threads=self.processing, jobs=jobs, channels=channels,
                           code_names=self._code_names())  # fmt: skip

    def async_relay_only(self, options: WorkerOptions) -> AsyncWorker:
        from hookinbox._processing._async_worker import AsyncWorker

        astore = self.new_async_store()
        processing = Processing(astore.store)
        queue = self._async_messages(options, astore, processing)
        return AsyncWorker(astore, [(queue, options.relay_concurrency, self.relay_wake)],
                           options, processing=processing, in_threads=self.processing,
                           channels={Listener.OUTBOX: self.relay_wake},
                           code_names=self._code_names())  # fmt: skip

    def _async_messages(
        self, options: WorkerOptions, astore: AsyncStore, processing: Processing
    ) -> AsyncQueue[Any]:
        from hookinbox.outbox._async_relay import AsyncMessageQueue

        relay = Relay(processing, self.registry.destinations, policy=self.settings.outbox_retry,
                      clock=self.settings.clock)  # fmt: skip
        return AsyncMessageQueue(MessageQueue(relay, options.lease_seconds), astore)

    def _processor_on(self, processing: Processing) -> Processor:
        self.registry.check()
        return Processor(
            processing,
            self.registry.handlers,
            policy=self.settings.retry,
            source_policies=self.registry.source_retry,
            clock=self.settings.clock,
            destinations=self.registry.destinations.keys(),
            on_messages=self.relay_wake.set,
            auto_pause=self.registry.auto_pause,
            on_auto_pause=self._auto_pause,
        )

    def _auto_pause(self, source: str, failures: int) -> None:
        """Pause `source` after `failures` failed attempts in a row (`_processing/_auto_pause.py`),
        in a thread of its own: the pause waits for attempts in flight at the source's events,
        which may be this worker's own."""

        def pause() -> None:
            reason = f"{failures} consecutive failed attempts"
            try:
                change = self.operations.pause(
                    source, datetime.now(UTC), actor=Actor(AUTO_PAUSE_ACTOR, reason)
                )
            except StoreUnavailable as error:
                log.error("%s: could not pause after %s: %s", source, reason, error)
                return
            if change.was_paused:
                return  # another worker process (or an operator) paused it first
            count_auto_pause(source)
            log.warning(
                "%s paused after %s (auto_pause_after); its events are kept, none processed "
                "until `hookinbox resume %s`",
                source, reason, source,
                extra={"source": source, "failures": failures},
            )  # fmt: skip

        threading.Thread(target=pause, name=f"hookinbox-auto-pause-{source}", daemon=True).start()

    def _code_names(self) -> dict[CodeType, str]:
        """The handlers' and destinations' code, for the async worker's watchdog."""
        functions: dict[str, Callable[..., object]] = {}
        for handler in self.registry.handlers:
            functions[f"handler {handler.name}"] = handler.function
        for name, destination in self.registry.destinations.items():
            function = getattr(destination, "function", None)
            if callable(function):
                functions[f"destination {name!r}"] = function
        return code_names(functions)

    def _jobs(
        self,
        prune: bool,
        reconcile_every: timedelta | None,
        reconcile_timeout: timedelta | None = None,
        reconcile_page_timeout: timedelta | None = None,
    ) -> list[BackgroundJob]:
        """The threads a worker starts with itself: the daily pruner, periodic reconcile."""
        jobs: list[BackgroundJob] = []
        prune_at = self.settings.prune_at
        if prune and prune_at is not None:
            jobs.append(DailyJob(self.operations, lambda stop: self.prune(stop=stop).summary(),
                                 at=prune_at, clock=self.now))  # fmt: skip
        if reconcile_every is not None:
            jobs += self._periodic_reconciles(
                reconcile_every, run_timeout=reconcile_timeout, page_timeout=reconcile_page_timeout
            )
        return jobs

    def _periodic_reconciles(
        self,
        every: timedelta,
        *,
        run_timeout: timedelta | None,
        page_timeout: timedelta | None,
    ) -> list[PeriodicReconcile]:
        """The sources configured with their provider's API credentials, each reconciled
        every `every` on a thread of its own (a source whose API hangs holds up no other);
        none at all is a mistake worth refusing at start."""
        sources = [s for s in self.registry.sources.values() if _can_reconcile(s)]
        if not sources:
            raise ConfigurationError(
                "--reconcile-every: no source can reconcile (Stripe needs api_key, GitHub "
                "api_token and hook: docs/reconcile.md)"
            )
        if every <= timedelta(0):
            raise ConfigurationError("--reconcile-every must be positive")
        from hookinbox._operations._reconcile_schedule import PeriodicReconcile
        from hookinbox.sources._provider_api import Limits

        default = Limits()
        limits = Limits(
            run_timeout=_seconds(run_timeout, default.run_timeout),
            page_timeout=_seconds(page_timeout, default.page_timeout),
        )
        handlers = self.registry.handlers
        return [
            PeriodicReconcile(
                self.operations,
                source,
                lambda name, event_type: bool(handlers.for_event(name, event_type)),
                every=every,
                clock=self.now,
                limits=limits,
            )
            for source in sources
        ]

    def relay_only(self, options: WorkerOptions) -> Worker:
        if self.is_async:
            raise ConfigurationError(_ASYNC_URL)
        queue = MessageQueue(self.relay, options.lease_seconds)
        return Worker(
            self.processing,
            [(queue, options.relay_concurrency, self.relay_wake)],
            options,
            channels={Listener.OUTBOX: self.relay_wake},
        )

    def prune(self, *, dry_run: bool = False, stop: threading.Event | None = None) -> PruneResult:
        return self.operations.prune(
            now=self.now(), retention=self.retentions, dry_run=dry_run, stop=stop
        )

    @property
    def retentions(self) -> Retentions:
        return Retentions(self.settings.retention, dict(self.registry.source_retention))

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.settings.clock(), UTC)

    async def aclose(self) -> None:
        """`close`, from an event loop (group commit's last batch is waited for in a thread;
        each async worker released its own pool when it ended)."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Store what group commit holds, then release pooled connections."""
        if self._receiver is not None and self._receiver.committer is not None:
            self._receiver.committer.close()
        if self._store is not None:
            self._store.dispose()
        if self._wake_worker is not None:
            self._wake_worker.close()


def _seconds(value: timedelta | None, default: float) -> float:
    return default if value is None else value.total_seconds()


_ASYNC_URL = (
    "this inbox's database URL names an async driver: its worker is the async one "
    "(`async with inbox.running():`, `await inbox.async_worker().run()`, or `hookinbox worker`)"
)
_NOT_ASYNC = (
    "an async worker needs an async database URL (postgresql+asyncpg://, "
    "postgresql+psycopg_async:// or sqlite+aiosqlite:///); this inbox's is {url}"
)


def _can_reconcile(source: Source) -> bool:
    try:
        source.listing()
    except ConfigurationError as error:
        if isinstance(error, MissingExtra):
            raise  # configured to reconcile, but httpx is missing: say so at start
        return False
    return True
