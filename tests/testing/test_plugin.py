"""The pytest plugin as a user opts in: a conftest naming it, the inbox named in the ini."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = """
from hookinbox import Inbox
from hookinbox.sources import GitHub

inbox = Inbox("sqlite:///never-used.db", sources=[GitHub(secret="gh")])
pushes = []


@inbox.handler("github", "push")
def record(event, ctx):
    pushes.append(event.payload["after"])
"""

TESTS = """
import webhooks
from hookinbox.testing import github_push


def test_a_redelivered_push_runs_once(hookinbox, deliver, run_due):
    push = github_push()
    assert [a.status for a in deliver("github", push, copies=2)] == ["accepted", "duplicate"]
    assert run_due() == 1
    assert webhooks.pushes == [push["after"]]
    assert hookinbox.database_url != webhooks.inbox.settings.database_url
"""


def pytest_in(directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    # The plugin is named by the conftest, as a user opts in; the other installed plugins
    # (hypothesis', schemathesis') cost seconds of start-up each run and play no part here.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_ini_option_names_the_inbox(tmp_path: Path) -> None:
    (tmp_path / "webhooks.py").write_text(APP)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["hookinbox.testing.pytest"]\n')
    (tmp_path / "pytest.ini").write_text("[pytest]\nhookinbox_app = webhooks:inbox\n")
    (tmp_path / "test_webhooks.py").write_text(TESTS)
    done = pytest_in(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert not (tmp_path / "never-used.db").exists()  # the app's own database is left alone


def test_an_unnamed_inbox_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "webhooks.py").write_text(APP)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["hookinbox.testing.pytest"]\n')
    (tmp_path / "test_webhooks.py").write_text(TESTS)
    done = pytest_in(tmp_path)
    assert done.returncode != 0
    assert "name your inbox: hookinbox_app = module:attribute" in done.stdout + done.stderr


ASYNC_APP = """
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hookinbox import Inbox
from hookinbox.sources import GitHub

inbox = Inbox("sqlite+aiosqlite:///never-used.db", sources=[GitHub(secret="gh")])


class Base(DeclarativeBase):
    pass


class Push(Base):
    __tablename__ = "pushes"
    id: Mapped[int] = mapped_column(primary_key=True)
    after: Mapped[str] = mapped_column(sa.String(64), unique=True)


inbox.after_migrate(Base.metadata.create_all)


@inbox.handler("github", "push", business_key="pushes.after")
async def record(event, ctx):
    async with ctx.session() as session:
        session.add(Push(after=event.payload["after"]))
        await session.commit()
"""

ASYNC_TESTS = """
import asyncio

import sqlalchemy as sa
from sqlalchemy.engine import make_url

import webhooks
from hookinbox.testing import github_push


def pushes(hookinbox):
    with hookinbox.inbox.store.reading() as connection:
        return list(connection.execute(sa.select(webhooks.Push.after)).scalars())


def test_a_redelivered_push_is_one_row(hookinbox, deliver, run_due, hookinbox_database):
    named = make_url(hookinbox_database).drivername if hookinbox_database else "sqlite+aiosqlite"
    assert make_url(hookinbox.database_url).drivername == named
    push = github_push()
    assert [a.status for a in deliver("github", push, copies=2)] == ["accepted", "duplicate"]
    assert run_due() == 1
    assert pushes(hookinbox) == [push["after"]]


def test_an_async_test_awaits_the_harness(hookinbox):
    push = github_push()

    async def scenario():
        await hookinbox.adeliver("github", push, copies=2, concurrently=True)
        return await hookinbox.arun_due()

    assert asyncio.run(scenario()) == 1
    assert pushes(hookinbox) == [push["after"]]  # the first test's rows are not here
"""


def postgres(driver: str) -> str:
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("HOOKINBOX_TEST_POSTGRES_URL is not set")
        pytest.skip("HOOKINBOX_TEST_POSTGRES_URL is not set")
    url = make_url(POSTGRES_URL).set(drivername=f"postgresql+{driver}")
    return url.render_as_string(hide_password=False)


PG_CONFTEST = """

import pytest


@pytest.fixture(params=["asyncpg", "psycopg_async"])
def hookinbox_database(request):
    url = request.config.getoption("hookinbox_db")  # postgresql+asyncpg://...
    return url.replace("+asyncpg", f"+{request.param}")
"""


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_an_async_app_is_tested_on_the_async_worker(tmp_path: Path, database: str) -> None:
    """The plugin's default (a SQLite file per test, opened with aiosqlite), and
    `--hookinbox-db` naming asyncpg, as it stands and overridden by a conftest's
    `hookinbox_database` naming psycopg's async mode: the fixtures run the app's `async def`
    handlers, with their AsyncSession, on each."""
    (tmp_path / "webhooks.py").write_text(ASYNC_APP)
    conftest = 'pytest_plugins = ["hookinbox.testing.pytest"]\n'
    options: list[str] = []
    if database == "postgres":
        options = ["--hookinbox-db", postgres("asyncpg")]
        conftest += PG_CONFTEST
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "pytest.ini").write_text("[pytest]\nhookinbox_app = webhooks:inbox\n")
    (tmp_path / "test_webhooks.py").write_text(ASYNC_TESTS)
    done = pytest_in(tmp_path, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{2 if database == 'sqlite' else 4} passed" in done.stdout
