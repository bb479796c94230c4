"""Every provider end to end, in process (issue 23's round two, for all since issue 32).

Each provider's example source, in one inbox; each delivery signed by the test kit (whose
signers the providers' own tests hold to their SDKs and recipes), sent through `inbox.receive`
and through the ASGI app: stored once across a retry signed anew (a retry that re-signs inside
the body is a duplicate, not a key conflict), and refused without
writing anything when forged, unsigned, or, where the signature dates the delivery, an hour
old. A body that names no event is each source's own tests' to refuse.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import Source
from hookinbox.sources._provider import Provider
from hookinbox.testing import paypal_test_certificate, sendgrid_test_key, sign
from hookinbox.testing._signing import encode_body, providers
from tests.http.header_sources import example_keys, stored_id
from tests.support.asgi import ASGIClient

KEYS = example_keys(paypal_test_certificate().pem, sendgrid_test_key().public_key)
SIGNED = [declared for declared in providers() if declared.signed]
Post = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    path: Path = tmp_path_factory.mktemp("every-source") / "inbox.db"
    inbox = Inbox(f"sqlite:///{path}")
    for declared in SIGNED:
        inbox.add_source(declared.example(KEYS))
    inbox.migrate()
    yield inbox
    inbox.close()


def _poster(inbox: Inbox, entry: str) -> Post:
    if entry == "receive":

        def receive(name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
            reply = inbox.receive(name, headers, body)
            return reply.status_code, dict(reply.body) if isinstance(reply.body, dict) else {}

        return receive
    client = ASGIClient(inbox.asgi())

    def post(name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]  # UTF-8, as sent
        response = client.post(f"/webhooks/{name}", headers=raw, content=body)
        json_answer = response.headers["content-type"].startswith("application/json")
        return response.status_code, response.json() if json_answer else {}

    return post


def _rows(inbox: Inbox, name: str, key: str) -> list[tuple[int, int]]:
    """(deliveries, key conflicts) of the stored event, if any."""
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.delivery_count, events.c.key_conflicts).where(
            events.c.source == name, events.c.event_id == key
        )
        return [(row[0], row[1]) for row in connection.execute(query).all()]


def _source(inbox: Inbox, declared: Provider) -> Source:
    return next(s for s in inbox.sources.values() if type(s) is declared.source)


def _dated(source: Source) -> bool:
    """Whether the signature dates the delivery: a tolerance, and (an `HMACSource`) a
    timestamp header to hold to it."""
    tolerance = getattr(source, "tolerance", None)
    return tolerance is not None and getattr(source, "timestamp_header", "") is not None


@pytest.mark.parametrize("entry", ["receive", "asgi"])
@pytest.mark.parametrize("declared", SIGNED, ids=lambda p: p.source.__name__)
def test_stored_once_and_every_refusal_writes_nothing(
    inbox: Inbox, declared: Provider, entry: str
) -> None:
    post = _poster(inbox, entry)
    source = _source(inbox, declared)
    payload = declared.event(f"{entry}{uuid.uuid4().hex[:12]}")
    now = time.time()
    headers, body = sign(source, payload, at=now)

    refusals = [sign(source, payload, at=now, **declared.forgery())]
    if declared.signature_header is not None:  # the signature header left out
        header = declared.signature_header.lower()
        refusals.append(({k: v for k, v in headers.items() if k.lower() != header}, body))
    else:  # signed in the body: the body as it was before the signer signed it
        refusals.append(({}, encode_body(source, payload, {})))
    if _dated(source):
        refusals.append(sign(source, payload, at=now - 3600))
    for refused_headers, refused_body in refusals:
        status, answer = post(source.name, refused_headers, refused_body)
        assert status == 401, answer

    status, answer = post(source.name, headers, body)
    assert status == 200, answer
    key = stored_id(source, answer, payload)
    assert answer.get("status", "accepted") == "accepted", answer
    assert _rows(inbox, source.name, key) == [(1, 0)]
    status, answer = post(source.name, *sign(source, payload, at=now + 30))  # signed anew
    assert status == 200, answer
    if declared.new_each_delivery:  # a wake-up without an id: every delivery is handled
        assert answer["status"] == "accepted" and answer["event_id"] != key, answer
        return
    assert answer.get("status", "duplicate") == "duplicate", answer
    assert _rows(inbox, source.name, key) == [(2, 0)]
