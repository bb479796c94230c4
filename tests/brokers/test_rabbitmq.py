"""A RabbitMQ queue as a source, against the real server: each message stored once by its
key and acked only once stored; duplicates are one event; poison goes to the queue's
dead-letter exchange without holding up the next message; a store that is down acks nothing.
The crash between the commit and the ack: test_crash.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hookinbox.brokers import RabbitMQConsumer
from tests.brokers.brokers import (
    SOURCE,
    effects,
    make_inbox,
    order,
    rabbit_queue,
    running,
    stored,
    until,
)


def test_each_key_is_stored_once_and_handled_once(rabbitmq_url: str, tmp_path: Path) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> int:
        async with rabbit_queue(rabbitmq_url) as queue:
            for n in (1, 2, 3, 2, 4, 1, 5):  # 2 and 1 published twice: duplicates
                await queue.publish(order(n))
            consumer = RabbitMQConsumer(inbox, SOURCE, url=rabbitmq_url, queue=queue.name)
            async with running(consumer):
                await until(lambda: sum(stored(inbox).values()) == 7)
            return await queue.count()  # unacked messages would be back in the queue now

    try:
        assert asyncio.run(scenario()) == 0
        assert stored(inbox) == {
            "order-1": 2, "order-2": 2, "order-3": 1, "order-4": 1, "order-5": 1
        }  # fmt: skip
        assert inbox.process_due() == 5
        assert effects(inbox) == {f"order-{n}": 1 for n in range(1, 6)}
    finally:
        inbox.close()


def test_the_key_may_be_the_message_id_and_the_type_a_header(
    rabbitmq_url: str, tmp_path: Path
) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}", key="message_id", type="header:x-type")

    async def scenario() -> None:
        async with rabbit_queue(rabbitmq_url) as queue:
            await queue.publish(b"<a>not json</a>", message_id="m-1", headers={"x-type": "a.b"})
            await queue.publish(b"<a>again</a>", message_id="m-1", headers={"x-type": "a.b"})
            await queue.publish(b"<b/>", message_id="m-2", headers={"x-type": 7})
            consumer = RabbitMQConsumer(inbox, SOURCE, url=rabbitmq_url, queue=queue.name)
            async with running(consumer):
                await until(lambda: sum(stored(inbox).values()) == 3)
            assert await queue.count() == 0

    try:
        asyncio.run(scenario())
        assert stored(inbox) == {"m-1": 2, "m-2": 1}
        assert inbox.process_due() == 2
        assert effects(inbox) == {"m-1": 1, "m-2": 1}
    finally:
        inbox.close()


def test_poison_is_dead_lettered_and_the_next_message_still_stored(
    rabbitmq_url: str, tmp_path: Path
) -> None:
    """One message in flight at a time (prefetch 1): had a poison message blocked the
    queue, the good one after it would never be stored."""
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}", max_body_size=200)
    poison = [b"not json", b'{"no": "id"}', order("x" * 300)]

    async def scenario() -> list[bytes]:
        async with rabbit_queue(rabbitmq_url) as queue:
            for body in poison:
                await queue.publish(body)
            await queue.publish(order("good"))
            consumer = RabbitMQConsumer(
                inbox, SOURCE, url=rabbitmq_url, queue=queue.name, prefetch=1
            )
            async with running(consumer):
                await until(lambda: "order-good" in stored(inbox))
            assert await queue.count() == 0
            await until_dead_lettered(queue, len(poison))
            return await queue.dead_lettered()

    try:
        assert asyncio.run(scenario()) == poison
        assert stored(inbox) == {"order-good": 1}
    finally:
        inbox.close()


async def until_dead_lettered(queue: object, count: int) -> None:
    for _ in range(100):
        if await queue.count(queue.dead_letters) >= count:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.05)


def test_a_store_that_is_down_acks_nothing(rabbitmq_url: str, tmp_path: Path) -> None:
    """The database cannot be opened: every message goes back to the queue (after the retry
    delay), none is acked or dead-lettered, and a consumer with a working store then takes
    them all."""
    down = make_inbox(f"sqlite:///{tmp_path / 'no such directory' / 'in.db'}", migrate=False)
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> None:
        async with rabbit_queue(rabbitmq_url) as queue:
            for n in range(3):
                await queue.publish(order(n))
            failing = RabbitMQConsumer(
                down, SOURCE, url=rabbitmq_url, queue=queue.name, retry_delay=0.1
            )
            async with running(failing):
                await asyncio.sleep(1.0)
            assert await queue.count() == 3
            assert await queue.count(queue.dead_letters) == 0
            consumer = RabbitMQConsumer(inbox, SOURCE, url=rabbitmq_url, queue=queue.name)
            async with running(consumer):
                await until(lambda: len(stored(inbox)) == 3)
            assert await queue.count() == 0

    try:
        asyncio.run(scenario())
    finally:
        down.close()
        inbox.close()
