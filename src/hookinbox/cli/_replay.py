"""`hookinbox replay [APP] SOURCE EVENT_ID` or `replay [APP] --status S [filters]`: back to
pending; a bulk replay runs in paced batches (`_operations._replay`)."""

from __future__ import annotations

import getpass
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError
from hookinbox._text import printable
from hookinbox.cli._commands import short_help
from hookinbox.cli._events import STATUS_METAVAR, STATUS_NAMES, STATUSES
from hookinbox.cli._options import (
    database_url_option,
    deprecated_app_option,
    json_option,
    resolve_app,
    split_app,
)
from hookinbox.cli._output import emit_json, progress
from hookinbox.cli._types import number

if TYPE_CHECKING:
    from hookinbox._records import Actor
    from hookinbox.cli._target import Target

SAMPLE = 5
"""Events a bulk replay's --dry-run lists (newest first) beside its count."""
DEFAULT_CONFIRM_ABOVE = 100
"""A bulk replay of more events than this asks first (`--yes` does not)."""


@click.command(short_help=short_help("replay"))
@click.argument("arguments", nargs=-1, metavar="[APP] [SOURCE EVENT_ID]")
@deprecated_app_option
@database_url_option
@click.option(
    "--status",
    "state",
    type=STATUSES,
    metavar=STATUS_METAVAR,
    help=f"Replay every event in it: {STATUS_NAMES}.",
)
@click.option("--source", "source_filter", help="With --status: only this source.")
@click.option("--type", "event_type", help="With --status: only this type.")
@click.option("--since", help="With --status: received since (1h, 2d, ISO 8601).")
@click.option("--until", help="With --status: received before (1h, 2d, ISO 8601).")
@click.option(
    "--error-contains",
    "error_contains",
    help="With --status: only events whose last error holds this text (any case).",
)
@click.option("--force", is_flag=True, help="Also replay processed events (runs them again).")
@click.option("--dry-run", is_flag=True, help="Say what would be replayed; change nothing.")
@click.option(
    "--reason", help="Why, for the audit trail (`events show` lists who replayed, when, why)."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask, however many events match.")
@click.option(
    "--confirm-above",
    default=DEFAULT_CONFIRM_ABOVE,
    show_default=True,
    type=number(ranges.CONFIRM_ABOVE),
    envvar="HOOKINBOX_REPLAY_CONFIRM_ABOVE",
    show_envvar=True,
    help="Ask before replaying more events than this.",
)
@json_option
def replay(
    arguments: tuple[str, ...],
    app_option: str | None,
    database_url: str | None,
    state: str | None,
    source_filter: str | None,
    event_type: str | None,
    since: str | None,
    until: str | None,
    error_contains: str | None,
    force: bool,
    dry_run: bool,
    reason: str | None,
    yes: bool,
    confirm_above: int,
    as_json: bool,
) -> None:
    """Put events back to pending, retries anew: `replay SOURCE EVENT_ID` or `--status failed`.

    Replaying an event that was processed runs its handlers again: their database writes
    happen a second time unless a business key or an idempotent write absorbs them. That is
    why it needs --force. A replay of more than --confirm-above events asks first (on a
    terminal; elsewhere it needs --yes). Every event replayed gets an audit row: when, who
    (your OS user), --reason, and the status, outcome and attempts it had. Attempts keep
    counting across replays; the retry budget (max_attempts) counts from the replay.

    Exit codes: 0 replayed (or --dry-run); 1 no such event, a worker holds the event right
    now (refused at once, never waited for) or it needs --force, the confirmation was
    declined, or the database is unavailable; 2 bad usage or configuration (an unknown source
    name, more than --confirm-above events without --yes off a terminal).
    """
    from hookinbox._model import Status
    from hookinbox._operations import parse_time
    from hookinbox._records import Actor, EventFilter
    from hookinbox.cli._target import opened

    names = ("SOURCE", "EVENT_ID") if state is None else ()
    if len(arguments) not in (len(names), len(names) + 1):
        raise ConfigurationError("give [APP] SOURCE EVENT_ID, or --status (with optional filters)")
    app, key = split_app(arguments, names)
    app = resolve_app(app, app_option, explicit=len(arguments) > len(names))
    if state == Status.PROCESSING.value:
        raise ConfigurationError("processing events are held by a worker; they cannot be replayed")
    if state == Status.PROCESSED.value and not force:
        raise ConfigurationError("replaying processed events runs them again; add --force")
    now = datetime.now(UTC)
    since_time = None if since is None else parse_time(since, now)  # refused before any I/O
    until_time = None if until is None else parse_time(until, now)
    if state is None and (until or error_contains):
        raise ConfigurationError("--until and --error-contains filter a bulk replay: add --status")
    if error_contains is not None and not error_contains.strip():
        raise ConfigurationError("--error-contains needs some text")
    actor = Actor(getpass.getuser(), reason or None)
    with opened(app, database_url) as target:
        if state is None:
            _replay_one(
                target, key[0], key[1], actor, force=force, dry_run=dry_run, as_json=as_json
            )
            return
        chosen = Status(state)
        filters = EventFilter(
            chosen, source_filter, event_type, since_time, until_time,
            error_contains=error_contains.strip() if error_contains else None,
        )  # fmt: skip
        total = target.operations.count_events(filters)
        if total == 0:
            target.check_source(source_filter)
        sample = target.operations.list_events(filters, SAMPLE) if dry_run and total else []
        if not dry_run and total > confirm_above and not yes:
            _confirm(total, chosen.value, confirm_above)
        replayed = 0
        if not dry_run:
            with progress("replaying", total) as advance:
                for batch in target.operations.replay_matching(filters, now, actor=actor):
                    replayed += batch
                    advance(batch)
    if as_json:
        found = [{"source": row["source"], "event_id": row["event_id"]} for row in sample]
        emit_json({"status": chosen.value, "matched": total, "replayed": replayed,
                   "dry_run": dry_run, **({"sample": found} if dry_run else {})})  # fmt: skip
    elif dry_run:
        click.echo(f"would replay {total} {chosen.value} events (dry run: nothing changed)")
        for row in sample:  # what a sender wrote, shown escaped on one line
            error = (row["last_error"] or "").splitlines()[:1]
            line = f"{row['source']} {row['event_id']} {row['event_type'] or '-'}"
            click.echo(
                "  " + printable(line + (f": {error[0][:80]}" if error else ""), one_line=True)
            )
        if total > len(sample):
            click.echo(f"  ... and {total - len(sample)} more")
    else:
        click.echo(f"replayed {replayed} {chosen.value} events")


def _confirm(total: int, status: str, threshold: int) -> None:
    if not sys.stdin.isatty():
        raise ConfigurationError(
            f"{total} {status} events match, more than --confirm-above {threshold}: add --yes "
            "to replay them all (or --dry-run to see the count only)"
        )
    click.confirm(f"Replay {total} {status} events?", abort=True, err=True)


def _replay_one(
    target: Target,
    source: str,
    event_id: str,
    actor: Actor,
    *,
    force: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    from hookinbox._records import ReplayResult

    operations = target.operations
    if dry_run:  # the same refusals as a replay, read without a write
        result, previous = operations.would_replay(source, event_id, force=force)
    else:
        result, previous = operations.replay_one(
            source, event_id, datetime.now(UTC), force=force, actor=actor
        )
    if result is ReplayResult.NOT_FOUND:
        target.check_source(source)
        raise click.ClickException(f"no event {source} {event_id}")
    if result is ReplayResult.IN_PROGRESS:
        raise click.ClickException(
            f"{source} {event_id} is held by a worker right now (being processed): replay it "
            "once it is done"
        )
    assert previous is not None
    if result is ReplayResult.NEEDS_FORCE:
        raise click.ClickException(
            f"{source} {event_id} is {previous.value}: replaying runs its handlers again and "
            "repeats their effects unless they are idempotent; add --force if that is intended"
        )
    if as_json:
        emit_json({"source": source, "event_id": event_id, "status": "pending",
                   "previous_status": previous.value, "dry_run": dry_run})  # fmt: skip
    elif dry_run:
        click.echo(f"{source} {event_id}: {previous.value} -> pending (dry run: nothing changed)")
    else:
        click.echo(f"{source} {event_id}: {previous.value} -> pending")
