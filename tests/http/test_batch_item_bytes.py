"""A batch's events are stored as the provider sent them (issue 31, item 4), on SQLite and
PostgreSQL.

Each event of a batch (HubSpot here; SendGrid and Adyen split theirs alike) is stored as its
own body. Made by re-serialising the parsed item, an item's `1e400` became `Infinity` (Python
reads it as a float that overflows), which is not JSON: no JSON reader but Python's reads it,
and PostgreSQL's jsonb refused it (a payload search of its window answered 500). The stored
body must be the item's own bytes, sliced from the signed batch.

Each item is sliced from the delivery (`hookinbox.sources._json_slices`); whether a retry is a
duplicate is still decided on the item's JSON, so a batch formatted anew is no key conflict.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from hookinbox import Inbox
from hookinbox.sources import HubSpot
from hookinbox.testing import sign

ITEMS = [
    b'{"eventId": 1, "subscriptionId": 1, "subscriptionType": "contact.creation", "amount": 1e400}',
    b'{"eventId":2,"subscriptionId":1,"subscriptionType":"contact.creation","big":'
    b"12345678901234567890123456789.5}",
]


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = Inbox(db_url)
    inbox.add_source(HubSpot(secret="batch-secret", url="https://hooks.example.com/hubspot"))
    yield inbox
    inbox.close()


def _refuse(token: str) -> object:
    raise ValueError(f"{token} is not JSON")


def test_each_event_of_a_batch_is_stored_as_the_bytes_sent(inbox: Inbox) -> None:
    body = b"[" + b", ".join(ITEMS) + b"]"
    headers, raw = sign(inbox.sources["hubspot"], body)
    assert inbox.receive("hubspot", headers, raw).status_code == 200
    for number, sent in enumerate(ITEMS, start=1):
        event = inbox.store.get_event("hubspot", f"1:{number}")
        assert event is not None
        json.loads(event.body, parse_constant=_refuse)  # JSON, as any reader reads it
        assert event.body == sent


def test_a_retry_formatted_anew_is_a_duplicate_not_a_key_conflict(inbox: Inbox) -> None:
    spaced = b"[" + b", ".join(ITEMS) + b"]"
    compact = b"[" + b",".join(json.dumps(json.loads(item)).encode() for item in ITEMS) + b"]"
    for body in (spaced, compact):
        headers, raw = sign(inbox.sources["hubspot"], body)
        assert inbox.receive("hubspot", headers, raw).status_code == 200
    for number, sent in enumerate(ITEMS, start=1):
        event = inbox.store.get_event("hubspot", f"1:{number}")
        assert event is not None
        assert (event.delivery_count, event.key_conflicts) == (2, 0)
        assert event.body == sent  # the first arrival's bytes
