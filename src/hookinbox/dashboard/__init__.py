"""The operator dashboard: `hookinbox serve` mounts it at `/admin` when an admin token is set;
`hookinbox dashboard APP` serves it alone. See docs/dashboard.md.

`dashboard_app` needs the `[dashboard]` extra (starlette, jinja2, itsdangerous); it is loaded
on first use: the command line reads the token's variable and checks it (`_token`) without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox._extras import importing

if TYPE_CHECKING:
    from hookinbox.dashboard._app import dashboard_app


def __getattr__(name: str) -> Any:
    if name == "dashboard_app":
        with importing("hookinbox.dashboard", "dashboard"):
            return importlib.import_module("hookinbox.dashboard._app").dashboard_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["dashboard_app"]
