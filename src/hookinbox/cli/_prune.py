"""`hookinbox prune [APP]`: delete done events past the retention, with counts and rate."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import (
    app_argument,
    database_url_option,
    deprecated_app_option,
    from_command_line,
    json_option,
    resolve_app,
)
from hookinbox.cli._output import emit_json, progress

SHORTEST_WITHOUT_APP = timedelta(days=30)
"""Stripe's manual resend window: without APP the sources' windows are unknown."""


def with_unit(value: str | None) -> str | None:
    """`--older-than` as given, if it names its unit: `90` might mean days to one operator and
    minutes to the next, and a prune cannot be undone."""
    try:
        float(value or "")
    except ValueError:
        return value  # a unit, or not a number at all (parse_duration says so)
    raise click.BadParameter(
        f"{value!r} has no unit: write {(value or '').strip()}d for days (or h, m, s)",
        param_hint="'--older-than'",
    )


@click.command("prune", short_help=short_help("prune"))
@app_argument(required=False)
@deprecated_app_option
@database_url_option
@click.option(
    "--older-than",
    callback=lambda _ctx, _param, value: with_unit(value),
    help="Retention with its unit (90d, 36h, 15m, 30s); default: the app's, else 90d.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--force", is_flag=True, help="Allow a retention shorter than a source's redelivery window."
)
@json_option
def prune(
    app: str | None,
    app_option: str | None,
    database_url: str | None,
    older_than: str | None,
    dry_run: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Delete processed and unhandled events (and the delivery log) older than the retention.

    Each source's events go by its own retention (`add_source(..., retention=...)`), the
    others by the inbox's; --older-than replaces the inbox's only. --dry-run lists each
    source's retention. Pending, deferred, processing, failed and stale events are never
    deleted. Prints what was deleted, how long it took and the rate (events per second); on a
    terminal, a live count.

    Exit codes: 0 done (or --dry-run); 1 the database is unavailable; 2 bad usage or
    configuration (a retention shorter than a source's redelivery window without --force).
    """  # fmt: skip
    from hookinbox._operations import (
        DEFAULT_RETENTION,
        check_retention,
        format_duration,
        parse_duration,
        time_ago,
    )
    from hookinbox._operations._prune import Retentions
    from hookinbox.cli._target import opened

    app = resolve_app(app, app_option, explicit=from_command_line("app"))
    now = datetime.now(UTC)
    # Bad input before I/O; `--older-than ''` too, which is no retention (not the default).
    requested = None if older_than is None else parse_duration(older_than)
    if requested is not None:
        check_retention(requested, [], force=force)  # positive
        time_ago(now, requested, older_than or "")  # a cutoff inside the calendar
    with opened(app, database_url) as target:
        default = target.inbox.settings.retention if target.inbox else DEFAULT_RETENTION
        retention = requested or default
        sources = list(target.inbox.sources.values()) if target.inbox else []
        own = dict(target.inbox.retentions.by_source) if target.inbox else {}
        retentions = Retentions(retention, own)
        # A source's own retention was checked (or forced) when it was added.
        check_retention(retention, [s for s in sources if s.name not in own], force=force)
        if not target.inbox and not force and retention < SHORTEST_WITHOUT_APP:
            raise ConfigurationError(
                "without APP the sources' redelivery windows are unknown; a retention under "
                "30d (Stripe's resend window) needs --force"
            )
        started = time.monotonic()
        with progress("pruning", None) as advance:
            result = target.operations.prune(
                now=now, retention=retentions, dry_run=dry_run, progress=advance
            )
        seconds = time.monotonic() - started
    rate = result.events / seconds if seconds > 0 and not dry_run else None
    by_source = retentions.describe(source.name for source in sources)
    if as_json:
        emit_json({
            "dry_run": dry_run,
            "older_than": format_duration(retention),
            "retention_by_source": by_source,
            "events": result.events,
            "deliveries": result.deliveries,
            "messages": result.messages,
            "seconds": round(seconds, 3),
            "events_per_second": None if rate is None else round(rate, 1),
        })  # fmt: skip
        return
    line = f"{result.summary()} older than {format_duration(retention)}"
    if own:
        line += " (or their source's own retention)"
    if rate is not None:
        line += f" in {seconds:.1f} s ({rate:,.0f} events/s)"
    click.echo(line)
    if dry_run:
        for name, kept in by_source.items():
            mark = "" if name in own else " (the inbox's)"
            click.echo(f"  {name}: kept {kept}{mark}")
