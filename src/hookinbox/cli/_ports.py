"""A port taken by another process is one line and exit 1, not a server's traceback or its
"startup complete" followed by a puzzling exit code; a host name that does not resolve is one
line and exit 2 (the host's form is checked earlier, by `cli/_types.Host`)."""

from __future__ import annotations

import socket

from hookinbox._errors import ConfigurationError, HookinboxError


def check_port_free(host: str, port: int, what: str) -> int:
    """Bind `host:port` as uvicorn will (SO_REUSEADDR) and let go of it at once.

    Returns the port (the kernel's pick when `port` is 0). Another process could take the port
    between this check and the server's bind; the server's own failure is caught as well, so
    that rare case is one line too.
    """
    with _bound(host, port, what) as sock:
        bound: int = sock.getsockname()[1]
        return bound


def listening_socket(host: str, port: int, what: str) -> socket.socket:
    """A socket bound to `host:port` and listening, for a server to take over.

    A command that prints its URL once this is open is honest about it: a client that
    connects on reading the URL is queued by the kernel until the server accepts, where a
    URL printed before the server's own bind can meet "connection refused".
    """
    sock = _bound(host, port, what)
    try:
        sock.listen(socket.SOMAXCONN)
    except OSError as error:
        sock.close()
        raise HookinboxError(f"{what} cannot listen on {host}:{port}: {error}") from error
    return sock


def _bound(host: str, port: int, what: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except socket.gaierror as error:
        sock.close()
        # A name no resolver knows is the configuration's mistake (exit 2); a resolver that
        # cannot answer now (EAI_AGAIN) is the machine's (exit 1).
        unknown = error.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None))
        failure = ConfigurationError if unknown else HookinboxError
        raise failure(f"{what} cannot listen on {host}:{port}: {error.strerror}") from error
    except OSError as error:
        sock.close()
        raise HookinboxError(
            f"{what} cannot listen on {host}:{port}: {error.strerror or error}"
        ) from error
    return sock


def url(host: str, port: int, path: str = "") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
