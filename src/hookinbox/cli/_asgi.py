"""The app factory uvicorn imports in each server process (`--workers N` spawns them)."""

from __future__ import annotations

import os

from starlette.types import ASGIApp

from hookinbox._inbox import DATABASE_URL_ENV
from hookinbox.cli._loading import APP_ENV, load_inbox


def app_from_environment() -> ASGIApp:
    """Build the ASGI app named by $HOOKINBOX_APP, set by `hookinbox serve` before it forks."""
    inbox = load_inbox(os.environ[APP_ENV], database_url=os.environ.get(DATABASE_URL_ENV))
    return inbox.asgi()
