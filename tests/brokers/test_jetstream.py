"""What only the JetStream consumer does, against the real server: the key from
`Nats-Msg-Id` and the type from the subject; a dead letter's headers; a missing consumer or
dead-letter stream refused at start. The rest: test_consume.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hookinbox import ConfigurationError
from hookinbox.brokers import JetStreamConsumer
from tests.brokers.brokers import (
    SOURCE,
    Stream,
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


def test_a_dead_letter_says_why_and_where_it_came_from(nats_url: str, tmp_path: Path) -> None:
    inbox = make_inbox(f"sqlite:///{tmp_path / 'in.db'}")

    async def scenario() -> tuple[str, list[Any]]:
        async with jetstream(nats_url) as stream:
            await stream.publish(b"not json", subject="paid", **{"Nats-Msg-Id": "p-1"})
            await stream.publish(order("good"))
            async with running(consumer_of(stream, inbox)):
                await until(lambda: "order-good" in stored(inbox))
            return stream.name, await stream.dead_lettered()

    try:
        name, [dead] = asyncio.run(scenario())
        assert dead.data == b"not json"
        assert dead.headers == {
            "Nats-Msg-Id": f"hookinbox-dead-letter:{name}:1",  # a second copy is dropped
            "Hookinbox-Reason": "body is not valid JSON",
            "Hookinbox-Stream": name,
            "Hookinbox-Sequence": "1",
            "Hookinbox-Subject": f"{name}.orders.paid",
            "Hookinbox-Message-Id": "p-1",
        }
    finally:
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
