"""An inbox at schema 8, as a process of that version left it, built fast enough to hold a
million events; and what an upgrade must make of it (every open event queued, once).

`fill(store, events)` writes `events` rows in one INSERT ... SELECT from the database's own
series of numbers (PostgreSQL's `generate_series`, MariaDB's sequence tables, a recursive CTE
on SQLite): tens of seconds for a million rows, where an executemany took minutes. Row `n`:

- odd `n`: done (`processed`, every seventh `unhandled`);
- even `n`: open (`pending`; `deferred`, `failed`, `stale` at n % 10 = 2, 4, 6; one in a
  thousand `processing`, held by a worker of schema 8 with its lease token).

`settle` vacuums and analyses as a working inbox is. `queue_mismatches` compares the queue
with the open events in SQL (no million rows in Python).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._types import UTCDateTime

OPEN = "status NOT IN ('processed', 'unhandled')"

_STATUS = (
    "CASE WHEN n % 2 = 1 THEN (CASE WHEN n % 7 = 0 THEN 'unhandled' ELSE 'processed' END)"
    " WHEN n % 1000 = 0 THEN 'processing'"
    " WHEN n % 10 = 2 THEN 'deferred' WHEN n % 10 = 4 THEN 'failed'"
    " WHEN n % 10 = 6 THEN 'stale' ELSE 'pending' END"
)
_COLUMNS = (
    "source, event_id, event_type, received_at, body, headers, body_sha256, status, outcome,"
    " attempts, next_attempt_at, lease_token, lease_expires_at, deferrals, delivery_count,"
    " key_conflicts, last_delivery_at"
)


def _values(event_id: str, body: str) -> str:
    return (
        f"'stripe', {event_id}, 'charge.succeeded', :received_at, {body}, '{{}}', :sha256,"
        f" {_STATUS}, CASE WHEN n % 2 = 1 THEN 'handled' END, n % 2, :due,"
        " CASE WHEN n % 1000 = 0 THEN :token END, CASE WHEN n % 1000 = 0 THEN :until END,"
        " 0, 1, 0, :received_at"
    )


# Per database: what comes before the INSERT, the numbers n (offset + 1 to offset + count),
# an event id and a JSON body made of n.
_SERIES = {
    "postgresql": (
        "",
        "(SELECT g + :offset AS n FROM generate_series(1, :count) AS g) AS t",
        "'evt_' || n",
        """convert_to('{"id": "evt_' || n || '"}', 'UTF8')""",
    ),
    "sqlite": (
        "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < :count) ",
        "(SELECT g + :offset AS n FROM s) AS t",
        "'evt_' || n",
        """CAST('{"id": "evt_' || n || '"}' AS BLOB)""",
    ),
    "mysql": (
        "",
        "(SELECT seq + :offset AS n FROM seq_1_to_{count}) AS t",
        "CONCAT('evt_', n)",
        """CONCAT('{"id": "evt_', n, '"}')""",
    ),
}


def at_schema_8(url: str) -> Store:
    """A store on `url` whose tables are schema 8's (the store does not migrate on use)."""
    store = Store(url, auto_migrate=False)
    from hookinbox._storage import _migrations

    _migrations.migrate(store.engine, target=8)
    return store


def fill(
    store: Store, count: int, *, start: int = 0, chunk: int = 200_000, ingest: bool = False
) -> None:
    """Events `start + 1` to `start + count`, half of them open, `chunk` rows a statement;
    with `ingest`, every one `pending` with no attempt, as schema 8's ingest stored each."""
    now = datetime.now(UTC)
    prefix, series, event_id, body = _SERIES[store.dialect.name]
    for offset in range(start, start + count, chunk):
        rows = min(chunk, start + count - offset)
        values = _values(event_id, body)
        if ingest:
            values = values.replace(_STATUS, "'pending'").replace("n % 2, :due", "0, :due")
            values = values.replace("n % 1000 = 0", "1 = 0")
        statement = sa.text(
            f"{prefix}INSERT INTO hookinbox_events ({_COLUMNS})"
            f" SELECT {values} FROM {series.replace('{count}', str(rows))}"
        ).bindparams(
            sa.bindparam("received_at", type_=UTCDateTime()),
            sa.bindparam("due", type_=UTCDateTime()),
            sa.bindparam("until", type_=UTCDateTime()),
        )
        with store.engine.begin() as connection:
            connection.execute(
                statement,
                {
                    "count": rows,
                    "offset": offset,
                    "received_at": now - timedelta(hours=1),
                    "due": now - timedelta(minutes=1),
                    "until": now + timedelta(minutes=5),
                    "token": "0" * 32,
                    "sha256": "0" * 64,
                },
            )


def settle(store: Store) -> None:
    """Statistics and visibility as a working inbox has them (autovacuum's, on PostgreSQL:
    the first reader of a million fresh rows would otherwise write their hint bits), and the
    fill's writes checkpointed, so that they are not flushed during the test."""
    statements = {
        "postgresql": ["VACUUM (ANALYZE) hookinbox_events", "CHECKPOINT"],
        "mysql": ["ANALYZE TABLE hookinbox_events"],
        "sqlite": ["ANALYZE", "PRAGMA wal_checkpoint(TRUNCATE)"],
    }[store.dialect.name]
    # The driver's own connection, outside any transaction (VACUUM and a checkpoint refuse one).
    connection = store.engine.raw_connection()
    try:
        if store.dialect.name == "postgresql":
            connection.driver_connection.autocommit = True  # type: ignore[union-attr]
        cursor = connection.cursor()
        for statement in statements:
            cursor.execute(statement)
            if cursor.description:
                cursor.fetchall()
        cursor.close()
        connection.commit()
    finally:
        connection.invalidate()  # not back to the pool with the setting changed


def queue_mismatches(store: Store) -> dict[str, int]:
    """How far the queue is from the open events: open events without a queue row, queue rows
    of no open event, rows whose state is not the event's (a held one due again: `pending`),
    and the queue's rows counted. All zero but the last after a correct upgrade."""
    queries = {
        "missing": (
            f"SELECT count(*) FROM hookinbox_events e WHERE e.{OPEN} AND NOT EXISTS"
            " (SELECT 1 FROM hookinbox_event_queue q WHERE q.id = e.id)"
        ),
        "extra": (
            "SELECT count(*) FROM hookinbox_event_queue q WHERE NOT EXISTS"
            f" (SELECT 1 FROM hookinbox_events e WHERE e.id = q.id AND e.{OPEN})"
        ),
        "wrong_state": (
            "SELECT count(*) FROM hookinbox_event_queue q JOIN hookinbox_events e ON e.id = q.id"
            " WHERE q.state <> e.status OR q.attempts <> e.attempts"
            " OR q.next_attempt_at <> e.next_attempt_at OR q.lease_token IS NOT NULL"
        ),
        "queued": "SELECT count(*) FROM hookinbox_event_queue",
    }
    with store.engine.connect() as connection:
        return {
            name: int(connection.exec_driver_sql(sql).scalar_one()) for name, sql in queries.items()
        }


def open_events(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(
            connection.exec_driver_sql(
                f"SELECT count(*) FROM hookinbox_events WHERE {OPEN}"
            ).scalar_one()
        )
