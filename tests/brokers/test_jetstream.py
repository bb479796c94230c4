"""A JetStream durable pull consumer as a source, against the real server: each message
stored once by its key and acked only once stored; duplicates are one event; poison is
published to the dead-letter subject and terminated without holding up the next message;
a store that is down acks nothing. The crash between the commit and the ack: test_crash.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hookinbox import ConfigurationError
from hookinbox.brokers import JetStreamConsumer
from tests.brokers.brokers import (
    SOURCE,
    Stream,
    effects,
    jetstream,
    make_inbox,
    order,
    running,
    stored,
    until,
)


def consumer_of(stream: Stream, inbox: object, **options: object) -> JetStreamConsumer:
    return JetStreamConsumer(
        inbox,  # type: ignore[arg-type]
        SOURCE,
        url=stream.url,
        stream=stream.name,
        consumer=stream.consumer,
        dead_letter_subject=stream.dead_letter_subject,
        **options,  # type: ignore[arg-type]
    )


def test_each_key_is_stored_once_and_handled_once(nats_url: str, tmp_path: Path) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> int:
        async with jetstream(nats_url) as stream:
            for n in (1, 2, 3, 2, 4, 1, 5):  # 2 and 1 published twice: duplicates
                await stream.publish(order(n), subject="created")
            async with running(consumer_of(stream, inbox)):
                await until(lambda: sum(stored(inbox).values()) == 7)
            return await stream.pending()

    try:
        assert asyncio.run(scenario()) == 0
        assert stored(inbox) == {
            "order-1": 2, "order-2": 2, "order-3": 1, "order-4": 1, "order-5": 1
        }  # fmt: skip
        assert inbox.process_due() == 5
        assert effects(inbox) == {f"order-{n}": 1 for n in range(1, 6)}
    finally:
        inbox.close()


def test_the_key_may_be_the_message_id_and_the_type_the_subject(
    nats_url: str, tmp_path: Path
) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}", key="message_id", type="subject")

    async def scenario() -> None:
        async with jetstream(nats_url) as stream:
            await stream.publish(b"plain text", subject="paid", **{"Nats-Msg-Id": "m-1"})
            await stream.publish(b"other", subject="paid", **{"Nats-Msg-Id": "m-2"})
            async with running(consumer_of(stream, inbox)):
                await until(lambda: len(stored(inbox)) == 2)
            assert await stream.pending() == 0

    try:
        asyncio.run(scenario())
        assert stored(inbox) == {"m-1": 1, "m-2": 1}
        with inbox.store.engine.connect() as connection:
            types = {t for (t,) in connection.exec_driver_sql(
                "SELECT event_type FROM hookinbox_events")}  # fmt: skip
        assert len(types) == 1 and next(iter(types)).endswith(".orders.paid")
    finally:
        inbox.close()


def test_poison_is_dead_lettered_and_the_next_message_still_stored(
    nats_url: str, tmp_path: Path
) -> None:
    """One message in flight at a time (prefetch 1): had a poison message blocked the
    consumer, the good one after it would never be stored."""
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}", max_body_size=200)
    poison = [b"not json", b'{"no": "id"}', order("x" * 300)]

    async def scenario() -> list[object]:
        async with jetstream(nats_url) as stream:
            for body in poison:
                await stream.publish(body)
            await stream.publish(order("good"))
            async with running(consumer_of(stream, inbox, prefetch=1)):
                await until(lambda: "order-good" in stored(inbox))
            assert await stream.pending() == 0  # terminated, not waiting for a redelivery
            return await stream.dead_lettered()

    try:
        dead = asyncio.run(scenario())
        assert [m.data for m in dead] == poison  # type: ignore[attr-defined]
        first = dead[0].headers  # type: ignore[attr-defined]
        assert first["Hookinbox-Reason"] == "body is not valid JSON"
        assert first["Hookinbox-Sequence"] == "1"
        assert stored(inbox) == {"order-good": 1}
    finally:
        inbox.close()


def test_a_store_that_is_down_acks_nothing(nats_url: str, tmp_path: Path) -> None:
    down = make_inbox(f"sqlite:///{tmp_path / 'no such directory' / 'in.db'}", migrate=False)
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> None:
        async with jetstream(nats_url) as stream:
            for n in range(3):
                await stream.publish(order(n))
            async with running(consumer_of(stream, down, retry_delay=0.1)):
                await asyncio.sleep(1.0)
            assert await stream.pending() == 3
            assert await stream.dead_lettered() == []
            async with running(consumer_of(stream, inbox)):
                await until(lambda: len(stored(inbox)) == 3)
            assert await stream.pending() == 0

    try:
        asyncio.run(scenario())
    finally:
        down.close()
        inbox.close()


def test_a_missing_consumer_or_dead_letter_stream_is_one_line(
    nats_url: str, tmp_path: Path
) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> list[str]:
        errors = []
        async with jetstream(nats_url) as stream:
            for options in (
                {"consumer": "nobody"},
                {"dead_letter_subject": "nowhere.kept"},
            ):
                consumer = JetStreamConsumer(
                    inbox,
                    SOURCE,
                    url=stream.url,
                    stream=stream.name,
                    **{"consumer": stream.consumer, **options},  # type: ignore[arg-type]
                )
                with pytest.raises(ConfigurationError) as raised:
                    await consumer.run()
                errors.append(str(raised.value))
        return errors

    try:
        no_consumer, no_stream = asyncio.run(scenario())
        assert "no consumer 'nobody'" in no_consumer
        assert "'nowhere.kept'" in no_stream
    finally:
        inbox.close()
