"""The sender: plays a plan against the target over HTTP, retrying as the provider would.

One scheduling loop pops deliveries as they fall due (a heap: the plan's deliveries plus the
retries that answers add) and starts each in its own task, at most `concurrency` at a time.
A burst takes one of those slots and fires its copies at once on connections of their own,
so that they really race at the receiver.

Retries follow the provider: any answer but 2xx, a timeout, a refused connection or a lost
response schedules the next attempt of the same event (same body, new signature timestamp)
after the provider's next delay divided by `retry_compression`, until the provider would give
up or `duration` ends the run. A 2xx from any delivery of the event ends its retries.
"""

from __future__ import annotations

import asyncio
import heapq
import importlib.util
import ssl
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

if importlib.util.find_spec("sniffio") is None:
    # httpcore 1.0 imports sniffio afresh for every lock it creates and falls back to asyncio
    # when it is missing (encode/httpcore#1103; anyio >= 4.11 no longer installs it); Python
    # does not cache a failed import, so each request paid a search of sys.path (~25% of the
    # sender's CPU). A None in sys.modules makes the same ImportError immediate.
    sys.modules["sniffio"] = None  # type: ignore[assignment]

from hookinbox.simulate._config import SimulationConfig
from hookinbox.simulate._plan import DeliveryKind, Plan, PlannedDelivery
from hookinbox.simulate._signing import Signer

