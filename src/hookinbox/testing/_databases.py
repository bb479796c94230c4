"""Throwaway databases for tests: a SQLite file, or a fresh schema on a PostgreSQL server.

The URL returned names the driver the application's inbox runs on: a copy of an inbox on an
async URL (`sqlite+aiosqlite:///`, `postgresql+asyncpg://`) must run its async worker, whose
`async def` handlers get an `AsyncHandlerContext`, not the sync worker the plain URL would pick.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from hookinbox._errors import ConfigurationError
from hookinbox._storage import async_url, dialect_for_url, parse_url


@contextmanager
def throwaway_database(
    server_url: str | None = None, directory: Path | None = None, *, like: str | None = None
) -> Iterator[str]:
    """A URL to an empty database, dropped (or deleted) afterwards.

    Without `server_url`: a SQLite file in `directory` (or a temporary directory). A SQLite
    URL is used as it stands. A PostgreSQL URL: a new schema `hookinbox_test_<random>` in that
    database (its user needs CREATE there), first on the returned URL's `search_path`, so that
    hookinbox's tables and the application's unqualified ones are made in it; dropped with
    everything in it at the end. A schema costs milliseconds where a database costs a second.

    The URL names an async driver when `server_url` does, or when `like` (the application's
    own database URL) does: then the database's async driver, the one `like` names where it
    is the same database, else the first hookinbox supports (aiosqlite, asyncpg).
    """
    wanted = server_url if server_url is not None and async_url(server_url) else like
    if server_url is None:
        with tempfile.TemporaryDirectory(dir=directory) as folder:
            file = f"sqlite:///{Path(folder) / 'inbox.db'}"
            yield _named(file, _async_driver(parse_url(file), wanted))
        return
    url = parse_url(server_url)
    driver = _async_driver(url, wanted)  # refused before anything is made
    with dialect_for_url(url).scratch_database(url) as scratch:
        yield _named(scratch, driver)


def _async_driver(database: URL, wanted: str | None) -> str | None:
    """The async driver to name on `database`: None when `wanted` names a sync one; the one
    it names if `database` has it; else the database's first (aiosqlite, asyncpg)."""
    if wanted is None or async_url(wanted) is None:
        return None
    given = make_url(wanted)
    dialect = dialect_for_url(database)
    drivers = list(dialect.async_drivers)
    if not drivers:
        raise ConfigurationError(
            f"the inbox runs on an async driver ({given.drivername}), and hookinbox has none "
            f"for {dialect.name}: test it on SQLite or PostgreSQL"
        )
    return given.get_driver_name() if given.get_driver_name() in drivers else drivers[0]


def _named(url: str, driver: str | None) -> str:
    if driver is None:
        return url
    parsed = make_url(url)
    named = parsed.set(drivername=f"{dialect_for_url(url).name}+{driver}")
    async_url(named)  # the driver installed, or one line naming its extra
    return named.render_as_string(hide_password=False)
