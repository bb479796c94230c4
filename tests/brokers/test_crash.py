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
from pathlib import Path

import pytest

from tests.brokers.brokers import (
    Broker,
    RabbitQueue,
    broker,
    effects,
    make_inbox,
    order,
    running,
    stored,
    until,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 20
KILL_AT = 7


def child_environment(queue: Broker, mark: Path, database_url: str) -> dict[str, str]:
    place = queue.place
    if isinstance(place, RabbitQueue):
        where = {"CRASH_QUEUE": place.name}
    else:
        where = {"CRASH_STREAM": place.name, "CRASH_CONSUMER": place.consumer}
    return {
        **os.environ,
        **where,
        "CRASH_BROKER": queue.kind,
        "CRASH_URL": place.url,
        "CRASH_DATABASE_URL": database_url,
        "CRASH_KILL_AT": str(KILL_AT),
        "CRASH_MARK": str(mark),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }


CHILD = [sys.executable, str(ROOT / "tests" / "brokers" / "crash_consumer.py")]


def run_child(queue: Broker, mark: Path, database_url: str) -> None:
    child = subprocess.run(
        CHILD,
        env=child_environment(queue, mark, database_url),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]


def test_a_consumer_killed_between_commit_and_ack_loses_and_doubles_nothing(
    broker_url: tuple[str, str], tmp_path: Path
) -> None:
    database_url = f"sqlite:///{tmp_path / 'in.db'}"
    mark = tmp_path / "killed"

    async def scenario() -> None:
        # JetStream: a short ack wait, so what the killed consumer held comes again soon.
        options = {"ack_wait": 1.0} if broker_url[0] == "jetstream" else {}
        async with broker(*broker_url, **options) as queue:
            for n in range(MESSAGES):
                await queue.publish(order(n))
            await asyncio.to_thread(run_child, queue, mark, database_url)
            inbox = make_inbox(database_url)
            try:  # a new consumer takes what the killed one left
                async with running(queue.consumer(inbox)):
                    await until(lambda: len(stored(inbox)) == MESSAGES)
                    for _ in range(200):
                        if await queue.left() == 0:
                            break
                        await asyncio.sleep(0.05)
                assert await queue.left() == 0
            finally:
                inbox.close()

    asyncio.run(scenario())
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


def test_sigterm_settles_the_message_in_flight_before_the_exit(
    broker_url: tuple[str, str], tmp_path: Path
) -> None:
    """SIGTERM while a message is stored and not yet acked: the consumer acks it, then exits
    0; nothing is delivered twice."""
    database_url = f"sqlite:///{tmp_path / 'in.db'}"
    mark = tmp_path / "in flight"

    async def scenario() -> None:
        async with broker(*broker_url) as queue:
            for n in range(3):
                await queue.publish(order(n))
            env = {**child_environment(queue, mark, database_url), "CRASH_PAUSE": "1"}
            env["CRASH_KILL_AT"] = "1"
            child = subprocess.Popen(CHILD, env=env, cwd=ROOT, stderr=subprocess.PIPE)
            try:
                await until(mark.exists)
                child.send_signal(signal.SIGTERM)
                _, errors = await asyncio.to_thread(child.communicate, timeout=30)
            finally:
                if child.poll() is None:
                    child.kill()
            assert child.returncode == 0, errors.decode()[-2000:]
            inbox = make_inbox(database_url)
            try:  # what the stopped consumer did not take, another takes: no redelivery
                async with running(queue.consumer(inbox)):
                    await until(lambda: len(stored(inbox)) == 3)
                assert await queue.left() == 0
                held = json.loads(mark.read_bytes())["id"]
                assert stored(inbox)[held] == 1  # acked before the exit, never delivered again
                assert sum(stored(inbox).values()) == 3
            finally:
                inbox.close()

    asyncio.run(scenario())
