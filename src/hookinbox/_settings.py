"""An inbox's settings: every knob in one frozen value, checked once, when the inbox is built.

Where a setting comes from (the first that gives one wins):

1. the command line: `hookinbox serve APP --database-url ...` imports APP inside
   `overriding(...)`, so its flags (and their `HOOKINBOX_*` variables) apply while the user's
   module constructs its `Inbox`; nothing is patched into an inbox after it was built;
2. the constructor's argument;
3. the environment: `$HOOKINBOX_DATABASE_URL` when no URL is given;
4. the default.

A wrong value is a `ConfigurationError` raised by the constructor, with one line that names
the setting: the application fails at import, not at its first delivery.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import time as time_of_day
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError
from hookinbox._operations._prune import DEFAULT_RETENTION
from hookinbox._operations._schedule import parse_daily_time
from hookinbox._processing._policy import RetryPolicy
from hookinbox._storage import GroupCommit, StoreOptions, async_url

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DATABASE_URL_ENV = "HOOKINBOX_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///hookinbox.db"
DEFAULT_MAX_BODY_SIZE = 1024 * 1024
DEFAULT_RETRY_AFTER = 5
MAX_RETENTION = timedelta(days=36_500)
"""A century: `now - retention` stays inside the calendar."""
DEFAULT_ACK_DEADLINE = 3.0
"""Seconds from a delivery's body read to its answer; past it, 503. Below Shopify's 5 s, the
shortest timeout among the providers (../docs/ingest.md#the-ack-deadline)."""
DEFAULT_BODY_TIMEOUT = 10.0
"""Seconds a client may take to send a delivery's body: a stalled or trickling client (slowloris)
would otherwise hold a connection and its buffer for as long as it likes."""


@dataclass(frozen=True, slots=True)
class ReceiverSettings:
    """What answering a delivery needs; shared by `Inbox` and `ClaimInbox`."""

    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    """Bytes; a longer body is refused with 413 before it is buffered."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    """Seconds a client may take to send the body; then 408."""
    retry_after: int = DEFAULT_RETRY_AFTER
    """Seconds sent as `Retry-After` with every 503."""
    ack_deadline: float | None = DEFAULT_ACK_DEADLINE
    """Seconds from the body read to the answer; a delivery not stored by then gets 503."""
    clock: Callable[[], float] = field(default=time.time, compare=False)
    """Seconds since the epoch: signature tolerances, timestamps and schedules use it."""

    def __post_init__(self) -> None:
        ranges.MAX_BODY_SIZE.check("max_body_size", self.max_body_size)
        ranges.RETRY_AFTER.check("retry_after", self.retry_after)
        ranges.ACK_DEADLINE.check_optional("ack_deadline", self.ack_deadline)
        ranges.BODY_TIMEOUT.check("body_timeout", self.body_timeout)
        if not callable(self.clock):
            raise ConfigurationError(
                f"clock must be a function returning seconds, not {self.clock!r}"
            )


@dataclass(frozen=True, slots=True)
class Settings:
    """An `Inbox`'s settings (`inbox.settings`); built and checked by the constructor."""

    database_url: str
    receiver: ReceiverSettings
    store_options: StoreOptions = field(default_factory=StoreOptions)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    outbox_retry: RetryPolicy = field(default_factory=RetryPolicy)
    retention: timedelta = DEFAULT_RETENTION
    allow_short_retention: bool = False
    prune_at: time_of_day | None = None
    auto_migrate: bool = True
    group_commit: GroupCommit | None = field(default_factory=GroupCommit)
    wake_socket: str | None = None
    """Not an argument: `hookinbox serve` sets it in its HTTP processes on SQLite, where each
    commit that stores a new event sends its worker a wake-up there (docs/processing.md,
    running workers). None elsewhere."""

    def __post_init__(self) -> None:
        for name, kind in (
            ("store_options", StoreOptions),
            ("retry", RetryPolicy),
            ("outbox_retry", RetryPolicy),
        ):
            if not isinstance(getattr(self, name), kind):
                raise ConfigurationError(f"{name} must be a {kind.__name__}")
        if not isinstance(self.retention, timedelta) or not (
            timedelta(0) < self.retention <= MAX_RETENTION
        ):
            # Longer, `now - retention` left the calendar: ingest's stale check and the
            # daily prune raised OverflowError.
            raise ConfigurationError(
                f"retention must be a positive timedelta of at most {MAX_RETENTION.days} days, "
                f"not {self.retention!r}"
            )

    @property
    def clock(self) -> Callable[[], float]:
        return self.receiver.clock

    @property
    def async_url(self) -> URL | None:
        """The async worker's URL when `database_url` names an async driver, else None.
        A DjangoInbox's `django:<alias>` is no URL: Django's connections, always sync."""
        if self.database_url.startswith("django:"):
            return None
        return async_url(self.database_url)

    @property
    def statement_timeout(self) -> float | None:
        """A group-commit writer's statement timeout: a second past the ack deadline, so that
        the requests of a stuck batch are answered by their deadline, not by the cancelled
        statement."""
        deadline = self.receiver.ack_deadline
        return None if deadline is None else deadline + 1.0


@dataclass(frozen=True, slots=True)
class Overrides:
    """Settings given on the command line; they beat the application's own arguments."""

    database_url: str | None = None
    group_commit: bool | None = None
    """False turns group commit off (`--no-group-commit`); None leaves the app's setting."""
    ack_deadline: float | None = None
    """Seconds; 0 turns the deadline off; None leaves the app's setting."""
    body_timeout: float | None = None
    wake_socket: str | None = None
    """Where `hookinbox serve`'s worker is woken after each commit (its HTTP processes only)."""
    store_options: tuple[tuple[str, object], ...] = ()
    """`StoreOptions` fields given on the command line (`--pool-size 5`): (name, value) pairs,
    each replacing the app's own value of that field."""

    def __bool__(self) -> bool:
        return bool(self.store_options) or any(value is not None for value in (
            self.database_url, self.group_commit, self.ack_deadline, self.body_timeout,
            self.wake_socket,
        ))  # fmt: skip


_OVERRIDES: ContextVar[Overrides | None] = ContextVar("hookinbox_overrides", default=None)


@contextmanager
def overriding(overrides: Overrides) -> Iterator[None]:
    """Inboxes constructed inside this block take `overrides` over their own arguments."""
    token = _OVERRIDES.set(overrides)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def current_overrides() -> Overrides:
    return _OVERRIDES.get() or Overrides()


def resolve_database_url(argument: str | None) -> str:
    """The URL an inbox opens: the command line's, the argument, the environment, the default."""
    return (
        current_overrides().database_url
        or argument
        or os.environ.get(DATABASE_URL_ENV)
        or DEFAULT_DATABASE_URL
    )


def resolve_receiver(
    *,
    max_body_size: int,
    body_timeout: float,
    retry_after: int,
    ack_deadline: float | None,
    clock: Callable[[], float],
) -> ReceiverSettings:
    """Receiver settings from the arguments, with the command line's overrides applied."""
    overrides = current_overrides()
    if overrides.ack_deadline is not None:
        ack_deadline = overrides.ack_deadline or None  # 0: off
    if overrides.body_timeout is not None:
        body_timeout = overrides.body_timeout
    return ReceiverSettings(
        max_body_size=max_body_size,
        body_timeout=body_timeout,
        retry_after=retry_after,
        ack_deadline=ack_deadline,
        clock=clock,
    )


def resolve_store_options(options: StoreOptions | None) -> StoreOptions:
    """The app's store options (or the defaults), each field the command line gives replaced."""
    chosen = options or StoreOptions()
    changes: dict[str, Any] = dict(current_overrides().store_options)
    if not changes or not isinstance(chosen, StoreOptions):  # Settings refuses a wrong type
        return chosen
    try:
        return replace(chosen, **changes)
    except TypeError as error:  # an unknown field: a bug of the caller, said in one line
        raise ConfigurationError(f"store options: {error}") from None


def resolve_group_commit(setting: GroupCommit | bool) -> GroupCommit | None:
    if current_overrides().group_commit is False:
        return None
    if setting is True:
        return GroupCommit()
    if setting is False or setting is None:
        return None
    if not isinstance(setting, GroupCommit):
        raise ConfigurationError(f"group_commit is True, False or a GroupCommit, not {setting!r}")
    return setting


def resolve_prune_at(text: str | None) -> time_of_day | None:
    return parse_daily_time(text) if text else None
