"""`hookinbox serve` restarts its worker process when the worker dies on its own."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from hookinbox import Status
from hookinbox._storage import Store
from tests.apps.orders import STRIPE_SECRET, create_tables
from tests.support.server import ROOT, free_port, hookinbox_command
from tests.support.signing import stripe_delivery, stripe_event


def children(pid: int) -> list[int]:
    """Child processes of `pid`, whichever of its threads started them (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue  # the thread ended while we looked
    return sorted(found)


def wait_for(predicate: object, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_worker_is_restarted_and_events_still_get_processed(db_url: str) -> None:
    create_tables(db_url)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = hookinbox_command(
        "serve", "tests.apps.orders:inbox", "--database-url", db_url, "--port", str(port),
        "--log-level", "warning",
    )  # fmt: skip
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        store = Store(db_url)
        try:
            wait_for(lambda: _ready(base_url), "the server to be ready")
            wait_for(lambda: len(children(server.pid)) == 1, "the worker process")
            [first_worker] = children(server.pid)
            os.kill(first_worker, signal.SIGKILL)
            wait_for(lambda: children(server.pid) not in ([], [first_worker]), "a restarted worker")
            headers, body = stripe_delivery(
                stripe_event("evt_after", payment_intent="pi_a"), STRIPE_SECRET
            )
            assert (
                httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body).status_code
                == 200
            )

            def processed() -> bool:
                event = store.get_event("stripe", "evt_after")
                return event is not None and event.status is Status.PROCESSED

            wait_for(processed, "the event to be processed by the restarted worker")
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0
            store.dispose()
        log.seek(0)
        assert "worker exited with code -9; restarting" in log.read()


def _ready(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False
