"""The SQL receiver: a verified delivery stored once, durably, and the answer its write earns.

Storing goes the way the delivery's `Verified.committer` says, chosen once when it was
verified: through the group committer (one statement for every delivery waiting), or in a
transaction of its own (group commit off; an inline source, whose handlers share the insert's
transaction). What the write did (new, duplicate, a key conflict, stale, invalid, or an error)
becomes the reply here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from typing import Any, cast

from sqlalchemy import Connection

from hookinbox._errors import BodyTooLarge, NotReady, StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import GaugeSource, exposition
from hookinbox._model import Event, NewDelivery, RecordedDelivery, Status
from hookinbox._receiver._base import BaseReceiver
from hookinbox._receiver._reply import Outcome, Reply, batch_reply, reject
from hookinbox._receiver._report import log_late
from hookinbox._receiver._verified import Verified, inline_event
from hookinbox._settings import ReceiverSettings
from hookinbox._storage import GroupCommitter, Store
from hookinbox.sources import Source

log = logger("hookinbox.ingest")

Stored = RecordedDelivery | list[RecordedDelivery]
"""What storing a verified delivery did: one result, or one per event of a batch."""

InlineProcessor = Callable[[Connection, Event], None]
"""Runs an event's handlers inside the connection's transaction and marks it processed."""


class Receiver(BaseReceiver):
    """Turns (source name, headers, raw body) into a stored event and a `Reply`."""

    def __init__(
        self,
        store: Store,
        sources: Mapping[str, Source],
        settings: ReceiverSettings | None = None,
        *,
        inline: Mapping[str, InlineProcessor] | None = None,
        on_new_event: Callable[[], None] | None = None,
        retention: timedelta | None = None,
        source_retention: Mapping[str, timedelta] | None = None,
        committer: GroupCommitter | None = None,
        gauges: GaugeSource | None = None,
    ) -> None:
        self.store = store
        self.sources = sources
        self.settings = settings or ReceiverSettings()
        self.committer = committer
        self.inline = inline or {}
        self.on_new_event = on_new_event
        self.retention = retention
        self.source_retention = source_retention or {}
        # What `/metrics` reads its gauges from: the inbox's operations service, handed over
        # by the runtime (None: the counters only).
        self.gauges = gauges
        for source in sources.values():
            if source.learns_secrets:  # Asana: its secrets kept where every process reads
                source.attach_secrets(store.trust)

    def ping(self) -> None:
        self.store.ping()

    def store_attributes(self) -> dict[str, Any]:
        return {
            "db.system.name": self.store.dialect.name,
            "db.operation.name": "INSERT",
            "db.collection.name": "hookinbox_events",
        }

    def metrics(self) -> tuple[bytes, str]:
        return exposition(self.gauges)

    def committer_for(self, source_name: str) -> GroupCommitter | None:
        """The group committer that stores the source's deliveries, or None to store each in
        a transaction of its own (group commit off, or an inline source, whose handlers share
        the insert's transaction). Asked once per delivery, when it is verified."""
        if source_name in self.inline:
            return None
        return self.committer

    def store_verified(self, verified: Verified) -> Reply:
        """The second half of `receive`, for a delivery that `verify` passed (blocking)."""
        try:
            recorded = self._store(verified)
        except Exception as error:
            return self.conclude(verified, error)
        return self.conclude(verified, recorded)

    def conclude(self, verified: Verified, result: Stored | Exception) -> Reply:
        """The reply for a verified delivery once storing it succeeded or raised `result`."""
        return self.finish_verified(verified, self._decide(verified, result))

    def conclude_late(self, verified: Verified, result: object) -> None:
        """A delivery stored (or not) after its 503 went out: the line the log promises."""
        stored = cast(Stored | Exception, result)
        log_late(verified.delivery, self._decide(verified, stored))

    def _decide(self, verified: Verified, result: Stored | Exception) -> Reply:
        delivery = verified.delivery
        if isinstance(result, Exception):
            return self._failed(delivery, result)
        if isinstance(result, list):
            return self._stored_batch(verified.batch, result)
        return self._stored(delivery, result)

    def _failed(self, delivery: NewDelivery, error: Exception) -> Reply:
        if isinstance(error, StoreUnavailable):
            return self.unavailable(error.message)
        if isinstance(error, BodyTooLarge):  # more than the database takes in a statement
            return reject(413, Outcome.TOO_LARGE, error.message)
        if isinstance(error, NotReady):
            return self._not_processed(f"not ready: {error.message}")
        if delivery.source in self.inline:
            log.error(
                "inline handler failed for %s %s",
                delivery.source,
                delivery.event_id,
                exc_info=error,
            )
            return self._not_processed(f"handler raised {type(error).__name__}")
        log.error(
            "unexpected error storing %s %s", delivery.source, delivery.event_id, exc_info=error
        )
        return Reply(500, {"status": "error", "error": "internal"}, {}, Outcome.ERROR)

    def _stored(self, delivery: NewDelivery, recorded: RecordedDelivery) -> Reply:
        self._note(delivery, recorded)
        if recorded.is_new and recorded.status is Status.PENDING and self.on_new_event:
            self.on_new_event()  # wakes a worker running in this process
        outcome = Outcome.ACCEPTED if recorded.is_new else Outcome.DUPLICATE
        body_out = {"status": outcome.value, "event_id": delivery.event_id}
        return Reply(200, body_out, {}, outcome, delivery.event_type, recorded.key_conflict)

    def _stored_batch(
        self, batch: tuple[NewDelivery, ...], results: list[RecordedDelivery]
    ) -> Reply:
        """One answer for a batch: `accepted` when it held any new event, else `duplicate`."""
        for delivery, recorded in zip(batch, results, strict=True):
            self._note(delivery, recorded)
        if self.on_new_event and any(r.is_new and r.status is Status.PENDING for r in results):
            self.on_new_event()
        new = sum(recorded.is_new for recorded in results)
        conflict = any(recorded.key_conflict for recorded in results)
        invalid = sum(delivery.invalid is not None for delivery in batch)
        return batch_reply(len(results), new, conflict, invalid)

    def _note(self, delivery: NewDelivery, recorded: RecordedDelivery) -> None:
        """Log what an operator should hear of: a key conflict, an event held as stale."""
        if recorded.key_conflict:
            log.warning(
                "key conflict: %s %s delivered again with a different body",
                delivery.source,
                delivery.event_id,
                extra={"source": delivery.source, "event_id": delivery.event_id},
            )
        if recorded.is_new and recorded.status is Status.STALE:
            log.warning(
                "%s %s occurred %s, before the retention: held as stale for an operator",
                delivery.source,
                delivery.event_id,
                delivery.occurred_at,
            )
        if recorded.is_new and recorded.status is Status.INVALID:
            log.warning(
                "%s %s: an event of a batch cannot be processed (%s): held as invalid for an "
                "operator, the rest of the batch stored",
                delivery.source,
                delivery.event_id,
                delivery.invalid,
                extra={"source": delivery.source, "event_id": delivery.event_id},
            )

    def _store(self, verified: Verified) -> Stored:
        """Store the delivery the way `verified.committer` says (blocking)."""
        delivery = verified.delivery
        process = self.inline.get(delivery.source)
        if verified.batch:
            return self._store_batch(verified, process)
        committer = verified.committer
        if committer is not None:
            late = partial(self.conclude_late, verified)
            return committer.record(delivery, self.time_left(verified), late=late)
        if process is None:
            return self.store.ingest.record(delivery)
        # Inline: insert, handlers and processed mark share one transaction, so a handler that
        # fails leaves no claim behind and the provider's retry is treated as new.
        with self.store.transaction() as connection:
            recorded = self.store.ingest.record_on(connection, delivery)
            if recorded.is_new and not delivery.stale:
                process(connection, inline_event(delivery, recorded))
            return recorded

    def _store_batch(
        self, verified: Verified, process: InlineProcessor | None
    ) -> list[RecordedDelivery]:
        """Every event of a batch in one transaction: all of them are stored, or none."""
        committer = verified.committer
        if committer is not None:
            late = partial(self.conclude_late, verified)
            return committer.record_batch(verified.batch, self.time_left(verified), late=late)
        batch = verified.batch
        # In key order, as group commit writes: two transactions storing one batch (its
        # redelivery, on another server) lock its rows in the same order, so one waits for
        # the other instead of deadlocking.
        order = sorted(range(len(batch)), key=lambda i: (batch[i].source, batch[i].event_id))

        def write() -> list[RecordedDelivery]:
            results: list[RecordedDelivery | None] = [None] * len(batch)
            with self.store.transaction() as connection:
                for index in order:
                    results[index] = self.store.ingest.record_on(connection, batch[index])
                if process is not None:
                    for delivery, recorded in zip(batch, results, strict=True):
                        assert recorded is not None
                        if recorded.is_new and recorded.status is Status.PENDING:
                            process(connection, inline_event(delivery, recorded))
            return [recorded for recorded in results if recorded is not None]

        if process is not None:
            # The handlers' writes share the transaction: a deadlock is a 503, and the
            # provider's retry runs them again, not this request.
            return write()
        return self.store.retry_deadlocks(write, "ingest")
