"""SQLite's part of the migrations: the queue's triggers, the refusal of an older hookinbox's
leases, and what it has no need of (locks, fill factors, notifications)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from hookinbox._storage._dialects._base import Dialect

if TYPE_CHECKING:
    from alembic.operations import Operations


OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
OLD_RELAY = "hookinbox schema 15: a relay of an older hookinbox tried to lease; upgrade it"


class SQLiteMigrations(Dialect):
    """The part of the dialect that answers for migrations."""

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """No LISTEN, nothing to notify."""

    def lock_tables(self, op: Operations, *tables: str) -> None:
        """The migration's BEGIN IMMEDIATE holds the one write lock already."""

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        """SQLite has no fill factor (and rewrites a row in place when it can)."""

    def queue_new_events(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " WHEN NEW.status NOT IN ('processed', 'unhandled') BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id, NEW.status, NEW.next_attempt_at, NEW.received_at, NEW.attempts);"
            " END"
        )

    def mirror_queue_changes(self, op: Operations) -> None:
        # `done` is `_queue_copy.TOMBSTONE`. One writer at a time: a copy's batch always reads
        # the events as they are, but the tombstones keep the three databases' copies alike.
        changed = (
            "AFTER UPDATE OF status, next_attempt_at, attempts, received_at ON hookinbox_events"
        )
        tombstone = (
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = 'done'; END"
        )
        op.execute(
            f"CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_open {changed}"
            f" WHEN NEW.status NOT IN ({_CLOSED}) BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " next_attempt_at = excluded.next_attempt_at, received_at = excluded.received_at,"
            " attempts = excluded.attempts; END"
        )
        op.execute(
            f"CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_closed {changed}"
            f" WHEN NEW.status IN ({_CLOSED}) AND OLD.status NOT IN ({_CLOSED}) BEGIN{tombstone}"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_deleted"
            f" AFTER DELETE ON hookinbox_events WHEN OLD.status NOT IN ({_CLOSED}) BEGIN{tombstone}"
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        for change in ("open", "closed", "deleted"):
            op.execute(f"DROP TRIGGER IF EXISTS hookinbox_events_mirror_{change}")

    def refuse_old_leases(self, op: Operations) -> None:
        for name, table, column, when in (
            ("hookinbox_events_old_lease", "hookinbox_events", "lease_token",
             "NEW.lease_token IS NOT NULL"),
            ("hookinbox_outbox_old_lease", "hookinbox_outbox", "status",
             "NEW.status = 'delivering'"),
        ):  # fmt: skip
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE OF {column} ON {table}"
                f" WHEN {when}"
                f" BEGIN SELECT RAISE(ABORT, '{OLD_LEASE}'); END"
            )

    def copy_new_payloads(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_payload AFTER INSERT"
            " ON hookinbox_events BEGIN INSERT OR IGNORE INTO hookinbox_payloads"
            " (id, body, headers) VALUES (NEW.id, NEW.body, NEW.headers); END"
        )

    def drop_payload_columns(self, op: Operations) -> None:
        # The trigger first: SQLite refuses to drop a column a trigger names. The step holds
        # the one write lock, so no insert comes between. SQLite's DROP COLUMN rewrites
        # every row of the table (docs/storage.md, "Upgrading to schema 14").
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_payload")
        present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("hookinbox_events")}
        for column in ("body", "headers"):
            if column in present:  # not when the step runs again (docs/upgrading.md)
                op.execute(f"ALTER TABLE hookinbox_events DROP COLUMN {column}")

    def queue_new_messages(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_outbox_queue AFTER INSERT ON hookinbox_outbox"
            " WHEN NEW.status = 'pending' BEGIN"
            " INSERT INTO hookinbox_outbox_queue"
            " (id, state, next_attempt_at, attempts, ordering_key)"
            " VALUES (NEW.id, 'pending', NEW.next_attempt_at, NEW.attempts, NEW.ordering_key);"
            " END"
        )

    def refuse_old_relays(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_outbox_old_relay"
            " BEFORE UPDATE OF lease_token ON hookinbox_outbox WHEN NEW.lease_token IS NOT NULL"
            f" BEGIN SELECT RAISE(ABORT, '{OLD_RELAY}'); END"
        )


_CLOSED = "'processed', 'unhandled'"
"""The statuses of an event whose work is over (no queue row), in the triggers' SQL."""
