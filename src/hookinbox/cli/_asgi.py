"""The app factory uvicorn imports in each server process (`--workers N` spawns them)."""

from __future__ import annotations

import os

from hookinbox._inbox import Inbox
from hookinbox._operations import Thresholds
from hookinbox._settings import Overrides
from hookinbox.cli._loading import load_app
from hookinbox.cli._options import (
    ACK_DEADLINE_ENV,
    APP_ENV,
    BODY_TIMEOUT_ENV,
    DATABASE_URL_ENV,
    GROUP_COMMIT_ENV,
    WAKE_SOCKET_ENV,
    store_options_from_environment,
)
from hookinbox.dashboard._token import ADMIN_TOKEN_ENV
from hookinbox.http._app import create_app
from hookinbox.http._types import ASGIApp


def overrides_from_environment() -> Overrides:
    """The settings `hookinbox serve` hands its server processes (checked by `serve` first)."""
    ack_deadline = os.environ.get(ACK_DEADLINE_ENV)
    body_timeout = os.environ.get(BODY_TIMEOUT_ENV)
    return Overrides(
        database_url=os.environ.get(DATABASE_URL_ENV) or None,
        group_commit=False if os.environ.get(GROUP_COMMIT_ENV) == "off" else None,
        ack_deadline=float(ack_deadline) if ack_deadline else None,
        body_timeout=float(body_timeout) if body_timeout else None,
        wake_socket=os.environ.get(WAKE_SOCKET_ENV) or None,
        store_options=store_options_from_environment(),
    )


def app_from_environment() -> ASGIApp:
    """Build the ASGI app named by $HOOKINBOX_APP, set by `hookinbox serve` before it forks;
    with $HOOKINBOX_ADMIN_TOKEN set, the dashboard is served at /admin too."""
    inbox = load_app(os.environ[APP_ENV], overrides=overrides_from_environment())
    token = os.environ.get(ADMIN_TOKEN_ENV)
    if not token or not isinstance(inbox, Inbox):
        return inbox.asgi()  # the dashboard is off: /admin answers 404 like any unknown path
    from hookinbox._extras import importing

    with importing("hookinbox.dashboard", "dashboard"):  # the extra: only when it is on
        from hookinbox.dashboard._app import dashboard_for

    admin = dashboard_for(  # over the inbox's own operations, as its pool is the inbox's
        inbox._operations(), token, sources=sorted(inbox.sources),
        thresholds=Thresholds.from_environment(),
    )  # fmt: skip
    return create_app(inbox._receiver, admin=admin)
