"""What both consumers share: one message through the inbox's ingest, and what to tell the
broker about it; the run loop's start, stop and drain.

A message goes through `inbox.ahandle` exactly as a webhook's POST does (the body cap, the
source, the group committer, the ack deadline, the delivery's log line and metrics), and the
reply decides (`verdict`):

- stored or a duplicate (2xx): `ACK`, and only now, after the commit: a crash before the
  ack redelivers the message, and the redelivery is a duplicate;
- refused for what it is (4xx: no key, not JSON, too large): `DEAD_LETTER`, the broker's
  dead-letter route, so a poison message never blocks the queue;
- not stored now (5xx: the database is down, the ack deadline passed): `RETRY`, handed back
  to the broker after `retry_delay`, never acked.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError, HookinboxError
from hookinbox._logging import logger
from hookinbox.brokers._source import MESSAGE_ID, SUBJECT, TOKEN, BrokerSource
from hookinbox.http import Request

if TYPE_CHECKING:
    from hookinbox import BaseInbox, Reply

log = logger("hookinbox.brokers")

DEFAULT_PREFETCH = 16
DEFAULT_RETRY_DELAY = 5.0


class Verdict(StrEnum):
    """What the broker is told about one message."""

    ACK = "ack"
    DEAD_LETTER = "dead_letter"
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class BrokerMessage:
    """One message as a consumer read it, before the inbox sees it."""

    body: bytes
    headers: Mapping[str, str]
    message_id: str | None
    subject: str | None
    label: str
    """How the log lines name it: the delivery tag or the stream sequence."""


def verdict(reply: Reply) -> Verdict:
    if reply.ok:
        return Verdict.ACK
    if 400 <= reply.status_code < 500:
        return Verdict.DEAD_LETTER
    return Verdict.RETRY


def text_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """A message's headers as text: a string as it is, bytes as UTF-8, a number as written;
    a nested table, a list or undecodable bytes are left out (no source reads them)."""
    found: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if isinstance(value, str):
            found[name] = value
        elif isinstance(value, bytes | bytearray):
            try:
                found[name] = bytes(value).decode()
            except UnicodeDecodeError:
                continue
        elif isinstance(value, int | float):  # bool is an int: "True", as AMQP shows it
            found[name] = str(value)
    return found


def check_url(url: object, broker: str, schemes: tuple[str, ...]) -> None:
    """`ConfigurationError` unless `url` starts with one of `schemes`; the error shows the
    scheme only (a URL may hold a password)."""
    if not isinstance(url, str) or not url.startswith(schemes):
        shown = url.partition("://")[0] + "://..." if isinstance(url, str) and "://" in url else url
        raise ConfigurationError(
            f"the {broker} URL must start with {' or '.join(schemes)}, not {shown!r}"
        )


class Consumer(ABC):
    """Feeds one `BrokerSource` of an inbox from a broker, until `stop()`.

    `await consumer.run()` connects, consumes with at most `prefetch` messages in flight,
    and returns once `stop()` was called and the messages in flight are settled. `stop()`
    may be called from any thread, or from a signal handler on the loop.
    """

    def __init__(
        self,
        inbox: BaseInbox,
        source: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        retry_delay: float = DEFAULT_RETRY_DELAY,
    ) -> None:
        found = inbox.sources.get(source)
        if found is None:
            raise ConfigurationError(f"the inbox has no source named {source!r}")
        if not isinstance(found, BrokerSource):
            raise ConfigurationError(
                f"source {source!r} is a {type(found).__name__}, not a BrokerSource: a broker "
                "consumer feeds only a source that takes its messages unsigned"
            )
        ranges.BROKER_PREFETCH.check("prefetch", prefetch)
        ranges.BROKER_RETRY_DELAY.check("retry_delay", retry_delay)
        self.inbox = inbox
        self.source = found
        self.prefetch = prefetch
        self.retry_delay = retry_delay
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_asked = False
        self._in_flight: set[asyncio.Task[None]] = set()

    # -- the run -------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until `stop()`; the messages in flight are settled before it returns."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        if self._stop_asked:
            self._stopping.set()
        await self._connect()
        log.info(
            "consuming %s for source %s (prefetch %d)", self.where, self.source.name, self.prefetch
        )
        try:
            await self._consume(self._stopping)
            await self._drain()
        finally:
            await self._close()
        log.info("stopped consuming %s", self.where)

    def stop(self) -> None:
        """Stop taking messages; `run` returns once those in flight are settled."""
        self._stop_asked = True
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            stopping.set()
        else:
            loop.call_soon_threadsafe(stopping.set)

    def spawn(self, work: Awaitable[None]) -> None:
        """Settle one message in a task of its own, kept until it is done (`_drain`)."""
        task = asyncio.ensure_future(work)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    @property
    def in_flight(self) -> int:
        """Messages taken and not yet settled."""
        return len(self._in_flight)

    async def wait_for_room(self) -> None:
        """Until one of the messages in flight is settled."""
        if self._in_flight:
            await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)

    async def pause(self) -> None:
        """Wait `retry_delay` before a message the store could not take goes back to the
        broker (cut short by `stop()`: the broker keeps it either way)."""
        stopping = self._stopping
        if stopping is None or stopping.is_set():
            return
        try:
            await asyncio.wait_for(stopping.wait(), self.retry_delay)
        except TimeoutError:
            pass

    async def _drain(self) -> None:
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    # -- one message ---------------------------------------------------------------------

    async def ingest(self, message: BrokerMessage) -> tuple[Verdict, str]:
        """Store `message` through the inbox's ingest; what to tell the broker, and why."""
        headers = {k: v for k, v in message.headers.items() if k.lower() not in _OURS}
        headers[TOKEN] = self.source.token
        if message.message_id is not None:
            headers[MESSAGE_ID] = message.message_id
        if message.subject is not None:
            headers[SUBJECT] = message.subject
        request = Request("POST", self.source.name, headers, body=message.body)
        try:
            reply = await self.inbox.ahandle(request)
        except HookinboxError as error:  # the inbox could not start: its database is away
            decided, detail = Verdict.RETRY, str(error)
        else:
            assert reply is not None  # bytes: nobody left before the body arrived
            decided = verdict(reply)
            detail = str(reply.body.get("detail") or reply.outcome.value)
        if decided is not Verdict.ACK:
            level = logging.WARNING if decided is Verdict.DEAD_LETTER else logging.INFO
            log.log(
                level,
                "%s message %s: %s (%s)",
                self.where,
                message.label,
                decided.value,
                detail,
                extra={"source": self.source.name, "verdict": decided.value},
            )
        return decided, detail

    # -- what each broker does -----------------------------------------------------------

    @property
    @abstractmethod
    def where(self) -> str:
        """The queue or the stream's consumer, as log lines and errors name it."""

    @abstractmethod
    async def _connect(self) -> None:
        """Connect and check that what is consumed exists (`ConfigurationError` if not)."""

    @abstractmethod
    async def _consume(self, stopping: asyncio.Event) -> None:
        """Take messages (`spawn`ing one task each) until `stopping` is set."""

    @abstractmethod
    async def _close(self) -> None:
        """Flush what was settled and disconnect."""


_OURS = frozenset({MESSAGE_ID, SUBJECT, TOKEN})
"""Headers only the consumer sets: a publisher's copies are dropped."""
