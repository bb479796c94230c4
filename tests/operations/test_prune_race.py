"""Exactly-once through a prune: redeliveries at the retention's edge while `hookinbox prune` runs.

Two real processes race: `hookinbox prune` (the app's 90-day retention) deletes 8,000 old
processed events and then those just past the edge, while a `hookinbox serve` process receives
the provider's redeliveries of events on both sides of the edge, each twice, in a shuffled
order. Whatever the interleaving:
- an event inside the retention (so inside its redelivery window: the retention is never
  shorter than the window) is kept and every redelivery of it is a duplicate: it is never
  stored again as new, so never processed twice;
- an event past the edge is either still there (a duplicate) or pruned, and then its
  redelivery is held as `stale` for an operator, never processed blindly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa

from hookinbox import Status
from hookinbox._storage import Store
from hookinbox._storage._schema import deliveries, events
from tests.apps import orders as orders_app
from tests.support.server import hookinbox_command, running_server
from tests.support.signing import stripe_delivery

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

FILLER = 8_000
EDGE = 150
"""Events on each side of the edge, a minute to ten minutes from it."""
RETENTION = timedelta(days=90)
LANES = 8


def _event(event_id: str, at: datetime) -> bytes:
    return json.dumps(
        {"id": event_id, "type": "checkout.session.completed", "created": int(at.timestamp()),
         "data": {"object": {"id": f"cs_{event_id}", "payment_intent": f"pi_{event_id}"}}},
    ).encode()  # fmt: skip


def _rows(ids_and_times: list[tuple[str, datetime]]) -> list[dict[str, object]]:
    rows = []
    for event_id, at in ids_and_times:
        body = _event(event_id, at)
        rows.append(
            {"source": "stripe", "event_id": event_id, "event_type": "checkout.session.completed",
             "occurred_at": at, "received_at": at, "body": body, "headers": "{}",
             "body_sha256": hashlib.sha256(body).hexdigest(), "status": Status.PROCESSED.value,
             "attempts": 1, "deferrals": 0, "next_attempt_at": at, "delivery_count": 1,
             "key_conflicts": 0, "last_delivery_at": at, "processed_at": at}
        )  # fmt: skip
    return rows


async def _redeliver(
    base_url: str, bodies: dict[str, bytes], pruner: subprocess.Popen[str]
) -> tuple[list[int], Counter[str], int]:
    """Redeliver every event twice, in a shuffled order, then keep redelivering random ones
    until the pruner has exited: the edge is crossed while deliveries arrive. A 503 is sent
    again, as the provider would (counted: none may be, below); `sent` counts the deliveries
    that were accepted."""
    order = list(bodies) * 2
    random.Random(7).shuffle(order)
    statuses: list[int] = []
    sent: Counter[str] = Counter()
    unavailable = 0
    chooser = random.Random(11)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:

        async def sender(lane: int) -> None:
            index = lane
            while index < len(order) or pruner.poll() is None:
                event_id = order[index] if index < len(order) else chooser.choice(order)
                index += LANES
                headers, signed = stripe_delivery(bodies[event_id], orders_app.STRIPE_SECRET)
                answer = await client.post("/webhooks/stripe", headers=headers, content=signed)
                for _ in range(5):  # the provider's retries, compressed
                    if answer.status_code != 503:
                        break
                    nonlocal unavailable
                    unavailable += 1
                    await asyncio.sleep(0.2)
                    answer = await client.post("/webhooks/stripe", headers=headers, content=signed)
                statuses.append(answer.status_code)
                sent[event_id] += 1

        await asyncio.gather(*(sender(lane) for lane in range(LANES)))
    return statuses, sent, unavailable


def test_redeliveries_at_the_retention_edge_during_a_prune(db_url: str) -> None:
    orders_app.create_tables(db_url)
    now = datetime.now(UTC)
    edge = now - RETENTION
    filler = [(f"evt_old_{n}", edge - timedelta(days=1, seconds=n)) for n in range(FILLER)]
    inside = [(f"evt_in_{n}", edge + timedelta(minutes=1 + n * 9 / EDGE)) for n in range(EDGE)]
    outside = [(f"evt_out_{n}", edge - timedelta(minutes=1 + n * 9 / EDGE)) for n in range(EDGE)]
    store = Store(db_url)
    rows = _rows(filler + inside + outside)
    with store.transaction() as connection:
        connection.execute(events.insert(), rows)
        connection.execute(
            deliveries.insert(),
            [{"source": "stripe", "event_id": r["event_id"], "received_at": r["received_at"],
              "duplicate": False, "key_conflict": False} for r in rows],
        )  # fmt: skip
    bodies = {event_id: _event(event_id, at) for event_id, at in inside + outside}

    with running_server("tests.apps.orders:inbox", db_url, "--no-worker") as base_url:
        pruner = subprocess.Popen(
            hookinbox_command("prune", "tests.apps.orders:inbox", "--database-url", db_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        statuses, sent, unavailable = asyncio.run(_redeliver(base_url, bodies, pruner))
        out, err = pruner.communicate(timeout=300)
    assert pruner.returncode == 0, err
    assert set(statuses) == {200}  # every delivery accepted in the end
    # No 503 while the pruner runs, on any database. On MariaDB a group-commit batch does
    # lose to a prune batch now and then (a deadlock: InnoDB rolls the lighter back); it is
    # written again before it is answered (`Store.retry_deadlocks`). With one run per batch,
    # 4 test runs in 6 answered 1 to 7 deliveries 503 here; with three, none in 12.
    assert unavailable == 0

    with store.engine.connect() as connection:
        found = {
            row.event_id: row
            for row in connection.execute(
                sa.select(events.c.event_id, events.c.status, events.c.delivery_count,
                          events.c.received_at).where(events.c.event_id.not_like("evt_old_%"))
            )
        }  # fmt: skip
        left_over = connection.execute(
            sa.select(sa.func.count()).where(events.c.event_id.like("evt_old_%"))
        ).scalar_one()
    store.dispose()
    assert left_over == 0, out
    for event_id, at in inside:  # kept; both redeliveries were duplicates of the first
        row = found[event_id]
        assert (row.status, row.delivery_count) == (Status.PROCESSED.value, 1 + sent[event_id])
        assert abs((row.received_at - at).total_seconds()) < 1, event_id
    for event_id, _ in outside:  # pruned (then held as stale) or still the processed original
        row = found.get(event_id)
        assert row is None or row.status in (Status.STALE.value, Status.PROCESSED.value), row
        if row is not None and row.status == Status.PROCESSED.value:
            assert row.delivery_count == 1 + sent[event_id]  # never pruned: every one a duplicate
