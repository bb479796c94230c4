"""PostgreSQL's part of the migrations: the notifying and queueing triggers, table locks, fill
factors, and the refusal of an older hookinbox's leases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox._storage._dialects._base import Dialect

if TYPE_CHECKING:
    from alembic.operations import Operations


OLD_LEASE = "hookinbox schema 9: a process of an older hookinbox tried to lease; upgrade it"
OLD_RELAY = "hookinbox schema 15: a relay of an older hookinbox tried to lease; upgrade it"


class PostgresMigrations(Dialect):
    """The part of the dialect that answers for migrations."""

    def create_notify_trigger(
        self, op: Operations, table: str, channel: str, function: str
    ) -> None:
        # Wake idle workers (LISTEN) the moment a row commits, with no extra round trip on
        # the writing path: the server raises the notification itself.
        trigger = f"{table}_notify"
        op.execute(
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_notify('{channel}', ''); RETURN NULL; END $$"
        )
        op.execute(
            f"CREATE TRIGGER {trigger} AFTER INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {function}()"
        )

    def lock_tables(self, op: Operations, *tables: str) -> None:
        op.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")

    def set_fill_factor(self, op: Operations, table: str, percent: int) -> None:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = {int(percent)})")

    def queue_new_events(self, op: Operations) -> None:
        # One call per statement, not per row: a group-commit batch queues its new events in
        # one INSERT ... SELECT from the statement's inserted rows (its transition table; the
        # rows an ON CONFLICT updated are not in it), and notifies once. It replaces the
        # notifying trigger of schema 1 (the same channel, so older workers are woken still).
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_queue_new_events() RETURNS trigger"
            " LANGUAGE plpgsql AS $$"
            " BEGIN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " SELECT id, status, next_attempt_at, received_at, attempts"
            " FROM hookinbox_inserted_events WHERE status NOT IN ('processed', 'unhandled');"
            " IF EXISTS (SELECT 1 FROM hookinbox_inserted_events"
            " WHERE status IN ('pending', 'deferred')) THEN"
            " PERFORM pg_notify('hookinbox_events', ''); END IF;"
            " RETURN NULL; END $$"
        )
        _unless_trigger_exists(
            op,
            "hookinbox_events_queue",
            "DROP TRIGGER IF EXISTS hookinbox_events_notify ON hookinbox_events;"
            " CREATE TRIGGER hookinbox_events_queue AFTER INSERT ON hookinbox_events"
            " REFERENCING NEW TABLE AS hookinbox_inserted_events"
            " FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_queue_new_events();",
        )
        op.execute("DROP FUNCTION IF EXISTS hookinbox_notify_new_event()")

    def mirror_queue_changes(self, op: Operations) -> None:
        # A row trigger on the columns the queue copies: an upsert of a duplicate delivery
        # (which sets none of them) fires nothing. `done` is `_queue_copy.TOMBSTONE`.
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_mirror_event() RETURNS trigger"
            " LANGUAGE plpgsql AS $$"
            " BEGIN"
            " IF TG_OP = 'UPDATE' AND NEW.status NOT IN ('processed', 'unhandled') THEN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (NEW.id,"
            " CASE WHEN NEW.status = 'processing' THEN 'pending' ELSE NEW.status END,"
            " NEW.next_attempt_at, NEW.received_at, NEW.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state,"
            " next_attempt_at = EXCLUDED.next_attempt_at, received_at = EXCLUDED.received_at,"
            " attempts = EXCLUDED.attempts;"
            " ELSIF OLD.status NOT IN ('processed', 'unhandled') THEN"
            " INSERT INTO hookinbox_event_queue"
            " (id, state, next_attempt_at, received_at, attempts)"
            " VALUES (OLD.id, 'done', OLD.next_attempt_at, OLD.received_at, OLD.attempts)"
            " ON CONFLICT (id) DO UPDATE SET state = 'done';"
            " END IF;"
            " RETURN NULL; END $$"
        )
        _unless_trigger_exists(
            op,
            "hookinbox_events_mirror",
            "CREATE TRIGGER hookinbox_events_mirror"
            " AFTER UPDATE OF status, next_attempt_at, attempts, received_at OR DELETE"
            " ON hookinbox_events FOR EACH ROW EXECUTE FUNCTION hookinbox_mirror_event();",
        )

    def stop_mirroring_queue(self, op: Operations) -> None:
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_mirror ON hookinbox_events")
        op.execute("DROP FUNCTION IF EXISTS hookinbox_mirror_event()")

    def refuse_old_leases(self, op: Operations) -> None:
        op.execute(
            "CREATE FUNCTION hookinbox_refuse_old_lease() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN RAISE EXCEPTION '{OLD_LEASE}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER hookinbox_events_old_lease BEFORE UPDATE OF lease_token"
            " ON hookinbox_events FOR EACH ROW WHEN (NEW.lease_token IS NOT NULL)"
            " EXECUTE FUNCTION hookinbox_refuse_old_lease()"
        )
        op.execute(
            "CREATE TRIGGER hookinbox_outbox_old_lease BEFORE UPDATE OF status"
            " ON hookinbox_outbox FOR EACH ROW WHEN (NEW.status = 'delivering')"
            " EXECUTE FUNCTION hookinbox_refuse_old_lease()"
        )

    def copy_new_payloads(self, op: Operations) -> None:
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_copy_payload() RETURNS trigger"
            " LANGUAGE plpgsql AS $$ BEGIN INSERT INTO hookinbox_payloads"
            " (id, body, headers) VALUES (NEW.id, NEW.body, NEW.headers)"
            " ON CONFLICT (id) DO NOTHING; RETURN NULL; END $$"
        )
        _unless_trigger_exists(
            op,
            "hookinbox_events_payload",
            "CREATE TRIGGER hookinbox_events_payload AFTER INSERT ON hookinbox_events"
            " FOR EACH ROW EXECUTE FUNCTION hookinbox_copy_payload();",
        )

    def drop_payload_columns(self, op: Operations) -> None:
        # One transaction, the table locked since the step began: the order is free.
        # Dropping a column is a catalog change: the rows keep their bytes until they are
        # rewritten or pruned (docs/storage.md, "Upgrading to schema 14").
        op.execute("DROP TRIGGER IF EXISTS hookinbox_events_payload ON hookinbox_events")
        op.execute("DROP FUNCTION IF EXISTS hookinbox_copy_payload()")
        op.execute("ALTER TABLE hookinbox_events DROP COLUMN IF EXISTS body,"
                   " DROP COLUMN IF EXISTS headers")  # fmt: skip

    def queue_new_messages(self, op: Operations) -> None:
        # A row trigger: a handler sends its messages one statement each.
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_queue_new_message() RETURNS trigger"
            " LANGUAGE plpgsql AS $$"
            " BEGIN"
            " INSERT INTO hookinbox_outbox_queue"
            " (id, state, next_attempt_at, attempts, ordering_key)"
            " VALUES (NEW.id, 'pending', NEW.next_attempt_at, NEW.attempts, NEW.ordering_key);"
            " RETURN NULL; END $$"
        )
        op.execute("DROP TRIGGER IF EXISTS hookinbox_outbox_queue ON hookinbox_outbox")
        op.execute(
            "CREATE TRIGGER hookinbox_outbox_queue AFTER INSERT ON hookinbox_outbox"
            " FOR EACH ROW WHEN (NEW.status = 'pending')"
            " EXECUTE FUNCTION hookinbox_queue_new_message()"
        )

    def refuse_old_relays(self, op: Operations) -> None:
        op.execute(
            "CREATE OR REPLACE FUNCTION hookinbox_refuse_old_relay() RETURNS trigger"
            f" LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{OLD_RELAY}'; END $$"
        )
        op.execute("DROP TRIGGER IF EXISTS hookinbox_outbox_old_relay ON hookinbox_outbox")
        op.execute(
            "CREATE TRIGGER hookinbox_outbox_old_relay BEFORE UPDATE OF lease_token"
            " ON hookinbox_outbox FOR EACH ROW WHEN (NEW.lease_token IS NOT NULL)"
            " EXECUTE FUNCTION hookinbox_refuse_old_relay()"
        )


def _unless_trigger_exists(op: Operations, trigger: str, statements: str) -> None:
    """Run `statements` unless `hookinbox_events` has `trigger`: creating or dropping a trigger
    locks the table against every write (and queues deliveries behind the writers it waits
    for), so a step run again (schema 9's copy, resumed) takes no such lock for nothing."""
    op.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger"
        f" WHERE tgrelid = 'hookinbox_events'::regclass AND tgname = '{trigger}')"
        f" THEN {statements} END IF; END $$"
    )
