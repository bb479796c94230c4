"""Each dialect reads its own driver's errors (`_storage/_errors.py` asks every registered
dialect's reader in turn): a reader answers for its driver's errors only, whatever the text of
another driver's message says, and an error no reader claims is no unique violation."""

from __future__ import annotations

import sqlite3
import types

from sqlalchemy import exc

from hookinbox._records import UniqueViolation
from hookinbox._storage import unique_violation
from hookinbox._storage._errors import is_unavailable, name_unique_violation, translate_errors


def integrity(original: BaseException) -> exc.IntegrityError:
    return exc.IntegrityError("INSERT ...", {}, original)


class PsycopgLike(Exception):
    """An error with psycopg's `diag` and `sqlstate`, as the PostgreSQL reader reads them."""

    def __init__(self, message: str, sqlstate: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.diag = types.SimpleNamespace(
            message_detail=detail, table_name="orders", constraint_name="orders_payment_key"
        )


def test_sqlite3_s_violation_is_read_from_its_message() -> None:
    error = sqlite3.IntegrityError("UNIQUE constraint failed: orders.payment_id")
    assert unique_violation(integrity(error)) == UniqueViolation(
        "orders", frozenset({"payment_id"}), None
    )
    assert unique_violation(integrity(sqlite3.IntegrityError("NOT NULL constraint failed"))) is None


def test_psycopg_s_violation_is_read_from_diag() -> None:
    error = PsycopgLike("duplicate key", "23505", "Key (payment_id)=(pi_1) already exists.")
    assert unique_violation(integrity(error)) == UniqueViolation(
        "orders", frozenset({"payment_id"}), "orders_payment_key"
    )


def test_a_reader_answers_for_its_own_driver_only() -> None:
    """A psycopg error that is no violation stays none, though its text reads like
    sqlite3's: the PostgreSQL reader claimed it, the SQLite reader never saw it."""
    error = PsycopgLike("UNIQUE constraint failed: orders.payment_id", "23514")
    assert unique_violation(integrity(error)) is None
    assert unique_violation(integrity(ValueError("UNIQUE constraint failed: a.b"))) is None


def test_a_violation_named_by_a_dialect_s_handler_is_read_first() -> None:
    error = sqlite3.IntegrityError("UNIQUE constraint failed: orders.payment_id")
    name_unique_violation(error, "orders", frozenset({"payment_id", "shop"}), "uq_orders")
    assert unique_violation(integrity(error)) == UniqueViolation(
        "orders", frozenset({"payment_id", "shop"}), "uq_orders"
    )


def test_a_damaged_sqlite_file_is_unavailable_and_named() -> None:
    error = sqlite3.DatabaseError("file is not a database")
    error.sqlite_errorcode = 26  # type: ignore[attr-defined]
    error.sqlite_errorname = "SQLITE_NOTADB"  # type: ignore[attr-defined]
    wrapped = exc.DatabaseError("SELECT 1", {}, error)
    assert is_unavailable(wrapped)
    try:
        with translate_errors():
            raise wrapped
    except Exception as translated:
        assert "(SQLITE_NOTADB)" in str(translated)
    assert not is_unavailable(exc.DatabaseError("SELECT 1", {}, ValueError("no")))
