"""Reading an operator's request: a form, the event list's filters, a payload search, a page
cursor, an event's key.

Each reader refuses what it cannot use with a 400 that says why (`bad_request`), before any
query runs: a malformed time, an unknown status, a NUL (which PostgreSQL text cannot hold), a
cursor without a time zone. Forms are read without python-multipart: every form of the
dashboard is URL-encoded and small.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import FormData, QueryParams, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request

from hookinbox._errors import ConfigurationError
from hookinbox._model import Status
from hookinbox._operations import parse_time
from hookinbox._records import Cursor, EventFilter, PayloadMatch, Selection, search_for
from hookinbox._text import printable

URLENCODED = "application/x-www-form-urlencoded"


def bad_request(message: str) -> HTTPException:
    return HTTPException(400, message)


FREE_TEXT = frozenset({"reason"})
"""Fields kept as typed (escaped where stored and shown), whatever they hold."""


def refuse_nul(fields: QueryParams | FormData) -> None:
    """A 400 for a NUL in any field but free text: no stored id, type, source or value holds
    one (PostgreSQL text cannot), and on PostgreSQL the query itself would fail (a 500)."""
    for name, value in fields.multi_items():
        if isinstance(value, str) and "\x00" in value and name not in FREE_TEXT:
            raise bad_request(
                f"{printable(name)[:40]}: a NUL character (\\x00) is never part of a filter, "
                "a search or an event id"
            )


def parse_filters(params: QueryParams | FormData, now: datetime) -> EventFilter:
    """The event list's form fields as a filter; a malformed value is a 400 that says why."""

    def text(name: str) -> str | None:
        value = params.get(name)
        return value.strip() or None if isinstance(value, str) else None

    status = text("status")
    try:
        chosen = Status(status) if status else None
        since, until = (text("since"), text("until"))
        return EventFilter(
            status=chosen,
            source=text("source"),
            event_type=text("type"),
            since=parse_time(since, now) if since else None,
            until=parse_time(until, now) if until else None,
            event_id=text("q"),
            error_contains=text("error"),
        )
    except ValueError:
        raise bad_request(f"unknown status {status!r}") from None
    except ConfigurationError as error:
        raise bad_request(str(error)) from None


def parse_search(params: QueryParams) -> PayloadMatch | None:
    """The payload search fields (`path`, `equals`), checked; a 400 that says why otherwise."""
    path, value = params.get("path", "").strip(), params.get("equals", "")
    if not path:
        return None
    try:
        return search_for(path, value.strip())
    except ValueError as error:
        raise bad_request(str(error)) from None


MAX_FORM_BYTES = 16 * 1024
"""The dashboard's forms hold a token and a few filter fields."""


async def read_form(request: Request) -> FormData:
    """A URL-encoded form (all the dashboard's forms are), parsed without python-multipart."""
    if request.headers.get("content-type", "").split(";")[0] != URLENCODED:
        raise HTTPException(415, f"forms must be sent as {URLENCODED}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, "form too large")
    try:
        fields: list[tuple[str, str | UploadFile]] = list(
            parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=50)
        )
    except (UnicodeDecodeError, ValueError):
        raise bad_request("malformed form") from None
    return FormData(fields)


def encode_cursor(row: dict[str, Any]) -> str:
    return f"{row['received_at'].isoformat()}~{row['id']}"


def parse_cursor(text: str) -> Cursor:
    """The `before` field: the last row's `received_at~id`, its time with its zone (as
    `encode_cursor` writes it); a time without one is a 400, never compared as if UTC."""
    received_at, _, row_id = text.rpartition("~")
    try:
        at, number = datetime.fromisoformat(received_at), int(row_id)
    except ValueError:
        raise bad_request(f"not a page cursor: {text!r}") from None
    if at.tzinfo is None:
        raise bad_request(f"not a page cursor: {text!r} (its time has no time zone)")
    return at, number


def filter_fields(filters: EventFilter) -> dict[str, str]:
    """A filter as the form fields that produce it (for links and hidden inputs)."""
    fields = {
        "status": filters.status.value if filters.status else None,
        "source": filters.source,
        "type": filters.event_type,
        "since": filters.since.isoformat() if filters.since else None,
        "until": filters.until.isoformat() if filters.until else None,
        "q": filters.event_id,
        "error": filters.error_contains,
    }
    return {name: value for name, value in fields.items() if value}


SELECTION_FIELDS = ("source", "until", "path", "equals")
"""A bulk erasure's fields: the events list's source, "received before" and payload search."""


def parse_selection(params: QueryParams | FormData, now: datetime) -> Selection | None:
    """A bulk erasure's events: those of `source` received before `until` (`30d`: longer
    ago than 30 days, or an ISO time) and/or whose body holds `equals` at `path`. None when
    the fields do not name a source and a filter yet (the page then asks for them); a value
    that is malformed is a 400 that says why."""
    given = {name: params.get(name) for name in SELECTION_FIELDS}
    source, until, path, value = (v.strip() if isinstance(v, str) else "" for v in given.values())
    try:
        before = parse_time(until, now) if until else None
        payload = search_for(path, value) if path else None
    except (ConfigurationError, ValueError) as error:
        raise bad_request(str(error)) from None
    if not source or (before is None and payload is None):
        return None
    return Selection(source, before, payload)


def selection_fields(selection: Selection) -> dict[str, str]:
    """A selection as the form fields that produce it, its time fixed (ISO): the erasure
    confirmed erases what the dry run counted, however long the operator took to confirm."""
    fields = {
        "source": selection.source,
        "until": selection.before.isoformat() if selection.before else None,
        "path": ".".join(selection.payload.path) if selection.payload else None,
        "equals": selection.payload.value if selection.payload else None,
    }
    return {name: value for name, value in fields.items() if value is not None}


def event_key(params: QueryParams | FormData) -> tuple[str, str]:
    """The event a page or a replay is about: its `source` and `id` fields."""
    source, event_id = params.get("source"), params.get("id")
    if not isinstance(source, str) or not isinstance(event_id, str) or not event_id:
        raise bad_request("give source and id")
    return source, event_id


NOT_IN_BULK = frozenset({Status.PROCESSING, Status.PROCESSED})
"""Statuses a bulk replay from the dashboard refuses: a worker holds a processing event, and
replaying processed ones runs their handlers again (one by one from an event's page, or
`hookinbox replay --status processed --force`)."""


def replayable(filters: EventFilter) -> EventFilter:
    """The events a bulk replay takes: the filter's, failed ones when it names no status; a
    status it cannot replay in bulk is a 400 that says why."""
    if filters.status is None:
        return replace(filters, status=Status.FAILED)
    if filters.status in NOT_IN_BULK:
        raise bad_request(
            f"{filters.status.value} events are not replayed in bulk here: replay one from its "
            "page, or use hookinbox replay --status processed --force"
        )
    return filters
