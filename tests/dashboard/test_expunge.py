"""The event page's erase button: a POST with the CSRF token erases the event's body and
headers (audited as by "dashboard", with the reason), the page then says "payload erased";
without the token nothing is erased; an unknown event is a 404."""

from __future__ import annotations

from hookinbox import Status
from tests.cli.conftest import Shop
from tests.dashboard.conftest import Browser, csrf_of
from tests.processing.conftest import checkout


def test_erase_one_event_from_its_page(signed_in: Browser, shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    page = signed_in.get("/admin/event?source=stripe&id=evt_1").text
    assert 'action="/admin/event/expunge"' in page and "payload erased" not in page.lower()
    form = {"csrf": csrf_of(page), "source": "stripe", "id": "evt_1", "reason": "GDPR 42"}

    forged = signed_in.post("/admin/event/expunge", data={**form, "csrf": "guessed"})
    assert forged.status_code == 403 and shop.event("evt_1").body != b""
    missing = signed_in.post("/admin/event/expunge", data={**form, "id": "evt_none"})
    assert missing.status_code == 404

    done = signed_in.post("/admin/event/expunge", data=form)

    assert done.status_code == 303
    assert done.headers["location"] == "/admin/event?source=stripe&id=evt_1&done=erased"
    after = signed_in.get(done.headers["location"]).text
    assert "Payload erased" in after and 'action="/admin/event/expunge"' not in after
    event = shop.event("evt_1")
    assert (event.status, event.body, event.headers) == (Status.PROCESSED, b"", {})
    assert shop.audit_trail("action", "actor", "reason") == [("expunge", "dashboard", "GDPR 42")]
