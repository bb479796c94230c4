"""The database an operator command reads: the app's (APP) or a bare URL (--database-url)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookinbox._errors import ConfigurationError

if TYPE_CHECKING:
    from hookinbox._inbox import Inbox
    from hookinbox._operations._service import Operations
    from hookinbox._storage import Store


@dataclass
class Target:
    """The database an operator command reads, and the app (APP) when one was given.

    `operations` is what the commands ask of its data; `store` itself only serves what is
    the schema's (`migrate --check`) and is released when the command ends."""

    store: Store
    inbox: Inbox | None
    operations: Operations

    def check_source(self, name: str | None) -> None:
        """Refuse a source name neither the app nor the database knows, with a hint.

        Called when a look-up by source found nothing, so a well-spelled name costs nothing
        and a typo (`strpe`) is an error that says what was probably meant. With APP the
        app's sources are the authority. Without it only the database speaks, and it does
        not know a configured source that has no events yet: then the name is refused only
        when a known one is close to it (a typo), else the look-up's own answer stands."""
        if name is None:
            return

        configured = set(self.inbox.sources) if self.inbox else set()
        if name in configured or self.store_has(name):
            return
        known = configured | set(self.operations.known_sources())
        hint = did_you_mean(name, known)
        if self.inbox is not None or hint.startswith(" (did you mean"):
            raise ConfigurationError(f"no source is named {name!r}{hint}")

    def store_has(self, source: str) -> bool:
        return self.operations.source_exists(source)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'stripe'?)`, ` (known: a, b)`, or nothing when nothing is known."""
    choices = sorted(set(known))
    close = difflib.get_close_matches(name, choices, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known: {', '.join(choices)})" if choices else ""


@contextmanager
def opened(app: str | None, database_url: str | None) -> Iterator[Target]:
    """The inbox's database, as it is: operator commands never create or upgrade a schema, so
    a mistyped URL is an error, not a fresh empty inbox that reports itself healthy."""
    from hookinbox._operations._service import Operations
    from hookinbox._storage import Store
    from hookinbox.cli._loading import load_inbox

    inbox: Inbox | None = None
    if app:
        inbox = load_inbox(app, database_url=database_url)
        url = inbox.settings.database_url
        _require_existing(url)
        store = Store(url, inbox.settings.store_options, auto_migrate=False)
    elif database_url:
        _require_existing(database_url)
        store = Store(database_url, auto_migrate=False)
    else:
        raise ConfigurationError("give APP (or set HOOKINBOX_APP) or --database-url")
    target = Target(store, inbox, Operations(store))
    try:
        yield target
    finally:
        target.store.dispose()


def _require_existing(database_url: str) -> None:
    from hookinbox._storage import dialect_for_url, parse_url

    missing = dialect_for_url(database_url).missing_database(parse_url(database_url))
    if missing is not None:
        raise ConfigurationError(missing)


@contextmanager
def explained(database_url: str) -> Iterator[None]:
    """A SQLite file that cannot be opened, said with its path and why: sqlite3 says only
    "unable to open database file" (SQLITE_CANTOPEN), whatever the file and the reason."""
    from hookinbox._errors import StoreUnavailable

    try:
        yield
    except StoreUnavailable as error:
        reason = _cannot_open(error, database_url)
        if reason is None:
            raise
        raise StoreUnavailable(reason) from error


def _cannot_open(error: BaseException, database_url: str) -> str | None:
    import os
    from pathlib import Path

    from hookinbox._storage import parse_url

    driver_error = getattr(error.__cause__, "orig", None)
    if getattr(driver_error, "sqlite_errorname", None) != "SQLITE_CANTOPEN":
        return None
    path = Path(parse_url(database_url).database or "")
    directory = path.parent
    if not directory.is_dir():
        why = f"no directory {directory}"
    elif not os.access(directory, os.W_OK | os.X_OK):
        why = f"this user may not write in {directory}"
    elif path.is_dir():
        why = "it is a directory"
    else:
        why = "SQLITE_CANTOPEN"
    return f"database unavailable: cannot open the SQLite file {path}: {why}"
