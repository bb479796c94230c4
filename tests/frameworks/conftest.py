"""The in-process adapter tests share the basic app (every built-in source, no handlers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookinbox import Inbox
from tests.apps.basic import build


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite only: this layer asks storage's gateways and never the database itself, so it
    behaves alike on both (tests/storage runs every query on each; docs/development.md). A
    test about PostgreSQL here says so with `@pytest.mark.parametrize("backend", [...])`."""
    return str(request.param)


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = build(db_url)
    yield inbox
    inbox.close()
