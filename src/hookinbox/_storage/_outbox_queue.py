"""Schema 15's queue of the relay's unfinished work, `hookinbox_outbox_queue`: the table as
released, and the copy of the messages not yet delivered into it.

Schema 9 moved the events' unfinished work out of `hookinbox_events` so that processing an
event updates no indexed column of that table (claims that stay heap-only on PostgreSQL);
schema 15 does the same for the outbox (docs/storage.md, "Upgrading to schema 15"). The open
messages are few however large the outbox grows (only unsent and failed ones), so the copy is
made inside the step, under its lock: what it reads is the backlog, through the open index it
then drops, not the delivered history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from hookinbox._storage._dialects import dialect_of
from hookinbox._storage._dialects._partial import partial
from hookinbox._storage._dialects._table_options import row_id_type
from hookinbox._storage._types import UTCDateTime

if TYPE_CHECKING:
    from alembic.operations import Operations

QUEUE = "hookinbox_outbox_queue"
QUEUE_FILLFACTOR = 30
"""The queue's small rows are rewritten by each lease and retry: most of each page is room (at
50 %, 66 % of the leases of tests/storage/test_schema_15.py's drain were heap-only)."""
OUTBOX_FILLFACTOR = 50
"""Room on each page of `hookinbox_outbox` for the one version each message's delivery writes,
before any pruning (bench/space.py: at 80 % 70 % of the deliveries were heap-only, at 60 %
86 %; overlapping relay transactions keep old versions from being pruned in time, as the
events' at schema 9)."""


def create_queue_table(op: Operations) -> None:
    """Schema 15's queue table and its indexes, as released, each unless it exists."""
    op.create_table(
        QUEUE,
        sa.Column("id", row_id_type(), primary_key=True, autoincrement=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("lease_token", sa.String(32)),
        sa.Column("lease_expires_at", UTCDateTime),
        sa.Column("ordering_key", sa.String(255)),
        if_not_exists=True,
    )
    dialect_of(op.get_context().dialect).set_fill_factor(op, QUEUE, QUEUE_FILLFACTOR)
    op.create_index(
        "ix_hookinbox_outbox_queue_due",
        QUEUE,
        ["next_attempt_at", "id"],
        **partial(sa.text("state = 'pending'")),
        if_not_exists=True,
    )
    op.create_index(
        "ix_hookinbox_outbox_queue_ordering",
        QUEUE,
        ["ordering_key", "id"],
        **partial(sa.text("ordering_key IS NOT NULL")),
        if_not_exists=True,
    )


def copy_open_messages(op: Operations) -> None:
    """Every message not delivered gets its queue row, unless it has one (a step run again,
    where DDL commits on its own): a failed one `failed`, the others `pending`, `delivering`
    ones (before schema 9) too; a relay's lease is kept, so that no second relay sends the
    message while the first one still may."""
    op.execute(
        f"INSERT INTO {QUEUE}"
        " (id, state, next_attempt_at, attempts, lease_token, lease_expires_at, ordering_key)"
        " SELECT m.id, CASE WHEN m.status = 'failed' THEN 'failed' ELSE 'pending' END,"
        " m.next_attempt_at, m.attempts, m.lease_token, m.lease_expires_at, m.ordering_key"
        " FROM hookinbox_outbox m WHERE m.status <> 'delivered'"
        f" AND NOT EXISTS (SELECT 1 FROM {QUEUE} q WHERE q.id = m.id)"
    )
