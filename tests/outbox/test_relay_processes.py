"""Relays as real processes: SIGKILL mid-delivery, and two relays on one database."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from hookinbox import Inbox, WorkerOptions
from hookinbox._storage import Store
from hookinbox._storage._schema import outbox
from tests.apps import shipping
from tests.processing.conftest import checkout
from tests.support.in_process import run_until_idle
from tests.support.receiver import Receiver, running_receiver
from tests.support.signing import stripe_delivery
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

MESSAGES = 200


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver(lambda _key, _attempt: "slow:0.1") as receiver:
        yield receiver


def queue_messages(db_url: str, target: str, count: int, inbox: Inbox | None = None) -> list[str]:
    """Events processed with the relay off: `count` pending messages, their keys returned.
    `inbox`: the shipping app built with another destination (tests/apps/rabbit_shipping.py)."""
    inbox = inbox or shipping.build(db_url, target)
    for number in range(count):
        headers, body = stripe_delivery(checkout(number), shipping.STRIPE_SECRET)
        assert inbox.receive("stripe", headers, body).status_code == 200
    options = WorkerOptions(handle_signals=False)
    run_until_idle(inbox, options, prune=False, relay=False)
    inbox.close()
    store = Store(db_url)
    with store.engine.connect() as connection:
        keys = list(connection.execute(sa.select(outbox.c.message_key)).scalars())
    store.dispose()
    assert len(keys) == count
    return keys


def statuses(store: Store) -> dict[str, int]:
    with store.engine.connect() as connection:
        rows = connection.execute(
            sa.select(outbox.c.status, sa.func.count()).group_by(outbox.c.status)
        )
        return {status: int(n) for status, n in rows}


def test_relays_killed_mid_delivery_lose_nothing(db_url: str, receiver: Receiver) -> None:
    keys = queue_messages(db_url, receiver.url, MESSAGES)
    held = sorted(keys)[0]
    # The first try of one message hangs, so killing every relay while it is in flight is
    # certain to cut a delivery in the middle; random kills follow.
    receiver.plan = lambda key, attempt: "slow:30" if key == held and attempt == 1 else "slow:0.05"
    store = Store(db_url)
    rng = random.Random(7)
    kills = 0
    env = {"OUTBOX_TARGET": receiver.url}
    with Workers(
        db_url, "--lease-seconds", "1", env=env, command="relay", app="tests.apps.shipping:inbox"
    ) as relays:
        relays.start(2)
        wait_for(
            lambda: receiver.attempts(held) == 1,
            timeout=60,
            what="the held delivery",
            describe=relays.describe,
        )
        for victim in list(relays.live):
            victim.kill()
            relays.retire(victim)
            kills += 1
        relays.start(2)
        while statuses(store).get("delivered", 0) < MESSAGES and kills < 8:
            time.sleep(rng.uniform(0.2, 0.6))
            victim = rng.choice(relays.live)
            victim.kill()
            relays.retire(victim)
            kills += 1
            relays.start(1)
        wait_for(
            lambda: statuses(store).get("delivered", 0) == MESSAGES,
            timeout=90,
            what="every message delivered",
            describe=lambda: f"{statuses(store)}; {relays.describe()}",
        )
        codes = relays.terminate_all(timeout=30)
    store.dispose()
    assert set(codes.values()) == {0}
    assert sorted(receiver.applied) == sorted(keys)  # each applied once, nothing lost
    assert {key for key, _, _ in receiver.tries} == set(keys)
    assert receiver.attempts(held) >= 2  # the cut delivery was sent again, same key


def test_two_relays_never_deliver_one_message_at_the_same_time(
    db_url: str, receiver: Receiver
) -> None:
    keys = queue_messages(db_url, receiver.url, MESSAGES)
    store = Store(db_url)
    env = {"OUTBOX_TARGET": receiver.url}
    with Workers(
        db_url,
        "--relay-concurrency",
        "8",
        env=env,
        command="relay",
        app="tests.apps.shipping:inbox",
    ) as relays:
        relays.start(2)
        wait_for(
            lambda: statuses(store).get("delivered", 0) == MESSAGES,
            timeout=90,
            what="every message delivered",
            describe=lambda: f"{statuses(store)}; {relays.describe()}",
        )
        codes = relays.terminate_all(timeout=30)
    store.dispose()
    assert set(codes.values()) == {0}
    assert receiver.overlaps == 0
    tries = [key for key, _, _ in receiver.tries]
    assert sorted(tries) == sorted(keys)  # no relay crashed, so each sent exactly once
