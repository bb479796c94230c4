"""A broker as a source, on RabbitMQ and on JetStream alike, against the real servers: each
message stored once by its key and acked only once stored; duplicates are one event, handled
once by the worker; poison goes to the dead-letter route without holding up the next
message; a store that is down acks nothing. What only one broker does: test_rabbitmq.py,
test_jetstream.py; the crash between the commit and the ack: test_crash.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.brokers.brokers import broker, effects, make_inbox, order, running, stored, until


def test_each_key_is_stored_once_and_handled_once(
    broker_url: tuple[str, str], tmp_path: Path
) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> int:
        async with broker(*broker_url) as queue:
            for n in (1, 2, 3, 2, 4, 1, 5):  # 2 and 1 published twice: duplicates
                await queue.publish(order(n))
            async with running(queue.consumer(inbox)):
                await until(lambda: sum(stored(inbox).values()) == 7)
            return await queue.left()  # unacked messages would be waiting again now

    try:
        assert asyncio.run(scenario()) == 0
        assert stored(inbox) == {
            "order-1": 2, "order-2": 2, "order-3": 1, "order-4": 1, "order-5": 1
        }  # fmt: skip
        assert inbox.process_due() == 5
        assert effects(inbox) == {f"order-{n}": 1 for n in range(1, 6)}
    finally:
        inbox.close()


def test_poison_is_dead_lettered_and_the_next_message_still_stored(
    broker_url: tuple[str, str], tmp_path: Path
) -> None:
    """One message in flight at a time (prefetch 1): had a poison message blocked the
    queue, the good one after it would never be stored."""
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}", max_body_size=200)
    poison = [b"not json", b'{"no": "id"}', order("x" * 300)]

    async def scenario() -> list[bytes]:
        async with broker(*broker_url) as queue:
            for body in poison:
                await queue.publish(body)
            await queue.publish(order("good"))
            async with running(queue.consumer(inbox, prefetch=1)):
                await until(lambda: "order-good" in stored(inbox))
            assert await queue.left() == 0  # dead-lettered, not waiting for a redelivery
            return await queue.dead_lettered()

    try:
        assert asyncio.run(scenario()) == poison
        assert stored(inbox) == {"order-good": 1}
    finally:
        inbox.close()


def test_a_store_that_is_down_acks_nothing(broker_url: tuple[str, str], tmp_path: Path) -> None:
    """The database cannot be opened: every message goes back to the broker (after the
    retry delay), none is acked or dead-lettered, and a consumer with a working store then
    takes them all."""
    down = make_inbox(f"sqlite:///{tmp_path / 'no such directory' / 'in.db'}", migrate=False)
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> None:
        async with broker(*broker_url) as queue:
            for n in range(3):
                await queue.publish(order(n))
            async with running(queue.consumer(down, retry_delay=0.1)):
                await asyncio.sleep(1.0)
            assert await queue.left() == 3
            assert await queue.dead_lettered() == []
            async with running(queue.consumer(inbox)):
                await until(lambda: len(stored(inbox)) == 3)
            assert await queue.left() == 0

    try:
        asyncio.run(scenario())
    finally:
        down.close()
        inbox.close()
