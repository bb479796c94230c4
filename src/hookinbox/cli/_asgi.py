"""The app factory uvicorn imports in each server process (`--workers N` spawns them)."""

from __future__ import annotations

import os

from hookinbox._inbox import DATABASE_URL_ENV
from hookinbox._operations import Thresholds
from hookinbox.cli._loading import APP_ENV, load_inbox
from hookinbox.cli._options import ACK_DEADLINE_ENV, BODY_TIMEOUT_ENV, GROUP_COMMIT_ENV
from hookinbox.dashboard import ADMIN_TOKEN_ENV
from hookinbox.http._app import create_app
from hookinbox.http._types import ASGIApp


def app_from_environment() -> ASGIApp:
    """Build the ASGI app named by $HOOKINBOX_APP, set by `hookinbox serve` before it forks;
    with $HOOKINBOX_ADMIN_TOKEN set, the dashboard is served at /admin too."""
    inbox = load_inbox(os.environ[APP_ENV], database_url=os.environ.get(DATABASE_URL_ENV))
    if os.environ.get(GROUP_COMMIT_ENV) == "off":
        inbox.use_group_commit(False)
    ack_deadline = os.environ.get(ACK_DEADLINE_ENV)
    if ack_deadline:  # checked by `serve` before it started this process
        inbox.use_ack_deadline(float(ack_deadline) or None)
    body_timeout = os.environ.get(BODY_TIMEOUT_ENV)
    if body_timeout:
        inbox.use_body_timeout(float(body_timeout))
    token = os.environ.get(ADMIN_TOKEN_ENV)
    if not token:
        return inbox.asgi()  # the dashboard is off: /admin answers 404 like any unknown path
    from hookinbox.dashboard import dashboard_app  # the [dashboard] extra: only when it is on

    admin = dashboard_app(
        inbox.store, token, sources=sorted(inbox.sources), thresholds=Thresholds.from_environment()
    )
    return create_app(inbox.receiver, admin=admin)
