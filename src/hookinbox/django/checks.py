"""System checks (`manage.py check`): settings under which hookinbox would misbehave."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def sqlite_transaction_mode(
    *, app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None, **kwargs: Any
) -> list[CheckMessage]:
    """hookinbox.W001: SQLite transactions that do not take the write lock when they begin."""
    messages: list[CheckMessage] = []
    for alias, database in settings.DATABASES.items():
        if not str(database.get("ENGINE", "")).endswith("sqlite3"):
            continue
        mode = str((database.get("OPTIONS") or {}).get("transaction_mode") or "DEFERRED")
        if mode.upper() != "IMMEDIATE":
            messages.append(
                Warning(
                    f"SQLite database {alias!r} begins transactions {mode.upper()}",
                    hint=(
                        'Set DATABASES[...]["OPTIONS"]["transaction_mode"] = "IMMEDIATE": a '
                        "transaction that reads, then writes, fails at once with 'database is "
                        "locked' when another process writes, instead of waiting its turn."
                    ),
                    id="hookinbox.W001",
                )
            )
    return messages
