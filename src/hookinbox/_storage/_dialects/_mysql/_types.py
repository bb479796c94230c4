"""MariaDB's spelling of hookinbox's column types and tables, registered with SQLAlchemy's
compiler when this module is imported (by the package)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateTable
from sqlalchemy.sql.compiler import DDLCompiler, TypeCompiler

from hookinbox._storage._dialects._mysql._server import COLLATION, REQUIRED_CHARSET
from hookinbox._storage._types import LongBinary, LongText, UTCDateTime

# -- column types ------------------------------------------------------------------------------
# MariaDB's plain types are too small for hookinbox's columns: DATETIME keeps whole seconds,
# BLOB and TEXT 64 KiB. A body (1 MiB by default) needs LONGBLOB, a time microseconds.


@compiles(CreateTable, "mysql")
def _create_table(element: CreateTable, compiler: DDLCompiler, **kw: Any) -> str:
    """hookinbox's tables compare text byte for byte (`evt_A` is not `evt_a`, `a ` is not
    `a`: a unique key must not fold two events into one), whatever the database's default
    collation; other tables are left to it."""
    sql: str = compiler.visit_create_table(element, **kw)  # type: ignore[no-untyped-call]
    if element.element.name.startswith("hookinbox_"):
        sql = sql.rstrip() + f" DEFAULT CHARSET={REQUIRED_CHARSET} COLLATE={COLLATION}"
    return sql


@compiles(UTCDateTime, "mysql")
def _datetime(type_: UTCDateTime, compiler: TypeCompiler, **kw: Any) -> str:
    return "DATETIME(6)"


@compiles(LongText, "mysql")
def _text(type_: LongText, compiler: TypeCompiler, **kw: Any) -> str:
    return "LONGTEXT"


@compiles(LongBinary, "mysql")
def _blob(type_: LongBinary, compiler: TypeCompiler, **kw: Any) -> str:
    return "LONGBLOB"
