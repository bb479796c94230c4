"""The operation in hookinbox's Django migrations: run hookinbox's own migration steps.

The tables are defined once, by hookinbox's own migration steps (`Store.migrate`); a Django
migration does not restate them. It brings the schema to a fixed version, on Django's
connection and inside the migration's transaction, and records it in
`hookinbox_schema_versions` as `hookinbox migrate` does. So a database migrated either way is
the same database, and a project that ran `hookinbox migrate` before adopting Django migrates
cleanly (the steps already applied are skipped). Each hookinbox release that adds a step adds
a Django migration for it.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from hookinbox._storage import Store
from hookinbox.django._engine import django_engine


class UpgradeSchema(migrations.RunPython):
    """Bring hookinbox's tables to schema `version` (irreversible: they hold the events)."""

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(self._forward, elidable=False)

    def _forward(self, _apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        engine = django_engine(schema_editor.connection.alias)
        try:
            Store(engine.url, engine=engine, auto_migrate=False).migrate(self.version)
        finally:
            engine.dispose()

    def describe(self) -> str:
        return f"Bring hookinbox's tables to schema version {self.version}"
