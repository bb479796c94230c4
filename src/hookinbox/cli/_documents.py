"""The JSON documents the operator commands print: one schema, the same names everywhere.

An event is described by the same fields in `events list --json` (one per event), `events show
--json` (with its headers, body and deliveries added) and the dashboard's detail page; the
names are the delivery log's and the HTTP answers' (`event_id`, `event_type`, docs/openapi.yaml)
and `status --json` counts by `source` and `status` under the same names. docs/cli.md ("JSON
output") lists every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookinbox._model import Event

EVENT_FIELDS = (
    "source",
    "event_id",
    "event_type",
    "status",
    "outcome",
    "attempts",
    "attempts_before_replay",
    "deferrals",
    "delivery_count",
    "key_conflicts",
    "occurred_at",
    "received_at",
    "next_attempt_at",
    "processed_at",
    "last_delivery_at",
    "forced_replay_at",
    "received_via",
    "last_error",
)
"""The fields of an event in every document, in the order `events show` prints them."""

DELIVERY_FIELDS = ("received_at", "duplicate", "key_conflict")

AUDIT_FIELDS = (
    "at",
    "action",
    "actor",
    "reason",
    "previous_status",
    "previous_outcome",
    "previous_attempts",
)
"""An audit row: an operator action on the event (`hookinbox_audit`'s columns)."""


def event_summary(row: Mapping[str, Any]) -> dict[str, Any]:
    """An event from a row of `list_events` (whose columns carry these names)."""
    document = {name: _value(row[name]) for name in EVENT_FIELDS}
    document["attempts_before_replay"] = row["attempts_before_replay"] or 0  # NULL: never
    return document


def event_document(event: Event) -> dict[str, Any]:
    """An event from the model handlers see (`Event.id` is the `event_id`, ...)."""
    return {
        "source": event.source,
        "event_id": event.id,
        "event_type": event.type,
        "status": event.status.value,
        "outcome": event.outcome,
        "attempts": event.attempts,
        "attempts_before_replay": event.attempts_before_replay,
        "deferrals": event.deferrals,
        "delivery_count": event.delivery_count,
        "key_conflicts": event.key_conflicts,
        "occurred_at": _value(event.occurred_at),
        "received_at": _value(event.received_at),
        "next_attempt_at": _value(event.next_attempt_at),
        "processed_at": _value(event.processed_at),
        "last_delivery_at": _value(event.last_delivery_at),
        "forced_replay_at": _value(event.forced_replay_at),
        "received_via": event.received_via,
        "last_error": event.last_error,
    }


def delivery_document(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _value(row[name]) for name in DELIVERY_FIELDS}


def audit_document(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _value(row[name]) for name in AUDIT_FIELDS}


def _value(value: Any) -> Any:
    """Times as ISO 8601 in UTC; everything else as it is."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value
