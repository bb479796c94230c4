"""Who may use the dashboard: signed-in operators, from the dashboard's own pages only."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from hookinbox import Status
from hookinbox._errors import ConfigurationError
from hookinbox.dashboard import dashboard_app
from tests.cli.conftest import Shop
from tests.dashboard.conftest import TOKEN, Browser, csrf_of

PAGES = [
    "/admin/",
    "/admin/events",
    "/admin/event?source=stripe&id=evt_1",
    "/admin/replay",
    "/admin/expunge?source=stripe&until=1d",
]


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        dashboard_app(None, "hunter2")  # type: ignore[arg-type]


def test_pages_send_visitors_who_are_not_signed_in_to_the_login_form(admin: Browser) -> None:
    for path in PAGES:
        response = admin.get(path)
        assert (response.status_code, response.headers["location"]) == (303, "/admin/login")
    form = admin.get("/admin/login")
    assert form.status_code == 200
    assert '<label for="token">Admin token</label>' in form.text
    cookie = form.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin/" in cookie


def test_a_replay_without_signing_in_is_refused(admin: Browser, shop: Shop) -> None:
    shop.fail(1)
    csrf = csrf_of(admin.get("/admin/login").text)  # a valid token of a signed-out session

    refused = admin.post(
        "/admin/event/replay", data={"csrf": csrf, "source": "stripe", "id": "evt_1"}
    )

    assert refused.status_code == 403
    assert "not signed in" in refused.text
    assert shop.event("evt_1").status is Status.FAILED


def test_a_wrong_token_signs_nobody_in(admin: Browser) -> None:
    response = admin.sign_in("dashboard-test-token-012345678X")
    assert response.status_code == 401
    assert "Wrong token." in response.text
    assert admin.get("/admin/").status_code == 303


def test_a_forged_or_tampered_cookie_is_a_signed_out_visitor(admin: Browser) -> None:
    assert admin.sign_in().status_code == 303
    signed = admin.cookies["hookinbox_admin"]

    def visitor(app: ASGIApp, cookie: str) -> Browser:
        browser = Browser(app)
        browser.cookies.set("hookinbox_admin", cookie, domain="testserver.local", path="/admin/")
        return browser

    assert visitor(admin.app, signed).get("/admin/").status_code == 200
    assert visitor(admin.app, signed[:-2] + "xx").get("/admin/").status_code == 303
    # A cookie signed for another token (the token was changed) is no session either.
    other = Starlette(routes=[Mount("/admin", dashboard_app(None, "another-token-0123456789"))])  # type: ignore[arg-type]
    assert visitor(other, signed).get("/admin/").status_code == 303


def test_state_changes_without_the_csrf_token_are_refused(signed_in: Browser, shop: Shop) -> None:
    shop.fail(1)
    form = {"source": "stripe", "id": "evt_1"}

    missing = signed_in.post("/admin/event/replay", data=form)
    wrong = signed_in.post("/admin/event/replay", data={**form, "csrf": "guessed"})
    bulk = signed_in.post("/admin/replay", data={"status": "failed"})
    erase = signed_in.post(
        "/admin/expunge", data={"source": "stripe", "until": "1s", "reason": "r"}
    )
    login = Browser(signed_in.app).post("/admin/login", data={"token": TOKEN})

    assert [r.status_code for r in (missing, wrong, bulk, erase, login)] == [403] * 5
    assert "CSRF" in missing.text
    assert shop.event("evt_1").status is Status.FAILED and shop.event("evt_1").body


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "https://evil.example"},
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},  # a sibling subdomain is another site to us
    ],
)
def test_cross_site_requests_are_refused_even_with_the_token(
    signed_in: Browser, shop: Shop, headers: dict[str, str]
) -> None:
    shop.fail(1)
    csrf = signed_in.csrf("/admin/event/replay?source=stripe&id=evt_1")

    refused = signed_in.post(
        "/admin/event/replay",
        data={"csrf": csrf, "source": "stripe", "id": "evt_1"},
        headers=headers,
    )

    assert refused.status_code == 403
    assert "cross-site request refused" in refused.text
    assert shop.event("evt_1").status is Status.FAILED
    same = {"origin": "http://testserver", "sec-fetch-site": "same-origin"}
    accepted = signed_in.post(
        "/admin/event/replay", data={"csrf": csrf, "source": "stripe", "id": "evt_1"}, headers=same
    )
    assert accepted.status_code == 303
    assert shop.event("evt_1").status is Status.PENDING


def test_signing_out_ends_the_session(signed_in: Browser) -> None:
    csrf = signed_in.csrf("/admin/")
    assert signed_in.post("/admin/logout", data={"csrf": csrf}).status_code == 303
    assert signed_in.get("/admin/").status_code == 303


def test_pages_cannot_be_framed_or_cached(signed_in: Browser) -> None:
    page = signed_in.get("/admin/")
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"


def test_the_dashboard_is_not_under_the_webhook_prefix(signed_in: Browser) -> None:
    assert signed_in.get("/webhooks/admin/").status_code == 404
    assert signed_in.get("/webhooks/admin/events").status_code == 404
    # `/webhooks/admin` is a delivery to a source named "admin": POST only, unknown source.
    assert signed_in.get("/webhooks/admin").status_code == 405
    assert signed_in.post("/webhooks/admin", content=b"{}").status_code == 404


def test_a_form_that_is_not_url_encoded_is_refused(signed_in: Browser, shop: Shop) -> None:
    shop.fail(1)
    response = signed_in.post(
        "/admin/event/replay", json={"source": "stripe", "id": "evt_1", "csrf": "x"}
    )
    assert response.status_code == 415
    assert "application/x-www-form-urlencoded" in response.text
    assert shop.event("evt_1").status is Status.FAILED
