"""A batch with one unusable event keeps the others, and the unusable one in sight (issue 31,
item 10).

HubSpot, SendGrid and Adyen put many events in one signed delivery. One event without its id
(or not an object at all) used to make the whole delivery a 400, and HubSpot (like SendGrid)
does not retry a 4xx: every valid event of the batch was lost. Now the valid events are
stored as usual, and each unusable one is stored too, with status `invalid`, its reason as
its last error, under a key derived from its own bytes (so a redelivered batch stores it
once): it is never processed, never pruned, and an operator sees it in `events list`, on the
dashboard and in the `hookinbox_events{status="invalid"}` gauge. The answer is 2xx and says
how many were invalid.

What it proves, on SQLite and PostgreSQL, with and without group commit (the two ways a batch
is written): for each batched source, a signed delivery with valid events and unusable ones
is answered 200 with `"invalid": n`, the valid events are pending and processed by the worker,
the unusable ones are `invalid` with their reason and are not handed to handlers; the same
delivery again is all duplicates; `hookinbox events list --status invalid` (a real process)
lists them; the dashboard's overview and events page show them; the gauge counts them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._metrics import exposition
from hookinbox._model import Status
from hookinbox._operations import Thresholds
from hookinbox._operations._service import Operations
from hookinbox._storage._schema import events
from hookinbox.dashboard import dashboard_app
from hookinbox.http._app import create_app
from hookinbox.sources import Adyen, HubSpot, SendGrid, Source
from hookinbox.testing import sendgrid_test_key, sign
from tests.dashboard.conftest import TOKEN, Browser
from tests.reliability._report import Trial, record
from tests.reliability._source_kinds import HUBSPOT_URL
from tests.support.server import run_cli

ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
NOW_MS = int(time.time() * 1000)
SENDGRID_KEY = sendgrid_test_key()


def _adyen_item(reference: str | None, code: str = "AUTHORISATION") -> dict[str, Any]:
    item: dict[str, Any] = {
        "merchantAccountCode": "Shop",
        "merchantReference": "order-1",
        "amount": {"value": 1000, "currency": "EUR"},
        "eventCode": code,
        "success": "true",
        "eventDate": "2026-12-01T10:00:00+01:00",
    }
    if reference is not None:
        item["pspReference"] = reference
    return {"NotificationRequestItem": item}


# Per source: the batch (valid events, then unusable ones), the valid keys, and the reasons.
BATCHES: dict[str, tuple[Any, list[str], list[str]]] = {
    "hubspot": (
        [
            {
                "eventId": 1,
                "subscriptionId": 9,
                "subscriptionType": "contact.creation",
                "occurredAt": NOW_MS,
            },
            {
                "eventId": 2,
                "subscriptionId": 9,
                "subscriptionType": "contact.deletion",
                "occurredAt": NOW_MS,
            },
            {"subscriptionId": 9, "subscriptionType": "contact.creation", "objectId": 7},
            "not an event",
        ],
        ["9:1", "9:2"],
        ["no eventId in the delivery", "an event of the batch is not a JSON object"],
    ),
    "sendgrid": (
        [
            {"sg_event_id": "sg-1", "event": "open", "email": "a@example.com"},
            {"event": "click", "email": "b@example.com"},
        ],
        ["sg-1"],
        ["no sg_event_id in the delivery"],
    ),
    "adyen": (
        {"live": "false", "notificationItems": [_adyen_item("8515"), _adyen_item(None)]},
        ["8515:AUTHORISATION:true"],
        ["no pspReference in the delivery"],
    ),
}


def _inbox(db_url: str, group_commit: bool) -> Inbox:
    inbox = Inbox(db_url, group_commit=group_commit)
    inbox.add_source(HubSpot(secret="hs-secret", url=HUBSPOT_URL))
    inbox.add_source(SendGrid(public_key=SENDGRID_KEY.public_key))
    inbox.add_source(Adyen(hmac_key=ADYEN_KEY))
    return inbox


def _rows(inbox: Inbox, source: str) -> dict[str, tuple[str, str | None, int]]:
    with inbox.store.engine.connect() as connection:
        query = sa.select(
            events.c.event_id, events.c.status, events.c.last_error, events.c.delivery_count
        ).where(events.c.source == source)
        found = connection.execute(query)
        return {r.event_id: (r.status, r.last_error, r.delivery_count) for r in found}


@pytest.mark.slow
@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "one-by-one"])
def test_valid_events_are_kept_and_unusable_ones_held_as_invalid(
    db_url: str, backend: str, group_commit: bool
) -> None:
    inbox = _inbox(db_url, group_commit)
    handled: list[str] = []
    for name in BATCHES:

        @inbox.handler(name, "*")
        def on_any(event: Event, ctx: HandlerContext) -> None:
            handled.append(f"{event.source} {event.id}")

    tried = 0
    for name, (document, valid, reasons) in BATCHES.items():
        source: Source = inbox.sources[name]
        headers, body = sign(source, document)
        reply = inbox.receive(name, headers, body)
        again = inbox.receive(name, headers, body)
        tried += 2
        events_in = len(valid) + len(reasons)
        assert reply.status_code == 200, reply.body
        assert reply.body.get("invalid") == len(reasons), reply.body
        assert (reply.body.get("events"), reply.body.get("accepted")) == (events_in, events_in)
        assert (again.body.get("duplicates"), again.body.get("invalid")) == (
            events_in,
            len(reasons),
        )
        rows = _rows(inbox, name)
        assert {key: rows[key][0] for key in valid} == dict.fromkeys(valid, "pending")
        invalid = {key: row for key, row in rows.items() if key not in valid}
        assert sorted(row[1] for row in invalid.values()) == sorted(reasons)
        assert {row[0] for row in invalid.values()} == {"invalid"}
        assert all(key.startswith("invalid:") for key in invalid)
        assert {row[2] for row in rows.values()} == {2}  # the redelivery: duplicates all
    inbox.process_due()
    expected = sorted(f"{name} {key}" for name, (_, valid, _) in BATCHES.items() for key in valid)
    assert sorted(handled) == expected  # no invalid event reaches a handler
    invalid_total = sum(len(reasons) for _, _, reasons in BATCHES.values())
    assert inbox.store.get_event("hubspot", "9:1").status is Status.PROCESSED

    metrics, _ = exposition(Operations(inbox.store))
    assert f'hookinbox_events{{status="invalid"}} {float(invalid_total)}' in metrics.decode()

    listed = run_cli("events", "list", "--database-url", db_url, "--status", "invalid", "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    rows_listed = document if isinstance(document, list) else document["events"]
    assert len(rows_listed) == invalid_total
    assert {row["status"] for row in rows_listed} == {"invalid"}

    dashboard = dashboard_app(
        inbox.store, TOKEN, sources=sorted(inbox.sources), thresholds=Thresholds(min_workers=0)
    )
    browser = Browser(create_app(inbox._receiver, admin=dashboard))
    assert browser.sign_in().status_code == 303
    overview = browser.get("/admin/")
    page = browser.get("/admin/events?status=invalid")
    inbox.close()
    assert overview.status_code == 200 and page.status_code == 200
    assert "Invalid" in overview.text
    assert page.text.count("invalid:") >= invalid_total
    assert "no eventId in the delivery" in page.text
    if group_commit:
        record(
            Trial(
                fault="batches with unusable events (HubSpot, SendGrid, Adyen)",
                backend=backend,
                deliveries=tried,
                detail=f"3 batches, {invalid_total} unusable events among them: 200 with "
                f"'invalid': n, the valid events stored and processed, the unusable ones "
                "stored 'invalid' with their reason, never handled; the redelivery all "
                "duplicates; events list --status invalid, the dashboard and "
                "hookinbox_events{status=invalid} show them (with and without group commit)",
            )
        )
