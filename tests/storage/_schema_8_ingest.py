"""Schema 8's ingest, as a process of that version still serving during an upgrade runs it.

A plain ASGI app for uvicorn (`uvicorn tests.storage._schema_8_ingest:app`), on the database
named by $HOOKINBOX_TEST_SCHEMA_8_URL: each POST's JSON body `{"id": ...}` is stored with the
statements of schema 8's delivery path (the event's upsert on its key, then the delivery's
log row, in one transaction) and answered 200, or 503 once the 3 s ack deadline has passed, as
the server of that version answered. No signature is checked: what an upgrade can slow down is
the write. GET answers 200 once the app has connected to the database.

Written against schema 8's columns (no `received_via`, which schema 11 adds), so it keeps
working before, during and after the upgrade, as a process of the older version does: its
inserts are queued by the trigger schema 9 installs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._types import LongBinary, UTCDateTime

URL_ENV = "HOOKINBOX_TEST_SCHEMA_8_URL"
ACK_DEADLINE = 3.0

_events = sa.table(
    "hookinbox_events",
    sa.column("id", sa.BigInteger),
    sa.column("source", sa.String),
    sa.column("event_id", sa.String),
    sa.column("event_type", sa.String),
    sa.column("received_at", UTCDateTime),
    sa.column("body", LongBinary),
    sa.column("headers", sa.Text),
    sa.column("body_sha256", sa.String),
    sa.column("status", sa.String),
    sa.column("attempts", sa.Integer),
    sa.column("next_attempt_at", UTCDateTime),
    sa.column("deferrals", sa.Integer),
    sa.column("delivery_count", sa.Integer),
    sa.column("key_conflicts", sa.Integer),
    sa.column("last_delivery_at", UTCDateTime),
)
_deliveries = sa.table(
    "hookinbox_deliveries",
    sa.column("source", sa.String),
    sa.column("event_id", sa.String),
    sa.column("received_at", UTCDateTime),
    sa.column("duplicate", sa.Boolean),
    sa.column("key_conflict", sa.Boolean),
)

_store: Store | None = None
_upsert: Any = None


def _statement(store: Store) -> Any:
    statement = store.dialect.insert(_events)
    statement = statement.on_conflict_do_update(
        index_elements=[_events.c.source, _events.c.event_id],
        set_={
            "delivery_count": _events.c.delivery_count + 1,
            "last_delivery_at": statement.excluded.last_delivery_at,
        },
    )
    return statement.returning(_events.c.id, _events.c.delivery_count)


def _connected() -> Store:
    global _store, _upsert
    if _store is None:
        _store = Store(os.environ[URL_ENV], auto_migrate=False)
        _upsert = _statement(_store)
    return _store


def _ping() -> None:
    with _connected().engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")


def _write(event_id: str, body: bytes) -> None:
    store = _connected()
    now = datetime.now(UTC)
    row = {
        "source": "stripe",
        "event_id": event_id,
        "event_type": "charge.succeeded",
        "received_at": now,
        "body": body,
        "headers": "{}",
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "deferrals": 0,
        "delivery_count": 1,
        "key_conflicts": 0,
        "last_delivery_at": now,
    }
    with store.engine.begin() as connection:
        _, count = connection.execute(_upsert, row).one()
        connection.execute(
            _deliveries.insert(),
            {
                "source": "stripe",
                "event_id": event_id,
                "received_at": now,
                "duplicate": count > 1,
                "key_conflict": False,
            },
        )


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()  # startup
        await send({"type": "lifespan.startup.complete"})
        await receive()  # shutdown
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    status = 200
    if scope["method"] == "GET":  # ready once connected: the first delivery pays no set-up
        await asyncio.to_thread(_ping)
    elif scope["method"] == "POST":
        event_id = str(json.loads(body)["id"])
        try:
            await asyncio.wait_for(asyncio.to_thread(_write, event_id, body), ACK_DEADLINE)
        except TimeoutError:
            status = 503  # the write goes on in its thread, as it did in the server
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})
