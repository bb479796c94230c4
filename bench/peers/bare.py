"""The bare limit: the least a correct receiver must do, with nothing else around it.

A raw ASGI callable on the same server (uvicorn) and the same drivers as hookinbox: read the
body, check the Stripe signature, one `INSERT ... ON CONFLICT DO NOTHING` committed, answer.
No framework, no logging, no metrics, no delivery log, no outbox, no migrations.
PostgreSQL through psycopg's async pool; SQLite through sqlite3 in a thread, WAL and
synchronous=FULL like hookinbox's default.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import Any

import anyio.to_thread

from bench.peers._verify import verified

URL = os.environ["BENCH_DATABASE_URL"]
DDL = (
    "CREATE TABLE IF NOT EXISTS bare_events (source TEXT NOT NULL, event_id TEXT NOT NULL, "
    "body BYTEA NOT NULL, PRIMARY KEY (source, event_id))"
)
INSERT = (
    "INSERT INTO bare_events (source, event_id, body) VALUES ({p}, {p}, {p}) ON CONFLICT DO NOTHING"
)

_local = threading.local()


def _sqlite() -> sqlite3.Connection:
    connection: sqlite3.Connection | None = getattr(_local, "connection", None)
    if connection is None:
        connection = sqlite3.connect(
            URL.removeprefix("sqlite:///"), timeout=5, isolation_level=None
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(DDL.replace("BYTEA", "BLOB"))
        _local.connection = connection
    return connection


def _insert_sqlite(event_id: str, body: bytes) -> None:
    connection = _sqlite()
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(INSERT.format(p="?"), ("stripe", event_id, body))
    connection.execute("COMMIT")


_pool: Any = None


async def _insert_postgres(event_id: str, body: bytes) -> None:
    global _pool
    if _pool is None:
        from psycopg_pool import AsyncConnectionPool

        _pool = AsyncConnectionPool(URL, min_size=10, max_size=10, open=False)
        await _pool.open()
        async with _pool.connection() as connection:
            await connection.execute(DDL)
    async with _pool.connection() as connection:
        await connection.execute(INSERT.format(p="%s"), ("stripe", event_id, body))


async def _reply(send: Any, status: int, document: dict[str, str]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] != "POST":
        await _reply(send, 200, {"status": "ok"})  # the readiness probe
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    header = dict(scope["headers"]).get(b"stripe-signature", b"").decode()
    if not verified(header, body):
        await _reply(send, 401, {"status": "rejected"})
        return
    event_id = json.loads(body)["id"]
    if URL.startswith("sqlite"):
        await anyio.to_thread.run_sync(_insert_sqlite, event_id, body)
    else:
        await _insert_postgres(event_id, body)
    await _reply(send, 200, {"status": "accepted", "event_id": event_id})
