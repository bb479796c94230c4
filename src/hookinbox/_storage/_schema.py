"""The live schema: the tables every query in this package is written against.

`_migrations.py` builds the same schema step by step for existing databases; a test checks
that a database migrated from nothing matches these tables exactly.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

from hookinbox._model import WAITING_STATUSES, MessageStatus
from hookinbox._storage._dialects._partial import partial
from hookinbox._storage._dialects._table_options import fill_factor, row_id_type
from hookinbox._storage._types import LongBinary, LongText, SafeText, UTCDateTime

metadata = MetaData()

# SQLite only auto-increments an INTEGER PRIMARY KEY (its rowid); PostgreSQL gets a bigint.
RowId = row_id_type()

schema_versions = Table(
    "hookinbox_schema_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", UTCDateTime, nullable=False),
    # The oldest code (by its schema version) that runs on the database once this version is
    # applied (schema 12; `_compatibility.py`): an older hookinbox reads the newest row to
    # know whether it may run. NULL in rows a hookinbox before schema 12 wrote.
    Column("min_code_version", Integer),
)

EVENTS_FILLFACTOR = 50
"""Percent of each page of `hookinbox_events` filled by inserts: the rest is room for the
version of each row its processing writes, on its own page (PostgreSQL; schema 10). Measured
again for schema 14's narrow row (docs/storage.md, "Bytes per event"): at 70 % a third of
processing's updates left the page, and the versions they wrote elsewhere made the table
larger than at 50 %, where every update stayed heap-only."""
QUEUE_FILLFACTOR = 30
"""The same for the queue's small rows, which a lease and a release rewrite; the queue holds
only unfinished work, so the room costs little."""
OUTBOX_FILLFACTOR = 50
"""Percent of each page of `hookinbox_outbox` filled by inserts: room for the one version of
each message its delivery writes (schema 15; bench/space.py)."""
OUTBOX_QUEUE_FILLFACTOR = 30
"""The same for the relay's queue, as the events' (`QUEUE_FILLFACTOR`)."""

RECEIVED_VIA_WEBHOOK = "webhook"
RECEIVED_VIA_RECONCILE = "reconcile"

events = Table(
    "hookinbox_events",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("event_id", String(255), nullable=False),
    Column("event_type", String(255)),
    Column("occurred_at", UTCDateTime),
    Column("received_at", UTCDateTime, nullable=False),
    Column("body_sha256", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("outcome", String(32)),  # why it ended as it did: handled, business_duplicate, ...
    Column("attempts", Integer, nullable=False),
    # Written at ingest and when the event's work ends; while it is unfinished, the queue row
    # has the live values (`Store.events`). The lease columns are unused since schema 9.
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("lease_token", String(32)),
    Column("lease_expires_at", UTCDateTime),
    Column("deferred_since", UTCDateTime),  # first NotReady; the deadline counts from here
    Column("deferrals", Integer, nullable=False),  # NotReady count: spaces the deferred retries
    Column("last_error", SafeText),
    Column("delivery_count", Integer, nullable=False),
    Column("key_conflicts", Integer, nullable=False),
    Column("last_delivery_at", UTCDateTime, nullable=False),
    Column("processed_at", UTCDateTime),
    # The last replay of this event while it was processed (`--force`): its first run's writes
    # are still in place, so a failure of the re-run does not mean "no effect".
    Column("forced_replay_at", UTCDateTime),
    # `attempts` is history: a replay never resets it. The count it had at the last replay is
    # kept here, so the retry budget (`max_attempts`, backoff) counts from the replay. NULL:
    # never replayed (the inserts on the delivery path need not know the column).
    Column("attempts_before_replay", Integer),
    # How the event first arrived: `webhook`, or `reconcile` when `hookinbox reconcile` found it
    # in the provider's API before any delivery (schema 11). Kept from the first arrival; a
    # reconciled event is no delivery, so the inserts on the delivery path need not name it.
    Column("received_via", String(16), nullable=False, server_default=RECEIVED_VIA_WEBHOOK),
    UniqueConstraint("source", "event_id", name="uq_hookinbox_events_source_event_id"),
    **fill_factor(EVENTS_FILLFACTOR),
)

# What a delivery brought, written once with its event and never updated (schema 14): kept out
# of the events row so that the row processing rewrites is ~200 bytes, and the fill factor
# that keeps that rewrite on its page (heap-only) leaves room in small rows, not in bodies.
# One row per event, keyed by the event's row id, written only when the event is new (never
# for a duplicate); deleted with its event by the prune (explicitly: no foreign key, whose
# check would cost every insert a look-up into the events' primary key). An event without
# one reads an empty body and no headers. What a row holds is written by
# `_payloads.stored_payload` and read by `_payloads.payload_of`.
payloads = Table(
    "hookinbox_payloads",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=False),  # the event's row id
    Column("body", LongBinary, nullable=False),
    Column("headers", LongText, nullable=False),  # JSON object of the headers kept for audit
)

# The events table is written at ingest and once more when the event's work ends (schema 9).
# While it waits and while a worker holds it, what changes (its lease, attempts, next attempt)
# is in the narrow queue table below, so no index of this big table covers a column that an
# event's processing updates: PostgreSQL can keep each of those updates on the row's own page
# (a heap-only tuple, no new index entries), if the page has room. The fill factor leaves it
# that room (docs/storage.md, "Claims that stay heap-only").
Index("ix_hookinbox_events_received_at", events.c.received_at)

# Unfinished work, one row per event that is not done (pending, deferred, failed, stale; a
# pending or deferred row with a lease token is being processed), deleted when the event's
# work ends. Inserted with the event (a trigger: every writer, whatever its version), so the
# ingest path writes no statement more. Its rows are few however large the inbox grows, so
# polling, leasing and claiming read and write small, cached indexes; a lease changes only
# columns no index covers (token, expiry, attempts), so it stays heap-only too.
event_queue = Table(
    "hookinbox_event_queue",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=False),  # the event's row id
    Column("state", String(16), nullable=False),  # pending, deferred, failed or stale
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("received_at", UTCDateTime, nullable=False),
    Column("attempts", Integer, nullable=False),  # live; copied to the event when it ends
    Column("lease_token", String(32)),  # set while a worker holds the event
    Column("lease_expires_at", UTCDateTime),
    **fill_factor(QUEUE_FILLFACTOR),
)
_queue_waiting = event_queue.c.state.in_([s.value for s in WAITING_STATUSES])
# In the lease's order, (next_attempt_at, id): a lease reads the first due rows and stops
# (schema 8's lesson). Leased rows stay in it, at its head; a lease steps over them.
Index(
    "ix_hookinbox_event_queue_due",
    event_queue.c.next_attempt_at,
    event_queue.c.id,
    **partial(_queue_waiting),
)
# What operators count, list and alert on: every open event by state, oldest first.
Index("ix_hookinbox_event_queue_open", event_queue.c.state, event_queue.c.received_at)

# Sources an operator (or the auto-pause) paused (schema 16): their events are still received
# and stored, none is processed until the source is resumed. Read by every lease round (a
# handful of rows at most, usually none); an event of a paused source that a lease takes is
# parked, its queue row in the state `paused`, which the due index does not cover.
paused_sources = Table(
    "hookinbox_paused_sources",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("paused_at", UTCDateTime, nullable=False),
    Column("actor", String(255), nullable=False),
    Column("reason", SafeText),
)

# One row per delivery, new or duplicate: the duplicate ratio over any window (the early
# warning of a slow endpoint, seed 003) and each event's delivery history. Pruned with events.
deliveries = Table(
    "hookinbox_deliveries",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("event_id", String(255), nullable=False),
    Column("received_at", UTCDateTime, nullable=False),
    Column("duplicate", Boolean, nullable=False),
    Column("key_conflict", Boolean, nullable=False),
)
Index("ix_hookinbox_deliveries_received_at", deliveries.c.received_at)
Index("ix_hookinbox_deliveries_event", deliveries.c.source, deliveries.c.event_id)

# Scheduled jobs (the daily pruner): the last run, claimed with a compare-and-set so that one
# process of many runs each scheduled slot.
jobs = Table(
    "hookinbox_jobs",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("last_run_at", UTCDateTime, nullable=False),
    Column("last_result", SafeText),
)

# The ordering guard's high-water marks: the newest position applied per object key.
ordering = Table(
    "hookinbox_ordering",
    metadata,
    Column("object_key", String(255), primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("source", String(64), nullable=False),
    Column("event_id", String(255), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Dashboard sessions signed out before their cookie expired: the cookie is signed, not stored,
# so signing out records its session id here until the cookie could no longer be valid anyway.
revoked_sessions = Table(
    "hookinbox_revoked_sessions",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("expires_at", UTCDateTime, nullable=False),
)

# The audit trail: one row per event an operator replayed (CLI or dashboard), written in the
# replay's own transaction, so a replay refused or rolled back leaves no row. What the event
# was before (status, outcome, attempts) is kept here because the replay resets status and
# outcome (attempts keep counting; `previous_attempts` is the count at the replay).
# Never pruned: operator actions are few, and their history is the point.
audit = Table(
    "hookinbox_audit",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("event_id", String(255), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    # replay, forced_replay; pause, resume (a whole source: event_id "*"); expunge
    Column("action", String(32), nullable=False),
    Column("actor", String(255), nullable=False),  # the CLI's OS user, or "dashboard"
    Column("reason", SafeText),
    Column("previous_status", String(16), nullable=False),
    Column("previous_outcome", String(32)),
    Column("previous_attempts", Integer, nullable=False),
)
Index("ix_hookinbox_audit_event", audit.c.source, audit.c.event_id, audit.c.id)

# Worker liveness: each worker or relay process beats here (one row per process, keyed by a
# random id) every few seconds. A row whose `expires_at` has passed is a process that stopped
# beating (killed, hung, cut off from the database); a clean stop deletes its row, and rows long
# expired are deleted by the next beat of any process. Each row says how long it counts as alive,
# so readers need not know the writers' interval.
workers = Table(
    "hookinbox_workers",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(16), nullable=False),  # worker (events, maybe the outbox), relay
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("last_beat_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)
Index("ix_hookinbox_workers_expires_at", workers.c.expires_at)

# The transactional outbox: side effects written in the handler's transaction, delivered later
# by the relay, at least once, with the key as the receiver's idempotency key. Written when the
# message is sent and once more when its delivery ends (schema 15): while it waits and while a
# relay holds it, what changes is in the narrow queue table below, and no index of this table
# covers a column its delivery writes (status, attempts, delivered_at, last_error), so that
# update stays heap-only on PostgreSQL, on the room the fill factor leaves. The lease columns
# are unused since schema 15.
outbox = Table(
    "hookinbox_outbox",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("destination", String(64), nullable=False),
    Column("message_key", String(255), nullable=False),
    Column("ordering_key", String(255)),
    Column("payload", LongText, nullable=False),  # JSON
    Column("source", String(64)),
    Column("event_id", String(255)),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("lease_token", String(32)),
    Column("lease_expires_at", UTCDateTime),
    Column("last_error", SafeText),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    # The trace context of the handler that sent it (OpenTelemetry, JSON): the relay's span
    # continues that trace. NULL when tracing was off.
    Column("trace_context", LongText),
    UniqueConstraint("destination", "message_key", name="uq_hookinbox_outbox_destination_key"),
    **fill_factor(OUTBOX_FILLFACTOR),
)
Index("ix_hookinbox_outbox_created_at", outbox.c.created_at)

# The relay's unfinished work, one row per message not delivered (pending, or failed for good),
# deleted when it is delivered. Inserted with the message (a trigger: every writer, whatever
# its version). A lease changes only columns no index covers (token, expiry, attempts), so it
# stays heap-only; the ordering key is copied so that "is an earlier message with my key still
# unsent?" stays a probe of this small table.
outbox_queue = Table(
    "hookinbox_outbox_queue",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=False),  # the message's row id
    Column("state", String(16), nullable=False),  # pending or failed
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("attempts", Integer, nullable=False),  # live; copied to the message when it ends
    Column("lease_token", String(32)),  # set while a relay holds the message
    Column("lease_expires_at", UTCDateTime),
    Column("ordering_key", String(255)),
    **fill_factor(OUTBOX_QUEUE_FILLFACTOR),
)
Index(  # in the relay's lease order, as the events' (above)
    "ix_hookinbox_outbox_queue_due",
    outbox_queue.c.next_attempt_at,
    outbox_queue.c.id,
    **partial(outbox_queue.c.state == MessageStatus.PENDING.value),
)
Index(
    "ix_hookinbox_outbox_queue_ordering",
    outbox_queue.c.ordering_key,
    outbox_queue.c.id,
    **partial(outbox_queue.c.ordering_key.is_not(None)),
)

# Trust on first use (Asana's `X-Hook-Secret`): the secrets a source learned from a first
# handshake, and the window an operator opened for one (`hookinbox trust`). In the database
# because every HTTP process of `serve` must see what one learned, after a restart too.
learned_secrets = Table(
    "hookinbox_learned_secrets",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("secret", String(255), primary_key=True),
    Column("learned_at", UTCDateTime, nullable=False),
)
trust_windows = Table(
    "hookinbox_trust_windows",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("closes_at", UTCDateTime, nullable=False),
)


_CONSTANT = re.compile(r"[a-z_]+")


def status_is(column: sa.ColumnElement[str], *values: str) -> sa.ColumnElement[bool]:
    """`column = 'a'` or `column IN ('a', 'b')` with the constants written into the SQL.

    SQLite uses a partial index only when it can prove, while planning, that the query's
    WHERE implies the index's; a bound parameter (`status IN (?, ?)`) proves nothing, and the
    queue's look-ups scanned the whole table: 4 events/s at a million rows. The values are
    hookinbox's own status names, never input.
    """
    literals = _literals(values)
    return column == literals[0] if len(literals) == 1 else column.in_(literals)


def status_not(column: sa.ColumnElement[str], *values: str) -> sa.ColumnElement[bool]:
    """`column != 'a'` or `column NOT IN ('a', 'b')`, the constants written as `status_is`'s."""
    literals = _literals(values)
    return column != literals[0] if len(literals) == 1 else column.not_in(literals)


def _literals(values: tuple[str, ...] | list[str]) -> list[sa.ColumnElement[str]]:
    for value in values:
        if not _CONSTANT.fullmatch(value):
            raise ValueError(f"not a status name: {value!r}")
    return [sa.literal_column(f"'{value}'", sa.String) for value in values]
