"""The outbox queue on the async worker: the relay's decisions, a destination awaited.

`Relay` decides (the settlement of an attempt, the retry schedule, the log line and the span);
this awaits the destination (`adeliver`, or `deliver` in a thread) and writes the settlement
through the async store's bridge.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hookinbox._records import LeasedMessage
from hookinbox.outbox._relay import MessageQueue, Relay

if TYPE_CHECKING:
    from hookinbox._processing._service import Processing
    from hookinbox._storage import AsyncStore


class AsyncMessageQueue:
    name = "outbox"

    def __init__(self, leasing: MessageQueue, astore: AsyncStore) -> None:
        """`leasing`: the relay's queue, through the processing service over `astore.store`."""
        self.leasing = leasing
        self.relay: Relay = leasing.relay
        self.astore = astore

    async def process(self, item: LeasedMessage) -> str:
        relay = self.relay
        with relay.observed(item) as attempt:
            attempt.settlement = await relay.attempt_async(item.message)
            attempt.label = await self.astore.run(relay.settle, item, attempt.settlement)
        return attempt.label

    def give_back(self, processing: Processing, item: LeasedMessage) -> bool:
        now: datetime = self.relay.now()
        return processing.give_back_message(item.message.row_id, item.token, now)
