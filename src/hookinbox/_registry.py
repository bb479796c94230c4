"""What an inbox is configured with: sources, handlers, destinations and migration hooks.

Registration checks what it can at once: a handler is a function callable as
`(event, ctx)`, registered once, under a source name and an event type; a source or a
destination is the right kind of object, under a name not taken. What it cannot know yet,
because sources may be added after the handlers that use them, it checks when the inbox
starts (`check()`, from migrate, serve, worker and the first delivery): every handler's source
exists, and a misspelt one gets a "did you mean". Each mistake is a `ConfigurationError` of one
line, so the application stops at start-up instead of failing on its first events.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._processing._handlers import ANY_TYPE, Handler, HandlerRegistry
from hookinbox._processing._policy import RetryPolicy
from hookinbox.outbox._destinations import Destination
from hookinbox.sources import Source

AfterMigrate = Callable[[Connection], None]


PROBE_NAMES = frozenset({"healthz", "readyz"})
"""Names no source may take: `inbox.asgi()` and `hookinbox.fastapi.router` serve these probes
under the same prefix as the deliveries, so such a source could never be reached."""


class Registry:
    """Sources, handlers, destinations and `after_migrate` hooks, in registration order."""

    def __init__(self) -> None:
        self.sources: dict[str, Source] = {}
        self.inline_sources: set[str] = set()
        self.source_retry: dict[str, RetryPolicy] = {}
        self.source_retention: dict[str, timedelta] = {}
        """Sources that keep their events longer or shorter than the inbox's retention."""
        self.auto_pause: dict[str, int] = {}
        """Source -> consecutive failed attempts after which the worker pauses it."""
        self.handlers = HandlerRegistry()
        self.destinations: dict[str, Destination] = {}
        self.after_migrate: list[AfterMigrate] = []

    def add_source(
        self,
        source: Source,
        *,
        inline: bool,
        retry: RetryPolicy | None,
        auto_pause_after: int | None = None,
    ) -> None:
        if not isinstance(source, Source):
            raise ConfigurationError(
                f"add_source takes a source such as Stripe(secret=...), not {source!r}"
            )
        if source.name in self.sources:
            raise ConfigurationError(f"a source named {source.name!r} is already added")
        if source.name in PROBE_NAMES:
            raise ConfigurationError(
                f"a source cannot be named {source.name!r}: GET /webhooks/{source.name} is "
                "the inbox's probe, beside its deliveries (name it with name=...)"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry must be a RetryPolicy, not {retry!r}")
        self.sources[source.name] = source
        if inline:
            self.inline_sources.add(source.name)
        if retry is not None:
            self.source_retry[source.name] = retry
        if auto_pause_after is not None:
            self.auto_pause[source.name] = auto_pause_after

    def copy(self) -> Registry:
        """A registry with the same entries, to which more can be added (`hookinbox.testing`
        adds its fault injection to a copy, never to the application's own registry)."""
        twin = Registry()
        twin.sources = dict(self.sources)
        twin.inline_sources = set(self.inline_sources)
        twin.source_retry = dict(self.source_retry)
        twin.source_retention = dict(self.source_retention)
        twin.auto_pause = dict(self.auto_pause)
        for handler in self.handlers:
            twin.handlers.add(handler)
        twin.destinations = dict(self.destinations)
        twin.after_migrate = list(self.after_migrate)
        return twin

    def add_handler(self, handler: Handler, *, started: bool) -> None:
        """Register `handler`; once the inbox has started, its source must exist already."""
        check_handler_function(handler.function)
        for other in self.handlers:
            if other.source == handler.source and _same_function(other, handler):
                if ANY_TYPE in (other.event_type, handler.event_type) or (
                    other.event_type == handler.event_type
                ):
                    raise ConfigurationError(
                        f"handler {handler.name} is already registered for {other.source} "
                        f"{_types(other.event_type)}: it would run twice for one event"
                    )
        if started:
            self._check_source(handler)
        self.handlers.add(handler)

    def add_destination(self, destination: Destination) -> None:
        if not isinstance(destination, Destination):
            raise ConfigurationError(
                f"add_destination takes a destination such as HTTPDestination(...), "
                f"not {destination!r}"
            )
        if destination.name in self.destinations:
            raise ConfigurationError(f"a destination named {destination.name!r} is already added")
        self.destinations[destination.name] = destination

    def add_after_migrate(self, function: AfterMigrate) -> None:
        if not callable(function):
            raise ConfigurationError(f"after_migrate takes a function, not {function!r}")
        self.after_migrate.append(function)

    def check(self) -> None:
        """Refuse the configuration if a handler's source was never added."""
        for handler in self.handlers:
            self._check_source(handler)

    def _check_source(self, handler: Handler) -> None:
        if handler.source in self.sources:
            return
        names = sorted({*self.sources, *_default_source_names()})
        close = difflib.get_close_matches(handler.source, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        added = ", ".join(sorted(self.sources)) or "none yet"
        raise ConfigurationError(
            f"handler {handler.name} is for source {handler.source!r}, which this inbox does "
            f"not have{hint}; its sources: {added}"
        )


def check_handler_function(function: object) -> None:
    """Refuse what cannot be called as `function(event, ctx)`."""
    if not callable(function):
        raise ConfigurationError(
            f"a handler must be a function taking (event, ctx), not {function!r}"
        )
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins and C callables have none: trust them
        return
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(function, "__qualname__", repr(function))
        raise ConfigurationError(
            f"handler {name}{signature} must accept two arguments, (event, ctx)"
        ) from None


def check_handler_source(source: object, event_type: object) -> None:
    """`@inbox.handler` without its arguments passes the function as the source: say so."""
    if callable(source) and not isinstance(source, str):
        raise ConfigurationError(
            "@inbox.handler needs the source name: write @inbox.handler('stripe') or "
            "@inbox.handler('stripe', 'checkout.session.completed')"
        )
    if not isinstance(source, str) or not source:
        raise ConfigurationError(f"a handler's source is a source name, not {source!r}")
    if not isinstance(event_type, str) or not event_type:
        raise ConfigurationError(
            f"a handler's event type is a type name, or '*' for any, not {event_type!r}"
        )


def _same_function(a: Handler, b: Handler) -> bool:
    if a.function is b.function:
        return True
    # A bound method is a new object at each attribute access: compare what it binds.
    bound_to = getattr(a.function, "__self__", None)
    return (
        bound_to is not None
        and bound_to is getattr(b.function, "__self__", None)
        and getattr(a.function, "__func__", None) is getattr(b.function, "__func__", None)
    )


def _default_source_names() -> set[str]:
    """The default names of the source classes loaded (the bundled ones, and the user's): a
    misspelling of one gets a hint even before that source is added."""
    names: set[str] = set()
    pending: list[type[Any]] = [Source]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        name = getattr(cls, "default_name", None)
        if isinstance(name, str):
            names.add(name)
    return names


def _types(event_type: str) -> str:
    return "events of any type" if event_type == ANY_TYPE else f"{event_type!r} events"
