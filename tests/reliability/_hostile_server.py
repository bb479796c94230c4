"""A real `hookinbox serve` of the hostile-input app on loopback, and what its database holds.

Every hostile-input test talks to this server over real sockets, then reads the events table to
check that only validly signed deliveries were stored. Signatures are computed here over raw
bytes (Stripe's and GitHub's documented HMACs), since a hostile body need not be UTF-8 and the
providers' own signers take text; `test_fuzz_http` checks them against tests/support/signing.py.
"""

from __future__ import annotations

import hashlib
import hmac
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events
from hookinbox.sources import Stripe
from hookinbox.testing import sign
from tests.apps.basic import GITHUB_SECRET, STRIPE_SECRET
from tests.support.server import free_port, hookinbox_command, serving_process

Header = tuple[bytes, bytes]
APP = "tests.apps.basic:inbox"
"""Every built-in source with a secret the tests sign with, and no handlers."""


@dataclass(frozen=True, slots=True)
class Server:
    process: subprocess.Popen[str]
    port: int
    base_url: str

    def alive(self) -> bool:
        return self.process.poll() is None


@contextmanager
def hostile_server(database_url: str, *, body_timeout: float = 10.0) -> Iterator[Server]:
    """`hookinbox serve` (one process, no worker: only ingest is under test) with the given
    body timeout; stopped on exit."""
    port = free_port()
    command = hookinbox_command(
        "serve", APP,
        "--database-url", database_url,
        "--port", str(port),
        "--no-worker",
        "--body-timeout", f"{body_timeout:g}",
        "--log-level", "warning",
    )  # fmt: skip
    with serving_process(command, port) as (process, base_url):
        yield Server(process, port, base_url)


def migrated_sqlite_url(directory: Path) -> str:
    """A migrated SQLite database in `directory`, for a module's shared server."""
    url = f"sqlite:///{directory / 'inbox.db'}"
    store = Store(url)
    store.migrate()
    store.dispose()
    return url


def stored_keys(database_url: str) -> list[tuple[str, str]]:
    """(source, event id) of every stored event, one entry per row."""
    store = Store(database_url)
    try:
        with store.engine.connect() as connection:
            rows = connection.execute(sa.select(events.c.source, events.c.event_id))
            return [(source, event_id) for source, event_id in rows]
    finally:
        store.dispose()


def stripe_signature(body: bytes, secret: str = STRIPE_SECRET) -> Header:
    """`Stripe-Signature` over the raw bytes (any bytes: the test kit signs them as sent), now."""
    headers, _ = sign(Stripe(secret=secret), body)
    return b"Stripe-Signature", headers["Stripe-Signature"].encode()


def github_headers(body: bytes, delivery_id: bytes, event: bytes = b"push") -> list[Header]:
    """GitHub's headers, signed over the raw bytes; its event id comes from a header."""
    digest = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return [
        (b"X-Hub-Signature-256", b"sha256=" + digest.encode()),
        (b"X-GitHub-Delivery", delivery_id),
        (b"X-GitHub-Event", event),
    ]
