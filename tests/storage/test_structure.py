"""The storage seam's shape (issue 37): one dialect object per database decides everything that
differs between databases, and nothing else in hookinbox compares a database's name.

What it proves: no module outside `hookinbox/_storage/_dialects/` compares a string naming a
database (`== "sqlite"`, `in ("postgresql", ...)`, `.startswith("postgres")`) or asks a URL or a
connection for its backend or vendor name to branch on it; the checker finds such a comparison
when one is planted; an unknown database is refused at start-up in one line, from a URL and
from an engine built elsewhere (as a framework's).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest
import sqlalchemy as sa

import hookinbox
from hookinbox._errors import ConfigurationError
from hookinbox._storage import Store, parse_url

PACKAGE = Path(hookinbox.__file__).parent
DIALECTS = PACKAGE / "_storage" / "_dialects"
# The bundled examples are user code: a Django settings module branches on its URL as any
# user's would.
USER_CODE = PACKAGE / "examples"
NAMES = frozenset({"sqlite", "postgresql", "postgres", "mysql", "mariadb"})
ASKING_FOR_A_NAME = frozenset({"get_backend_name", "vendor"})


def _names_a_database(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower().split("+")[0] in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_database(element) for element in node.elts)
    return False


def comparisons(source: str) -> list[int]:
    """Line numbers where `source` compares something with a database's name, or asks for
    a backend's name or a Django vendor."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(_names_a_database(part) for part in (node.left, *node.comparators)):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            prefix_test = node.func.attr in ("startswith", "endswith")
            if prefix_test and any(_names_a_database(arg) for arg in node.args):
                found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ASKING_FOR_A_NAME:
            found.append(node.lineno)
    return sorted(found)


def test_nothing_outside_the_dialect_modules_compares_database_names() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(DIALECTS) or path.is_relative_to(USER_CODE):
            continue
        for line in comparisons(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert offenders == []


def test_the_checker_finds_a_planted_comparison() -> None:
    planted = """
if store.engine.dialect.name == "sqlite":
    pass
ok = url.drivername in ("postgresql", "mysql")
fast = database_url.startswith("postgresql")
name = url.get_backend_name()
kind = connection.vendor
fine = status == "pending"
"""
    assert comparisons(planted) == [2, 4, 5, 6, 7]


def test_the_dialect_modules_do_compare_names() -> None:
    """The checker is not blind to the one place where names are known."""
    source = "".join(
        path.read_text()
        for name in ("_sqlite", "_postgres", "_mysql")
        for path in sorted((DIALECTS / name).glob("*.py"))
    )
    assert comparisons(source) != []


@pytest.mark.parametrize(
    "url", ["mssql://sa@127.0.0.1/test", "oracle+oracledb://x@127.0.0.1/test", "oracle://x"]
)
def test_an_unknown_database_is_refused_in_one_line(url: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_url(url)
    assert "unsupported database" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_store_on_an_engine_of_an_unknown_database_is_refused() -> None:
    """A framework's engine (as Django's store builds) of a database hookinbox does not know."""
    driver = types.SimpleNamespace(paramstyle="pyformat")  # never connected
    engine = sa.create_engine("mssql+pymssql://sa@127.0.0.1/test", module=driver)
    with pytest.raises(ConfigurationError, match="unsupported database 'mssql'"):
        Store(engine.url, engine=engine)


def dialect_imports(source: str) -> list[int]:
    """Line numbers where `source` imports one of SQLAlchemy's database dialects."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        if any(m == "sqlalchemy.dialects" or m.startswith("sqlalchemy.dialects.") for m in modules):
            found.append(node.lineno)
    return found


def test_only_the_dialect_modules_import_sqlalchemy_dialects() -> None:
    """import-linter cannot say this one: it treats an external package as one module
    (`sqlalchemy`), so the rule is checked here, on the source."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(DIALECTS):
            continue
        for line in dialect_imports(path.read_text()):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert offenders == []
    planted = "from sqlalchemy.dialects import sqlite\nimport sqlalchemy.dialects.postgresql\n"
    assert dialect_imports(planted) == [1, 2]
    assert dialect_imports((DIALECTS / "_postgres" / "_borrowed.py").read_text()) != []
