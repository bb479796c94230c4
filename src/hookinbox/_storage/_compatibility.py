"""Which code runs on which schema: expand and contract steps, and what a database records of
the oldest code that may run on it (docs/upgrading.md).

A step that only adds what older code does not look at (a table, a nullable column or one
with a default, an index, a fill factor) leaves every statement of older code working: an
expand step. A step after which older code no longer works correctly (a table it reads is
gone, a trigger refuses its leases) is a contract step: it raises the oldest code that may run
on the database to its own version, or to the older one it declares (code that stopped using
what the step removes a release before). Code is named by its schema version, the number of
steps it knows (`LATEST_VERSION`).

Since schema 12 each row of `hookinbox_schema_versions` records that oldest version
(`min_code_version`): code older than the database reads the newest row and knows whether it
may run, without knowing the steps it has never seen. Code younger than the feature refuses
any newer schema, as every hookinbox did before schema 12.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._storage._schema import schema_versions

if TYPE_CHECKING:  # alembic costs 0.1 s to import: only a migration pays it
    from alembic.operations import Operations

Step = Callable[["Operations"], None]

RECORDED_FROM = 12
"""The first version whose row records `min_code_version` (the step that adds the column)."""


class Kind(StrEnum):
    EXPAND = "expand"
    CONTRACT = "contract"


@dataclass(frozen=True, slots=True)
class Migration:
    step: Step
    kind: Kind
    title: str
    """What the step changes, in a few words (`hookinbox migrate --plan`)."""
    needs: int | None = None
    """A contract step's oldest code, when older than the step itself; None: the step's own
    version (the code that knows the step)."""


class Planned(NamedTuple):
    """A step `migrate` would run (`--plan`)."""

    version: int
    kind: Kind
    title: str
    min_code_version: int
    """The oldest code that runs on the database once the step is applied."""


def oldest_code(migrations: Sequence[Migration], version: int) -> int:
    """The oldest code (by schema version) that runs on a database at `version`."""
    oldest = 1
    for number, migration in enumerate(migrations[:version], 1):
        if migration.kind is Kind.CONTRACT:
            oldest = max(oldest, migration.needs or number)
    return oldest


class State(StrEnum):
    CURRENT = "current"
    """At this code's version."""
    PENDING = "pending"
    """Older (or no tables yet): migrations to run."""
    NEWER_COMPATIBLE = "newer_compatible"
    """Newer, and it records that code as old as this one runs on it."""
    NEWER_INCOMPATIBLE = "newer_incompatible"
    """Newer, and it needs newer code (or records nothing: written before schema 12)."""


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """A database's schema seen from this code: what `migrate --check` and `--plan` print,
    and what a process that starts decides by."""

    version: int
    """The database's schema version (0: no hookinbox tables)."""
    code_version: int
    """This hookinbox's (`LATEST_VERSION`)."""
    min_code_version: int | None
    """The oldest code the database says runs on it; read only when it is newer."""

    @property
    def state(self) -> State:
        if self.version == self.code_version:
            return State.CURRENT
        if self.version < self.code_version:
            return State.PENDING
        if self.min_code_version is not None and self.min_code_version <= self.code_version:
            return State.NEWER_COMPATIBLE
        return State.NEWER_INCOMPATIBLE

    @property
    def current(self) -> bool:
        return self.state is State.CURRENT

    def describe(self) -> str:
        """One line: where the database stands for this code."""
        here = f"this hookinbox's is {self.code_version}"
        if self.state is State.CURRENT:
            return f"the database schema is version {self.version}, this hookinbox's"
        if self.state is State.PENDING:
            steps = self.code_version - self.version
            numbers = ", ".join(str(n) for n in range(self.version + 1, self.code_version + 1))
            start = (
                "the database has no hookinbox tables"
                if self.version == 0
                else f"the database schema is version {self.version}, {here}"
            )
            plural = "s" if steps > 1 else ""
            return f"{start}: {steps} migration{plural} pending ({numbers})"
        newer = f"the database schema is version {self.version}, newer than this hookinbox's"
        if self.state is State.NEWER_COMPATIBLE:
            return (
                f"{newer} {self.code_version}; it runs with the code of schema"
                f" {self.min_code_version} or later, so this hookinbox runs on it"
            )
        return f"{newer} {self.code_version}, {self._needs()}: upgrade hookinbox"

    def _needs(self) -> str:
        if self.min_code_version is None:
            return "and does not record which older code runs on it"
        return f"and needs the code of schema {self.min_code_version} or later"


def read_status(connection: Connection, code_version: int) -> SchemaStatus:
    """The database's version and, when it is newer than `code_version`, the oldest code its
    newest row records (the column exists on any database past schema 11)."""
    if not sa.inspect(connection).has_table(schema_versions.name):
        return SchemaStatus(0, code_version, None)
    newest = connection.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar()
    version = int(newest or 0)
    needs = None
    if version > code_version and _records_oldest_code(connection):
        needs = connection.execute(
            sa.select(schema_versions.c.min_code_version).where(
                schema_versions.c.version == version
            )
        ).scalar()
    return SchemaStatus(version, code_version, None if needs is None else int(needs))


def _records_oldest_code(connection: Connection) -> bool:
    columns = sa.inspect(connection).get_columns(schema_versions.name)
    return any(column["name"] == "min_code_version" for column in columns)
