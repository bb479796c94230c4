"""The dashboard's Sources page: pause a source with a reason (a CSRF-checked POST, audited as
"dashboard"), its events are stored and parked, not processed; resume, and each is processed
once. A form without the CSRF token, or for an unknown source, changes nothing."""

from __future__ import annotations

from hookinbox import Status
from tests.cli.conftest import Shop
from tests.dashboard.conftest import Browser, csrf_of
from tests.processing.conftest import checkout


def test_pause_then_resume_from_the_sources_page(signed_in: Browser, shop: Shop) -> None:
    page = signed_in.get("/admin/sources").text
    assert "<code>stripe</code>" in page and "Pause stripe" in page
    paused = signed_in.post(
        "/admin/sources/pause",
        data={"csrf": csrf_of(page), "source": "stripe", "reason": "warehouse down"},
    )
    assert paused.status_code == 303
    assert paused.headers["location"] == "/admin/sources?source=stripe&done=paused"
    shown = signed_in.get(paused.headers["location"]).text
    assert "stripe paused." in shown and "by dashboard: warehouse down" in shown
    assert "Resume stripe" in shown

    shop.deliver(checkout(1))
    assert shop.process() == 0
    assert shop.event("evt_1").status is Status.PAUSED
    listed = signed_in.get("/admin/events?status=paused").text
    assert "evt_1" in listed

    resumed = signed_in.post(
        "/admin/sources/resume", data={"csrf": csrf_of(shown), "source": "stripe"}
    )
    assert resumed.status_code == 303
    shop.catch_up()
    assert shop.process() == 1
    assert shop.event("evt_1").status is Status.PROCESSED
    assert shop.audit_trail("action", "actor", "reason") == [
        ("pause", "dashboard", "warehouse down"),
        ("resume", "dashboard", None),
    ]


def test_no_csrf_or_an_unknown_source_changes_nothing(signed_in: Browser, shop: Shop) -> None:
    page = signed_in.get("/admin/sources").text
    forged = signed_in.post("/admin/sources/pause", data={"source": "stripe"})
    unknown = signed_in.post(
        "/admin/sources/pause", data={"csrf": csrf_of(page), "source": "paypal"}
    )
    assert forged.status_code == 403
    assert unknown.status_code == 404 and "no source is named" in unknown.text
    assert shop.inbox.paused_sources() == []
