"""Reconcile, webhooks and workers as separate processes on one database: `hookinbox
reconcile` stores the events Stripe's API lists while two other processes deliver webhooks of
the same events and two `hookinbox worker` processes process what is stored. The oldest
events arrive as webhooks first; the rest arrive while reconcile stores its pages. Each event
must be stored once and applied once (`applied_invoices` has no unique constraint: an event
applied twice shows as two rows), every webhook counted, none a key conflict."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import time
from collections import Counter
from typing import Any

import sqlalchemy as sa

from hookinbox import Inbox, Status
from hookinbox.testing import FakeStripeAPI
from tests.apps import reconciling
from tests.support.listed import stripe_listed
from tests.support.loopback import serving
from tests.support.server import hookinbox_command
from tests.support.signing import stripe_delivery
from tests.support.workers import Workers, opened_store, read_all, wait_for

APP = "tests.apps.reconciling:inbox"
EVENTS = 300
SENDERS = 2
EARLY = 150  # the oldest events, delivered before reconcile starts


def deliver(inbox: Inbox, events: list[dict[str, Any]]) -> None:
    for event in events:
        headers, body = stripe_delivery(event, reconciling.SECRET)
        reply = inbox.receive("stripe", headers, body)
        assert reply.ok, reply


def deliver_share(
    database_url: str, early: list[dict[str, Any]], late: list[dict[str, Any]]
) -> int:
    """A sender process: the webhooks of its `early` events; then, once reconcile has stored
    its first page (the newest events, which no webhook has brought yet), those of its `late`
    events, racing reconcile's next pages and duplicating what it stored."""
    inbox = reconciling.build(database_url)
    try:
        deliver(inbox, early)
        wait_for(
            lambda: any(e.received_via == "reconcile" for e in inbox.store.operator.all_events()),
            timeout=60,
            what="reconcile's first page",
        )
        deliver(inbox, late)
        return len(early) + len(late)
    finally:
        inbox.close()


def test_reconcile_webhooks_and_workers_in_processes_apply_each_event_once(db_url: str) -> None:
    now = int(time.time())
    api = FakeStripeAPI([stripe_listed(n, now - 3600 + n) for n in range(EVENTS)])
    migrated = reconciling.build(db_url)
    migrated.migrate()
    migrated.close()
    with (
        serving(api) as server,
        opened_store(db_url, migrate=False) as store,
        Workers(db_url, app=APP) as workers,
    ):
        workers.start(2)
        context = multiprocessing.get_context("spawn")
        with context.Pool(SENDERS) as pool:
            early, late = api.events[:EARLY], api.events[EARLY:]
            shares = [(db_url, early[n::SENDERS], late[n::SENDERS]) for n in range(SENDERS)]
            sent = pool.starmap_async(deliver_share, shares)
            # Reconcile starts once the early webhooks are stored: it finds them already
            # stored, and stores at least its first page (the 100 newest) itself.
            wait_for(lambda: len(store.operator.all_events()) == EARLY, timeout=60, what="webhooks")
            reconciled = subprocess.run(
                hookinbox_command("reconcile", APP, "stripe", "--json", "--database-url", db_url),
                env={**os.environ, "RECONCILE_STRIPE_API": server.url},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert sum(sent.get(timeout=120)) == EVENTS
        assert reconciled.returncode == 0, reconciled.stderr
        counts = json.loads(reconciled.stdout)
        assert counts["listed"] == EVENTS
        assert counts["already_stored"] + counts["stored"] == EVENTS

        def processed() -> int:
            return sum(e.status is Status.PROCESSED for e in store.operator.all_events())

        wait_for(lambda: processed() == EVENTS, timeout=90, what="every event processed")
        workers.check_alive()
        applied = read_all(store, sa.select(reconciling.applied_invoices.c.event_id))
        stored = store.operator.all_events()  # read before the store is closed
    assert Counter(row.event_id for row in applied) == Counter({e["id"]: 1 for e in api.events})
    assert len(stored) == EVENTS
    assert all(e.key_conflicts == 0 for e in stored)
    assert sum(e.delivery_count for e in stored) == EVENTS  # every webhook counted once
    # The first arrival is kept: what reconcile stored says so, the rest were webhooks first.
    via = Counter(e.received_via for e in stored)
    assert via["reconcile"] == counts["stored"] and via["webhook"] == counts["already_stored"]
    assert counts["already_stored"] >= EARLY and counts["stored"] >= 100  # both orders
