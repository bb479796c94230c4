"""A UTF-8 byte order mark before an authentic body is refused by every source (issue 19, 7).

Python's `json.loads(bytes)` skips a BOM, so hookinbox used to acknowledge such a body, while
a handler or library that decodes the body as text first refuses it (stripe-node's
`JSON.parse`, the `standardwebhooks` package, `json.loads(body.decode())`): an event stored
that cannot be read. Every source now answers 400, after the signature verified, and stores
nothing; the same body without the mark is accepted. RFC 8259 (8.1) lets a parser either
refuse or ignore the mark; hookinbox refuses it, whatever the SDKs of the day do.

What it proves: for every signed source class, a body signed with the mark in front is refused
with `PayloadError` (400) and the same body without it verifies; over HTTP, a real `hookinbox
serve` answers 400 to such a Stripe delivery and stores nothing; the `standardwebhooks` source
refuses a body that the pinned `standardwebhooks` package (1.3.0) accepts, and what each of
that package's releases does is recorded.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import standardwebhooks

from hookinbox._errors import PayloadError
from hookinbox._storage import Store
from hookinbox._storage._schema import events
from hookinbox.sources import StandardWebhooks
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


# What the `standardwebhooks` package does with a marked body, by release: before 1.3.0 its
# `verify` decoded the body as UTF-8 text and refused the mark; 1.3.0 parses the verified bytes
# with `json.loads(bytes)`, which detects the encoding and skips the mark. hookinbox's rule does
# not follow it (docs/reliability.md): a table, so that a release that changes again fails here
# under `make test-latest` and is looked at on purpose.
STANDARDWEBHOOKS_ACCEPTS_A_MARK = {"1.0.0": False, "1.0.1": False, "1.1.0": False, "1.3.0": True}


def test_hookinbox_refuses_what_the_pinned_standardwebhooks_accepts() -> None:
    secret = base64.b64encode(b"a standard webhooks key").decode()
    body = UTF8_BOM + json.dumps({"type": "invoice.paid"}).encode()
    webhook = standardwebhooks.Webhook(secret)
    signature = webhook.sign("msg_bom", datetime.now(UTC), body.decode())
    headers = {
        "webhook-id": "msg_bom",
        "webhook-timestamp": str(int(time.time())),
        "webhook-signature": signature,
    }
    source = StandardWebhooks(secret=f"whsec_{secret}")
    with pytest.raises(PayloadError, match="byte order mark"):
        source.authenticate(normalize_headers(headers), body, now=time.time())

    installed = version("standardwebhooks")
    assert installed in STANDARDWEBHOOKS_ACCEPTS_A_MARK, (
        f"standardwebhooks {installed} is not in the table: see what it does with a marked body "
        "and record it (docs/reliability.md, 'byte order mark')"
    )
    try:
        webhook.verify(body, headers)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted is STANDARDWEBHOOKS_ACCEPTS_A_MARK[installed], installed


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
