"""How hookinbox talks to its database: the options, and the execution options it sets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError

HIDE_PARAMETERS = True
"""SQLAlchemy's errors quote a failed statement's parameters, and the inbox's statements carry
raw bodies and signature headers (a handler's carry its event's data): an error logged, stored
as `last_error` or shown by `events` must not repeat them. The statement itself is kept."""

READ_ONLY = "hookinbox_read_only"
"""Execution option: this connection only reads, so SQLite may begin without the write lock."""


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """How hookinbox talks to its database. Every field has a safe default."""

    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    """FULL: a 2xx survives a power cut. NORMAL: survives a process crash only, ~3x faster."""
    busy_timeout: float = 5.0
    """Seconds a SQLite writer waits for the lock before the delivery is answered 503."""
    pool_size: int = 10
    max_overflow: int = 10
    pool_timeout: float = 5.0
    """Seconds to wait for a pooled connection before answering 503 (PostgreSQL)."""
    connect_timeout: float = 5.0
    tcp_timeout: float = 10.0
    """Seconds before a PostgreSQL connection whose server went silent (a host lost without
    a reset, a network partition) is given up, so that a failover is followed in seconds,
    not after the kernel's retransmission timeout (about 15 minutes). It sets libpq's
    `tcp_user_timeout` and TCP keepalives (idle `tcp_timeout / 2` seconds, then 3 probes);
    each of them given in the URL's query wins. 0: the system's defaults."""

    def __post_init__(self) -> None:
        if self.sqlite_synchronous not in ("FULL", "NORMAL"):
            raise ConfigurationError(
                f"sqlite_synchronous must be 'FULL' or 'NORMAL', not {self.sqlite_synchronous!r}"
            )
        for name, limits in _RANGES.items():
            limits.check(name, getattr(self, name))


_RANGES = {
    "busy_timeout": ranges.BUSY_TIMEOUT,
    "pool_size": ranges.POOL_SIZE,
    "max_overflow": ranges.MAX_OVERFLOW,
    "pool_timeout": ranges.POOL_TIMEOUT,
    "connect_timeout": ranges.CONNECT_TIMEOUT,
    "tcp_timeout": ranges.TCP_TIMEOUT,
}
"""Each number's range, the one its command-line flag takes too (`cli/_options.py`)."""
