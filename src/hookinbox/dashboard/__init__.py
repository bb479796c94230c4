"""The operator dashboard: `hookinbox serve` mounts it at `/admin` when an admin token is set;
`hookinbox dashboard APP` serves it alone. See docs/dashboard.md."""

from hookinbox.dashboard._app import dashboard_app

__all__ = ["dashboard_app"]
