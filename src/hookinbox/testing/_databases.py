"""Throwaway databases for tests: a SQLite file, or a fresh schema on a PostgreSQL server."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hookinbox._storage import dialect_for_url, parse_url


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
    with dialect_for_url(url).scratch_database(url) as scratch:
        yield scratch
