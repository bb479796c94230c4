"""A new database's first delivery: the tables are made before its ack deadline starts.

Receiving starts with the schema (`Runtime.prepare_schema`): migrating is no delivery's work,
so a first delivery on a slow or loaded machine is not answered 503 for time it never had.
The migration here is made slower than the deadline on purpose (a hook that sleeps), so the
old order (migrate inside the first write) could only answer 503.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox.http import Request
from hookinbox.sources import Stripe
from hookinbox.testing import sign

DEADLINE = 0.3
SLOW_MIGRATION = 1.0  # more than three deadlines


def _slow_inbox(tmp_path: Path) -> Inbox:
    inbox = Inbox(f"sqlite:///{tmp_path}/first.db", ack_deadline=DEADLINE)
    inbox.add_source(Stripe(secret="whsec_first"))
    inbox.after_migrate(lambda connection: time.sleep(SLOW_MIGRATION))
    return inbox


def _delivery(inbox: Inbox, event_id: str) -> tuple[dict[str, str], bytes]:
    event = {"id": event_id, "type": "order.paid", "created": int(time.time())}
    return sign(inbox.sources["stripe"], event)


def test_the_first_blocking_delivery_is_stored_though_migrating_takes_longer_than_its_deadline(
    tmp_path: Path,
) -> None:
    inbox = _slow_inbox(tmp_path)
    try:
        headers, body = _delivery(inbox, "evt_first")
        reply = inbox.receive("stripe", headers, body)
        assert (reply.status_code, reply.body["status"]) == (200, "accepted")
        assert inbox.store.get_event("stripe", "evt_first") is not None
    finally:
        inbox.close()


def test_the_first_delivery_on_an_event_loop_is_stored_too(tmp_path: Path) -> None:
    inbox = _slow_inbox(tmp_path)
    try:
        headers, body = _delivery(inbox, "evt_first_async")
        request = Request("POST", "stripe", headers=headers, body=body)
        reply = asyncio.run(inbox.ahandle(request))
        assert reply is not None and reply.status_code == 200
        with sa.create_engine(f"sqlite:///{tmp_path}/first.db").connect() as connection:
            stored = connection.execute(
                sa.text("SELECT count(*) FROM hookinbox_events WHERE event_id = :id"),
                {"id": "evt_first_async"},
            ).scalar_one()
        assert stored == 1
    finally:
        inbox.close()
