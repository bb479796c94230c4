"""A consumer SIGKILLed between the store's commit and the broker's ack, on both brokers:
the message comes again, the inbox answers it as a duplicate, and every message is stored
once and handled once (lost 0, doubled 0). The kill lands there by construction: the child
(crash_consumer.py) kills itself in `settle`, which runs only after the inbox answered that
the message is stored, and before the ack."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hookinbox.brokers import JetStreamConsumer, RabbitMQConsumer
from tests.brokers.brokers import (
    SOURCE,
    effects,
    jetstream,
    make_inbox,
    order,
    rabbit_queue,
    running,
    stored,
    until,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 20
KILL_AT = 7


def run_child(env: dict[str, str], mark: Path, database_url: str) -> None:
    environment = {
        **os.environ,
        **env,
        "CRASH_DATABASE_URL": database_url,
        "CRASH_KILL_AT": str(KILL_AT),
        "CRASH_MARK": str(mark),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "brokers" / "crash_consumer.py")],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]


def check_exactly_once(database_url: str, mark: Path) -> None:
    inbox = make_inbox(database_url)
    try:
        killed = json.loads(mark.read_bytes())["id"]
        events = stored(inbox)
        keys = {f"order-{n}" for n in range(MESSAGES)}
        assert set(events) == keys  # lost 0
        with inbox.store.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT COUNT(*) FROM hookinbox_events").scalar()
        assert rows == MESSAGES  # doubled 0 in the store
        assert events[killed] >= 2  # stored before the kill, and delivered again after it
        assert inbox.process_due() == MESSAGES
        assert effects(inbox) == dict.fromkeys(keys, 1)  # doubled 0 in the handlers
    finally:
        inbox.close()


async def finish(consumer_for: Callable[[Any], Any], inbox: Any, left: Callable[[], Any]) -> None:
    """A new consumer takes what the killed one left, until nothing is left unacked."""
    async with running(consumer_for(inbox)):
        await until(lambda: len(stored(inbox)) == MESSAGES)
        for _ in range(200):
            if await left() == 0:
                break
            await asyncio.sleep(0.05)
    assert await left() == 0


def test_rabbitmq_consumer_killed_between_commit_and_ack(rabbitmq_url: str, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'in.db'}"
    mark = tmp_path / "killed"

    async def scenario() -> None:
        async with rabbit_queue(rabbitmq_url) as queue:
            for n in range(MESSAGES):
                await queue.publish(order(n))
            env = {"CRASH_BROKER": "rabbitmq", "CRASH_URL": rabbitmq_url, "CRASH_QUEUE": queue.name}
            await asyncio.to_thread(run_child, env, mark, database_url)
            inbox = make_inbox(database_url)
            try:
                await finish(
                    lambda i: RabbitMQConsumer(i, SOURCE, url=rabbitmq_url, queue=queue.name),
                    inbox,
                    queue.count,
                )
            finally:
                inbox.close()

    asyncio.run(scenario())
    check_exactly_once(database_url, mark)


def test_jetstream_consumer_killed_between_commit_and_ack(nats_url: str, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'in.db'}"
    mark = tmp_path / "killed"

    async def scenario() -> None:
        # A short ack wait: what the killed consumer held comes again within a second.
        async with jetstream(nats_url, ack_wait=1.0) as stream:
            for n in range(MESSAGES):
                await stream.publish(order(n))
            env = {
                "CRASH_BROKER": "jetstream",
                "CRASH_URL": nats_url,
                "CRASH_STREAM": stream.name,
                "CRASH_CONSUMER": stream.consumer,
            }
            await asyncio.to_thread(run_child, env, mark, database_url)
            inbox = make_inbox(database_url)
            try:
                await finish(
                    lambda i: JetStreamConsumer(
                        i, SOURCE, url=nats_url, stream=stream.name, consumer=stream.consumer
                    ),
                    inbox,
                    stream.pending,
                )
            finally:
                inbox.close()

    asyncio.run(scenario())
    check_exactly_once(database_url, mark)
