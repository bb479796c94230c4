"""MariaDB (10.6+, through PyMySQL): a pooled server, concurrent writers, no LISTEN.

The engine reads committed data (READ COMMITTED: no gap locks, so concurrent upserts of new
events do not deadlock on each other's gaps; docs/storage.md has the measurement), speaks
utf8mb4 in UTC, and refuses at the first connection a server that is not MariaDB 10.6 or later
(the lease needs `SKIP LOCKED`, the upsert `INSERT ... RETURNING`, the claim `DELETE ...
RETURNING`: MySQL 8.0 has the first and neither of the others), a connection or a database
whose character set is not utf8mb4, and a `max_allowed_packet` under 4 MiB. Each session keeps
the packet the server reported when it opened: group commit cuts its batch into statements that
fit it (every value counted escaped, at worst), a row that cannot fit alone is `BodyTooLarge`
(413) rather than sent, and an inbox whose body limit no statement can carry is refused when it
starts receiving (`check_body_limit`). A write refused because the server is read-only counts
as a lost connection (503), as on PostgreSQL; a deadlock (1213) or a lock wait timeout (1205)
is an `OperationalError`, so 503 + Retry-After, and a deadlock marks the error (a transaction
of hookinbox's own, as ingest's, is run again first: `Store.retry_deadlocks`) and the
transaction aborted (InnoDB rolled it back whole: `refuse_aborted`).

The upsert is `INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING` (`MySQLUpsert` speaks the
`on_conflict_*` of the other dialects); group commit's batch is a multi-row VALUES upsert and
its log rows, in the caller's transaction. Payload search reads the body with `JSON_VALUE`
(a body that is not JSON reads NULL, never an error), and a body whose path crosses a repeated
key in Python (`payload_unsure`). Workers poll with a cheap due read.
"""

from __future__ import annotations

from typing import ClassVar

# Imported for its effect: MariaDB's column types and tables, registered with SQLAlchemy.
from hookinbox._storage._dialects._mysql import _types  # noqa: F401
from hookinbox._storage._dialects._mysql._borrowed import MySQLBorrowed
from hookinbox._storage._dialects._mysql._ddl import MySQLMigrations
from hookinbox._storage._dialects._mysql._engine import MySQLEngines
from hookinbox._storage._dialects._mysql._state import MySQLState
from hookinbox._storage._dialects._mysql._statements import MySQLStatements

__all__ = ["MySQL"]


class MySQL(MySQLEngines, MySQLStatements, MySQLState, MySQLMigrations, MySQLBorrowed):
    """MariaDB's answers, one concern a module of this package."""

    name: ClassVar[str] = "mysql"
    single_writer: ClassVar[bool] = False
    listens: ClassVar[bool] = False
    returns_joined_rows: ClassVar[bool] = False
    autocommit_batches: ClassVar[bool] = False
    prune_busy_batch_seconds: ClassVar[float] = 0.02
    django_vendors: ClassVar[tuple[str, ...]] = ("mysql",)  # MariaDB's, too
