"""Running an event's handlers inside a transaction that the caller owns and commits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from hookinbox import _tracing as tracing
from hookinbox._logging import logger
from hookinbox._model import Event
from hookinbox._processing._context import async_handler_context, handler_context
from hookinbox._processing._handlers import Handler
from hookinbox._storage import unique_violation

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from hookinbox._processing._service import Processing

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
    processing: Processing,
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
        context = handler_context(processing, connection, event, handler.name, destinations, clock)
        if not handler.business_keys:
            call_handler(handler, event, context)
            messages += context.outbox.sent
            continue
        savepoint = connection.begin_nested()
        try:
            call_handler(handler, event, context)
        except IntegrityError as error:
            savepoint.rollback()
            if not business_duplicate(error, handler, event):
                raise
            outcome = BUSINESS_DUPLICATE  # its messages are gone with its savepoint
        else:
            savepoint.commit()
            messages += context.outbox.sent
    return HandlersResult(outcome, messages)


async def run_handlers_async(
    processing: Processing,
    connection: AsyncConnection,
    event: Event,
    handlers: Sequence[Handler],
    clock: Callable[[], float],
    destinations: Collection[str] = (),
) -> HandlersResult:
    """`run_handlers` on the async worker's `AsyncConnection`: the same order, savepoints and
    business-key rule. An `async def` handler is awaited with an `AsyncHandlerContext`; a plain
    one runs on the same connection and transaction (`run_sync`) with a `HandlerContext`, on
    the event loop's thread (its statements are awaited underneath)."""
    if not handlers:
        return HandlersResult(NO_HANDLER, 0)
    outcome = HANDLED
    messages = 0
    for handler in handlers:
        if not handler.business_keys:
            messages += await _call_async(
                processing, connection, event, handler, clock, destinations
            )
            continue
        savepoint = await connection.begin_nested()
        try:
            sent = await _call_async(processing, connection, event, handler, clock, destinations)
        except IntegrityError as error:
            await savepoint.rollback()
            if not business_duplicate(error, handler, event):
                raise
            outcome = BUSINESS_DUPLICATE  # its messages are gone with its savepoint
            continue
        await savepoint.commit()
        messages += sent
    if not connection.in_transaction():
        # A session bound to ctx.db rolled the transaction back (`session.rollback()`): the
        # claim went with it, so nothing may be marked; the attempt fails and is retried.
        raise RuntimeError(
            "a handler rolled back the processing transaction (an AsyncSession's rollback() on "
            "ctx.db): the attempt is retried"
        )
    return HandlersResult(outcome, messages)


async def _call_async(
    processing: Processing,
    connection: AsyncConnection,
    event: Event,
    handler: Handler,
    clock: Callable[[], float],
    destinations: Collection[str],
) -> int:
    """Run one handler on the async worker; returns the outbox messages it sent."""
    if not handler.is_async:

        def in_transaction(sync: Connection) -> int:
            context = handler_context(processing, sync, event, handler.name, destinations, clock)
            call_handler(handler, event, context)
            return context.outbox.sent

        return await connection.run_sync(in_transaction)
    context = async_handler_context(
        processing, connection, event, handler.name, destinations, clock
    )
    with tracing.step(f"handler {handler.name}", {"code.function.name": handler.name}):
        await handler.function(event, context)
    return context.outbox.sent


def business_duplicate(error: IntegrityError, handler: Handler, event: Event) -> bool:
    """Whether `error` violates one of `handler`'s business keys (logged when it does): the
    effect exists already, and the handler's writes were rolled back to its savepoint."""
    violation = unique_violation(error)
    if violation is None or not any(k.matches(violation) for k in handler.business_keys):
        return False
    log.warning(
        "%s %s: business key %s already exists; %s skipped",
        event.source,
        event.id,
        f"{violation.table}({', '.join(sorted(violation.columns))})",
        handler.name,
    )
    return True
