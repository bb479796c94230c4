"""Storage: hookinbox's tables and every query against them (SQLite and PostgreSQL)."""

from hookinbox.storage._deliveries import record_delivery
from hookinbox.storage._engine import StoreOptions, parse_url
from hookinbox.storage._errors import translate_errors
from hookinbox.storage._migrations import LATEST_VERSION
from hookinbox.storage._schema import events, metadata
from hookinbox.storage._store import Store, event_from_row

__all__ = [
    "LATEST_VERSION",
    "Store",
    "StoreOptions",
    "event_from_row",
    "events",
    "metadata",
    "parse_url",
    "record_delivery",
    "translate_errors",
]
