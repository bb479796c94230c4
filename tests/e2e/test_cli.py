"""The CLI's own errors: one line on stderr, a documented exit code, never a traceback."""

from __future__ import annotations

import pytest

from hookinbox._storage import LATEST_VERSION
from tests.support.server import run_cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "no_such_module:inbox"], "cannot import 'no_such_module'"),
        (["serve", "tests.apps.basic:nothing"], "has no attribute 'nothing'"),
        (["serve", "tests.apps.basic:STRIPE_SECRET"], "not a hookinbox Inbox"),
        (["serve", "tests.apps.basic"], "module:attribute"),
        (["migrate"], "give APP (or set HOOKINBOX_APP) or --database-url"),
        (["migrate", "--database-url", "oracle://x@y/z"], "unsupported database"),
    ],
)
def test_configuration_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_an_unreachable_database_exits_1_with_one_line(command: str) -> None:
    result = run_cli(
        command, "tests.apps.basic:inbox", "--database-url", "postgresql://postgres@127.0.0.1:1/x"
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: database unavailable")
    assert len(result.stderr.strip().splitlines()) == 1


def test_migrate_creates_then_reports_up_to_date(empty_db_url: str) -> None:
    first = run_cli("migrate", "--database-url", empty_db_url)
    second = run_cli("migrate", "tests.apps.basic:inbox", "--database-url", empty_db_url)
    assert first.returncode == 0, first.stderr
    assert f"upgraded from version 0 to {LATEST_VERSION}" in first.stdout
    assert second.returncode == 0
    assert f"up to date (version {LATEST_VERSION})" in second.stdout


def test_python_dash_m_and_help_show_the_environment_variables() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    assert "HOOKINBOX_DATABASE_URL" in result.stdout
    assert "HOOKINBOX_PORT" in result.stdout
