"""`hookinbox status [APP]`: counts, duplicate ratio, backlog; `--check` for probes and cron."""

from __future__ import annotations

import sys
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
)
from hookinbox.cli._output import Table, emit_json, say, show
from hookinbox.cli._types import number

EXIT_CHECK_FAILED = 1


@click.command(short_help=short_help("status"))
@app_argument(required=False)
@deprecated_app_option
@database_url_option
@click.option("--check", is_flag=True, help="Exit 1 with one line per breached threshold.")
@click.option(
    "--max-failed",
    default=0,
    show_default=True,
    type=number(ranges.THRESHOLD),
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
    type=number(ranges.THRESHOLD),
    envvar="HOOKINBOX_MAX_NOT_READY_DEADLINE",
    show_envvar=True,
)
@click.option(
    "--max-stale",
    default=0,
    show_default=True,
    type=number(ranges.THRESHOLD),
    envvar="HOOKINBOX_MAX_STALE",
    show_envvar=True,
)
@click.option(
    "--max-outbox-failed",
    default=0,
    show_default=True,
    type=number(ranges.THRESHOLD),
    envvar="HOOKINBOX_MAX_OUTBOX_FAILED",
    show_envvar=True,
)
@click.option(
    "--min-workers",
    default=1,
    show_default=True,
    type=number(ranges.THRESHOLD),
    envvar="HOOKINBOX_MIN_WORKERS",
    show_envvar=True,
    help="Live worker processes (by heartbeat) below which --check fails; 0 for none needed.",
)
@json_option
def status(
    app: str | None,
    app_option: str | None,
    database_url: str | None,
    check: bool,
    max_failed: int,
    max_pending_age: str,
    max_not_ready_deadline: int,
    max_stale: int,
    max_outbox_failed: int,
    min_workers: int,
    as_json: bool,
) -> None:
    """Counts, duplicate ratio, backlog; with --check, a health check for cron and probes.

    --check reads only indexed figures (cheap enough for every probe) and exits 0 when no
    threshold is breached, 1 with one line per breach otherwise: among them, fewer live
    workers than --min-workers (a worker is live while its heartbeat has not expired), and an
    oldest pending event older than --max-pending-age.

    Exit codes: 0 ok; 1 a threshold is breached (--check) or the database is unavailable;
    2 bad usage or configuration.
    """  # fmt: skip
    from hookinbox._model import Status
    from hookinbox._operations import Thresholds, breaches, parse_duration
    from hookinbox.cli._target import opened

    app = resolve_app(app, app_option, explicit=from_command_line("app"))
    thresholds = Thresholds(
        max_failed=max_failed,
        max_oldest_pending=parse_duration(max_pending_age),
        max_not_ready_deadline=max_not_ready_deadline,
        max_stale=max_stale,
        max_outbox_failed=max_outbox_failed,
        min_workers=min_workers,
    )
    now = datetime.now(UTC)
    with opened(app, database_url) as target:
        figures = target.operations.report(now, full=not check)
        paused = [] if check else target.operations.paused_sources()
    found = breaches(figures.open, now, thresholds)
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
        "live_workers": [
            {"host": host, "kind": kind, "count": count}
            for (host, kind), count in sorted(figures.open.workers.items())
        ],
        "paused_sources": [
            {"source": p.source, "paused_at": p.paused_at, "actor": p.actor, "reason": p.reason}
            for p in paused
        ],
        "breaches": found,
    }
    if as_json:
        emit_json(document)
        return
    _print_status(figures.counts, document, now)


def _print_status(
    counts: dict[tuple[str, str], int], document: dict[str, Any], now: datetime
) -> None:
    from hookinbox._model import Status

    statuses = [s.value for s in Status]
    sources = sorted({source for source, _ in counts})
    # A window too narrow for a column per status (80 is) gets a row per status instead.
    narrow = Table(["status", *sources], "Events by status and source", right=frozenset(sources),
                   keep=frozenset({"status"}))  # fmt: skip
    for state in statuses:
        narrow.add_row(state, *(counts.get((source, state), 0) for source in sources))
    table = Table(["source", *statuses], "Events by source and status", right=frozenset(statuses),
                  keep=frozenset({"source"}), narrow=narrow)  # fmt: skip
    for source in sources:
        table.add_row(source, *(counts.get((source, s), 0) for s in statuses))
    show(table)
    click.echo()
    ratios = Table(
        ["window", "deliveries", "duplicates", "ratio"],
        "Duplicate deliveries",
        right=frozenset({"deliveries", "duplicates", "ratio"}),
    )
    for window, r in document["duplicate_ratio"].items():
        ratios.add_row(window, r["deliveries"], r["duplicates"], f"{r['ratio']:.2%}")
    show(ratios)
    click.echo()
    summary = Table(["figure", "value"], header=False)
    live = document["live_workers"]
    summary.add_row(
        "live workers",
        ", ".join(f"{w['host']}: {w['count']} {w['kind']}" for w in live) if live else "none",
    )
    summary.add_row("oldest pending", age(document["oldest_pending"], now))
    summary.add_row(
        "deferred (NotReady)",
        f"{document['deferred']}, oldest waiting {age(document['oldest_deferred'], now)}",
    )
    summary.add_row("failed", document["failed"])
    summary.add_row("past NotReady deadline", document["not_ready_deadline"])
    summary.add_row("stale", document["stale"])
    backlog = document["outbox"]
    summary.add_row(
        "outbox",
        f"{backlog['pending']} pending, {backlog['delivering']} delivering, "
        f"{backlog['failed']} failed",
    )
    paused = document["paused_sources"]
    summary.add_row(
        "paused sources",
        ", ".join(f"{p['source']} ({age(p['paused_at'], now)} ago, by {p['actor']})"
                  for p in paused) if paused else "none",
    )  # fmt: skip
    show(summary)
    for line in document["breaches"]:
        say(f"breach: {line}", style="red", err=True)


def age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = (now - since).total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
