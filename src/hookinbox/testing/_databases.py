"""Throwaway databases for tests: a SQLite file, or a fresh PostgreSQL database on a server."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from hookinbox._storage._engine import parse_url


@contextmanager
def throwaway_database(
    server_url: str | None = None, directory: Path | None = None
) -> Iterator[str]:
    """A URL to an empty database, dropped (or deleted) afterwards.

    Without `server_url`: a SQLite file in `directory` (or a temporary directory). With a
    PostgreSQL URL: a new database `hookinbox_test_<random>` created on that server (its user
    needs CREATEDB), dropped at the end. A SQLite URL is used as a file name to create.
    """
    if server_url is None or parse_url(server_url).get_backend_name() == "sqlite":
        if server_url is not None:
            yield server_url
            return
        with tempfile.TemporaryDirectory(dir=directory) as folder:
            yield f"sqlite:///{Path(folder) / 'inbox.db'}"
        return
    url = parse_url(server_url)
    name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
