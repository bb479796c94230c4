"""The dashboard with encryption at rest on: events shown and searched as they came; an event
no key given decrypts is a page that says why, not a body read as garbage."""

from __future__ import annotations

import pytest

from hookinbox._storage._payload_codec import KEYS_ENV
from tests.cli.conftest import Shop, customer_created
from tests.dashboard.conftest import Browser
from tests.dashboard.test_pages import event_ids
from tests.processing.conftest import checkout
from tests.storage.test_encryption import K1, K2


def test_events_read_and_searched_encrypted_and_a_missing_key_is_said(
    signed_in: Browser, shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, K1)
    shop.deliver(checkout(1))
    shop.deliver(customer_created(2))
    shown = signed_in.get("/admin/event?source=stripe&id=evt_1")
    assert shown.status_code == 200 and "cs_1" in shown.text
    found = signed_in.get("/admin/events?path=data.object.id&equals=cus_2")
    assert event_ids(found.text) == ["evt_2"]
    monkeypatch.setenv(KEYS_ENV, K2)
    refused = signed_in.get("/admin/event?source=stripe&id=evt_1")
    assert refused.status_code == 500
    assert "encrypted with key &#39;k1&#39;, which HOOKINBOX_ENCRYPTION_KEYS" in refused.text
