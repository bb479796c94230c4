"""`hookinbox events list [APP]` and `hookinbox events show [APP] SOURCE EVENT_ID`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from hookinbox import _ranges as ranges
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    app_argument,
    database_url_option,
    deprecated_app_option,
    from_command_line,
    json_option,
    resolve_app,
    split_app,
)
from hookinbox.cli._output import Table, echo_untrusted, emit_json, say, show, show_json
from hookinbox.cli._types import number

STATUSES = click.Choice(
    ["pending", "processing", "deferred", "processed", "unhandled", "failed", "stale", "invalid",
     "paused"]
)  # fmt: skip
"""`Status`'s values (a test checks they agree), spelt out so `--help` imports no storage."""
STATUS_METAVAR = "STATUS"
"""`--status STATUS`, the choices in the help text: click's `[pending|processing|...]` is 81
columns wide in `--help`, one line it cannot wrap."""
STATUS_NAMES = ", ".join(STATUSES.choices)


@click.group(short_help=short_help("events"))
def events() -> None:
    """Find and read stored events."""


@events.command("list")
@app_argument(required=False)
@deprecated_app_option
@database_url_option
@click.option(
    "--status", "state", type=STATUSES, metavar=STATUS_METAVAR, help=f"One of {STATUS_NAMES}."
)
@click.option("--source")
@click.option("--type", "event_type")
@click.option("--since", help="1h, 2d, or an ISO 8601 time.")
@click.option("--limit", default=50, show_default=True, type=number(ranges.LIST_LIMIT))
@click.option(
    "--wide",
    is_flag=True,
    help="On a terminal too, every column, each whole (long lines wrap); by default columns "
    "that do not fit the window are left out, never an event id or a status.",
)
@json_option
def list_command(
    app: str | None,
    app_option: str | None,
    database_url: str | None,
    state: str | None,
    source: str | None,
    event_type: str | None,
    since: str | None,
    limit: int,
    wide: bool,
    as_json: bool,
) -> None:
    """Events, newest first.

    Exit codes: 0 listed (none may match); 1 the database is unavailable; 2 bad usage or
    configuration (an unknown source name, with a hint).
    """
    from hookinbox._model import Status
    from hookinbox._operations import parse_time
    from hookinbox._records import EventFilter
    from hookinbox.cli._documents import event_summary
    from hookinbox.cli._target import opened

    app = resolve_app(app, app_option, explicit=from_command_line("app"))
    now = datetime.now(UTC)
    after = None if since is None else parse_time(since, now)
    filters = EventFilter(Status(state) if state else None, source, event_type, after)
    with opened(app, database_url) as target:
        rows = target.operations.list_events(filters, limit)
        if not rows:
            target.check_source(source)
    documents = [event_summary(row) for row in rows]
    if as_json:
        emit_json(documents)
        return
    table = Table(
        ["received", "source", "event id", "type", "status", "attempts", "deliveries",
         "outcome / last error"],
        right=frozenset({"attempts", "deliveries"}),
        keep=frozenset({"source", "event id", "status"}),  # what `events show` and `replay` take
        drop=["deliveries", "attempts", "received", "outcome / last error", "type"],
    )  # fmt: skip
    for row, document in zip(rows, documents, strict=True):
        note = row["outcome"] or (row["last_error"] or "").split("\n", 1)[0]
        table.add_row(
            row["received_at"].strftime("%Y-%m-%d %H:%M:%S"),
            document["source"],
            document["event_id"],
            document["event_type"] or "-",
            document["status"],
            document["attempts"],
            document["delivery_count"],
            note[:80],
        )
    if rows:
        left_out = show(table, wide=wide)
        if left_out:
            say(f"not shown, for want of width: {', '.join(left_out)} (--wide shows them)",
                style="dim", err=True)  # fmt: skip
    else:
        say("no events match", err=True)


@events.command("show")
@click.argument("arguments", nargs=-1, metavar="[APP] SOURCE EVENT_ID")
@deprecated_app_option
@database_url_option
@json_option
def show_command(
    arguments: tuple[str, ...], app_option: str | None, database_url: str | None, as_json: bool
) -> None:
    """One event: its fields, body, last error, every delivery and its audit trail. An
    erased event (`hookinbox expunge`) says "payload erased" in place of its headers and body.

    Exit codes: 0 shown; 1 no such event, or the database is unavailable; 2 bad usage or
    configuration (an unknown source name, with a hint).
    """
    from hookinbox.cli._documents import audit_document, delivery_document, event_document
    from hookinbox.cli._target import opened

    app, (source, event_id) = split_app(arguments, ("SOURCE", "EVENT_ID"))
    app = resolve_app(app, app_option, explicit=len(arguments) == 3)
    with opened(app, database_url) as target:
        record = target.operations.event_record(source, event_id)
        if record is None:
            target.check_source(source)
            raise click.ClickException(f"no event {source} {event_id}")
    event = record.event
    history = [delivery_document(row) for row in record.deliveries]
    trail = [audit_document(row) for row in record.audit]
    fields = event_document(event)
    try:
        body: Any = event.payload
    except ValueError:
        body = event.body.decode("utf-8", "replace")
    if as_json:
        emit_json({**fields, "headers": event.headers, "body": body, "deliveries": history,
                   "audit": trail, "payload_erased": record.payload_erased})  # fmt: skip
        return
    table = Table(["field", "value"], header=False, keep=frozenset({"field", "value"}))
    for name, value in fields.items():
        if name != "last_error":
            table.add_row(name, value)
    show(table)
    say("headers", style="bold")
    if record.payload_erased:  # an empty body that was not empty when it came
        say("payload erased (see the audit trail)", style="dim")
    else:
        show_json(event.headers)
    say("body", style="bold")
    if record.payload_erased:
        say("payload erased", style="dim")
    elif isinstance(body, str):
        echo_untrusted(body)
    else:
        show_json(body)
    if event.last_error:
        say("last error", style="bold")
        echo_untrusted(event.last_error)
    deliveries = Table(["received", "duplicate", "key conflict"], "deliveries")
    for entry in history:
        deliveries.add_row(entry["received_at"], entry["duplicate"], entry["key_conflict"])
    show(deliveries)
    if trail:
        actions = Table(
            ["when", "action", "who", "reason", "was", "outcome", "attempts"],
            "audit",
            keep=frozenset({"action", "was"}),
        )
        for row in trail:
            actions.add_row(
                row["at"], row["action"], row["actor"], row["reason"],
                row["previous_status"], row["previous_outcome"], row["previous_attempts"],
            )  # fmt: skip
        show(actions)
