"""The one place where redis-py's errors become hookinbox errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from hookinbox._errors import ClaimStoreUnavailable


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Re-raise any redis-py error as `ClaimStoreUnavailable` (cause kept).

    Every Redis error counts, not only a lost connection: a claim that could not be checked
    must stop the work (a 503, or an exception the caller sees), never let it run unguarded.
    """
    try:
        yield
    except RedisError as error:
        raise ClaimStoreUnavailable(describe(action, error)) from error


def describe(action: str, error: RedisError) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, ConnectionError | TimeoutError):
        reason = "Redis is unreachable"
    else:
        reason = "Redis refused the command"
    return f"could not {action}: {reason}: {type(error).__name__}: {first_line}"[:300]
