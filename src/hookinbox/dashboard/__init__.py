"""The operator dashboard: `hookinbox serve` mounts it at `/admin` when an admin token is set;
`hookinbox dashboard APP` serves it alone. See docs/dashboard.md."""

from hookinbox.dashboard._app import dashboard_app
from hookinbox.dashboard._auth import ADMIN_TOKEN_ENV, check_token_strength

__all__ = ["ADMIN_TOKEN_ENV", "check_token_strength", "dashboard_app"]
