"""MariaDB's part of the migrations: the queue's row triggers, indexes whole (no partial
indexes), and the refusal of an older hookinbox's leases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox._storage._dialects._base import Dialect

if TYPE_CHECKING:
    from alembic.operations import Operations


OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
OLD_RELAY = "hookinbox schema 15: a relay of an older hookinbox tried to lease; upgrade it"


class MySQLMigrations(Dialect):
    """The part of the dialect that answers for migrations."""

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        """No LISTEN, nothing to notify."""

    def lock_tables(self, op: Operations, *tables: str) -> None:
        """MariaDB commits at each DDL statement, so a table lock cannot span the step; no
        hookinbox older than schema 10 ever ran on MariaDB, so none writes while it runs."""

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        """InnoDB's fill factor is the server's (`innodb_fill_factor`), not a table's."""

    def create_index_if_missing(
        self, op: Operations, name: str, table: str, columns: str, where: str
    ) -> None:
        # No partial indexes: the whole table's.
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")

    def drop_index_if_exists(self, op: Operations, table: str, name: str) -> None:
        op.execute(f"DROP INDEX IF EXISTS {name} ON {table}")

    def queue_new_events(self, op: Operations) -> None:
        # A row trigger; an upsert that updates (a duplicate) fires no INSERT trigger.
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " FOR EACH ROW INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " SELECT NEW.id, NEW.status, NEW.next_attempt_at, NEW.received_at, NEW.attempts"
            f" FROM DUAL WHERE NEW.status NOT IN ({_CLOSED})"
        )

    def mirror_queue_changes(self, op: Operations) -> None:
        # MariaDB's triggers name no columns: an update that leaves the copied ones as they
        # were (a duplicate delivery's upsert) writes nothing. `done` is
        # `_queue_copy.TOMBSTONE`.
        unchanged = " AND ".join(
            f"NEW.{column} <=> OLD.{column}"
            for column in ("status", "next_attempt_at", "attempts", "received_at")
        )
        columns = " (id, state, next_attempt_at, received_at, attempts)"
        tombstone = (
            f"INSERT INTO hookinbox_event_queue{columns}"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON DUPLICATE KEY UPDATE state = 'done'"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror AFTER UPDATE"
            " ON hookinbox_events FOR EACH ROW BEGIN"
            f" IF NEW.status NOT IN ({_CLOSED}) THEN"
            f" IF NOT ({unchanged}) THEN"
            f" INSERT INTO hookinbox_event_queue{columns}"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON DUPLICATE KEY UPDATE state = VALUES(state),"
            " next_attempt_at = VALUES(next_attempt_at), received_at = VALUES(received_at),"
            " attempts = VALUES(attempts);"
            " END IF;"
            f" ELSEIF OLD.status NOT IN ({_CLOSED}) THEN {tombstone};"
            " END IF; END"
        )
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_mirror_deleted AFTER DELETE"
            f" ON hookinbox_events FOR EACH ROW BEGIN IF OLD.status NOT IN ({_CLOSED}) THEN"
            f" {tombstone}; END IF; END"
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror")
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror_deleted")

    def refuse_old_leases(self, op: Operations) -> None:
        # MariaDB's triggers name no columns: each compares the row before and after.
        for name, table, when in (
            ("hookinbox_events_old_lease", "hookinbox_events",
             "NEW.lease_token IS NOT NULL AND NOT (NEW.lease_token <=> OLD.lease_token)"),
            ("hookinbox_outbox_old_lease", "hookinbox_outbox", "NEW.status = 'delivering'"),
        ):  # fmt: skip
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE UPDATE ON {table} FOR EACH ROW"
                f" BEGIN IF {when} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{OLD_LEASE}';"
                " END IF; END"
            )

    def copy_new_payloads(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_events_payload AFTER INSERT"
            " ON hookinbox_events FOR EACH ROW INSERT IGNORE INTO hookinbox_payloads"
            " (id, body, headers) VALUES (NEW.id, NEW.body, NEW.headers)"
        )

    def drop_payload_columns(self, op: Operations) -> None:
        # Each DDL statement commits on its own and no table lock spans the step: the
        # columns go first, while the trigger still copies what an older process inserts
        # (an insert after the drop fails: the process is older than the schema). InnoDB
        # drops a column in place (`ALGORITHM=INSTANT`, MariaDB 10.4+), the rows untouched.
        op.execute("ALTER TABLE hookinbox_events DROP COLUMN IF EXISTS body,"
                   " DROP COLUMN IF EXISTS headers")  # fmt: skip
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_payload")

    def queue_new_messages(self, op: Operations) -> None:
        # A row trigger; an upsert that finds the key (`ON DUPLICATE KEY`) fires no INSERT one.
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_outbox_queue AFTER INSERT ON hookinbox_outbox"
            " FOR EACH ROW INSERT INTO hookinbox_outbox_queue"
            " (id, state, next_attempt_at, attempts, ordering_key)"
            " SELECT NEW.id, 'pending', NEW.next_attempt_at, NEW.attempts, NEW.ordering_key"
            " FROM DUAL WHERE NEW.status = 'pending'"
        )

    def refuse_old_relays(self, op: Operations) -> None:
        op.execute(
            "CREATE TRIGGER IF NOT EXISTS hookinbox_outbox_old_relay BEFORE UPDATE"
            " ON hookinbox_outbox FOR EACH ROW BEGIN"
            " IF NEW.lease_token IS NOT NULL AND NOT (NEW.lease_token <=> OLD.lease_token) THEN"
            f" SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{OLD_RELAY}'; END IF; END"
        )


_CLOSED = "'processed', 'unhandled'"
"""The statuses of an event whose work is over (no queue row), in the triggers' SQL."""
