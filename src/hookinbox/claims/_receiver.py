"""Ingest without an SQL database: verify, claim the event in Redis, run its handlers, answer.

`ClaimInbox(RedisClaims(...))` answers deliveries with a `ClaimReceiver` instead of the SQL
`Receiver`; the HTTP app and `BaseInbox.receive` see the same `BaseReceiver` contract. Nothing is
stored but the claim, so the handlers run inline, in the request, and the provider's retry is
the only retry:

    claimed          -> handlers run -> done: 200 accepted
                                     -> raised: claim released, 503 (the retry runs them again)
    done already     -> 200 duplicate, handlers not run
    in progress      -> 409 + Retry-After (or 200 duplicate if so configured), handlers not run
    Redis unusable   -> 503, handlers not run
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hookinbox._errors import (
    AlreadyDone,
    ClaimStoreUnavailable,
    ConfigurationError,
    InProgress,
    NotReady,
)
from hookinbox._logging import logger
from hookinbox._metrics import exposition
from hookinbox._model import Event
from hookinbox._processing import HandlerRegistry
from hookinbox._processing._execute import call_handler
from hookinbox._receiver import (
    BaseReceiver,
    Outcome,
    Reply,
    Verified,
    batch_reply,
    event_of,
)
from hookinbox._settings import ReceiverSettings
from hookinbox.claims._protocol import Claim
from hookinbox.claims._redis import RedisClaims, release_failed, warn_lost
from hookinbox.sources import Source

log = logger("hookinbox.ingest")
handler_log = logger("hookinbox.handler")

IN_PROGRESS_STATUSES = (200, 409)
DEFAULT_IN_PROGRESS_STATUS = 409
"""409 keeps the provider retrying while another copy's handler runs: if that run then fails
or its process dies, a retry after the lease still runs the handler. 200 closes the copy at
once, and leaves the event to the other copy's own retry."""


def check_in_progress_status(status: int | None) -> int:
    """The status to answer a copy that arrives while another copy's handlers run."""
    if status is None:
        return DEFAULT_IN_PROGRESS_STATUS
    if status not in IN_PROGRESS_STATUSES:
        raise ConfigurationError(
            f"in_progress_status is 409 (retry later) or 200 (duplicate), not {status!r}"
        )
    return status


class ClaimContext:
    """Passed to handlers in Redis claim mode: there is no `db`, `ordering` or `outbox`."""

    def __init__(self, event: Event, claim: Claim, claims: RedisClaims) -> None:
        self.event = event
        self.claim = claim
        self._claims = claims
        fields = {"source": event.source, "event_id": event.id, "event_type": event.type}
        self.log = logging.LoggerAdapter(handler_log, fields)

    def extend(self, lease_seconds: float | None = None) -> bool:
        """Restart the claim's lease for a handler that needs longer; False if already lost."""
        return self._claims.extend(self.claim, lease_seconds)


