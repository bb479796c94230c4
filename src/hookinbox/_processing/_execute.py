"""Running an event's handlers inside a transaction that the caller owns and commits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from hookinbox import _tracing as tracing
from hookinbox._logging import logger
from hookinbox._model import Event
from hookinbox._processing._context import handler_context
from hookinbox._processing._handlers import Handler
from hookinbox._storage import Store, unique_violation

log = logger("hookinbox.worker")

HANDLED = "handled"
BUSINESS_DUPLICATE = "business_duplicate"
NO_HANDLER = "no_handler"

_thread_state = threading.local()


def _event_loop() -> asyncio.AbstractEventLoop:
    """One event loop per worker thread, kept between events so async clients can be reused."""
    loop: asyncio.AbstractEventLoop | None = getattr(_thread_state, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _thread_state.loop = loop
    return loop


def call_handler(handler: Handler, event: Event, context: object) -> None:
    with tracing.step(f"handler {handler.name}", {"code.function.name": handler.name}):
        if handler.is_async:
            _event_loop().run_until_complete(handler.function(event, context))
        else:
            handler.function(event, context)


@dataclass(frozen=True, slots=True)
class HandlersResult:
    outcome: str
    messages: int
    """Outbox messages the handlers sent (the relay is woken after the commit)."""


def run_handlers(
    store: Store,
    connection: Connection,
    event: Event,
    handlers: Sequence[Handler],
    clock: Callable[[], float],
    destinations: Collection[str] = (),
) -> HandlersResult:
    """Run every handler in order on `connection`; return the outcome to record.

    Exceptions propagate (the caller rolls back), except a violation of a handler's declared
    business key: that handler's writes roll back to its savepoint and the event counts as
    done, with outcome `business_duplicate`.
    """
    if not handlers:
        return HandlersResult(NO_HANDLER, 0)
    outcome = HANDLED
    messages = 0
    for handler in handlers:
        context = handler_context(store, connection, event, handler.name, destinations, clock)
        if not handler.business_keys:
            call_handler(handler, event, context)
            messages += context.outbox.sent
            continue
        savepoint = connection.begin_nested()
        try:
            call_handler(handler, event, context)
        except IntegrityError as error:
            violation = unique_violation(error)
            savepoint.rollback()
            if violation is None or not any(k.matches(violation) for k in handler.business_keys):
                raise
            outcome = BUSINESS_DUPLICATE
            log.warning(
                "%s %s: business key %s already exists; %s skipped",
                event.source,
                event.id,
                f"{violation.table}({', '.join(sorted(violation.columns))})",
                handler.name,
            )
        else:
            savepoint.commit()
            messages += context.outbox.sent
            continue
        # Rolled back to the savepoint: the messages this handler sent are gone with it.
    return HandlersResult(outcome, messages)
