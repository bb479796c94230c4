"""What only the RabbitMQ consumer does, against the real server: the key from the AMQP
`message_id`, the type from a header of any AMQP type. The rest: test_consume.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hookinbox.brokers import RabbitMQConsumer
from tests.brokers.brokers import (
    SOURCE,
    effects,
    make_inbox,
    rabbit_queue,
    running,
    stored,
    until,
)


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
        with inbox.store.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT event_id, event_type FROM hookinbox_events")
            types = {key: kind for key, kind in rows}
        assert types == {"m-1": "a.b", "m-2": "7"}
        assert inbox.process_due() == 2
        assert effects(inbox) == {"m-1": 1, "m-2": 1}
    finally:
        inbox.close()
