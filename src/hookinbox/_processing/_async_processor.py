"""One attempt on the async worker: the claim, the handlers and the mark on an `AsyncConnection`.

Everything but the waiting is `Processor`'s: which handlers run, the schedule, what a failure
or a `NotReady` leaves behind (`Processor.failed`), the release, the span, the metric and the
log line (`Processor.observed`). The statements are the processing service's
(`processor.processing`, over the async store's sync facade), run on the connection's sync
facade (`run_sync`) or through `AsyncStore.run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hookinbox import _tracing as tracing
from hookinbox._processing._execute import run_handlers_async
from hookinbox._processing._handlers import Handler
from hookinbox._processing._policy import Schedule
from hookinbox._processing._processor import (
    LOST_LEASE,
    TAKEN_OVER,
    AttemptResult,
    Processor,
)
from hookinbox._records import Leased, Release

if TYPE_CHECKING:
    from hookinbox._storage import AsyncStore


class AsyncProcessor:
    """`Processor`'s decisions, awaited: `processor.processing` is over `astore.store`."""

    def __init__(self, processor: Processor, astore: AsyncStore) -> None:
        self.processor = processor
        self.astore = astore

    async def process(self, leased: Leased) -> str:
        """Run one attempt; returns its outcome label."""
        with self.processor.observed(leased) as attempt:
            if attempt.exhausted:
                attempt.result = await self.release(leased, attempt.exhausted)
            else:
                attempt.result = await self._attempt(leased, attempt.handlers, attempt.schedule)
        return attempt.label

    async def release(self, leased: Leased, decision: Release) -> AttemptResult:
        return await self.astore.run(self.processor.release, leased, decision)

    async def _attempt(
        self, leased: Leased, handlers: Sequence[Handler], schedule: Schedule
    ) -> AttemptResult:
        processor = self.processor
        processing = processor.processing
        event = leased.event
        status, expected = processor.expectation(handlers)
        try:
            async with self.astore.transaction() as connection:
                with tracing.step("claim", processor.claim_attributes()):
                    claimed = await connection.run_sync(
                        processing.claim, leased, status, processor.now(), expected
                    )
                if not claimed:
                    return AttemptResult(LOST_LEASE, TAKEN_OVER)
                result = await run_handlers_async(
                    processing,
                    connection,
                    event,
                    handlers,
                    processor.clock,
                    processor.destinations,
                )
                outcome = result.outcome
                if outcome != expected:
                    await connection.run_sync(processing.set_outcome, event.row_id, outcome)
                await connection.run_sync(processing.refuse_aborted)
            if result.messages:
                processor.on_messages()  # committed: the relay may send them now
        except Exception as error:
            return await self.release(leased, processor.failed(leased, schedule, error))
        return processor.succeeded(status, outcome)
