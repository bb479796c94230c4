"""Rows as hookinbox's values: events (with what their queue row says while they are open) and
outbox messages.

An open event's live state is split between two rows: `hookinbox_events` has what was written
at ingest and when an attempt ended, `hookinbox_event_queue` its lease and attempt count while
it is unfinished. `EVENT_VIEW` joins them for every reader: an event held by a worker reads as
`processing`, and its attempts and next attempt are the queue's. Its body and headers are in
`hookinbox_payloads` (schema 14): `EVENT_WITH_PAYLOAD` joins them for the readers that need
them, and `event_from_row` reads them through `_payloads.payload_of`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from hookinbox._model import Event, Message, MessageStatus, Status
from hookinbox._records import Leased, LeasedMessage
from hookinbox._storage._payloads import payload_of
from hookinbox._storage._schema import event_queue, events, outbox, outbox_queue, payloads

_HELD = event_queue.c.lease_token.is_not(None)

_PARKED = event_queue.c.state == sa.literal_column(f"'{Status.PAUSED.value}'")

EVENT_STATUS = sa.case(
    (_HELD, sa.literal(Status.PROCESSING.value)),
    (_PARKED, sa.literal(Status.PAUSED.value)),
    else_=events.c.status,
).label("status")
"""An event's status as operators see it: `processing` while a worker holds it, `paused` while
it is parked because its source is paused (the events row keeps the status it will have
again when the source is resumed)."""

_LIVE = {
    "status": EVENT_STATUS,
    "attempts": sa.func.coalesce(event_queue.c.attempts, events.c.attempts).label("attempts"),
    "next_attempt_at": sa.func.coalesce(
        event_queue.c.next_attempt_at, events.c.next_attempt_at
    ).label("next_attempt_at"),
}
EVENT_JOIN = events.outerjoin(event_queue, event_queue.c.id == events.c.id)
PAYLOAD_COLUMNS = (payloads.c.body, payloads.c.headers)
EVENT_WITH_PAYLOAD = EVENT_JOIN.outerjoin(payloads, payloads.c.id == events.c.id)
"""`EVENT_JOIN` with each event's payload row (an outer join: an event without one reads an
empty body)."""


def event_columns(*, without: tuple[str, ...] = ()) -> list[sa.ColumnElement[Any]]:
    """The events' columns as readers see them (live values from the queue) and their
    payload's (`body`, `headers`: read from `EVENT_WITH_PAYLOAD`), less `without`."""
    columns = [_LIVE.get(c.name, c) for c in events.c if c.name not in without]
    return columns + [c for c in PAYLOAD_COLUMNS if c.name not in without]


def select_events(*, without: tuple[str, ...] = ()) -> sa.Select[Any]:
    return sa.select(*event_columns(without=without)).select_from(EVENT_WITH_PAYLOAD)


def event_from_row(row: Mapping[Any, Any]) -> Event:
    body, headers = payload_of(row["body"], row["headers"], row["source"], row["event_id"])
    return Event(
        row_id=row["id"],
        source=row["source"],
        id=row["event_id"],
        type=row["event_type"],
        occurred_at=row["occurred_at"],
        received_at=row["received_at"],
        body=body,
        headers=headers,
        status=Status(row["status"]),
        attempts=row["attempts"],
        delivery_count=row["delivery_count"],
        last_error=row["last_error"],
        outcome=row["outcome"],
        deferrals=row["deferrals"],
        deferred_since=row["deferred_since"],
        next_attempt_at=row["next_attempt_at"],
        processed_at=row["processed_at"],
        key_conflicts=row["key_conflicts"],
        last_delivery_at=row["last_delivery_at"],
        forced_replay_at=row["forced_replay_at"],
        attempts_before_replay=row["attempts_before_replay"] or 0,
        received_via=row["received_via"],
    )


def leased_event(row: Mapping[Any, Any], token: str, until: datetime) -> Leased:
    """A row the event queue's lease returned: the event, as its worker holds it."""
    live = {
        **row,
        "status": Status.PROCESSING.value,
        "attempts": row["queue_attempts"],
        "next_attempt_at": row["queue_next_attempt_at"],
    }
    return Leased(event_from_row(live), token, until)


def message_from_row(row: Mapping[Any, Any]) -> Message:
    return Message(
        row_id=row["id"],
        destination=row["destination"],
        key=row["message_key"],
        payload=json.loads(row["payload"]),
        ordering_key=row["ordering_key"],
        source=row["source"],
        event_id=row["event_id"],
        attempts=row["attempts"],
        created_at=row["created_at"],
    )


def leased_message(row: Mapping[Any, Any], token: str, until: datetime) -> LeasedMessage:
    """A row the relay's lease returned: the message, its attempts the queue's live count."""
    live = {**row, "attempts": row["queue_attempts"]}
    return LeasedMessage(message_from_row(live), token, until, row["trace_context"])


MESSAGE_HELD = sa.and_(
    outbox_queue.c.lease_token.is_not(None), outbox_queue.c.state == MessageStatus.PENDING.value
)
"""A relay holds the message (its queue row)."""
MESSAGE_STATUS = sa.case(
    (MESSAGE_HELD, sa.literal(MessageStatus.DELIVERING.value)), else_=outbox.c.status
).label("status")
"""A message's status as operators see it, its queue row outer-joined: `delivering` while a
relay holds it."""
