"""`hookinbox migrate [APP]`: create or upgrade hookinbox's tables."""

from __future__ import annotations

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import app_argument, database_url_option, json_option
from hookinbox.cli._output import emit_json


@click.command(short_help=short_help("migrate"))
@app_argument(required=False)
@database_url_option
@json_option
def migrate(app: str | None, database_url: str | None, as_json: bool) -> None:
    """Create or upgrade hookinbox's tables (for APP, or the database at --database-url).

    Exit codes: 0 done (or already up to date); 1 the database is unavailable; 2 bad usage or
    configuration (neither APP nor --database-url, an unsupported URL).
    """
    from hookinbox._storage import Store
    from hookinbox.cli._loading import load_inbox
    from hookinbox.cli._target import explained

    if app:
        inbox = load_inbox(app, database_url=database_url)
        with explained(inbox.settings.database_url):
            before, after = inbox.migrate()  # checks the app's handlers and sources first
        inbox.close()
    elif database_url:
        store = Store(database_url)
        with explained(database_url):
            before, after = store.migrate()
        store.dispose()
    else:
        raise ConfigurationError("give APP (or set HOOKINBOX_APP) or --database-url")
    if as_json:
        emit_json({"schema_version_before": before, "schema_version": after})
    elif before == after:
        click.echo(f"schema is up to date (version {after})")
    else:
        click.echo(f"schema upgraded from version {before} to {after}")