LOST = "lost"
TIMEOUT = "timeout"
CONNECTION = "connection error"
PRIMARY_KINDS = ("first", "burst", "retry")
"""Kinds that carry an event's own attempts; duplicates are extra copies of an attempt."""


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    event: int
    kind: DeliveryKind
    status: int | None
    """The HTTP status answered, None when no answer was read."""
    failure: str | None
    """Why there is no status: `lost` (we dropped it on purpose), `timeout`, `connection error`."""
    latency: float | None
    """Seconds from the request's start to the answer's headers."""

    @property
    def accepted(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class SendOutcome:
    results: list[DeliveryResult]
    elapsed: float
    not_sent: int
    """Deliveries the duration cut off (retries of acknowledged events are not counted)."""


class Sender:
    def __init__(
        self,
        config: SimulationConfig,
        plan: Plan,
        signer: Signer,
        forger: Signer,
        *,
        on_result: Callable[[DeliveryResult], None] = lambda _result: None,
        on_scheduled: Callable[[int], None] = lambda _count: None,
    ) -> None:
        self.config = config
        self.plan = plan
        self.signer = signer
        self.forger = forger
        self.on_result = on_result
        self.on_scheduled = on_scheduled
        self.acknowledged = [False] * plan.valid_count
        self.results: list[DeliveryResult] = []
        self._heap: list[tuple[float, int, PlannedDelivery, int]] = []
        self._sequence = 0
        self._wake = asyncio.Event()
        self._burst_lock = asyncio.Lock()
        self._burst_clients: list[httpx.AsyncClient] = []
        self._start = 0.0
        parts = urlsplit(config.target)
        self._host = parts.hostname or ""
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._host_header = parts.netloc

    def _push(self, delivery: PlannedDelivery, attempt: int) -> None:
        heapq.heappush(self._heap, (delivery.at, self._sequence, delivery, attempt))
        self._sequence += 1

    async def run(self) -> SendOutcome:
        loop = asyncio.get_running_loop()
        for delivery in self.plan.deliveries:
            self._push(delivery, 1)
        running: set[asyncio.Task[None]] = set()
        async with AsyncExitStack() as stack:
            # One single-connection client per slot, rather than one shared pool: httpcore's
            # pool rescans every connection and waiting request whenever one changes state,
            # which made the sender's CPU per request grow with the concurrency (1.2 ms at 8,
            # 2.5 ms at 32) until the simulator, not the receiver, set the pace.
            idle: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
            for _ in range(self.config.concurrency):
                idle.put_nowait(await stack.enter_async_context(self._client()))
            self._burst_clients = [
                await stack.enter_async_context(self._client())
                for _ in range(self.config.burst_size)
            ]
            self._start = loop.time()
            end = self._start + self.config.duration if self.config.duration else float("inf")
            while True:
                now = loop.time()
                if now >= end or (not self._heap and not running):
                    break
                if self._heap and self._start + self._heap[0][0] <= now:
                    _, _, delivery, attempt = heapq.heappop(self._heap)
                    if self._superseded(delivery):
                        self.on_scheduled(-delivery.copies)
                        continue
                    client = await idle.get()
                    if loop.time() >= end:
                        idle.put_nowait(client)
                        self._push(delivery, attempt)  # counted as not sent below
                        break
                    task = asyncio.create_task(self._deliver(client, delivery, attempt))
                    running.add(task)

                    def finished(
                        task: asyncio.Task[None], client: httpx.AsyncClient = client
                    ) -> None:
                        # Wake the loop only now: woken from inside the task, it could still
                        # see the task running, wait for another wake-up, and never get one.
                        running.discard(task)
                        idle.put_nowait(client)
                        self._wake.set()

                    task.add_done_callback(finished)
                    continue
                # Sleep until the next delivery falls due, or until an answer adds a retry.
                wait = min(end, self._start + self._heap[0][0]) - now if self._heap else None
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
                self._wake.clear()
            if running:  # cut by the duration: let the requests in flight finish
                await asyncio.gather(*running)
        elapsed = loop.time() - self._start
        not_sent = sum(item[2].copies for item in self._heap if not self._superseded(item[2]))
        return SendOutcome(self.results, elapsed, not_sent)

    def _client(self) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(self.config.ack_timeout))

    def _superseded(self, delivery: PlannedDelivery) -> bool:
        """A retry whose event was acknowledged meanwhile: the provider would not send it."""
        return delivery.kind == "retry" and self.acknowledged[delivery.event]

    async def _deliver(
        self, client: httpx.AsyncClient, delivery: PlannedDelivery, attempt: int
    ) -> None:
        if delivery.copies == 1:
            results = [await self._send(client, delivery)]
        else:
            # A burst: every copy on a connection of its own, started together. One burst at
            # a time, so that the copies never wait for each other's connections.
            async with self._burst_lock:
                clients = self._burst_clients[: delivery.copies]
                results = await asyncio.gather(*(self._send(c, delivery) for c in clients))
        for result in results:
            self.results.append(result)
            self.on_result(result)
        if self.plan.is_valid(delivery.event):
            self._after(delivery, attempt, any(r.accepted for r in results))

    def _after(self, delivery: PlannedDelivery, attempt: int, accepted: bool) -> None:
        if accepted:
            self.acknowledged[delivery.event] = True
            return
        if delivery.kind not in PRIMARY_KINDS or self.acknowledged[delivery.event]:
            return
        delays = self.config.profile.retry_delays
        if attempt > len(delays):
            return  # the provider gives up on this event
        now = asyncio.get_running_loop().time() - self._start
        at = now + delays[attempt - 1] / self.config.retry_compression
        self._push(PlannedDelivery(at, delivery.event, "retry"), attempt + 1)
        self.on_scheduled(1)

    async def _send(self, client: httpx.AsyncClient, delivery: PlannedDelivery) -> DeliveryResult:
        headers, body = build_request(
            self.plan, delivery, self.signer, self.forger, now=time.time()
        )
        if delivery.lose_response:
            failure = await self._send_and_drop(headers, body)
            return DeliveryResult(delivery.event, delivery.kind, None, failure, None)
        started = time.perf_counter()
        try:
            response = await client.post(self.config.target, content=body, headers=headers)
        except httpx.TimeoutException:
            return DeliveryResult(delivery.event, delivery.kind, None, TIMEOUT, None)
        except httpx.HTTPError:
            return DeliveryResult(delivery.event, delivery.kind, None, CONNECTION, None)
        latency = time.perf_counter() - started
        return DeliveryResult(delivery.event, delivery.kind, response.status_code, None, latency)

    async def _send_and_drop(self, headers: dict[str, str], body: bytes) -> str:
        """Send the whole request on a raw socket, then reset the connection unread.

        We wait for the first byte of the answer before dropping. A server that notices the
        client gone before its application read the body hands it `http.disconnect` instead
        (uvicorn): dropping at once lost the request itself in 12 of 400 tries against
        `hookinbox serve`, a different case. Waiting means the receiver did its work and
        answered into the void, the case seed 000 describes ("the work committed but the
        response was lost").
        """
        lines = [f"POST {self._path} HTTP/1.1", f"host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += [f"content-length: {len(body)}", "connection: close", "", ""]
        request = "\r\n".join(lines).encode("latin-1") + body
        context = ssl.create_default_context() if self._tls else None
        timeout = self.config.ack_timeout
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self._host, self._port, ssl=context), timeout
            )
        except (OSError, TimeoutError):
            return CONNECTION
        try:
            writer.write(request)
            await writer.drain()
            await asyncio.wait_for(reader.read(1), timeout)
        except (OSError, TimeoutError):
            pass  # no answer in time: the provider gives up just the same
        finally:
            writer.transport.abort()  # RST, nothing read: the answer is lost
        return LOST


def build_request(
    plan: Plan, delivery: PlannedDelivery, signer: Signer, forger: Signer, *, now: float
) -> tuple[dict[str, str], bytes]:
    """Headers and body of one delivery, signed at `now` as the provider signs at send time.

    An expired delivery carries a timestamp `age` seconds old (a replayed capture); a forged
    one is signed with the forger's secret.
    """
    event = plan.events[delivery.event]
    headers = dict(event.headers)
    key = forger if delivery.kind == "forged" else signer
    headers.update(key.sign(headers, event.body, int(now) - delivery.age))
    return headers, event.body
