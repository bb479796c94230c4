"""A UTF-8 byte order mark before an authentic body is refused by every source (issue 19, 7).

Python's `json.loads(bytes)` skips a BOM, so hookinbox used to acknowledge such a body, while
a handler or library that decodes the body as text first refuses it (stripe-node's
`JSON.parse`, the `standardwebhooks` package, `json.loads(body.decode())`): an event stored
that cannot be read. Every source now answers 400, after the signature verified, and stores
nothing; the same body without the mark is accepted.

What it proves: for every signed source class, a body signed with the mark in front is refused
with `PayloadError` (400) and the same body without it verifies; over HTTP, a real `hookinbox
serve` answers 400 to such a Stripe delivery and stores nothing; the `standardwebhooks`
package itself refuses that body (the behaviour this matches).
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import standardwebhooks

from hookinbox._errors import PayloadError
from hookinbox._storage import Store, events
from hookinbox.sources._base import UTF8_BOM, normalize_headers
from tests.apps import basic
from tests.reliability._report import Trial, record
from tests.reliability._source_kinds import KINDS, NOW
from tests.support.server import running_server
from tests.support.signing import stripe_delivery


def test_every_source_refuses_a_byte_order_mark_after_verifying() -> None:
    accepted = []
    for kind in KINDS:
        source = kind.build([kind.secrets[0]])
        marked = UTF8_BOM + kind.body
        headers = normalize_headers(kind.assemble([kind.sign(kind.secrets[0], marked, NOW)], NOW))
        with pytest.raises(PayloadError, match="byte order mark"):
            source.authenticate(headers, marked, now=NOW)
        plain = normalize_headers(kind.headers([kind.secrets[0]]))
        accepted.append(source.authenticate(plain, kind.body, now=NOW))
    record(
        Trial(
            fault="UTF-8 byte order mark before an authentic body (every source class)",
            backend="-",
            deliveries=2 * len(KINDS),
            detail=f"{len(KINDS)} classes: signed with the mark, 400 (PayloadError) after "
            "verifying; the same body without it accepted",
        )
    )


def test_the_standardwebhooks_package_refuses_it_too() -> None:
    secret = base64.b64encode(b"a standard webhooks key").decode()
    body = UTF8_BOM + json.dumps({"type": "invoice.paid"}).encode()
    webhook = standardwebhooks.Webhook(secret)
    signature = webhook.sign("msg_bom", datetime.now(UTC), body.decode())
    headers = {
        "webhook-id": "msg_bom",
        "webhook-timestamp": str(int(time.time())),
        "webhook-signature": signature,
    }
    with pytest.raises(ValueError, match="BOM"):
        webhook.verify(body, headers)


def test_a_marked_stripe_body_is_refused_over_http(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'inbox.db'}"
    event = {"id": "evt_bom", "type": "invoice.paid", "created": int(time.time())}
    with running_server("tests.apps.basic:inbox", database_url, "--no-worker") as base_url:
        headers, body = stripe_delivery(UTF8_BOM + json.dumps(event).encode(), basic.STRIPE_SECRET)
        marked = httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body)
        headers, body = stripe_delivery(event, basic.STRIPE_SECRET)
        plain = httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body)
    store = Store(database_url)
    with store.engine.connect() as connection:
        stored = connection.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
    store.dispose()
    assert marked.status_code == 400, marked.text
    assert plain.status_code == 200, plain.text
    assert stored == 1  # the plain one
    record(
        Trial(
            fault="UTF-8 byte order mark before a signed Stripe body, over HTTP",
            backend="sqlite",
            deliveries=2,
            detail="with the mark: 400, nothing stored; the same event without it: 200",
        )
    )
