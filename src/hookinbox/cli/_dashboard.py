"""`hookinbox dashboard APP`: the operator dashboard on its own, without the webhook endpoint."""

from __future__ import annotations

import click
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from hookinbox._errors import ConfigurationError
from hookinbox._inbox import DATABASE_URL_ENV
from hookinbox._operations import Thresholds
from hookinbox.cli._loading import APP_ENV
from hookinbox.cli._ops import opened
from hookinbox.dashboard import ADMIN_TOKEN_ENV, check_token_strength, dashboard_app
from hookinbox.http._probes import ADMIN_PATH

admin_token_option = click.option(
    "--admin-token",
    envvar=ADMIN_TOKEN_ENV,
    show_envvar=True,
    help="Turns the dashboard on; operators sign in with it. Prefer the variable: a command "
    "line is visible to every user of the machine.",
)


def dashboard_settings(admin_token: str | None) -> tuple[str, Thresholds]:
    """The token (refused when missing or short) and the thresholds, checked before serving."""
    if not admin_token:
        raise ConfigurationError(
            f"the dashboard is off without an admin token: set {ADMIN_TOKEN_ENV} or --admin-token"
        )
    return check_token_strength(admin_token), Thresholds.from_environment()


@click.command()
@click.argument("app", required=False, envvar=APP_ENV)
@click.option("--database-url", envvar=DATABASE_URL_ENV, show_envvar=True, help="Database URL.")
@admin_token_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535))
def dashboard(
    app: str | None, database_url: str | None, admin_token: str | None, host: str, port: int
) -> None:
    """Serve the operator dashboard for APP (or --database-url) at http://HOST:PORT/admin/.

    It reads and replays events; it receives no webhooks and processes nothing (a worker
    processes what it replays). Thresholds come from the HOOKINBOX_MAX_* variables, as for
    `hookinbox status --check`.
    """
    import uvicorn

    token, thresholds = dashboard_settings(admin_token)
    if not app and not database_url:
        raise ConfigurationError("give APP or --database-url")
    with opened(app, database_url) as target:
        sources = sorted(target.inbox.sources) if target.inbox else []
        admin = dashboard_app(target.store, token, sources=sources, thresholds=thresholds)

        async def to_dashboard(_request: Request) -> Response:
            return RedirectResponse(ADMIN_PATH + "/", 303)

        root = Starlette(routes=[Route("/", to_dashboard), Mount(ADMIN_PATH, app=admin)])
        uvicorn.run(root, host=host, port=port, log_level="warning", access_log=False)


def register(group: click.Group) -> None:
    group.add_command(dashboard)
