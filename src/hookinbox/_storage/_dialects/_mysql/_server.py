"""The server and session hookinbox runs on: MariaDB 10.6 or later, utf8mb4, a packet of 4 MiB
at least; and the connection's parameters."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError
from hookinbox._storage._options import StoreOptions

REQUIRED_CHARSET = "utf8mb4"
COLLATION = "utf8mb4_nopad_bin"
MIN_MARIADB = (10, 6)
MIN_PACKET = 4 * 1024 * 1024
"""The smallest `max_allowed_packet` accepted: a 1 MiB body (the default body limit) is sent
as an escaped literal, up to twice its size, beside its headers."""


def check_server(
    version: str, connection_set: str, database_set: str, database: object, packet: object
) -> None:
    """Refuse, in one line, a server or a database hookinbox cannot run on."""
    if "mariadb" not in version.lower():
        raise ConfigurationError(
            f"the server is MySQL {version}; hookinbox needs MariaDB 10.6 or later "
            "(MySQL has no INSERT ... RETURNING)"
        )
    numbers = tuple(int(part) for part in version.split("-")[0].split(".")[:2])
    if numbers < MIN_MARIADB:
        raise ConfigurationError(
            f"the server is MariaDB {version}; hookinbox needs 10.6 or later (SKIP LOCKED)"
        )
    if connection_set != REQUIRED_CHARSET:
        raise ConfigurationError(
            f"the connection's character set is {connection_set}; hookinbox needs "
            f"{REQUIRED_CHARSET} (leave charset= out of the URL, or set it to utf8mb4)"
        )
    if database is not None and database_set != REQUIRED_CHARSET:
        raise ConfigurationError(
            f"database {database!r} has the character set {database_set}; hookinbox needs "
            f"{REQUIRED_CHARSET} (ALTER DATABASE ... CHARACTER SET utf8mb4)"
        )
    if isinstance(packet, int) and packet < MIN_PACKET:
        raise ConfigurationError(
            f"the server's max_allowed_packet is {packet} bytes; hookinbox needs at least "
            f"{MIN_PACKET} (4 MiB: a 1 MiB body is sent escaped)"
        )


def connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    defaults: dict[str, Any] = {"connect_timeout": max(1, round(options.connect_timeout))}
    if options.tcp_timeout > 0:
        # A silent server is given up after this long, as on PostgreSQL.
        defaults["read_timeout"] = max(1, round(options.tcp_timeout * 6))
        defaults["write_timeout"] = max(1, round(options.tcp_timeout))
    return {key: value for key, value in defaults.items() if key not in url.query}
