"""The extras pyproject.toml declares, and the ones hookinbox names when one is missing, agree:
every feature extra is in `all`, `test` installs `all`, and each missing-extra line names an
extra that exists (docs/install.md lists them)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from hookinbox._extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
NOT_FEATURES = {"all", "test", "bench", "docs"}


def declared() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def self_references(requirements: list[str]) -> set[str]:
    """The extras named by `hookinbox[a,b]` entries."""
    named: set[str] = set()
    for requirement in requirements:
        match = re.fullmatch(r"hookinbox\[([a-z,-]+)\]", requirement)
        if match:
            named |= set(match[1].split(","))
    return named


def test_all_is_every_feature_extra() -> None:
    extras = declared()
    assert self_references(extras["all"]) == set(extras) - NOT_FEATURES
    assert "all" in self_references(extras["test"])
    assert "all" in self_references(extras["bench"])


def test_every_extra_hookinbox_names_exists_and_is_documented() -> None:
    extras = declared()
    install = (ROOT / "docs" / "install.md").read_text()
    for name in EXTRAS:
        assert name in extras, name
        assert f"| `{name}` |" in install, name
    for name in set(extras) - NOT_FEATURES - {"fastapi", "flask", "django"}:
        assert name in EXTRAS, f"{name} is declared but hookinbox never names it"


def test_the_core_is_four_requirements() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[; ]", r, maxsplit=1)[0].lower() for r in project["dependencies"]}
    assert names == {"sqlalchemy", "alembic", "click", "anyio"}
