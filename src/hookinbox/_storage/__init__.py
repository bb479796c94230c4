"""Storage: hookinbox's tables and every statement against them, behind one object.

`Store` owns the engine, the dialect (`_dialects/`: everything that differs between SQLite and
PostgreSQL) and one gateway per role (`store.ingest`, `store.events`, `store.messages`,
`store.outbox`, `store.ordering`, `store.operator`, `store.housekeeping`, `store.liveness`,
`store.stats`); the values they take and return are in `hookinbox._records`. This front door
is what the other layers import; every other module here is private to the package.
"""

from hookinbox._storage._async_store import AsyncStore
from hookinbox._storage._dialects import (
    Dialect,
    async_url,
    dialect_for_django,
    dialect_for_url,
    parse_url,
)
from hookinbox._storage._errors import translate_errors, unique_violation
from hookinbox._storage._group_commit import GroupCommit, GroupCommitter
from hookinbox._storage._housekeeping import Cutoffs, Sweep
from hookinbox._storage._migrations import LATEST_VERSION
from hookinbox._storage._notify import Listener
from hookinbox._storage._options import HIDE_PARAMETERS, StoreOptions
from hookinbox._storage._pressure import PressureGauge
from hookinbox._storage._store import Store

__all__ = [
    "HIDE_PARAMETERS",
    "LATEST_VERSION",
    "AsyncStore",
    "Cutoffs",
    "Dialect",
    "GroupCommit",
    "GroupCommitter",
    "Listener",
    "PressureGauge",
    "Store",
    "StoreOptions",
    "Sweep",
    "async_url",
    "dialect_for_django",
    "dialect_for_url",
    "parse_url",
    "translate_errors",
    "unique_violation",
]
