"""What sqlite3's errors mean: the result codes hookinbox reads, the reader `_errors.py` asks."""

from __future__ import annotations

import re
import sqlite3

from hookinbox._records import UniqueViolation
from hookinbox._storage._errors import (
    NOT_MINE,
    NotMine,
    ReadsNothing,
)

SQLITE_READONLY = 8
"""The primary result code of "attempt to write a readonly database" and its extended codes."""
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
_UNIQUE_MESSAGE = re.compile(r"UNIQUE constraint failed: (?P<targets>.+)$")


class SQLiteErrors(ReadsNothing):
    """What sqlite3's errors mean (aiosqlite raises sqlite3's classes)."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        """The table and columns sqlite3's message names (it names no constraint)."""
        if not isinstance(original, sqlite3.Error):
            return NOT_MINE
        match = _UNIQUE_MESSAGE.search(str(original))
        if not match:
            return None
        targets = [t.strip() for t in match["targets"].split(",")]
        tables = {t.rpartition(".")[0] for t in targets}
        columns = frozenset(t.rpartition(".")[2] for t in targets)
        return UniqueViolation(tables.pop() if len(tables) == 1 else None, columns, None)

    def unavailable(self, original: BaseException) -> bool:
        """A file that is damaged or is not a database at all: sqlite3 raises a plain
        DatabaseError for it, yet nothing can be stored or read until an operator restores
        it."""
        code = getattr(original, "sqlite_errorcode", None)
        return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)

    def detail(self, original: BaseException) -> str | None:
        """The extended result code (SQLITE_IOERR_WRITE, SQLITE_FULL, SQLITE_READONLY, ...):
        a write refused by a read-only or immutable file reads "disk I/O error" alone."""
        name = getattr(original, "sqlite_errorname", None)
        return str(name) if name else None


def is_read_only_error(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.Error) and code is not None and code & 0xFF == SQLITE_READONLY
