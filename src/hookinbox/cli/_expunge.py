"""`hookinbox expunge [APP] SOURCE EVENT_ID` or `expunge [APP] --source S (--older-than AGE |
--payload PATH=VALUE)`: erase events' bodies and headers, keeping the key, the status, the
times and the delivery log; a bulk erasure runs in paced batches (`_operations._expunge`)."""

from __future__ import annotations

import getpass
import sys
from datetime import UTC, datetime

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    database_url_option,
    deprecated_app_option,
    json_option,
    resolve_app,
    split_app,
)
from hookinbox.cli._output import emit_json, progress
from hookinbox.cli._prune import with_unit


@click.command(short_help=short_help("expunge"))
@click.argument("arguments", nargs=-1, metavar="[APP] [SOURCE EVENT_ID]")
@deprecated_app_option
@database_url_option
@click.option("--source", "source_filter", help="Erase this source's events (with a filter).")
@click.option(
    "--older-than",
    callback=lambda _ctx, _param, value: with_unit(value),
    help="With --source: received longer ago than this (90d, 36h, 15m, 30s).",
)
@click.option(
    "--payload",
    "payload_filter",
    metavar="PATH=VALUE",
    help="With --source: whose body holds VALUE at PATH (customer.id=cus_123).",
)
@click.option("--dry-run", is_flag=True, help="Count what would be erased; erase nothing.")
@click.option("--reason", help="Why, for the audit trail (`events show` lists it).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before a bulk erasure.")
@json_option
def expunge(
    arguments: tuple[str, ...],
    app_option: str | None,
    database_url: str | None,
    source_filter: str | None,
    older_than: str | None,
    payload_filter: str | None,
    dry_run: bool,
    reason: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Erase events' bodies and headers: `expunge SOURCE EVENT_ID`, or `--source S` with
    `--older-than AGE` and/or `--payload PATH=VALUE`.

    The event's key, status, times, attempts and delivery log are kept: a redelivery is still
    a duplicate, and stores nothing again. Every event erased gets an audit row (action
    expunge): when, who (your OS user), --reason. An event a worker is processing is erased
    too, never waited for: that attempt goes on with the body it read; a later attempt reads
    an empty body. --payload searches every event of the source, in batches. A bulk erasure
    cannot be undone: it counts first and asks (on a terminal; elsewhere it needs --yes).

    Exit codes: 0 erased (or --dry-run, or nothing left to erase); 1 no such event, the
    confirmation was declined, or the database is unavailable; 2 bad usage or configuration
    (an unknown source name, a bad --older-than or --payload, a bulk erasure without --yes off
    a terminal).
    """
    from hookinbox._operations import parse_duration, time_ago
    from hookinbox._records import Actor, Selection, search_for
    from hookinbox.cli._target import opened

    bulk = source_filter is not None
    names = () if bulk else ("SOURCE", "EVENT_ID")
    if len(arguments) not in (len(names), len(names) + 1):
        raise ConfigurationError(
            "give [APP] SOURCE EVENT_ID, or --source with --older-than and/or --payload"
        )
    if not bulk and (older_than is not None or payload_filter is not None):
        raise ConfigurationError("--older-than and --payload filter --source's events: add it")
    if bulk and older_than is None and payload_filter is None:
        raise ConfigurationError(
            "--source alone would erase every payload of the source: add --older-than or --payload"
        )
    app, key = split_app(arguments, names)
    app = resolve_app(app, app_option, explicit=len(arguments) > len(names))
    now = datetime.now(UTC)
    before = None  # bad input refused before any I/O
    if older_than is not None:
        before = time_ago(now, parse_duration(older_than), older_than)
    payload = None
    if payload_filter is not None:
        path, equals, value = payload_filter.partition("=")
        if not equals:
            raise ConfigurationError("--payload takes PATH=VALUE (customer.id=cus_123)")
        try:
            payload = search_for(path, value)
        except ValueError as error:
            raise ConfigurationError(f"--payload: {error}") from None
    actor = Actor(getpass.getuser(), reason or None)
    with opened(app, database_url) as target:
        operations = target.operations
        if not bulk:
            source, event_id = key
            erased = operations.expunge_one(source, event_id, now, actor=None if dry_run else actor)
            if erased is None:
                target.check_source(source)
                raise click.ClickException(f"no event {source} {event_id}")
            if as_json:
                emit_json({"source": source, "event_id": event_id, "erased": int(erased),
                           "dry_run": dry_run})  # fmt: skip
            elif not erased:
                click.echo(f"{source} {event_id}: payload already erased")
            elif dry_run:
                click.echo(f"{source} {event_id}: would erase its payload (dry run)")
            else:
                click.echo(f"{source} {event_id}: payload erased")
            return
        assert source_filter is not None
        selection = Selection(source_filter, before, payload)
        total = None
        if dry_run or not yes:  # counted the way the erasure goes, without a write
            with progress("counting", None) as advance:
                total = 0
                for batch in operations.expunge_matching(selection, now, actor=None):
                    total += batch
                    advance(batch)
            if total == 0:
                target.check_source(source_filter)
        erased_total = 0
        if not dry_run and total != 0:
            if not yes:
                _confirm(total or 0, source_filter)
            with progress("erasing", total) as advance:
                for batch in operations.expunge_matching(selection, now, actor=actor):
                    erased_total += batch
                    advance(batch)
    if as_json:
        emit_json({"source": source_filter, "matched": total, "erased": erased_total,
                   "dry_run": dry_run})  # fmt: skip
    elif dry_run:
        click.echo(f"would erase {total} {source_filter} payloads (dry run: nothing changed)")
    else:
        click.echo(f"erased {erased_total} {source_filter} payloads")


def _confirm(total: int, source: str) -> None:
    if not sys.stdin.isatty():
        raise ConfigurationError(
            f"{total} {source} payloads match and an erasure cannot be undone: add --yes to "
            "erase them (or --dry-run to see the count only)"
        )
    click.confirm(f"Erase {total} {source} payloads? This cannot be undone", abort=True, err=True)
