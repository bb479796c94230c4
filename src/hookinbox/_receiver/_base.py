"""The delivery pipeline: one request in, one `Reply` out, below any web framework.

`BaseReceiver.ahandle(request)` (on an event loop) and `handle(request)` (blocking) are the
only ways in: every adapter (the ASGI app, FastAPI, Flask, Django, `receive_stream`) makes a
`Request` and sends back the `Reply`, and chooses nothing. The order is fixed: find the
source (an unknown one is answered before a byte is read), read the body with the cap, verify
the raw bytes, store durably (the way chosen once, when the delivery is verified), answer.
Nothing is written before verification succeeds, and nothing is answered 2xx before the
transaction holding the event has committed. A `GET` or `HEAD` is a source's handshake,
answered without a body read or a row stored.

A subclass decides how a verified delivery is kept (`store_verified`): `Receiver` stores it in
the SQL database, `hookinbox.claims.ClaimReceiver` claims it in Redis and runs its handlers.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hookinbox import _tracing as tracing
from hookinbox._errors import (
    AckDeadlinePassed,
    BodyTooLarge,
    Handshake,
    PayloadError,
    VerificationError,
)
from hookinbox._headers import HeaderValues
from hookinbox._logging import logger
from hookinbox._receiver._body import (
    BodyTimeout,
    ClientGone,
    Read,
    Receive,
    declared_size,
    read_body,
    read_capped,
)
from hookinbox._receiver._deadlines import within
from hookinbox._receiver._reply import (
    INTERNAL_ERROR,
    STORED,
    TEXT,
    Outcome,
    Reply,
    handshake_reply,
    method_not_allowed,
    not_processed,
    reject,
    unavailable,
)
from hookinbox._receiver._report import log_late, report, report_refusal, server_error
from hookinbox._receiver._request import Request, RequestHeaders, request_headers
from hookinbox._receiver._verified import Verified
from hookinbox._receiver._verify import verify_delivery
from hookinbox._settings import ReceiverSettings
from hookinbox.sources import Source
from hookinbox.sources._handshakes import parse_query

if TYPE_CHECKING:
    from hookinbox._storage import GroupCommitter

# The logger of the lines a bug in hookinbox leaves (answered 500): the HTTP layer wrote them
# before the pipeline moved below it, and logging configurations name it.
log = logger("hookinbox.http")


class BaseReceiver(ABC):
    """What every receiver does alike: the pipeline from a request to its reply, and the
    answers, log lines and counts of every step that refuses.

    A subclass sets the attributes and decides `store_verified` (and, with a group committer,
    `committer_for`, `conclude` and `conclude_late`).
    """

    sources: Mapping[str, Source]
    settings: ReceiverSettings
    retention: timedelta | None = None
    source_retention: Mapping[str, timedelta] = MappingProxyType({})
    """Sources whose retention is their own (the stale check: older than it, held)."""
    committer: GroupCommitter | None = None

    @property
    def max_body_size(self) -> int:
        return self.settings.max_body_size

    @property
    def body_timeout(self) -> float:
        return self.settings.body_timeout

    @property
    def retry_after(self) -> int:
        return self.settings.retry_after

    @property
    def ack_deadline(self) -> float | None:
        return self.settings.ack_deadline

    @property
    def clock(self) -> Callable[[], float]:
        return self.settings.clock

    # -- the two entries --------------------------------------------------------------------

    async def ahandle(self, request: Request) -> Reply | None:
        """The reply to `request`, on an event loop; None if the client left before its body
        arrived (nobody is left to answer). `request.body` is bytes or an ASGI `receive`.

        The delivery's path, in one coroutine (the ASGI path is the hot one: no step of its
        own awaits more than it must): the body within `body_timeout`, verification on the
        loop (CPU work of tens of microseconds: less than a hop to a thread and back; a source
        that asks its provider goes to a pool of threads of its own), then the group
        committer's future, resolved on this loop, until the ack deadline (then 503)."""
        if request.method != "POST":
            return self.answer_handshake(request)
        name = request.source
        try:
            source = self.sources.get(name)
            if source is None:
                return self.receive(name, {}, b"")  # answered before reading: no buffer at all
            headers = request_headers(request.headers)
            body = request.body
            on_asyncio = _on_asyncio()
            if not isinstance(body, bytes):
                declared = declared_size(request.content_length or headers.get("content-length"))
                limit = self.max_body_size
                receive: Receive = body  # type: ignore[assignment]  # not bytes: a callable
                try:
                    if on_asyncio:  # one timer of the loop keeps every body's deadline
                        body = await read_body(receive, declared, limit, self.body_timeout)
                    else:  # anyio's cancel scope bounds each message
                        from hookinbox._receiver._anyio import receive_within

                        bounded = receive_within(receive, self.body_timeout)
                        body = await read_body(bounded, declared, limit, None)
                except BodyTooLarge:
                    return self.reject_too_large(name)
            if source.verifies_over_network:
                step = await self._verify_over_network(name, headers, body, request.query)
            else:
                step = self.verify(name, headers, body, query=request.query)
            if isinstance(step, Reply):
                return step
            # Past the ack deadline the answer is 503, whatever storing is doing (a held lock,
            # a stalled disk): a provider that waits longer than it allows counts a failure.
            committer = step.committer
            if committer is None or not on_asyncio:
                return await self._store_in_thread(step)
            # A result, or a batched delivery's list of them, resolved on this loop. `late`:
            # a write that a writer took before the deadline ends after the 503 went out, and
            # the log says how (docs/ingest.md).
            future = committer.submit_async(
                step.batch or step.delivery, late=partial(self.conclude_late, step)
            )
            try:
                # At the deadline the timeout cancels `future`: the committer drops the
                # delivery unless a writer has taken it already.
                async with within(self.time_left(step)):
                    recorded = await future
            except TimeoutError:
                return self.past_deadline(step)
            except Exception as error:
                return self.conclude(step, error)
            return self.conclude(step, recorded)
        except ClientGone:
            return None
        except BodyTimeout:
            return self.reject_slow_body(name)
        except Exception:  # a bug in hookinbox: log it, answer without the traceback
            log.exception("unexpected error receiving a delivery")
            return INTERNAL_ERROR

    def handle(self, request: Request) -> Reply:
        """The reply to `request`, blocking. `request.body` is bytes or a `read(n)`.

        Errors raised by `read` itself (a client that hung up mid-body) are the framework's to
        answer and propagate; anything else is a bug in hookinbox, logged and answered 500."""
        if request.method != "POST":
            return self.answer_handshake(request)
        name = request.source
        if name not in self.sources:
            return self.receive(name, {}, b"")  # answered before reading
        headers = request_headers(request.headers)
        body = request.body
        if not isinstance(body, bytes):
            declared = declared_size(request.content_length or headers.get("content-length"))
            try:
                read: Read = body  # type: ignore[assignment]  # not bytes: a callable
                body = read_capped(read, declared, self.max_body_size)
            except BodyTooLarge:
                return self.reject_too_large(name)
        try:
            return self.receive(name, headers, body, query=request.query)
        except Exception:  # a bug in hookinbox: log it, answer without the traceback
            log.exception("unexpected error receiving a delivery")
            return INTERNAL_ERROR

    def receive(
        self,
        source_name: str,
        headers: RequestHeaders,
        body: bytes,
        *,
        query: str | bytes | None = None,
    ) -> Reply:
        """A delivery whose body is read already, verified and stored (blocking)."""
        step = self.verify(source_name, headers, body, query=query)
        if isinstance(step, Reply):
            return step
        return self.store_verified(step)

    # -- the steps ------------------------------------------------------------------------

    def verify(
        self,
        source_name: str,
        headers: RequestHeaders,
        body: bytes,
        *,
        query: str | bytes | None = None,
    ) -> Reply | Verified:
        """The first half of `receive`: a `Verified` delivery to store, or the final reply.

        `query` is the request's query string, read only by a source that `reads_query`."""
        started = time.perf_counter()
        source = self.sources.get(source_name)
        if source is None:
            reply = reject(404, Outcome.UNKNOWN_SOURCE, f"no source named {source_name!r}")
            # The name comes from the URL: never a span name either (cardinality).
            span = tracing.start_receive("unknown", {}, len(body))
        elif len(body) > self.max_body_size:
            reply = self._too_large()
            span = tracing.start_receive(source_name, {}, len(body))
        else:
            if type(headers) is not HeaderValues:  # the pipeline's entries read them already
                headers = request_headers(headers)
            step = verify_delivery(
                source, headers, body, started, query, self.settings,
                self.source_retention.get(source_name, self.retention),
                self.committer_for(source_name),
            )  # fmt: skip
            if isinstance(step, Verified):
                return step
            reply, span = step
        return report(source_name, reply, started, known=source is not None, span=span)

    async def _verify_over_network(
        self, source_name: str, headers: RequestHeaders, body: bytes, query: str | bytes
    ) -> Reply | Verified:
        """`verify` in a worker thread, at most `NETWORK_VERIFICATIONS` of the source's at
        once; a delivery that finds no free slot within the ack deadline is answered 503.
        Only the wait for a slot is cut short: a verification that started is waited for."""
        from hookinbox._receiver._anyio import NETWORK_VERIFICATIONS, in_thread, network_limiter

        started = time.perf_counter()
        limiter = network_limiter(self, source_name)
        verify = partial(self.verify, query=query)
        step = await in_thread(
            self.ack_deadline, verify, source_name, headers, body, limiter=limiter
        )
        if step is not None:
            return step
        detail = (
            f"{NETWORK_VERIFICATIONS} deliveries of this source are being verified with the "
            "provider; none finished within the ack deadline"
        )
        return self.reject_unavailable(source_name, detail, time.perf_counter() - started)

    async def _store_in_thread(self, verified: Verified) -> Reply:
        """`store_verified` in a worker thread, until the ack deadline (then 503). Abandoned
        at the deadline, the thread goes on: its transaction commits or rolls back whole, and
        `finish_verified` logs what became of it."""
        from hookinbox._receiver._anyio import in_thread

        reply = await in_thread(
            self.time_left(verified), self.store_verified, verified, abandon=True
        )
        return self.past_deadline(verified) if reply is None else reply

    def committer_for(self, source_name: str) -> GroupCommitter | None:
        """The group committer that stores the source's deliveries, or None: `store_verified`
        then stores each in a transaction of its own. Asked once, when one is verified."""
        return None

    @abstractmethod
    def store_verified(self, verified: Verified) -> Reply:
        """The second half of `receive`, for a delivery that `verify` passed (blocking)."""

    def conclude(self, verified: Verified, result: Any) -> Reply:
        """The reply once the committer of `committer_for` stored the delivery or raised."""
        raise TypeError(f"{type(self).__name__} stores nothing through a group committer")

    def conclude_late(self, verified: Verified, result: object) -> None:
        """What became of a delivery answered 503 at its ack deadline, once its write ended
        (the committer's `late` callback): logged, never counted as a second answer."""
        raise TypeError(f"{type(self).__name__} stores nothing through a group committer")

    @abstractmethod
    def ping(self) -> None:
        """Raise `StoreUnavailable` unless the backing store answers (the readiness probe)."""

    @abstractmethod
    def metrics(self) -> tuple[bytes, str]:
        """The `/metrics` body and its content type."""

    # -- handshakes -----------------------------------------------------------------------

    def answer_handshake(self, request: Request) -> Reply:
        """A request other than `POST`: a `GET` or `HEAD` is the source's handshake, and so is
        an `OPTIONS` (CloudEvents' abuse protection), any other method 405. Nothing is read
        from a body and nothing is stored."""
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            return self.method_not_allowed(request.source)
        try:
            if request.method == "OPTIONS":
                return self.answer_options(request.source, request.headers, request.query)
            return self.answer_get(request.source, request.headers, request.query)
        except Exception:  # a bug in hookinbox: log it, answer without the traceback
            log.exception("unexpected error answering a handshake")
            return INTERNAL_ERROR

    def answer_get(
        self, source_name: str, headers: RequestHeaders, query: str | bytes | None = None
    ) -> Reply:
        """The answer to a GET or HEAD on a source's path: its handshake (`Source.answer_get`),
        or 405 where there is none (an unknown name too, as before any source had one).

        A request that does not prove itself (a wrong verify token) is 403, one that is not
        the provider's handshake 400; both are logged and counted as deliveries refused, the
        handshakes as `handshake`."""
        return self._answer_bodiless(source_name, headers, query, options=False)

    def answer_options(
        self, source_name: str, headers: RequestHeaders, query: str | bytes | None = None
    ) -> Reply:
        """The answer to an OPTIONS on a source's path (`Source.answer_options`: Event Grid's
        CloudEvents validation), with `answer_get`'s statuses; 405 where there is none."""
        return self._answer_bodiless(source_name, headers, query, options=True)

    def _answer_bodiless(
        self, source_name: str, headers: RequestHeaders, query: str | bytes | None, *,
        options: bool,
    ) -> Reply:  # fmt: skip
        source = self.sources.get(source_name)
        if source is None or not (source.answers_options if options else source.answers_get):
            return self.method_not_allowed(source_name)
        started = time.perf_counter()
        answering = source.answer_options if options else source.answer_get
        try:
            answer = answering(parse_query(query), request_headers(headers))
        except VerificationError as error:
            reply = reject(403, Outcome.INVALID_SIGNATURE, error.message)
        except PayloadError as error:
            reply = reject(400, Outcome.BAD_REQUEST, error.message)
        else:
            if answer is None:
                return self.method_not_allowed(source_name)
            handshake = answer if isinstance(answer, Handshake) else Handshake(answer)
            reply = handshake_reply(handshake)
        return report(source_name, reply, started, known=True)

    def method_not_allowed(self, source_name: str) -> Reply:
        """405 for a method the source's path does not take, naming those it does."""
        source = self.sources.get(source_name)
        answers_get = source is not None and source.answers_get
        answers_options = source is not None and source.answers_options
        allow = ("GET, HEAD, " if answers_get else "") + ("OPTIONS, " if answers_options else "")
        return method_not_allowed(allow + "POST")

    # -- the answers ----------------------------------------------------------------------

    def reject_too_large(self, source_name: str) -> Reply:
        """For a body that passed the limit, before or while it was read."""
        return report_refusal(source_name, self._too_large(), 0.0, 0.0)

    def reject_unavailable(self, source_name: str, detail: str, elapsed: float) -> Reply:
        """503 for a delivery that could not be verified in time through no fault of its
        own (every slot for verifying with its provider was taken): the provider retries."""
        return report_refusal(source_name, self.unavailable(detail), elapsed, elapsed)

    def reject_slow_body(self, source_name: str) -> Reply:
        """For a body that did not arrive within `body_timeout`."""
        detail = f"body not received within {self.body_timeout:g} s"
        # The rest of the body may still be on its way: the connection cannot serve another
        # request, so the answer says it closes.
        reply = reject(408, Outcome.TIMEOUT, detail, connection="close")
        return report_refusal(source_name, reply, self.body_timeout, 0.0)

    def _too_large(self) -> Reply:
        return reject(413, Outcome.TOO_LARGE, f"body over {self.max_body_size} bytes")

    def unavailable(self, detail: str) -> Reply:
        return unavailable(detail, self.retry_after)

    def _not_processed(self, detail: str) -> Reply:
        return not_processed(detail, self.retry_after)

    def time_left(self, verified: Verified) -> float | None:
        """Seconds left before `verified`'s ack deadline (None: no deadline)."""
        if self.ack_deadline is None:
            return None
        return max(0.0, self.ack_deadline - (time.perf_counter() - verified.started))

    def past_deadline(self, verified: Verified) -> Reply:
        """The 503 for a delivery not stored within the ack deadline (it may be, later)."""
        reply = self.unavailable(AckDeadlinePassed(self.ack_deadline or 0.0).message)
        return self.finish_verified(verified, reply)

    def finish_verified(self, verified: Verified, reply: Reply) -> Reply:
        """Log and count the reply to a verified delivery, unless it was answered already."""
        delivery = verified.delivery
        if reply.outcome in STORED:
            reply = self._source_answer(verified, reply)
        if verified.settle():
            if verified.span is not None:
                storing = tracing.start_child(
                    verified.span, "store", self.store_attributes(), kind="client",
                    start_time=verified.verified_ns,
                )  # fmt: skip
                tracing.end(storing, error=server_error(reply))
            return report(
                delivery.source, reply, verified.started, known=True, delivery=delivery,
                span=verified.span,
            )  # fmt: skip
        # The ack deadline answered 503 first; say what became of the delivery after all.
        log_late(delivery, reply)
        return reply

    def _source_answer(self, verified: Verified, reply: Reply) -> Reply:
        """A stored delivery's reply in the source's own words, if it has any: a JSON body of
        its event's (`Identity.answer`, Discord) or a text for every one (`acknowledgement`,
        Adyen's `[accepted]`, sent as it stands while `body` keeps our fields for the logs)."""
        if verified.answer is not None:
            reply = replace(reply, body=verified.answer)
        acknowledgement = self.sources[verified.delivery.source].acknowledgement
        if acknowledgement is not None:
            reply = replace(reply, raw=acknowledgement.encode(), media_type=TEXT)
        return reply

    def store_attributes(self) -> dict[str, Any]:
        """The `store` span's attributes (the database's semantic conventions)."""
        return {}


def _on_asyncio() -> bool:
    """Group commit's futures are awaited with asyncio; under another loop (trio), a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
