"""Throwaway databases for tests: a SQLite file, or a fresh schema on a PostgreSQL server."""

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

    Without `server_url`: a SQLite file in `directory` (or a temporary directory). A SQLite
    URL is used as it stands. A PostgreSQL URL: a new schema `hookinbox_test_<random>` in that
    database (its user needs CREATE there), first on the returned URL's `search_path`, so that
    hookinbox's tables and the application's unqualified ones are made in it; dropped with
    everything in it at the end. A schema costs milliseconds where a database costs a second.
    """
    if server_url is None:
        with tempfile.TemporaryDirectory(dir=directory) as folder:
            yield f"sqlite:///{Path(folder) / 'inbox.db'}"
        return
    url = parse_url(server_url)
    if url.get_backend_name() == "sqlite":
        yield server_url
        return
    schema = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        try:
            given = url.query.get("options")
            given = " ".join(given) if isinstance(given, tuple) else given
            options = " ".join(filter(None, [given, f"-csearch_path={schema}"]))
            scoped = url.update_query_dict({"options": options})
            yield scoped.render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        admin.dispose()
