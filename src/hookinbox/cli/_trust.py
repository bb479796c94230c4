"""`hookinbox trust [APP] SOURCE --for 10m`: open the window in which a source's first
handshake is believed (trust on first use: Asana's `X-Hook-Secret`), close it, or forget the
secrets it learned. Never prints a secret."""

from __future__ import annotations

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import database_url_option, json_option, split_app
from hookinbox.cli._output import emit_json

LONGEST_WINDOW_SECONDS = 24 * 3600
"""A window is for the minutes a webhook's creation takes, not a standing state."""


@click.command("trust", short_help=short_help("trust"))
@click.argument("arguments", nargs=-1, metavar="[APP] SOURCE")
@database_url_option
@click.option(
    "--for",
    "length",
    default="10m",
    show_default=True,
    help="How long the window stays open, with its unit (10m, 1h; at most 24h).",
)
@click.option("--close", is_flag=True, help="Close the source's window now.")
@click.option("--forget", is_flag=True, help="Drop every secret the source learned.")
@json_option
def trust(
    arguments: tuple[str, ...],
    database_url: str | None,
    length: str,
    close: bool,
    forget: bool,
    as_json: bool,
) -> None:
    """Believe SOURCE's next first handshake for a while (--for), then create the webhook.

    The first request of a source that learns its secret on first use (Asana: `X-Hook-Secret`)
    is answered, and its secret kept in the database, only inside this window; the window
    closes at the first such handshake, or when its time is up. Outside it a handshake is
    refused (401) and nothing is kept. --close closes it now; --forget drops the secrets the
    source learned (its webhooks were deleted). No secret is ever printed.

    Exit codes: 0 done; 1 the database is unavailable; 2 bad usage or configuration (a
    source APP has that learns no secrets).
    """  # fmt: skip
    from hookinbox._operations import format_duration, parse_duration
    from hookinbox.cli._target import opened

    app, (source,) = split_app(arguments, ("SOURCE",))
    if close and forget:
        raise click.UsageError("--close and --forget are two commands")
    window = parse_duration(length)
    if not 0 < window.total_seconds() <= LONGEST_WINDOW_SECONDS:
        raise click.BadParameter("a length of time, with its unit, of at most 24h",
                                 param_hint="'--for'")  # fmt: skip
    with opened(app, database_url) as target:
        if target.inbox is not None:
            configured = target.inbox.sources.get(source)
            if configured is None:
                target.check_source(source)
                raise ConfigurationError(f"no source is named {source!r}")
            if not configured.learns_secrets:
                raise ConfigurationError(
                    f"source {source!r} ({type(configured).__name__}) learns no secret on "
                    "first use: nothing to trust"
                )
        operations = target.operations
        if forget:
            forgotten = operations.forget_learned_secrets(source)
            result = {"source": source, "forgotten": forgotten}
            line = f"{source}: {forgotten} learned secret(s) forgotten"
        elif close:
            was_open = operations.close_trust_window(source)
            result = {"source": source, "closed": was_open}
            line = f"{source}: window closed" if was_open else f"{source}: no window was open"
        else:
            closes_at = operations.open_trust_window(source, window)
            learned = operations.learned_secret_count(source)
            result = {"source": source, "closes_at": closes_at.isoformat(), "learned": learned}
            line = (
                f"{source}: the next first handshake is believed for "
                f"{format_duration(window)} (until {closes_at:%Y-%m-%d %H:%M:%S} UTC, or the "
                f"first one); {learned} secret(s) learned so far"
            )
    if as_json:
        emit_json(result)
        return
    click.echo(line)
