"""Storage: hookinbox's tables and every query against them (SQLite and PostgreSQL)."""

from hookinbox.storage._deliveries import record_delivery
from hookinbox.storage._engine import StoreOptions, parse_url
from hookinbox.storage._errors import UniqueViolation, translate_errors, unique_violation
from hookinbox.storage._migrations import LATEST_VERSION
from hookinbox.storage._notify import Listener, supports_listen
from hookinbox.storage._ordering import advance as advance_ordering
from hookinbox.storage._queue import (
    Leased,
    Release,
    claim,
    has_due,
    lease_due,
    mark_inline,
    next_due_at,
    release,
    set_outcome,
    sweep_expired,
)
from hookinbox.storage._schema import events, metadata
from hookinbox.storage._store import Store, event_from_row

__all__ = [
    "LATEST_VERSION",
    "Leased",
    "Listener",
    "Release",
    "Store",
    "StoreOptions",
    "UniqueViolation",
    "advance_ordering",
    "claim",
    "event_from_row",
    "events",
    "has_due",
    "lease_due",
    "mark_inline",
    "metadata",
    "next_due_at",
    "parse_url",
    "record_delivery",
    "release",
    "set_outcome",
    "supports_listen",
    "sweep_expired",
    "translate_errors",
    "unique_violation",
]
