"""The in-process adapter tests share the basic app (every built-in source, no handlers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookinbox import Inbox
from tests.apps.basic import build


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = build(db_url)
    yield inbox
    inbox.close()
