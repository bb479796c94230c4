"""The handler registry: which functions run for an event of a given source and type."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hookinbox._errors import ConfigurationError
from hookinbox._metrics import label_event_type
from hookinbox._processing._business import BusinessKey
from hookinbox._processing._policy import RetryPolicy

ANY_TYPE = "*"


@dataclass(frozen=True, slots=True)
class Handler:
    source: str
    event_type: str
    function: Callable[..., Any]
    is_async: bool
    retry: RetryPolicy | None = None
    business_keys: tuple[BusinessKey, ...] = ()

    @property
    def name(self) -> str:
        return str(getattr(self.function, "__qualname__", repr(self.function)))

    def matches(self, source: str, event_type: str | None) -> bool:
        return self.source == source and self.event_type in (ANY_TYPE, event_type)


class HandlerRegistry:
    """Handlers in registration order; an event runs every handler that matches, in that order."""

    def __init__(self) -> None:
        self._handlers: list[Handler] = []

    def add(self, handler: Handler) -> None:
        if not handler.event_type:
            raise ConfigurationError("a handler needs an event type, or '*' for any")
        self._handlers.append(handler)
        if handler.event_type != ANY_TYPE:  # '*' names no type: its events are labelled other
            label_event_type(handler.source, handler.event_type)

    def for_event(self, source: str, event_type: str | None) -> list[Handler]:
        return [h for h in self._handlers if h.matches(source, event_type)]

    def __len__(self) -> int:
        return len(self._handlers)

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._handlers)


def is_async_function(function: Callable[..., Any]) -> bool:
    """True for `async def` functions and objects with an `async def __call__`."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004
    )
