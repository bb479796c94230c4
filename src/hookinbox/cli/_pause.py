"""`hookinbox pause [APP] SOURCE` and `hookinbox resume [APP] SOURCE`: stop processing a
source's events while it is broken downstream, keep receiving and storing them, and start
again; both audited."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import database_url_option, json_option, split_app
from hookinbox.cli._output import emit_json

if TYPE_CHECKING:
    from hookinbox.cli._target import Target

_REASON = click.option("--reason", help="Why, for the audit trail.")


@click.command("pause", short_help=short_help("pause"))
@click.argument("arguments", nargs=-1, metavar="[APP] SOURCE")
@database_url_option
@_REASON
@json_option
def pause(arguments: tuple[str, ...], database_url: str | None, reason: str | None,
          as_json: bool) -> None:  # fmt: skip
    """Stop processing SOURCE's events; keep receiving and storing them.

    Deliveries are still verified, stored and answered; no event of SOURCE is processed until
    `hookinbox resume`. When the command returns, no attempt at one of them starts any more;
    an attempt that had already begun has ended (the command waits for it). Its open events
    are shown as `paused` (`events list --status paused`), and `status` lists the paused
    sources. Audited: who (your OS user), when, --reason. Pausing a paused source is fine.

    Exit codes: 0 paused; 1 the database is unavailable; 2 bad usage or configuration (an
    unknown source name).
    """
    from hookinbox._records import Actor
    from hookinbox.cli._target import opened

    app, (source,) = split_app(arguments, ("SOURCE",))
    actor = Actor(getpass.getuser(), reason or None)
    with opened(app, database_url) as target:
        _known(target, source)
        change = target.operations.pause(source, datetime.now(UTC), actor=actor)
    if as_json:
        emit_json({"source": source, "paused": True, "was_paused": change.was_paused,
                   "parked": change.events})  # fmt: skip
        return
    already = " (it was paused already)" if change.was_paused else ""
    click.echo(f"{source}: paused{already}; {change.events} open events parked")


@click.command("resume", short_help=short_help("resume"))
@click.argument("arguments", nargs=-1, metavar="[APP] SOURCE")
@database_url_option
@_REASON
@json_option
def resume(arguments: tuple[str, ...], database_url: str | None, reason: str | None,
           as_json: bool) -> None:  # fmt: skip
    """Process SOURCE's events again: those kept while it was paused are due again.

    Each is processed once, at the time it was due (a retry keeps its backoff). Audited as
    `pause` is. A resume cut short (the database went away) is finished by running it again.

    Exit codes: 0 resumed; 1 SOURCE is not paused, or the database is unavailable; 2 bad
    usage or configuration (an unknown source name).
    """
    from hookinbox._records import Actor
    from hookinbox.cli._target import opened

    app, (source,) = split_app(arguments, ("SOURCE",))
    actor = Actor(getpass.getuser(), reason or None)
    with opened(app, database_url) as target:
        _known(target, source)
        change = target.operations.resume(source, datetime.now(UTC), actor=actor)
    if not change.was_paused and change.events == 0:
        raise click.ClickException(f"source {source!r} is not paused")
    if as_json:
        emit_json({"source": source, "paused": False, "was_paused": change.was_paused,
                   "resumed": change.events})  # fmt: skip
        return
    click.echo(f"{source}: resumed; {change.events} events due again")


def _known(target: Target, source: str) -> None:
    """Refuse a source name neither the app nor the database knows: with APP the app's
    sources decide; without it, a source with stored events or one that is paused."""
    if target.inbox is not None:
        if source not in target.inbox.sources:
            target.check_source(source)  # a hint, when a known name is close
            raise ConfigurationError(f"no source is named {source!r}")
        return
    operations = target.operations
    if operations.source_exists(source):
        return
    if any(paused.source == source for paused in operations.paused_sources()):
        return
    target.check_source(source)
    raise ConfigurationError(
        f"no source is named {source!r} (no event of it is stored: give APP to pause a "
        "source before its first event)"
    )
