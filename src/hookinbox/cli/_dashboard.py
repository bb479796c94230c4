"""`hookinbox dashboard APP`: the operator dashboard on its own, without the webhook endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hookinbox import _ranges as ranges
from hookinbox._errors import ConfigurationError, HookinboxError
from hookinbox._extras import require
from hookinbox.cli._commands import short_help
from hookinbox.cli._options import app_argument, database_url_option
from hookinbox.cli._ports import listening_socket, url
from hookinbox.cli._types import Host, number
from hookinbox.dashboard._token import ADMIN_TOKEN_ENV, check_token_strength

if TYPE_CHECKING:
    import socket

    from hookinbox._operations import Thresholds

admin_token_option = click.option(
    "--admin-token",
    envvar=ADMIN_TOKEN_ENV,
    show_envvar=True,
    help="Turns the dashboard on; operators sign in with it. Prefer the variable: a command "
    "line is visible to every user of the machine.",
)


def dashboard_settings(admin_token: str | None) -> tuple[str, Thresholds]:
    """The token (refused when missing or short) and the thresholds, checked before serving."""
    from hookinbox._operations import Thresholds

    if not admin_token:
        raise ConfigurationError(
            f"the dashboard is off without an admin token: set {ADMIN_TOKEN_ENV} or --admin-token"
        )
    return check_token_strength(admin_token), Thresholds.from_environment()


@click.command(short_help=short_help("dashboard"))
@app_argument(required=False)
@database_url_option
@admin_token_option
@click.option(
    "--host", default="127.0.0.1", show_default=True, type=Host(), help="Interface to listen on."
)
@click.option("--port", default=8001, show_default=True, type=number(ranges.PORT))
def dashboard(
    app: str | None, database_url: str | None, admin_token: str | None, host: str, port: int
) -> None:
    """Serve the operator dashboard for APP (or --database-url) at http://HOST:PORT/admin/.

    It reads and replays events; it receives no webhooks and processes nothing (a worker
    processes what it replays). Thresholds come from the HOOKINBOX_MAX_* variables, as for
    `hookinbox status --check`. Prints its URL, then serves until SIGTERM or SIGINT. Needs
    hookinbox[dashboard].

    Exit codes: 0 stopped; 1 the database is unavailable or the port is taken; 2 bad usage or
    configuration (no token, a short one, a missing extra).
    """
    require("hookinbox dashboard", "dashboard")
    token, thresholds = dashboard_settings(admin_token)
    if not app and not database_url:
        raise ConfigurationError("give APP (or set HOOKINBOX_APP) or --database-url")
    with listening_socket(host, port, "hookinbox dashboard") as listening:
        _serve_dashboard(app, database_url, token, thresholds, listening)


def _serve_dashboard(
    app: str | None,
    database_url: str | None,
    token: str,
    thresholds: Thresholds,
    listening: socket.socket,
) -> None:
    """Serve on a socket already listening, so that the URL printed is one that connects."""

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Mount, Route

    from hookinbox.cli._target import opened
    from hookinbox.dashboard._app import dashboard_for
    from hookinbox.http._probes import ADMIN_PATH

    with opened(app, database_url) as target:
        sources = sorted(target.inbox.sources) if target.inbox else []
        admin = dashboard_for(target.operations, token, sources=sources, thresholds=thresholds)

        async def to_dashboard(_request: Request) -> Response:
            return RedirectResponse(ADMIN_PATH + "/", 303)

        root = Starlette(routes=[Route("/", to_dashboard), Mount(ADMIN_PATH, app=admin)])
        host, port = listening.getsockname()[:2]
        click.echo(f"hookinbox dashboard: {url(host, port, ADMIN_PATH + '/')}")
        click.echo("sign in with the admin token; stop with Ctrl+C")
        config = uvicorn.Config(root, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        try:
            server.run(sockets=[listening])
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C that stopped it: a clean stop
            pass
        if not server.started:
            raise HookinboxError(f"the dashboard stopped at start-up on {host}:{port}")
