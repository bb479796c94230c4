"""Operator commands: `status`, `events list|show`, `replay`, `prune`.

Each works from `--app module:attribute` (the inbox, with its sources and retention) or from
`--database-url` alone where nothing but the tables is needed. Human output is aligned tables;
`--json` prints one JSON document for scripts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import Inbox
from hookinbox._model import Status
from hookinbox._operations import (
    DEFAULT_RETENTION,
    Thresholds,
    breaches,
    check_retention,
    format_duration,
    parse_duration,
    parse_time,
    prune,
    time_ago,
)
from hookinbox._settings import DATABASE_URL_ENV
from hookinbox._storage import (
    EventFilter,
    ReplayResult,
    Store,
    count_events,
    delivery_history,
    list_events,
    parse_url,
    replay_matching,
    replay_one,
    report,
)
from hookinbox.cli._loading import APP_ENV, load_inbox

EXIT_CHECK_FAILED = 1

stdout = Console()
stderr = Console(stderr=True)


@dataclass
class Target:
    store: Store
    inbox: Inbox | None


app_option = click.option(
    "--app", "app", envvar=APP_ENV, show_envvar=True, help="module:attribute naming an Inbox."
)
database_option = click.option(
    "--database-url", envvar=DATABASE_URL_ENV, show_envvar=True, help="Database URL."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@contextmanager
def opened(app: str | None, database_url: str | None) -> Iterator[Target]:
    """The inbox's database, as it is: operator commands never create or upgrade a schema, so
    a mistyped URL is an error, not a fresh empty inbox that reports itself healthy."""
    if app:
        inbox = load_inbox(app, database_url=database_url)
        url = inbox.settings.database_url
        _require_existing(url)
        target = Target(Store(url, inbox.settings.store_options, auto_migrate=False), inbox)
    elif database_url:
        _require_existing(database_url)
        target = Target(Store(database_url, auto_migrate=False), None)
    else:
        raise ConfigurationError("give --app or --database-url")
    try:
        yield target
    finally:
        target.store.dispose()


def _require_existing(database_url: str) -> None:
    url = parse_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        raise ConfigurationError(f"no database at {url.database} (run `hookinbox migrate` first)")


def now() -> datetime:
    return datetime.now(UTC)


def ago(duration: timedelta, text: str) -> datetime:
    return time_ago(now(), duration, text)


def parse_since(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text, now())


def status_choice() -> click.Choice[str]:
    return click.Choice([s.value for s in Status])


def emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, default=str, sort_keys=True))


def age(since: datetime | None) -> str:
    if since is None:
        return "-"
    seconds = (now() - since).total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


# -- status ------------------------------------------------------------------------------------


@click.command()
@app_option
@database_option
@click.option("--check", is_flag=True, help="Exit 1 with one line per breached threshold.")
@click.option(
    "--max-failed",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    envvar="HOOKINBOX_MAX_FAILED",
    show_envvar=True,
)
@click.option(
    "--max-pending-age",
    default="15m",
    show_default=True,
    envvar="HOOKINBOX_MAX_PENDING_AGE",
    show_envvar=True,
    help="Oldest pending event's age allowed (90s, 15m, 2h).",
)
@click.option(
    "--max-not-ready-deadline",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    envvar="HOOKINBOX_MAX_NOT_READY_DEADLINE",
    show_envvar=True,
)
@click.option(
    "--max-stale",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    envvar="HOOKINBOX_MAX_STALE",
    show_envvar=True,
)
@click.option(
    "--max-outbox-failed",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    envvar="HOOKINBOX_MAX_OUTBOX_FAILED",
    show_envvar=True,
)
@json_option
def status(
    app: str | None,
    database_url: str | None,
    check: bool,
    max_failed: int,
    max_pending_age: str,
    max_not_ready_deadline: int,
    max_stale: int,
    max_outbox_failed: int,
    as_json: bool,
) -> None:
    """Counts, duplicate ratio, backlog; with --check, a health check for cron and probes.

    --check reads only indexed figures (cheap enough for every probe) and exits 0 when no
    threshold is breached, 1 with one line per breach otherwise.
    """  # fmt: skip
    thresholds = Thresholds(
        max_failed=max_failed,
        max_oldest_pending=parse_duration(max_pending_age),
        max_not_ready_deadline=max_not_ready_deadline,
        max_stale=max_stale,
        max_outbox_failed=max_outbox_failed,
    )
    with opened(app, database_url) as target, target.store.reading() as connection:
        figures = report(connection, now(), full=not check)
    found = breaches(figures.open, now(), thresholds)
    if check:
        if as_json:
            emit_json({"ok": not found, "breaches": found})
        else:
            for line in found:
                click.echo(line)
            if not found:
                click.echo("ok")
        if found:
            sys.exit(EXIT_CHECK_FAILED)
        return
    document = {
        "events": [
            {"source": source, "status": state, "count": count}
            for (source, state), count in sorted(figures.counts.items())
        ],
        "duplicate_ratio": {
            window: {"deliveries": r.deliveries, "duplicates": r.duplicates, "ratio": r.ratio}
            for window, r in figures.duplicates.items()
        },
        "oldest_pending": figures.open.oldest_pending,
        "oldest_deferred": figures.open.oldest_deferred,
        "failed": figures.open.count(Status.FAILED),
        "deferred": figures.open.count(Status.DEFERRED),
        "stale": figures.open.count(Status.STALE),
        "not_ready_deadline": figures.open.not_ready_deadline,
        "outbox": {s: figures.open.outbox.get(s, 0) for s in ("pending", "delivering", "failed")},
        "breaches": found,
    }
    if as_json:
        emit_json(document)
        return
    _print_status(figures.counts, document)


def _print_status(counts: dict[tuple[str, str], int], document: dict[str, Any]) -> None:
    statuses = [s.value for s in Status]
    table = Table(title="Events by source and status", title_justify="left")
    table.add_column("source")
    for state in statuses:
        table.add_column(state, justify="right")
    for source in sorted({source for source, _ in counts}):
        table.add_row(source, *(str(counts.get((source, s), 0)) for s in statuses))
    stdout.print(table)
    ratios = Table(title="Duplicate deliveries", title_justify="left")
    for column in ("window", "deliveries", "duplicates", "ratio"):
        ratios.add_column(column, justify="left" if column == "window" else "right")
    for window, r in document["duplicate_ratio"].items():
        ratios.add_row(window, str(r["deliveries"]), str(r["duplicates"]), f"{r['ratio']:.2%}")
    stdout.print(ratios)
    summary = Table(show_header=False, box=None)
    summary.add_row("oldest pending", age(document["oldest_pending"]))
    summary.add_row("deferred (NotReady)", f"{document['deferred']}, oldest waiting "
                    f"{age(document['oldest_deferred'])}")  # fmt: skip
    summary.add_row("failed", str(document["failed"]))
    summary.add_row("past NotReady deadline", str(document["not_ready_deadline"]))
    summary.add_row("stale", str(document["stale"]))
    backlog = document["outbox"]
    summary.add_row(
        "outbox",
        f"{backlog['pending']} pending, {backlog['delivering']} delivering, "
        f"{backlog['failed']} failed",
    )
    stdout.print(summary)
    for line in document["breaches"]:
        stderr.print(f"[red]breach:[/red] {line}")


# -- events ------------------------------------------------------------------------------------


@click.group()
def events() -> None:
    """Find and read stored events."""


@events.command("list")
@app_option
@database_option
@click.option("--status", "state", type=status_choice())
@click.option("--source")
@click.option("--type", "event_type")
@click.option("--since", help="1h, 2d, or an ISO 8601 time.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@json_option
def list_command(
    app: str | None,
    database_url: str | None,
    state: str | None,
    source: str | None,
    event_type: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Events, newest first."""
    filters = EventFilter(Status(state) if state else None, source, event_type, parse_since(since))
    with opened(app, database_url) as target:
        rows = list_events(target.store, filters, limit)
    if as_json:
        emit_json(rows)
        return
    table = Table()
    for column in ("received", "source", "event id", "type", "status", "attempts", "deliveries",
                   "outcome / last error"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for row in rows:
        note = row["outcome"] or (row["last_error"] or "").split("\n", 1)[0]
        table.add_row(
            row["received_at"].strftime("%Y-%m-%d %H:%M:%S"),
            row["source"],
            row["event_id"],
            row["event_type"] or "-",
            row["status"],
            str(row["attempts"]),
            str(row["delivery_count"]),
            note[:80],
        )
    stdout.print(table)
    if not rows:
        stderr.print("no events match")


@events.command("show")
@click.argument("source")
@click.argument("event_id")
@app_option
@database_option
@json_option
def show_command(
    source: str, event_id: str, app: str | None, database_url: str | None, as_json: bool
) -> None:
    """One event: its fields, body, last error and every delivery."""
    with opened(app, database_url) as target:
        event = target.store.get_event(source, event_id)
        if event is None:
            raise click.ClickException(f"no event {source} {event_id}")
        history = delivery_history(target.store, source, event_id)
    fields = {
        "source": event.source,
        "event_id": event.id,
        "type": event.type,
        "status": event.status.value,
        "outcome": event.outcome,
        "attempts": event.attempts,
        "deferrals": event.deferrals,
        "occurred_at": event.occurred_at,
        "received_at": event.received_at,
        "next_attempt_at": event.next_attempt_at,
        "processed_at": event.processed_at,
        "delivery_count": event.delivery_count,
        "key_conflicts": event.key_conflicts,
        "headers": event.headers,
        "last_error": event.last_error,
    }
    try:
        body: Any = event.payload
    except ValueError:
        body = event.body.decode("utf-8", "replace")
    if as_json:
        emit_json({**fields, "body": body, "deliveries": history})
        return
    table = Table(show_header=False, box=None)
    for name, value in fields.items():
        if name not in ("headers", "last_error"):
            table.add_row(name, "-" if value is None else str(value))
    stdout.print(table)
    stdout.print("[bold]headers[/bold]")
    stdout.print_json(data=event.headers)
    stdout.print("[bold]body[/bold]")
    stdout.print_json(data=body) if not isinstance(body, str) else stdout.print(body)
    if event.last_error:
        stdout.print("[bold]last error[/bold]")
        stdout.print(event.last_error, highlight=False, markup=False)
    deliveries = Table(title="deliveries", title_justify="left")
    for column in ("received", "duplicate", "key conflict"):
        deliveries.add_column(column)
    for entry in history:
        deliveries.add_row(
            str(entry["received_at"]), str(entry["duplicate"]), str(entry["key_conflict"])
        )
    stdout.print(deliveries)


# -- replay ------------------------------------------------------------------------------------


@click.command()
@click.argument("source", required=False)
@click.argument("event_id", required=False)
@app_option
@database_option
@click.option("--status", "state", type=status_choice(), help="Replay every event in it.")
@click.option("--source", "source_filter", help="With --status: only this source.")
@click.option("--type", "event_type", help="With --status: only this type.")
@click.option("--since", help="With --status: received since (1h, 2d, ISO 8601).")
@click.option("--force", is_flag=True, help="Also replay processed events (runs them again).")
def replay(
    source: str | None,
    event_id: str | None,
    app: str | None,
    database_url: str | None,
    state: str | None,
    source_filter: str | None,
    event_type: str | None,
    since: str | None,
    force: bool,
) -> None:
    """Put events back to pending, attempts reset: `replay SOURCE EVENT_ID` or `--status failed`.

    Replaying an event that was processed runs its handlers again: their database writes
    happen a second time unless a business key or an idempotent write absorbs them. That is
    why it needs --force.
    """
    if (source is None) == (state is None) or (source is not None and event_id is None):
        raise ConfigurationError("give SOURCE EVENT_ID, or --status (with optional filters)")
    if state == Status.PROCESSING.value:
        raise ConfigurationError("processing events are held by a worker; they cannot be replayed")
    if state == Status.PROCESSED.value and not force:
        raise ConfigurationError("replaying processed events runs them again; add --force")
    since_time = parse_since(since)  # bad input is refused before the database is opened
    with opened(app, database_url) as target:
        if source is not None and event_id is not None:
            _replay_one(target.store, source, event_id, force)
            return
        assert state is not None
        chosen = Status(state)
        filters = EventFilter(chosen, source_filter, event_type, since_time)
        total = count_events(target.store, filters)
        replayed = 0
        with Progress(console=stderr, disable=not stderr.is_terminal, transient=True) as progress:
            task = progress.add_task("replaying", total=total)
            for batch in replay_matching(target.store, filters, now()):
                replayed += batch
                progress.advance(task, batch)
    click.echo(f"replayed {replayed} {chosen.value} events")


def _replay_one(store: Store, source: str, event_id: str, force: bool) -> None:
    result, previous = replay_one(store, source, event_id, now(), force=force)
    if result is ReplayResult.NOT_FOUND:
        raise click.ClickException(f"no event {source} {event_id}")
    if result is ReplayResult.IN_PROGRESS:
        raise click.ClickException(f"{source} {event_id} is being processed right now; try later")
    if result is ReplayResult.NEEDS_FORCE:
        assert previous is not None
        raise click.ClickException(
            f"{source} {event_id} is {previous.value}: replaying runs its handlers again and "
            "repeats their effects unless they are idempotent; add --force if that is intended"
        )
    assert previous is not None
    click.echo(f"{source} {event_id}: {previous.value} -> pending")


# -- prune -------------------------------------------------------------------------------------


@click.command("prune")
@app_option
@database_option
@click.option("--older-than", help="Retention (90d, 36h); default: the app's, else 90d.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--force", is_flag=True, help="Allow a retention shorter than a source's redelivery window."
)
def prune_command(
    app: str | None, database_url: str | None, older_than: str | None, dry_run: bool, force: bool
) -> None:
    """Delete processed and unhandled events (and the delivery log) older than the retention.

    Pending, deferred, processing, failed and stale events are never deleted.
    """  # fmt: skip
    requested = parse_duration(older_than) if older_than else None  # bad input before I/O
    if requested is not None:
        check_retention(requested, [], force=force)  # positive
        ago(requested, older_than or "")  # a cutoff inside the calendar
    with opened(app, database_url) as target:
        default = target.inbox.settings.retention if target.inbox else DEFAULT_RETENTION
        retention = requested or default
        sources = list(target.inbox.sources.values()) if target.inbox else []
        check_retention(retention, sources, force=force)
        if not target.inbox and not force and retention < timedelta(days=30):
            raise ConfigurationError(
                "without --app the sources' redelivery windows are unknown; a retention under "
                "30d (Stripe's resend window) needs --force"
            )
        with Progress(console=stderr, disable=not stderr.is_terminal, transient=True) as progress:
            task = progress.add_task("pruning", total=None)
            result = prune(
                target.store,
                now=now(),
                retention=retention,
                dry_run=dry_run,
                progress=lambda n: progress.advance(task, n),
            )
    click.echo(f"{result.summary()} (older than {format_duration(retention)})")


def register(group: click.Group) -> None:
    for command in (status, events, replay, prune_command):
        group.add_command(command)
