"""The pipeline's steps that leave the event loop, through anyio: worker threads and deadlines.

Off the usual path, and imported on first use (`from hookinbox import Inbox` loads no anyio):
a delivery stored without a group committer's future (group commit off, an inline source, an
event loop other than asyncio) is stored in a worker thread; a source that asks its provider
to verify runs in a pool of its own; and under another loop (trio) the body's deadline is
anyio's cancel scope rather than `within`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

import anyio
import anyio.to_thread

from hookinbox._receiver._body import BodyTimeout, Message, Receive

T = TypeVar("T")

NETWORK_VERIFICATIONS = 8
"""Deliveries of one source verified over the network at once, per process (PayPal's API or
certificates, Mollie's API): each holds a worker thread until the provider answers. The rest
wait on the event loop, holding no thread, for at most the ack deadline (then 503), so a
provider slow to answer, or a flood of forged deliveries it must judge, never takes the
worker threads that other work shares (`/metrics`, storing without group commit, the
dashboard): anyio has 40 of them, and without this bound 40 such deliveries took them all."""

_network_limiters: WeakKeyDictionary[object, dict[str, anyio.CapacityLimiter]] = WeakKeyDictionary()


async def in_thread(
    seconds: float | None,
    function: Callable[..., T],
    *args: Any,
    abandon: bool = False,
    limiter: anyio.CapacityLimiter | None = None,
) -> T | None:
    """`function(*args)` in a worker thread, or None once `seconds` have passed (None: no
    limit). `abandon`: the thread goes on alone past the deadline (its transaction commits or
    rolls back whole, and the receiver logs what became of it); otherwise only the wait for a
    thread of `limiter` is cut short, and a call that started is waited for and its result
    used, however long it took."""
    with anyio.move_on_after(seconds):
        return await anyio.to_thread.run_sync(
            function, *args, abandon_on_cancel=abandon, limiter=limiter
        )
    return None


def network_limiter(owner: object, source: str) -> anyio.CapacityLimiter:
    """The pool of `NETWORK_VERIFICATIONS` threads of `source`, one per receiver (`owner`)."""
    per_source = _network_limiters.setdefault(owner, {})
    limiter = per_source.get(source)
    if limiter is None:
        limiter = per_source[source] = anyio.CapacityLimiter(NETWORK_VERIFICATIONS)
    return limiter


def receive_within(receive: Receive, seconds: float) -> Receive:
    """`receive`, raising `BodyTimeout` once `seconds` have passed since this call.

    One deadline for the whole body, not one per message: a client trickling a byte a second
    never waits long for any one message, and would hold its connection for ever.
    """
    deadline = anyio.current_time() + seconds

    async def receive_before_deadline() -> Message:
        with anyio.CancelScope(deadline=deadline):
            return await receive()
        raise BodyTimeout()

    return receive_before_deadline
