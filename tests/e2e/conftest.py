"""End-to-end tests: hookinbox as its users run it, in processes of its own."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite only: this layer asks storage's gateways and never the database itself, so it
    behaves alike on both (tests/storage runs every query on each; docs/development.md). A
    test about PostgreSQL here says so with `@pytest.mark.parametrize("backend", [...])`."""
    return str(request.param)
