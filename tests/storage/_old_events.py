"""`hookinbox_events` as schemas 1 to 13 had it, with each event's `body` and `headers`: the
table older processes write, for tests that play them (schema 14 moved those columns to
`hookinbox_payloads`)."""

from __future__ import annotations

import sqlalchemy as sa

from hookinbox._storage._schema import events
from hookinbox._storage._types import LongBinary, LongText

EVENTS_13 = events.to_metadata(sa.MetaData())
EVENTS_13.append_column(sa.Column("body", LongBinary, nullable=False))
EVENTS_13.append_column(sa.Column("headers", LongText, nullable=False))

PAYLOAD_KEYS = ("body", "headers")


def live(row: dict[str, object]) -> dict[str, object]:
    """An event row of `EVENTS_13` as the live table takes it (without its payload)."""
    return {k: v for k, v in row.items() if k not in PAYLOAD_KEYS}
