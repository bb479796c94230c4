"""`Inbox`: the one object users configure; it wires sources, storage, HTTP and handlers."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._operations import (
    DEFAULT_RETENTION,
    DailyJob,
    PruneResult,
    check_retention,
    parse_daily_time,
)
from hookinbox._operations import prune as prune_events
from hookinbox._processing import (
    ANY_TYPE,
    BusinessKey,
    Handler,
    HandlerRegistry,
    Processor,
    RetryPolicy,
    Worker,
    WorkerOptions,
    WorkQueue,
    is_async_function,
)
from hookinbox._processing._queues import EventQueue
from hookinbox._receiver import (
    DEFAULT_ACK_DEADLINE,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_RETRY_AFTER,
    BaseReceiver,
    Receiver,
    Reply,
)
from hookinbox._storage import GroupCommit, GroupCommitter, Store, StoreOptions, parse_url
from hookinbox._storage._notify import CHANNEL as EVENTS_CHANNEL
from hookinbox._storage._notify import OUTBOX_CHANNEL
from hookinbox.http import create_app
from hookinbox.http._types import ASGIApp
from hookinbox.outbox import CallableDestination, Destination, MessageQueue, Relay
from hookinbox.sources import Source

if TYPE_CHECKING:
    from hookinbox.claims import RedisClaims

DATABASE_URL_ENV = "HOOKINBOX_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///hookinbox.db"

F = TypeVar("F", bound=Callable[..., Any])
G = TypeVar("G", bound=Callable[[Connection], None])
D = TypeVar("D", bound=Callable[..., Any])


class Inbox:
    """Verified, deduplicated, durable webhook ingest, and exactly-once processing.

    `database_url` defaults to `$HOOKINBOX_DATABASE_URL`, then to `sqlite:///hookinbox.db`.
    Nothing connects until the inbox is first used, so an `Inbox` can be built at import time
    in every server process.

    `claims=RedisClaims(...)` instead keeps no SQL database: each delivery is claimed in Redis
    and its handlers run inline (docs/redis-claims.md). `in_progress_status` (409, or 200)
    answers a copy that arrives while another copy's handlers run.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
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
        claims: RedisClaims | None = None,
        in_progress_status: int | None = None,
    ) -> None:
        if claims is not None and database_url is not None:
            raise ConfigurationError("an inbox keeps claims in Redis or in a database, not both")
        if claims is None and in_progress_status is not None:
            raise ConfigurationError("in_progress_status applies to an inbox with Redis claims")
        if claims is not None:
            from hookinbox.claims._receiver import check_in_progress_status

            check_in_progress_status(in_progress_status)  # refused now, not at the first delivery
        self.claims = claims
        self.in_progress_status = in_progress_status
        self.database_url = database_url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL
        self.store_options = store_options or StoreOptions()
        self.max_body_size = max_body_size
        self.body_timeout = _check_body_timeout(body_timeout)
        self.retry_after = retry_after
        self.ack_deadline = _check_ack_deadline(ack_deadline)
        self.auto_migrate = auto_migrate
        # Concurrent deliveries share one transaction and one commit (docs/ingest.md).
        self.group_commit = _group_commit(group_commit)
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self.outbox_retry = outbox_retry or RetryPolicy()
        self.retention = retention
        self.allow_short_retention = allow_short_retention
        self.prune_at = parse_daily_time(prune_at) if prune_at else None
        self.sources: dict[str, Source] = {}
        self.source_retry: dict[str, RetryPolicy] = {}
        self.inline_sources: set[str] = set()
        self.handlers = HandlerRegistry()
        self._store: Store | None = None
        self._receiver: BaseReceiver | None = None
        self._processor: Processor | None = None
        self._relay: Relay | None = None
        self._relay_wake = threading.Event()
        self.destinations: dict[str, Destination] = {}
        self._after_migrate: list[Callable[[Connection], None]] = []
        self._wake = threading.Event()  # set on each new event: an in-process worker starts at once
        self._lock = threading.RLock()

    # -- configuration -------------------------------------------------------------------

    def add_source(
        self, source: Source, *, inline: bool = False, retry: RetryPolicy | None = None
    ) -> Source:
        """Receive deliveries for `source` at `POST /webhooks/{source.name}`.

        `inline=True` runs the handlers inside the request, in the insert's transaction: the
        provider gets 200 only once they committed, and 503 (nothing kept) if they raised.
        `retry` overrides the inbox's retry policy for this source's events.
        """
        if source.name in self.sources:
            raise ConfigurationError(f"a source named {source.name!r} is already added")
        self._check_not_started()
        retention = self.retention
        if self.claims is not None:
            if not inline:
                raise ConfigurationError(
                    "an inbox with Redis claims has no queue: add sources with inline=True"
                )
            from hookinbox.claims._protocol import check_source

            check_source(source.name)  # now, not at the first delivery
            retention = self.claims.retention
        check_retention(retention, [source], force=self.allow_short_retention)
        self.sources[source.name] = source
        if inline:
            self.inline_sources.add(source.name)
        if retry is not None:
            self.source_retry[source.name] = retry
        return source

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
        """
        keys = (business_key,) if isinstance(business_key, str) else business_key
        if self.claims is not None and (keys or max_attempts is not None or retry is not None):
            raise ConfigurationError(
                "with Redis claims, handlers take no business_key, max_attempts or retry: "
                "they run inline, and the provider's redelivery is the retry"
            )
        policy = retry or RetryPolicy()
        if max_attempts is not None:
            policy = RetryPolicy(max_attempts=max_attempts).over(policy)

        def register(function: F) -> F:
            self.handlers.add(
                Handler(
                    source=source,
                    event_type=event_type,
                    function=function,
                    is_async=is_async_function(function),
                    retry=policy if policy != RetryPolicy() else None,
                    business_keys=tuple(BusinessKey.parse(k) for k in keys),
                )
            )
            return function

        return register

    def add_destination(self, destination: Destination) -> Destination:
        """Deliver outbox messages sent to `destination.name` (e.g. an `HTTPDestination`)."""
        if destination.name in self.destinations:
            raise ConfigurationError(f"a destination named {destination.name!r} is already added")
        self._check_not_started()
        self._check_sql("the outbox")
        self.destinations[destination.name] = destination
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
            self.add_destination(CallableDestination(name, function, policy))
            return function

        return register

    def after_migrate(self, function: G) -> G:
        """Run `function(connection)` after hookinbox's migrations, in their transaction.

        For applications that keep their own tables beside the inbox and create them with
        `metadata.create_all(connection)`; applications with their own migrations do not need it.
        """
        self._check_not_started()
        self._check_sql("migrations")
        self._after_migrate.append(function)
        return function

    def use_database(self, database_url: str) -> None:
        """Point the inbox at another database (the CLI's --database-url) before first use."""
        if database_url == self.database_url:
            return
        self._check_sql("--database-url")
        self._check_not_started()
        self.database_url = database_url

    def use_group_commit(self, setting: GroupCommit | bool) -> None:
        """Group concurrent deliveries into shared transactions (True: the defaults), or not."""
        if self._receiver is not None:
            raise ConfigurationError("configure the inbox before it is first used")
        self.group_commit = _group_commit(setting)

    def use_ack_deadline(self, seconds: float | None) -> None:
        """Answer 503 to a delivery not stored within `seconds` (None: wait as long as it takes)."""
        if self._receiver is not None:
            raise ConfigurationError("configure the inbox before it is first used")
        self.ack_deadline = _check_ack_deadline(seconds)

    def use_body_timeout(self, seconds: float) -> None:
        """Answer 408 to a delivery whose body has not arrived within `seconds`."""
        if self._receiver is not None:
            raise ConfigurationError("configure the inbox before it is first used")
        self.body_timeout = _check_body_timeout(seconds)

    def _check_not_started(self) -> None:
        if self._store is not None:
            raise ConfigurationError("configure the inbox before it is first used")

    def _check_sql(self, feature: str) -> None:
        if self.claims is not None:
            raise ConfigurationError(
                f"no SQL database for {feature}: this inbox keeps its claims in Redis"
            )

    # -- running -------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The storage, opened on first access (the schema is created on first query)."""
        self._check_sql("the worker, prune, migrate and the operator commands")
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = Store(
                        self.database_url,
                        self.store_options,
                        auto_migrate=self.auto_migrate,
                        after_migrate=self._after_migrate,
                    )
        return self._store

    @property
    def receiver(self) -> BaseReceiver:
        if self._receiver is None and self.claims is not None:
            with self._lock:
                if self._receiver is None:
                    self._receiver = self._claim_receiver(self.claims)
        if self._receiver is None:
            with self._lock:
                if self._receiver is None:
                    inline = {name: self.processor.inline for name in self.inline_sources}
                    self._receiver = Receiver(
                        self.store,
                        self.sources,
                        max_body_size=self.max_body_size,
                        body_timeout=self.body_timeout,
                        retry_after=self.retry_after,
                        inline=inline,
                        on_new_event=self._wake.set,
                        retention=self.retention,
                        clock=self.clock,
                        committer=(
                            GroupCommitter(
                                self.store,
                                self.group_commit,
                                statement_timeout=_statement_timeout(self.ack_deadline),
                            )
                            if self.group_commit
                            else None
                        ),
                        ack_deadline=self.ack_deadline,
                    )
        return self._receiver

    def _claim_receiver(self, claims: RedisClaims) -> BaseReceiver:
        from hookinbox.claims import ClaimReceiver

        return ClaimReceiver(
            claims,
            self.sources,
            self.handlers,
            in_progress_status=self.in_progress_status,
            max_body_size=self.max_body_size,
            body_timeout=self.body_timeout,
            retry_after=self.retry_after,
            clock=self.clock,
            ack_deadline=self.ack_deadline,
        )

    @property
    def processor(self) -> Processor:
        if self._processor is None:
            with self._lock:
                if self._processor is None:
                    self._processor = Processor(
                        self.store,
                        self.handlers,
                        policy=self.retry,
                        source_policies=self.source_retry,
                        clock=self.clock,
                        destinations=self.destinations.keys(),
                        on_messages=self._relay_wake.set,
                    )
        return self._processor

    @property
    def relay(self) -> Relay:
        if self._relay is None:
            with self._lock:
                if self._relay is None:
                    self._relay = Relay(
                        self.store, self.destinations, policy=self.outbox_retry, clock=self.clock
                    )
        return self._relay

    def worker(
        self, options: WorkerOptions | None = None, *, prune: bool = True, relay: bool = True
    ) -> Worker:
        """A worker for this inbox; call `run()` to process until SIGTERM or `stop()`.

        It processes events and, unless `relay=False`, delivers outbox messages. Unless
        `prune=False` or the inbox's `prune_at` is None, it also runs the daily pruner (once
        per day across all workers on the database).
        """
        options = options or WorkerOptions()
        queues: list[tuple[WorkQueue[Any], int, threading.Event]] = [
            (EventQueue(self.processor, options.lease_seconds), options.concurrency, self._wake)
        ]
        channels = {EVENTS_CHANNEL: self._wake}
        if relay:
            queue = MessageQueue(self.relay, options.lease_seconds)
            queues.append((queue, options.relay_concurrency, self._relay_wake))
            channels[OUTBOX_CHANNEL] = self._relay_wake
        jobs = []
        if prune and self.prune_at is not None:
            jobs.append(
                DailyJob(
                    self.store,
                    lambda: self.prune().summary(),
                    at=self.prune_at,
                    clock=lambda: datetime.fromtimestamp(self.clock(), UTC),
                )
            )
        return Worker(self.store, queues, options, jobs=jobs, channels=channels)

    def relay_only(self, options: WorkerOptions | None = None) -> Worker:
        """A worker that only delivers outbox messages (`hookinbox relay`)."""
        options = options or WorkerOptions()
        queue = MessageQueue(self.relay, options.lease_seconds)
        return Worker(
            self.store,
            [(queue, options.relay_concurrency, self._relay_wake)],
            options,
            channels={OUTBOX_CHANNEL: self._relay_wake},
        )

    def prune(self, *, dry_run: bool = False) -> PruneResult:
        """Delete done events older than the retention, in small batches."""
        return prune_events(
            self.store,
            now=datetime.fromtimestamp(self.clock(), UTC),
            retention=self.retention,
            dry_run=dry_run,
        )

    def process_due(self, *, timeout: float = 60.0) -> int:
        """Process every due event now, in this thread; returns the number of attempts run.

        Retries scheduled for later are left for later. Handy in tests, scripts and cron jobs.
        """
        worker = self.worker(WorkerOptions(handle_signals=False), prune=False)
        return worker.run_until_idle(timeout=timeout)

    def migrate(self) -> tuple[int, int]:
        """Create or upgrade hookinbox's tables; returns (version before, version after)."""
        return self.store.migrate()

    def receive(
        self,
        source: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        body: bytes,
    ) -> Reply:
        """Framework-neutral ingest (Flask, Django, ...): verify, store, and say what to answer.

        Pass the raw body bytes exactly as received. Answer with `reply.status_code`,
        `reply.body` as JSON and `reply.headers`.
        """
        return self.receiver.receive(source, headers, body)

    def asgi(self, *, path: str = "/webhooks") -> ASGIApp:
        """An ASGI app: `POST {path}/{source}`, `GET /healthz`, `GET /readyz`."""
        return create_app(self.receiver, path=path)

    def close(self) -> None:
        """Store what group commit holds, then release pooled connections."""
        if self._receiver is not None and self._receiver.committer is not None:
            self._receiver.committer.close()
        if self._store is not None:
            self._store.dispose()
        if self.claims is not None:
            self.claims.close()

    def __repr__(self) -> str:
        if self.claims is not None:
            return f"Inbox({self.claims!r}, sources={sorted(self.sources)})"
        url = parse_url(self.database_url).render_as_string(hide_password=True)
        return f"Inbox({url!r}, sources={sorted(self.sources)})"


MAX_ACK_DEADLINE = 60.0
MAX_BODY_TIMEOUT = 300.0


def _check_ack_deadline(seconds: float | None) -> float | None:
    """None turns the deadline off; otherwise a positive number of seconds, at most 60."""
    if seconds is not None and not 0 < seconds <= MAX_ACK_DEADLINE:
        raise ConfigurationError(
            f"ack_deadline must be between 0 and {MAX_ACK_DEADLINE:g} seconds (or None), "
            f"not {seconds!r}"
        )
    return seconds


def _statement_timeout(ack_deadline: float | None) -> float | None:
    """A group-commit writer's statement timeout: a second past the ack deadline, so that the
    requests of a stuck batch are answered by their deadline, not by the cancelled statement."""
    return None if ack_deadline is None else ack_deadline + 1.0


def _check_body_timeout(seconds: float) -> float:
    """A positive number of seconds, at most 300 (senders give up after 30 s at most)."""
    if not 0 < seconds <= MAX_BODY_TIMEOUT:
        raise ConfigurationError(
            f"body_timeout must be between 0 and {MAX_BODY_TIMEOUT:g} seconds, not {seconds!r}"
        )
    return seconds


def _group_commit(setting: GroupCommit | bool) -> GroupCommit | None:
    return GroupCommit() if setting is True else setting or None
