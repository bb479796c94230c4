"""hookinbox's pytest plugin: your inbox on a throwaway database, deliveries, a clock.

Opt in from a `conftest.py`:

    pytest_plugins = ["hookinbox.testing.pytest"]

and name your inbox, either with the `hookinbox_app = "myapp.webhooks:inbox"` ini option or by
overriding the `hookinbox_app` fixture. Fixtures:

- `hookinbox`: an `InboxHarness`, your inbox's copy on its own database and clock;
- `deliver(source, payload, copies=1, **fields)`: signed deliveries through the HTTP contract;
- `run_due()`: process what is due now, in the test's thread;
- `hookinbox_clock`: the `Clock` the copy reads (`advance(seconds)`).

`--hookinbox-db postgresql://...` runs each test in a fresh schema of that database instead of
a SQLite file. An inbox on an async URL is tested on the async worker: its copy keeps an async
driver (aiosqlite by default), and an async test awaits `hookinbox.adeliver(...)` and
`hookinbox.arun_due()` on its own event loop.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from hookinbox._inbox import Inbox
from hookinbox._storage import dialect_for_url
from hookinbox.testing._asgi import Answer
from hookinbox.testing._clock import Clock
from hookinbox.testing._harness import InboxHarness


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hookinbox")
    group.addoption(
        "--hookinbox-db",
        dest="hookinbox_db",
        default=None,
        help="a PostgreSQL URL: each test gets a fresh schema in that database (default: a "
        "SQLite file per test); name an async driver (postgresql+asyncpg://, sqlite+aiosqlite://) "
        "to run the async worker",
    )
    parser.addini("hookinbox_app", "the inbox under test, as module:attribute", default="")


@pytest.fixture
def hookinbox_app(request: pytest.FixtureRequest) -> Inbox:
    """Your application's inbox; override this fixture, or set the `hookinbox_app` ini option."""
    spec = str(request.config.getini("hookinbox_app"))
    if not spec:
        raise pytest.UsageError(
            "name your inbox: hookinbox_app = module:attribute in the pytest ini, "
            "or a hookinbox_app fixture returning it"
        )
    module, _, attribute = spec.partition(":")
    inbox = importlib.import_module(module)
    for part in (attribute or "inbox").split("."):
        inbox = getattr(inbox, part)
    if not isinstance(inbox, Inbox):
        raise pytest.UsageError(f"hookinbox_app {spec} is not an Inbox")
    return inbox


@pytest.fixture
def hookinbox_clock() -> Clock:
    """The clock of the inbox under test: it stands still until the test moves it."""
    return Clock()


@pytest.fixture
def hookinbox_settings() -> dict[str, Any]:
    """Other settings of the copy (`{"retry": RetryPolicy(...)}`); override to change them."""
    return {}


@pytest.fixture
def hookinbox_database(request: pytest.FixtureRequest) -> str | None:
    """Where each test's database is made: `--hookinbox-db`'s PostgreSQL, or None for SQLite
    (a SQLite URL names only the driver: each test has a file of its own). Override it to
    choose per test (a parametrized fixture runs on both)."""
    option: str | None = request.config.getoption("hookinbox_db")
    return option


@pytest.fixture
def hookinbox(
    hookinbox_database: str | None,
    hookinbox_app: Inbox,
    hookinbox_clock: Clock,
    hookinbox_settings: dict[str, Any],
    tmp_path: Path,
) -> Iterator[InboxHarness]:
    """Your inbox's copy on a throwaway database, with `hookinbox_clock` as its clock; on
    an async inbox (or an async `hookinbox_database`), the async worker's."""
    url = _test_database(hookinbox_database, tmp_path / "hookinbox.db")
    with InboxHarness(
        hookinbox_app, database_url=url, clock=hookinbox_clock, **hookinbox_settings
    ) as harness:
        yield harness


@pytest.fixture
def deliver(hookinbox: InboxHarness) -> Callable[..., list[Answer]]:
    """`deliver(source, payload, copies=1, concurrently=False, **fields)`: the answers."""
    return hookinbox.deliver


@pytest.fixture
def run_due(hookinbox: InboxHarness) -> Callable[..., int]:
    """`run_due()`: process everything due at the clock's time; the attempts run. Inside an
    async test's event loop, await `hookinbox.arun_due()` instead."""
    return hookinbox.run_due


def _test_database(url: str | None, file: Path) -> str:
    """A server's URL as it stands (the harness makes the test's schema there); a SQLite URL,
    or none, as the file of this test alone, with the driver the URL names."""
    if url is None:
        return f"sqlite:///{file}"
    if not dialect_for_url(url).single_writer:  # a server: SQLite is the one file-based
        return url
    return make_url(url).set(database=str(file)).render_as_string(hide_password=False)
