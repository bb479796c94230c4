"""`hookinbox serve` runs a worker process beside the HTTP server, unless --no-worker."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

from hookinbox._storage import Store
from tests.apps import orders
from tests.support.server import free_port, hookinbox_command, running_server, serving_process
from tests.support.signing import stripe_delivery
from tests.support.workers import (
    APP,
    WorkerProcess,
    checkout_event,
    event_row,
    opened_store,
    read_all,
    wait_for,
)


def _post_checkout(base_url: str, number: int) -> None:
    headers, body = stripe_delivery(checkout_event(number), orders.STRIPE_SECRET)
    response = httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "accepted"


def _order_for(store: Store, number: int) -> list[sa.Row[object]]:
    table = orders.orders
    return read_all(store, sa.select(table.c.event_id).where(table.c.payment_id == f"pi_{number}"))


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie waiting for its parent to reap it."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_serve_processes_events_with_its_own_worker_process(db_url: str) -> None:
    orders.create_tables(db_url)
    with opened_store(db_url) as store:
        with running_server(APP, db_url) as base_url:
            _post_checkout(base_url, 1)
            took = wait_for(
                lambda: (
                    event_row(store, "evt_1").status == "processed" and bool(_order_for(store, 1))
                ),
                timeout=15,
                what="serve's worker to process evt_1",
                describe=lambda: str(dict(event_row(store, "evt_1"))),
            )
            [worker_pid] = [
                r.worker_pid for r in read_all(store, sa.select(orders.applied_checkouts))
            ]
            assert worker_pid != os.getpid()
            assert _alive(worker_pid), "the worker should run as long as the server"
        assert event_row(store, "evt_1").outcome == "handled"
        assert _order_for(store, 1)[0].event_id == "evt_1"
        # The server stopped its worker on the way out: no orphan keeps processing.
        wait_for(
            lambda: not _alive(worker_pid),
            timeout=5,
            what=f"serve's worker (pid {worker_pid}) to stop with the server",
        )
    print(f"\nprocessed {took:.2f} s after the 200")


def test_serve_no_worker_only_receives_and_a_separate_worker_processes(db_url: str) -> None:
    orders.create_tables(db_url)
    with opened_store(db_url) as store:
        with running_server(APP, db_url, "--no-worker") as base_url:
            _post_checkout(base_url, 1)
            time.sleep(1.5)  # far longer than serve's worker takes (see the test above)
            event = event_row(store, "evt_1")
            assert (event.status, event.attempts) == ("pending", 0), dict(event)
            assert not _order_for(store, 1)

            worker = WorkerProcess(db_url)
            try:
                wait_for(
                    lambda: event_row(store, "evt_1").status == "processed",
                    timeout=15,
                    what="the separate worker to process evt_1",
                    describe=worker.describe,
                )
                worker.signal(signal.SIGTERM)
                assert worker.wait(timeout=15) == 0, worker.describe()
            finally:
                worker.close()
        assert _order_for(store, 1)[0].event_id == "evt_1"
        [applied] = read_all(store, sa.select(orders.applied_checkouts))
        assert applied.worker_pid == worker.pid


def test_serve_with_granian_receives_processes_probes_and_stops_cleanly(db_url: str) -> None:
    """`--server granian`: the same app, probes and worker under another server; SIGTERM
    stops it with exit 0 (the server, then its worker)."""
    orders.create_tables(db_url)
    port = free_port()
    command = hookinbox_command(
        "serve", APP, "--database-url", db_url, "--port", str(port), "--server", "granian",
        "--log-level", "warning",
    )  # fmt: skip
    with opened_store(db_url) as store, serving_process(command, port) as (process, base_url):
        _post_checkout(base_url, 7)
        assert httpx.get(f"{base_url}/healthz").json() == {"status": "ok"}
        assert "hookinbox_deliveries_total" in httpx.get(f"{base_url}/metrics").text
        wait_for(
            lambda: event_row(store, "evt_7").status == "processed",
            timeout=15,
            what="serve's worker to process evt_7 under granian",
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
