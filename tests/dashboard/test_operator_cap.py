"""The dashboard's database work is capped: operators can never take the whole pool.

Ten dashboard requests at once are made to wait inside the database (a test connection holds
an ACCESS EXCLUSIVE lock on the events table), over a pool of 3 connections shared with the
rest of the inbox, as `serve` shares it. At most 2 of them hold a connection
(`OPERATOR_CONCURRENCY`); the third stays free, so a ping (what `/readyz` and ingest need)
gets one at once. Without the cap, the waiting pages took all 3, and the ping waited for the
pool's timeout and failed.
"""

from __future__ import annotations

import threading
import time

import anyio
import httpx
import pytest
import sqlalchemy as sa

from hookinbox._storage import Store, StoreOptions
from hookinbox.dashboard import dashboard_app
from hookinbox.dashboard._context import OPERATOR_CONCURRENCY
from tests.dashboard.conftest import BASE, TOKEN, csrf_of
from tests.support.workers import wait_for

PAGES = 10


@pytest.mark.parametrize("backend", ["postgres"])
def test_waiting_dashboard_pages_leave_the_pool_to_ingest(db_url: str) -> None:
    store = Store(db_url, StoreOptions(pool_size=OPERATOR_CONCURRENCY + 1, max_overflow=0))
    store.ensure_schema()
    app = dashboard_app(store, TOKEN)
    answers: list[int] = []

    async def browse() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=60) as client:
            login = await client.get("/login")
            form = {"token": TOKEN, "csrf": csrf_of(login.text)}
            assert (await client.post("/login", data=form)).status_code == 303

            async def one_page() -> None:
                answers.append((await client.get("/events")).status_code)

            async with anyio.create_task_group() as group:
                for _ in range(PAGES):
                    group.start_soon(one_page)

    locker = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
    browser = threading.Thread(target=anyio.run, args=(browse,))
    try:
        with locker.connect() as connection:
            connection.execute(sa.text("LOCK TABLE hookinbox_events IN ACCESS EXCLUSIVE MODE"))
            browser.start()
            wait_for(
                lambda: store.engine.pool.checkedout() >= OPERATOR_CONCURRENCY,  # type: ignore[attr-defined]
                timeout=30,
                what="dashboard pages waiting on the lock",
            )
            time.sleep(0.5)  # room for more pages to take connections, were they not capped
            held = store.engine.pool.checkedout()  # type: ignore[attr-defined]
            store.ping()  # StoreUnavailable if the pages had taken every connection
            connection.rollback()  # the pages go on
        browser.join(timeout=60)
    finally:
        locker.dispose()
        store.dispose()
    assert held == OPERATOR_CONCURRENCY
    assert answers == [200] * PAGES
