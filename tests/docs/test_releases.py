"""docs/releases.md's rules, held to what the repository says: one version everywhere, a
changelog grouped by release, deprecations removed two minor releases later by a warning that
names that release, and a package index page with no link to break."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from datetime import date

import pytest

import hookinbox
from hookinbox import WorkerOptions
from hookinbox._storage import LATEST_VERSION
from hookinbox.cli._options import resolve_app
from tests.docs.blocks import ROOT

CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RELEASE = re.compile(r"^## (?P<version>\d+\.\d+\.\d+) — (?P<date>\d{4}-\d{2}-\d{2})$")
SCHEMA = re.compile(r"\bSchema (\d+)\b")
INSTALLING = [
    ROOT / "docs" / "install.md",
    ROOT / "docs" / "deployment.md",
    ROOT / "deploy" / "README.md",
]
"""The pages whose commands name the release's wheel (docs/releases.md, "Cutting one")."""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _releases() -> list[tuple[str, date, str]]:
    """(version, date, text) of each release section of the changelog, in its order."""
    sections = re.split(r"^(?=## )", CHANGELOG, flags=re.MULTILINE)[1:]
    assert sections[0].startswith("## Unreleased\n"), "Unreleased comes first"
    found = []
    for section in sections[1:]:
        heading = RELEASE.match(section.splitlines()[0])
        assert heading, f"not a release heading: {section.splitlines()[0]!r}"
        found.append((heading["version"], date.fromisoformat(heading["date"]), section))
    return found


def test_the_version_is_the_same_everywhere() -> None:
    version = PROJECT["version"]
    newest = _releases()[0][0]

    assert hookinbox.__version__ == version
    assert newest == version, "a release's version is set when its section is cut"
    for page in INSTALLING:  # their lines install this release's wheel, into its venv
        named = set(re.findall(r"(?:hookinbox-|releases/)(\d+\.\d+\.\d+)", page.read_text()))
        assert named == {version}, page.relative_to(ROOT)


def test_the_changelog_is_grouped_by_release_newest_first() -> None:
    releases = _releases()

    assert len(releases) >= 2
    versions = [_version(version) for version, _, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [day for _, day, _ in releases]
    assert dates == sorted(dates, reverse=True)
    for version, _, text in releases:  # each says which schema it migrates to
        schemas = SCHEMA.findall(text.split("\n###")[0])
        assert schemas, f"{version}: no 'Schema N' before its first subsection"
        assert int(schemas[0]) <= LATEST_VERSION


def _deprecations() -> dict[str, tuple[str, str]]:
    """api.md's deprecation table: what is deprecated -> (since, removed in)."""
    api = (ROOT / "docs" / "api.md").read_text()
    table = api.split("## Deprecations", 1)[1].split("\n\n")[2]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return {row[0].removeprefix("| "): (row[1], row[2]) for row in rows}


def _sweep_interval() -> str:
    with pytest.warns(DeprecationWarning) as caught:
        WorkerOptions(sweep_interval=5.0)
    return str(caught[0].message)


def _app_option(capsys: pytest.CaptureFixture[str]) -> str:
    assert resolve_app(None, "shop:inbox", explicit=False) == "shop:inbox"
    return capsys.readouterr().err


WARNINGS: dict[str, Callable[[pytest.CaptureFixture[str]], str]] = {
    "`WorkerOptions(sweep_interval=...)`": lambda _: _sweep_interval(),
    "`hookinbox status --app APP` (and `events`, `replay`, `prune`, `demo`)": _app_option,
}
"""How to set off each deprecation api.md lists: a new one needs its line here."""


def test_each_deprecation_lasts_two_minor_releases_and_its_warning_names_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    table = _deprecations()
    current = _version(PROJECT["version"])

    assert set(table) == set(WARNINGS)
    for name, (since, removed) in table.items():
        first, last = _version(since), _version(removed)
        assert last[0] == first[0] == 0 and last[1] >= first[1] + 2 and last[2] == 0, name
        assert first <= current < last, f"{name}: due for removal in {removed}"
        assert f"removed in hookinbox {removed}" in WARNINGS[name](capsys), name


def test_the_package_index_page_is_its_own_and_has_no_link() -> None:
    page = (ROOT / "README.pypi.md").read_text()

    assert PROJECT["readme"] == {"file": "README.pypi.md", "content-type": "text/markdown"}
    assert not re.search(r"\]\(|<a |://", page), "an index resolves links against its own URL"
    assert page.splitlines()[:3] == (ROOT / "README.md").read_text().splitlines()[:3]
