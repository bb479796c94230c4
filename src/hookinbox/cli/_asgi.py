"""The app factory uvicorn imports in each server process (`--workers N` spawns them)."""

from __future__ import annotations

import os

from starlette.types import ASGIApp

from hookinbox._inbox import DATABASE_URL_ENV
from hookinbox.cli._loading import APP_ENV, load_inbox

GROUP_COMMIT_ENV = "HOOKINBOX_GROUP_COMMIT"


def app_from_environment() -> ASGIApp:
    """Build the ASGI app named by $HOOKINBOX_APP, set by `hookinbox serve` before it forks."""
    inbox = load_inbox(os.environ[APP_ENV], database_url=os.environ.get(DATABASE_URL_ENV))
    if os.environ.get(GROUP_COMMIT_ENV) == "off":
        inbox.use_group_commit(False)
    return inbox.asgi()
