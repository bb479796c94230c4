"""`hookinbox migrate [APP]`: create or upgrade hookinbox's tables; `--check` and `--plan`
say where the schema stands and what would run, and change nothing (docs/upgrading.md)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from hookinbox._errors import ConfigurationError
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import app_argument, database_url_option, json_option
from hookinbox.cli._output import Table, emit_json, show

if TYPE_CHECKING:
    from hookinbox._storage._compatibility import Planned, SchemaStatus

EXIT_NOT_CURRENT = 1
"""`--check`: the schema is not this hookinbox's version (older, newer or refused)."""


@click.command(short_help=short_help("migrate"))
@app_argument(required=False)
@database_url_option
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing: exit 0 if the schema is this hookinbox's version, else 1 and why.",
)
@click.option(
    "--plan",
    is_flag=True,
    help="Change nothing: list the migrations that would run, each expand or contract.",
)
@json_option
def migrate(
    app: str | None, database_url: str | None, check: bool, plan: bool, as_json: bool
) -> None:
    """Create or upgrade hookinbox's tables (for APP, or the database at --database-url).

    --check and --plan only read: --check exits 0 when the schema is this hookinbox's
    version and 1 with one line otherwise (migrations pending, or a newer schema, which this
    hookinbox runs on or not); --plan prints the migrations that would run.

    Exit codes: 0 done (or already up to date, or a newer schema this hookinbox runs on);
    1 the database is unavailable, or (--check) the schema is not this hookinbox's version;
    2 bad usage or configuration (neither APP nor --database-url, an unsupported URL, a
    newer schema that needs a newer hookinbox).
    """
    if check and plan:
        raise click.UsageError("--check and --plan ask two questions: give one")
    if check or plan:
        _inspect(app, database_url, plan=plan, as_json=as_json)
        return
    before, after = _upgrade(app, database_url)
    from hookinbox._storage import LATEST_VERSION

    if as_json:
        emit_json({"schema_version_before": before, "schema_version": after})
    elif before > LATEST_VERSION:
        click.echo(
            f"nothing to migrate: the schema is version {before}, newer than this hookinbox's"
            f" {LATEST_VERSION}, and runs with it (docs/upgrading.md)"
        )
    elif before == after:
        click.echo(f"schema is up to date (version {after})")
    else:
        click.echo(f"schema upgraded from version {before} to {after}")


def _upgrade(app: str | None, database_url: str | None) -> tuple[int, int]:
    from hookinbox._storage import Store
    from hookinbox.cli._loading import load_inbox
    from hookinbox.cli._target import explained

    if app:
        inbox = load_inbox(app, database_url=database_url)
        with explained(inbox.settings.database_url):
            result = inbox.migrate()  # checks the app's handlers and sources first
        inbox.close()
        return result
    if database_url:
        store = Store(database_url)
        with explained(database_url):
            result = store.migrate()
        store.dispose()
        return result
    raise ConfigurationError("give APP (or set HOOKINBOX_APP) or --database-url")


def _inspect(app: str | None, database_url: str | None, *, plan: bool, as_json: bool) -> None:
    """`--check` or `--plan`: the database as it is (a missing SQLite file is an error, not a
    new empty inbox), read without a write."""
    from hookinbox.cli._target import explained, opened

    with opened(app, database_url) as target, explained(str(target.store.url)):
        status = target.store.schema_status()
        steps = target.store.migration_plan(status.version)
    if plan:
        _print_plan(status, steps, as_json)
        return
    current = status.current
    if as_json:
        emit_json(
            {
                "ok": current,
                "state": status.state.value,
                "schema_version": status.version,
                "code_schema_version": status.code_version,
                "min_code_version": status.min_code_version,
                "pending": [step.version for step in steps],
            }
        )
    else:
        click.echo(("up to date: " if current else "") + status.describe())
    if not current:
        sys.exit(EXIT_NOT_CURRENT)


def _print_plan(status: SchemaStatus, steps: list[Planned], as_json: bool) -> None:
    if as_json:
        migrations = [
            {"version": step.version, "kind": step.kind.value, "title": step.title,
             "min_code_version": step.min_code_version}
            for step in steps
        ]  # fmt: skip
        emit_json(
            {
                "state": status.state.value,
                "schema_version": status.version,
                "code_schema_version": status.code_version,
                "migrations": migrations,
            }
        )
        return
    click.echo(status.describe() if steps else f"nothing to run: {status.describe()}")
    if steps:
        table = Table(["version", "kind", "then runs with", "what it changes"])
        for step in steps:
            table.add_row(step.version, step.kind.value, f"schema {step.min_code_version}+",
                          step.title)  # fmt: skip
        show(table)