class ClaimReceiver(BaseReceiver):
    """Turns a delivery into a claimed, handled event and a `Reply`; keeps no events."""

    def __init__(
        self,
        claims: RedisClaims,
        sources: Mapping[str, Source],
        handlers: HandlerRegistry,
        settings: ReceiverSettings | None = None,
        *,
        in_progress_status: int | None = None,
    ) -> None:
        self.claims = claims
        self.sources = sources
        self.handlers = handlers
        self.settings = settings or ReceiverSettings()
        self.in_progress_status = check_in_progress_status(in_progress_status)

    def ping(self) -> None:
        self.claims.ping()

    def metrics(self) -> tuple[bytes, str]:
        return exposition(None)

    def store_verified(self, verified: Verified) -> Reply:
        """Claim the verified delivery's event, run its handlers, answer (blocking)."""
        # Nothing is stored: the claim is the only record, and no row or count exists.
        if verified.batch:
            return self.finish_verified(verified, self._run_batch(verified))
        event = event_of(verified.delivery, row_id=0, delivery_count=1)
        reply = self._claim_and_run(event)
        return self.finish_verified(verified, reply)

    def _run_batch(self, verified: Verified) -> Reply:
        """Each event of a batch claimed and handled in turn. Redis has no transaction over
        handlers, so the first event not handled stops the batch with its answer (503, 409):
        the events handled before it are done, and the provider's retry skips them as
        duplicates."""
        accepted = invalid = 0
        for delivery in verified.batch:
            if delivery.invalid is not None:
                # No table to hold it in: the log line is the operator's only record.
                log.error(
                    "%s: an event of a batch cannot be processed (%s) and claim mode keeps no "
                    "events: not handled; its bytes' digest is %s",
                    delivery.source,
                    delivery.invalid,
                    delivery.event_id,
                    extra={"source": delivery.source, "event_id": delivery.event_id},
                )
                invalid += 1
                continue
            reply = self._claim_and_run(event_of(delivery, row_id=0, delivery_count=1))
            if not reply.ok:
                return reply
            accepted += reply.outcome is Outcome.ACCEPTED
        return batch_reply(len(verified.batch) - invalid, accepted, False, invalid)

    def _claim_and_run(self, event: Event) -> Reply:
        try:
            claim = self.claims.claim(event.source, event.id)
        except ClaimStoreUnavailable as error:
            return self.unavailable(error.message)
        except AlreadyDone:
            return self._answer(200, "duplicate", event, Outcome.DUPLICATE)
        except InProgress:
            return self._in_progress(event)
        except Exception:  # a bug, or a foreign value under the prefix: logged, never a traceback
            log.exception("unexpected error claiming %s %s", event.source, event.id)
            return Reply(500, {"status": "error", "error": "internal"}, {}, Outcome.ERROR)
        return self._run(event, claim)

    def _run(self, event: Event, claim: Claim) -> Reply:
        context = ClaimContext(event, claim, self.claims)
        try:
            for handler in self.handlers.for_event(event.source, event.type):
                call_handler(handler, event, context)
        except BaseException as error:
            # Never leave a mark of a try: the provider's retry must find the key free.
            self._release(claim)
            if isinstance(error, NotReady):
                return self._not_processed(f"not ready: {error.message}")
            if not isinstance(error, Exception):
                raise
            log.exception("handler failed for %s %s", event.source, event.id)
            return self._not_processed(f"handler raised {type(error).__name__}")
        self._complete(claim)
        return self._answer(200, "accepted", event, Outcome.ACCEPTED)

    def _release(self, claim: Claim) -> None:
        try:
            self.claims.release(claim)
        except ClaimStoreUnavailable as error:
            release_failed(claim, error)

    def _complete(self, claim: Claim) -> None:
        """The handlers ran: answer 200 even if Redis fails now, since a 503 would make the
        provider's retry run them a second time once the lease is over."""
        try:
            if not self.claims.complete(claim):
                warn_lost(claim)
        except ClaimStoreUnavailable as error:
            log.error(
                "%s: handlers ran but the claim could not be marked done (%s); a redelivery "
                "after its %g s lease would run them again",
                claim.key,
                error,
                claim.lease_seconds,
            )

    def _in_progress(self, event: Event) -> Reply:
        if self.in_progress_status == 200:
            return self._answer(200, "duplicate", event, Outcome.IN_PROGRESS)
        detail = "another delivery of this event is being handled; retry later"
        body = {"status": "in_progress", "event_id": event.id, "detail": detail}
        headers = {"retry-after": str(self.retry_after)}
        return Reply(409, body, headers, Outcome.IN_PROGRESS, event.type)

    @staticmethod
    def _answer(status_code: int, status: str, event: Event, outcome: Outcome) -> Reply:
        body = {"status": status, "event_id": event.id}
        return Reply(status_code, body, {}, outcome, event.type)
