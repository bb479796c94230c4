"""How PostgreSQL is dialled: libpq's parameters (TCP timeouts, the application's name),
asyncpg's names for them, and the checks of a new connection (UTF8, the socket)."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError
from hookinbox._storage._options import StoreOptions

REQUIRED_ENCODING = "UTF8"
KEEPALIVE_PROBES = 3


def check_psycopg(connection: Any) -> None:
    # psycopg's connection, or (async) SQLAlchemy's adapter holding it as `_connection`.
    pgconn = getattr(connection, "pgconn", None) or connection._connection.pgconn
    check_encoding(pgconn)


def checking_asyncpg(options: StoreOptions) -> Callable[[Any], None]:
    def check(adapted: Any) -> None:
        connection = adapted._connection  # asyncpg's own, behind SQLAlchemy's adapter
        encoding = str(connection.get_settings().server_encoding)
        if encoding.upper() != REQUIRED_ENCODING:
            database = connection._params.database or ""
            raise ConfigurationError(_encoding_refused(database, encoding))
        tune_socket(connection, options.tcp_timeout)

    return check


def tune_socket(connection: Any, timeout: float) -> None:
    """libpq's TCP settings (`tcp_settings`) on an asyncpg connection's socket, which asyncpg
    has no parameters for: a silent server is given up in `timeout` seconds, as with psycopg."""
    transport = getattr(connection, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or timeout <= 0 or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a UNIX socket has no TCP to tune
    settings = tcp_settings(timeout)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, settings["keepalives_idle"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, settings["keepalives_interval"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, settings["keepalives_count"])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, settings["tcp_user_timeout"])


_WORD = re.compile(r"(?:\\.|[^\s\\])+")
"""A word of libpq's `options`: a backslash keeps the next character (a space) in it."""
_ESCAPE = re.compile(r"\\(.)")


def asyncpg_connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    """asyncpg's names for what `connect_args` sets through libpq, and the settings of the
    URL's libpq `options` (`?options=-csearch_path%3Dapp`: the test kit's scratch schema, or
    an application's own), which asyncpg takes as `server_settings`. As with libpq, a setting
    hookinbox passes on its own (`application_name`) wins over the same one in `options`."""
    given = url.query.get("options")
    settings = _server_settings(" ".join(given) if isinstance(given, tuple) else given or "")
    defaults: dict[str, Any] = {
        "timeout": options.connect_timeout,
        "server_settings": {**settings, "application_name": "hookinbox"},
    }
    return {key: value for key, value in defaults.items() if key not in url.query}


def _server_settings(options: str) -> dict[str, str]:
    """libpq's `options` (`-c name=value` and `--name=value` switches, separated by spaces
    unless escaped with a backslash) as the settings they name; any other server switch is
    refused in one line, since asyncpg can only send settings."""
    words = [_ESCAPE.sub(r"\1", word) for word in _WORD.findall(options)]
    settings: dict[str, str] = {}
    switches = iter(words)
    for switch in switches:
        if switch == "-c":  # `-c name=value`, the setting in the next word
            switch += next(switches, "")
        name, equals, value = switch[2:].partition("=")
        if switch[:2] not in ("-c", "--") or not name or not equals:
            raise ConfigurationError(
                f"a postgresql+asyncpg URL's options take only -c name=value settings "
                f"(asyncpg sends settings, not server switches): {options!r}"
            )
        settings[name.replace("-", "_")] = value
    return settings


def check_encoding(pgconn: Any) -> None:
    """Refuse a database that is not UTF8, before anything reads a string from it.

    A cluster initialised under the C locale makes SQL_ASCII databases: the server neither
    converts nor checks text there, and psycopg returns bytes where SQLAlchemy expects str
    (its first query, the server version, fails with a TypeError). One line naming the
    encoding needed is the answer; the same holds for the other single-byte encodings, where
    a header or an error message outside their alphabet would fail to store.
    """
    raw = pgconn.parameter_status(b"server_encoding") or b""
    encoding = raw.decode("ascii", "replace")
    if encoding.upper() != REQUIRED_ENCODING:
        database = (pgconn.db or b"").decode("utf-8", "replace")
        raise ConfigurationError(_encoding_refused(database, encoding))


def _encoding_refused(database: str, encoding: str) -> str:
    return (
        f"database {database!r} is encoded {encoding}; hookinbox needs {REQUIRED_ENCODING}"
        f" (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0, or initdb -E UTF8)"
    )


def connect_args(url: URL, options: StoreOptions) -> dict[str, Any]:
    """libpq parameters hookinbox sets unless the URL's query sets them itself."""
    defaults: dict[str, Any] = {
        "connect_timeout": max(1, round(options.connect_timeout)),
        "application_name": "hookinbox",
        **tcp_settings(options.tcp_timeout),
    }
    return {key: value for key, value in defaults.items() if key not in url.query}


def tcp_settings(timeout: float) -> dict[str, int]:
    """libpq's TCP settings for a connection given up after `timeout` seconds of silence.

    `tcp_user_timeout` bounds data sent and not acknowledged (a query, a COMMIT); keepalives
    find a silent server under a connection that sends nothing (idle in the pool, or the
    listener waiting for notifications). Linux ends the probing at `tcp_user_timeout` too.
    """
    if timeout <= 0:
        return {}
    idle = max(1, round(timeout / 2))
    return {
        "tcp_user_timeout": max(1, round(timeout * 1000)),  # milliseconds
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": max(1, round((timeout - idle) / KEEPALIVE_PROBES)),
        "keepalives_count": KEEPALIVE_PROBES,
    }


def several_hosts(url: URL) -> bool:
    hosts = url.query.get("host", url.host or "")
    return isinstance(hosts, tuple) or "," in hosts
