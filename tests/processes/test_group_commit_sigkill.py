"""SIGKILL of a server process while batches are in flight: no delivery that was answered 200
is missing afterwards, and everything else is accepted once when the provider retries."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from typing import IO

import httpx
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events
from tests.apps.basic import STRIPE_SECRET
from tests.support.server import ROOT, _wait_ready, free_port, hookinbox_command
from tests.support.signing import stripe_delivery, stripe_event

SENDERS = 8
PER_SENDER = 60
KILL_AFTER = 100  # answers seen before the kill: batches are in flight by then


def start_server(database_url: str, port: int, log: IO[str]) -> subprocess.Popen[str]:
    command = hookinbox_command(
        "serve", "tests.apps.basic:inbox", "--database-url", database_url,
        "--port", str(port), "--no-worker", "--log-level", "warning",
    )  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    _wait_ready(process, f"http://127.0.0.1:{port}/readyz", 200, log)
    return process


def test_no_acknowledged_delivery_is_lost_to_sigkill(db_url: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/webhooks/stripe"
    log = tempfile.TemporaryFile("w+")
    server = start_server(db_url, port, log)
    acknowledged: set[str] = set()
    answered = threading.Semaphore(0)
    lock = threading.Lock()

    def sender(worker: int) -> None:
        with httpx.Client(timeout=10) as client:
            for n in range(PER_SENDER):
                event_id = f"evt_{worker}_{n}"
                headers, body = stripe_delivery(stripe_event(event_id), STRIPE_SECRET)
                try:
                    response = client.post(url, headers=headers, content=body)
                except httpx.TransportError:
                    return  # the server is gone: the provider would retry later
                if response.status_code == 200:
                    with lock:
                        acknowledged.add(event_id)
                answered.release()

    threads = [threading.Thread(target=sender, args=(w,)) for w in range(SENDERS)]
    for thread in threads:
        thread.start()
    for _ in range(KILL_AFTER):
        assert answered.acquire(timeout=60), "the server stopped answering before the kill"
    os.kill(server.pid, signal.SIGKILL)
    server.wait(10)
    for thread in threads:
        thread.join(30)
    store = Store(db_url)
    with store.engine.connect() as connection:
        stored = set(connection.execute(sa.select(events.c.event_id)).scalars())
    store.dispose()
    total = SENDERS * PER_SENDER
    assert KILL_AFTER <= len(acknowledged) < total, "the kill came after every delivery"
    assert acknowledged <= stored, f"answered 200 but lost: {sorted(acknowledged - stored)[:5]}"

    # The provider retries everything it has no 200 for; a restarted server takes each once.
    server = start_server(db_url, port, log)
    try:
        with httpx.Client(timeout=10) as client:
            statuses = []
            for worker in range(SENDERS):
                for n in range(PER_SENDER):
                    event_id = f"evt_{worker}_{n}"
                    if event_id in acknowledged:
                        continue
                    headers, body = stripe_delivery(stripe_event(event_id), STRIPE_SECRET)
                    reply = client.post(url, headers=headers, content=body)
                    assert reply.status_code == 200
                    statuses.append((event_id in stored, reply.json()["status"]))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)
        log.close()
    # Stored but never acknowledged (the kill cut the answer): a duplicate now; the rest: new.
    assert all(
        status == ("duplicate" if was_stored else "accepted") for was_stored, status in statuses
    )
    store = Store(db_url)
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(sa.func.count()).select_from(events)).scalar()
    store.dispose()
    assert rows == total
