"""Storage: hookinbox's tables and every query against them (SQLite and PostgreSQL)."""

from hookinbox.storage._admin import (
    EventFilter,
    ReplayResult,
    claim_job,
    count_events,
    count_prunable,
    delivery_history,
    last_job_run,
    list_events,
    notify_workers,
    prune_batch,
    record_job_result,
    replay_matching,
    replay_one,
)
from hookinbox.storage._batch import record_deliveries
from hookinbox.storage._deliveries import record_delivery
from hookinbox.storage._engine import StoreOptions, parse_url
from hookinbox.storage._errors import UniqueViolation, translate_errors, unique_violation
from hookinbox.storage._group_commit import GroupCommit, GroupCommitter
from hookinbox.storage._migrations import LATEST_VERSION
from hookinbox.storage._notify import Listener, supports_listen
from hookinbox.storage._ordering import advance as advance_ordering
from hookinbox.storage._outbox import (
    LeasedMessage,
    Settlement,
    enqueue,
    has_message_due,
    lease_messages,
    next_message_due_at,
    outbox_backlog,
    settle,
    sweep_messages,
)
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
from hookinbox.storage._schema import deliveries, events, metadata, outbox
from hookinbox.storage._stats import (
    DuplicateRatio,
    OpenFigures,
    Report,
    duplicate_ratio,
    open_figures,
    report,
)
from hookinbox.storage._store import Store, event_from_row

__all__ = [
    "LATEST_VERSION",
    "DuplicateRatio",
    "EventFilter",
    "GroupCommit",
    "GroupCommitter",
    "Leased",
    "LeasedMessage",
    "Listener",
    "OpenFigures",
    "Release",
    "ReplayResult",
    "Report",
    "Settlement",
    "Store",
    "StoreOptions",
    "UniqueViolation",
    "advance_ordering",
    "claim",
    "claim_job",
    "count_events",
    "count_prunable",
    "deliveries",
    "delivery_history",
    "duplicate_ratio",
    "enqueue",
    "event_from_row",
    "events",
    "has_due",
    "has_message_due",
    "last_job_run",
    "lease_due",
    "lease_messages",
    "list_events",
    "mark_inline",
    "metadata",
    "next_due_at",
    "next_message_due_at",
    "notify_workers",
    "open_figures",
    "outbox",
    "outbox_backlog",
    "parse_url",
    "prune_batch",
    "record_deliveries",
    "record_delivery",
    "record_job_result",
    "release",
    "replay_matching",
    "replay_one",
    "report",
    "set_outcome",
    "settle",
    "supports_listen",
    "sweep_expired",
    "sweep_messages",
    "translate_errors",
    "unique_violation",
]
