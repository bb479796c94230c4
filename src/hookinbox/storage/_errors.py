"""The one place where driver errors become hookinbox errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from hookinbox._errors import StoreUnavailable


def is_unavailable(error: BaseException) -> bool:
    """True for errors that mean "the database cannot answer now", as opposed to bugs."""
    if isinstance(error, exc.TimeoutError):  # no pooled connection came free in time
        return True
    if isinstance(error, exc.DBAPIError):
        return error.connection_invalidated or isinstance(
            error, exc.OperationalError | exc.InterfaceError
        )
    return False


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise unavailability as `StoreUnavailable` (cause kept); let anything else through."""
    try:
        yield
    except Exception as error:
        if is_unavailable(error):
            raise StoreUnavailable(_describe(error)) from error
        raise


def _describe(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    return f"database unavailable: {type(original).__name__}: {first_line}"[:300]
