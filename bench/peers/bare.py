"""The bare limit: the least a correct receiver must do, with nothing else around it.

A raw ASGI callable on the same server (uvicorn) and the same drivers as hookinbox: read the
body, check the Stripe signature, one `INSERT ... ON CONFLICT DO NOTHING` committed, answer.
No framework, no logging, no metrics, no delivery log, no outbox, no migrations.
PostgreSQL through psycopg's async pool; SQLite through sqlite3 in a thread, WAL and
synchronous=FULL like hookinbox's default; MariaDB through PyMySQL (hookinbox's driver) in a
thread, one autocommitted `INSERT ... ON DUPLICATE KEY UPDATE event_id = event_id` (a duplicate
is a no-op, every other error still an error, unlike `INSERT IGNORE`), at most 10 at once (the
PostgreSQL pool's size; a connection per thread), READ COMMITTED and utf8mb4 like hookinbox.
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

MYSQL_DDL = (
    "CREATE TABLE IF NOT EXISTS bare_events (source VARCHAR(64) NOT NULL, "
    "event_id VARCHAR(255) NOT NULL, body LONGBLOB NOT NULL, PRIMARY KEY (source, event_id)) "
    "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
)
MYSQL_INSERT = (
    "INSERT INTO bare_events (source, event_id, body) VALUES (%s, %s, %s) "
    "ON DUPLICATE KEY UPDATE event_id = event_id"
)
MYSQL_CONNECTIONS = 10

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


_mysql_limiter: Any = None
_mysql_ready = threading.Lock()
_mysql_created = False


def _mysql() -> Any:
    connection: Any = getattr(_local, "connection", None)
    if connection is None:
        import pymysql
        from sqlalchemy.engine import make_url

        url = make_url(URL)
        connection = pymysql.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            database=url.database,
            charset="utf8mb4",
            autocommit=True,
        )
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        _local.connection = connection
    return connection


def _insert_mysql(event_id: str, body: bytes) -> None:
    global _mysql_created
    connection = _mysql()
    with connection.cursor() as cursor:
        if not _mysql_created:
            with _mysql_ready:
                cursor.execute(MYSQL_DDL)
                _mysql_created = True
        cursor.execute(MYSQL_INSERT, ("stripe", event_id, body))


async def _insert_mysql_in_thread(event_id: str, body: bytes) -> None:
    global _mysql_limiter
    if _mysql_limiter is None:
        _mysql_limiter = anyio.CapacityLimiter(MYSQL_CONNECTIONS)
    await anyio.to_thread.run_sync(_insert_mysql, event_id, body, limiter=_mysql_limiter)


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
    elif URL.startswith("mysql"):
        await _insert_mysql_in_thread(event_id, body)
    else:
        await _insert_postgres(event_id, body)
    await _reply(send, 200, {"status": "accepted", "event_id": event_id})
