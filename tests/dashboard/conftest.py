"""Dashboard tests: the orders shop of the CLI tests (real deliveries, real processing, a
manual clock), with the dashboard in front of it, driven over HTTP like a browser would."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import ASGIApp

from hookinbox import Event, HandlerContext, Message
from hookinbox._operations import Thresholds
from hookinbox.dashboard import dashboard_app
from hookinbox.http._app import create_app
from tests.cli.conftest import Shop, customer_created, plain_environment, shop


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite only: this layer asks storage's gateways and never the database itself, so it
    behaves alike on both (tests/storage runs every query on each; docs/development.md). A
    test about PostgreSQL here says so with `@pytest.mark.parametrize("backend", [...])`."""
    return str(request.param)


__all__ = ["customer_created", "plain_environment", "shop"]  # fixtures, re-exported

TOKEN = "dashboard-test-token-0123456789"
BASE = "http://testserver"


class Browser:
    """An HTTP client that keeps cookies across calls, over the ASGI app in this process."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.cookies = httpx.Cookies()

    async def _send(self, method: str, url: str, kwargs: dict[str, Any]) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(
            transport=transport, base_url=BASE, cookies=self.cookies
        ) as client:
            response = await client.request(method, url, **kwargs)
            self.cookies = client.cookies
            return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return anyio.run(self._send, "GET", url, kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return anyio.run(self._send, "POST", url, kwargs)

    def csrf(self, path: str) -> str:
        """The CSRF token of the form on the page at `path`."""
        page = self.get(path)
        assert page.status_code == 200, page.text
        return csrf_of(page.text)

    def sign_in(self, token: str = TOKEN) -> httpx.Response:
        return self.post("/admin/login", data={"token": token, "csrf": self.csrf("/admin/login")})


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


def with_outbox(shop: Shop) -> None:
    """`customer.created` events send one outbox message to `crm`, delivered in-process."""

    @shop.inbox.handler("stripe", "customer.created")
    def on_customer(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("crm", {"customer": event.payload["data"]["object"]["id"]})

    @shop.inbox.destination("crm")
    def crm(message: Message) -> None:
        pass  # delivered


@pytest.fixture
def admin(shop: Shop) -> Iterator[Browser]:
    """The webhook app with the dashboard at /admin, as `hookinbox serve` builds it."""
    with_outbox(shop)
    dashboard = dashboard_app(
        shop.inbox.store,
        TOKEN,
        sources=sorted(shop.inbox.sources),
        thresholds=Thresholds(min_workers=0),  # no worker runs here; see test_pages' own check
    )
    yield Browser(create_app(shop.inbox._receiver, admin=dashboard))


@pytest.fixture
def signed_in(admin: Browser) -> Browser:
    response = admin.sign_in()
    assert response.status_code == 303, response.text
    return admin
