"""`hookinbox reconcile [APP] SOURCE`: store the events the provider's API lists that no
webhook delivered (docs/reconcile.md)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import click

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import database_url_option, json_option, split_app
from hookinbox.cli._output import emit_json, say
from hookinbox.cli._types import number

DEFAULT_SINCE = "3d"
"""Stripe's automatic retries last 3 days: what an outage of that length lost."""
DEFAULT_PAGE_TIMEOUT = "60s"
DEFAULT_RUN_TIMEOUT = "30m"
DEFAULT_MAX_PAGES = 10_000
"""The defaults of `Limits` (`sources/_provider_api.py`), as the options show them."""


def duration(text: str, flag: str = "--since") -> timedelta:
    """`90m`, `12h`, `3d`, `30s`: a positive length of time with its unit."""
    from hookinbox._operations import parse_duration

    text = text.strip()
    hint = f"'{flag}'"
    if not text or text[-1].lower() not in "smhd":
        raise click.BadParameter(
            f"{text!r} has no unit: write it as 90m, 12h or 3d (s, m, h, d)", param_hint=hint
        )
    try:
        value = parse_duration(text)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from exc
    if value <= timedelta(0):
        raise click.BadParameter(f"{text!r} is not a positive duration", param_hint=hint)
    return value


def _limit(text: str, option: str) -> timedelta:
    """A limit's duration, checked while the command line is parsed (one line, exit 2)."""
    try:
        return duration(text, option)
    except click.BadParameter as error:  # click names the option
        raise click.BadParameter(error.message) from None


@click.command("reconcile", short_help=short_help("reconcile"))
@click.argument("arguments", nargs=-1, metavar="[APP] SOURCE")
@database_url_option
@click.option(
    "--since",
    default=DEFAULT_SINCE,
    show_default=True,
    help="How far back to list: 90m, 12h, 3d (clamped to the provider's window: Stripe 30d, "
    "Square 28d, GitHub 3d).",
)
@click.option("--dry-run", is_flag=True, help="Count what is missing; store nothing.")
@click.option(
    "--page-timeout",
    default=DEFAULT_PAGE_TIMEOUT,
    callback=lambda _ctx, _param, text: _limit(text, "--page-timeout"),
    show_default=True,
    help="The longest one request may take, to the last byte of its answer (30s, 2m).",
)
@click.option(
    "--run-timeout",
    default=DEFAULT_RUN_TIMEOUT,
    callback=lambda _ctx, _param, text: _limit(text, "--run-timeout"),
    show_default=True,
    help="The longest the whole run may take, pages, retries and stores (30m, 2h).",
)
@click.option(
    "--max-pages",
    type=number(ranges.RECONCILE_MAX_PAGES),
    default=DEFAULT_MAX_PAGES,
    show_default=True,
    help="The most pages to list (a provider lists 100 events a page).",
)
@json_option
def reconcile(
    arguments: tuple[str, ...],
    database_url: str | None,
    since: str,
    dry_run: bool,
    page_timeout: timedelta,
    run_timeout: timedelta,
    max_pages: int,
    as_json: bool,
) -> None:
    """List SOURCE's events from the provider's API and store those the inbox lacks.

    Each listed event is counted once: skipped_types (no handler takes its type; not
    stored), already_stored, or missing (stored, unless --dry-run). Stored events are
    processed by the workers like any delivery. GitHub's missing deliveries are redelivered
    instead (redelivery_requested): they arrive signed. The source needs API credentials
    (Stripe(secret=..., api_key=...), Square(..., access_token=...), GitHub(secret=...,
    api_token=..., hook=...)).

    What the API lists that was not asked for (outside the window, another account's, not
    an event, an id that is no id) is skipped and counted, with a warning line.

    Exit codes: 0 done; 1 the provider's API refused the key, kept failing, answered what is
    no page (too large, a cursor that does not move), a limit was reached (--page-timeout,
    --run-timeout, --max-pages) or the database is unavailable (what earlier pages stored
    stays stored); 2 bad usage or configuration.
    """
    from hookinbox.cli._target import did_you_mean, opened
    from hookinbox.sources._provider_api import Limits, ProviderAPIError

    app, (name,) = split_app(arguments, ("SOURCE",))
    window = duration(since)
    limits = Limits(
        page_timeout=page_timeout.total_seconds(),
        run_timeout=run_timeout.total_seconds(),
        max_pages=max_pages,
    )
    if not app:
        raise ConfigurationError("give APP (or set HOOKINBOX_APP): the source's API key is there")
    with opened(app, database_url) as target:
        inbox = target.inbox
        assert inbox is not None  # opened with an APP
        source = inbox.sources.get(name)
        if source is None:
            raise ConfigurationError(
                f"no source is named {name!r}{did_you_mean(name, inbox.sources)}"
            )
        listing = source.listing()
        now = datetime.now(UTC)
        if window > listing.window:
            say(
                f"warning: --since {since} is past what the provider's API lists; listing "
                f"the last {listing.window.days}d",
                err=True,
            )
        try:
            result = target.operations.reconcile(
                source,
                listing,
                since=window,
                now=now,
                takes=lambda event_type: inbox._takes(name, event_type),
                dry_run=dry_run,
                limits=limits,
            )
        except ProviderAPIError as error:
            if not as_json:
                raise
            emit_json({"source": name, "error": str(error)})
            sys.exit(1)
    if as_json:
        emit_json({"source": name, "since": result.since, "dry_run": dry_run,
                   "clamped": result.clamped, **result.counts()})  # fmt: skip
        return
    counts = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in result.shown().items())
    click.echo(f"{name}: {counts} (since {result.since.isoformat(timespec='seconds')})"
               + (" (dry run: nothing stored)" if dry_run else ""))  # fmt: skip
    unasked = result.unasked_summary()
    if unasked is not None:
        say(f"warning: {unasked}", err=True)
    if result.missing and not dry_run:
        say(f"warning: {result.missing} event(s) had never arrived: deliveries were lost "
            "upstream; check the endpoint's configuration and the provider's dashboard",
            err=True)  # fmt: skip
