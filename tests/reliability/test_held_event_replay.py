"""Replays of an event a frozen worker holds are refused at once, and never starve ingest.

What it proves, with a real `hookinbox worker` stopped (SIGSTOP) inside the handler of
`evt_held`, so that its processing transaction holds the event (PostgreSQL: the row lock;
SQLite: the write lock) for as long as the test likes:
- `hookinbox replay stripe evt_held` (with and without `--force`) exits 1 at once, saying a
  worker holds the event; the event stays `processing`. Before, on PostgreSQL the replay
  waited on the row lock for as long as the worker was stopped (forever), and on SQLite for
  the busy timeout, then said "database unavailable";
- on PostgreSQL, 50 dashboard replay POSTs of that event at once, served by `hookinbox serve`
  with the dashboard, are all answered 409, while a new webhook delivery sent meanwhile is
  answered 200 and `/readyz` 200. Before, each replay held a pooled connection while it
  waited, the pool ran dry and the delivery was answered 503.
"""

from __future__ import annotations

import re
import secrets
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from hookinbox.dashboard._token import ADMIN_TOKEN_ENV
from tests.apps import held
from tests.reliability._report import Trial, record
from tests.support.server import free_port, hookinbox_command, run_cli, serving
from tests.support.signing import stripe_delivery, stripe_event
from tests.support.workers import WorkerProcess, opened_store, status_counts, wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = "tests.apps.held:inbox"
HELD = "evt_held"
REPLAYS = 50
LIMITS = httpx.Limits(max_connections=REPLAYS + 10)


def deliver_held_event(database_url: str) -> None:
    assert held.deliver(database_url, HELD).status_code == 200


@contextmanager
def frozen_worker(database_url: str, directory: Path) -> Iterator[WorkerProcess]:
    """A worker stopped inside `evt_held`'s handler (its transaction open); killed on exit."""
    deliver_held_event(database_url)
    marker = directory / "inside-the-handler"
    worker = WorkerProcess(database_url, env={held.MARKER_ENV: str(marker)}, app=APP)
    try:
        wait_for(marker.exists, timeout=60, what="the handler to start", describe=worker.describe)
        worker.signal(signal.SIGSTOP)
        yield worker
    finally:
        worker.close()  # SIGKILL ends a stopped process too; its transaction rolls back


def test_a_cli_replay_of_a_held_event_is_refused_at_once(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    with frozen_worker(db_url, tmp_path), opened_store(db_url, migrate=False) as store:
        # Bounded, so that a replay waiting on the lock fails the test instead of hanging it.
        started = time.monotonic()
        plain = run_cli("replay", APP, "stripe", HELD, "--database-url", db_url, timeout=30)
        forced = run_cli(
            "replay", APP, "stripe", HELD, "--force", "--database-url", db_url, timeout=30
        )
        took = (time.monotonic() - started) / 2  # noted, not asserted: the outcome is
        after = status_counts(store)
    for result in (plain, forced):
        assert result.returncode == 1, result
        assert result.stderr.strip().splitlines() == [
            f"error: stripe {HELD} is held by a worker right now (being processed): replay it "
            "once it is done"
        ]
    assert after == {"processing": 1}
    record(
        Trial(
            fault="replay (CLI) of an event a frozen worker holds (SIGSTOP in the handler)",
            backend=backend,
            deliveries=3,
            detail=f"replay and replay --force: exit 1, 'held by a worker', {took:.1f} s each "
            "(the command's whole run); the event stayed processing",
        )
    )


@contextmanager
def serve_with_dashboard(database_url: str, token: str) -> Iterator[str]:
    port = free_port()
    command = hookinbox_command(
        "serve", APP, "--database-url", database_url, "--port", str(port),
        "--log-level", "warning", "--no-worker",
    )  # fmt: skip
    with serving(command, port, env={ADMIN_TOKEN_ENV: token}) as base_url:
        yield base_url


def signed_in_csrf(client: httpx.Client, token: str) -> str:
    """Sign in as a browser would; the CSRF token of the replay form of `evt_held`."""
    login = client.get("/admin/login")
    client.post("/admin/login", data={"token": token, "csrf": csrf_of(login.text)})
    page = client.get("/admin/event/replay", params={"source": "stripe", "id": HELD})
    assert page.status_code == 200, page.text
    return csrf_of(page.text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


@pytest.mark.parametrize("backend", ["postgres"])
def test_fifty_dashboard_replays_of_a_held_event_leave_ingest_alone(
    db_url: str, tmp_path: Path
) -> None:
    token = secrets.token_urlsafe(32)
    headers, body = stripe_delivery(stripe_event("evt_new", "customer.created"), held.STRIPE_SECRET)
    with (
        frozen_worker(db_url, tmp_path),
        serve_with_dashboard(db_url, token) as base_url,
        httpx.Client(base_url=base_url, timeout=30, limits=LIMITS) as client,
    ):
        form = {"csrf": signed_in_csrf(client, token), "source": "stripe", "id": HELD, "force": "1"}
        with ThreadPoolExecutor(max_workers=REPLAYS) as pool:
            started = time.monotonic()
            replays = [
                pool.submit(client.post, "/admin/event/replay", data=form) for _ in range(REPLAYS)
            ]
            delivery = client.post("/webhooks/stripe", content=body, headers=headers)
            ready = client.get("/readyz")
            answers = Counter(future.result().status_code for future in replays)
            took = time.monotonic() - started  # noted, not asserted
        with opened_store(db_url, migrate=False) as store:
            after = status_counts(store)
    assert (delivery.status_code, delivery.json()["status"]) == (200, "accepted")
    assert ready.status_code == 200, ready.text
    assert answers == {409: REPLAYS}
    assert after.get("processing") == 1, after
    record(
        Trial(
            fault=f"{REPLAYS} dashboard replays at once of an event a frozen worker holds, "
            "one new delivery meanwhile",
            backend="postgres",
            deliveries=REPLAYS + 1,
            detail=f"replays: {dict(answers)}, all answered within {took:.1f} s; the delivery: "
            f"{delivery.status_code}; /readyz: {ready.status_code}; the held event stayed "
            "processing",
        )
    )
