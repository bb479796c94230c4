"""The previous release of hookinbox, as a wheel installed beside this tree's code.

The previous release is the newest commit of this repository whose schema is older than
HEAD's and that already has the compatible schema range (`Migration(...)` steps in
`_storage/_migrations.py`, schema 12): an older commit refuses every newer schema by design
(docs/upgrading.md), so it is no release to roll back to. Until a migration lands after the
range's own, no commit is both: the previous release is then HEAD's tree with its newest
step withheld (`MIGRATIONS[:-1]`), the one change made to the source, so that it knows one
step fewer and writes nothing of it, as the release before it would. Its tables (`_schema.py`)
still name what the withheld step adds: it proves the compatible range and the rollback
procedure, not that the previous release's own statements run on the new schema.

Either way the source is `git archive` of a commit (never the working tree), built into a
wheel with `pip wheel --no-deps` (build isolation: setuptools from the package index, as
`make dist` builds) and installed with `pip install --no-deps --target`. The processes of the
previous release run this interpreter with `PYTHONPATH` set to that directory, so that
`import hookinbox` is the wheel's and its dependencies are the shared environment's (the pins
of requirements/test.txt): `Release.env`.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import ROOT

MIGRATIONS_PATH = "src/hookinbox/_storage/_migrations.py"
_STEP = re.compile(r"\bMigration\(\s*_v\d+")
_LATEST = "LATEST_VERSION = len(MIGRATIONS)"
RELEASE_ENV = "HOOKINBOX_TEST_PREVIOUS_RELEASE"


@dataclass(frozen=True)
class Release:
    site: Path
    """Where the wheel is installed: the previous release's `PYTHONPATH`."""
    schema: int
    """Its schema version (`LATEST_VERSION`)."""
    described: str
    """What it is: the commit, and whether a step was withheld."""

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.site)}

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "hookinbox", *args]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def _steps(source: str) -> int:
    return len(_STEP.findall(source))


def choose() -> tuple[str, int]:
    """(the commit, how many of its newest steps to withhold). `$HOOKINBOX_TEST_PREVIOUS_RELEASE`
    names a commit (a tag, a revision) to take as it is instead."""
    named = os.environ.get(RELEASE_ENV)
    if named:
        return _git("rev-parse", "--verify", f"{named}^{{commit}}").strip(), 0
    head = _steps(_git("show", f"HEAD:{MIGRATIONS_PATH}"))
    for commit in _git("rev-list", "HEAD", "--", MIGRATIONS_PATH).split():
        steps = _steps(_git("show", f"{commit}:{MIGRATIONS_PATH}"))
        if steps == 0:
            break  # before the compatible range: no older commit can be rolled back to
        if steps < head:
            return commit, 0
    return _git("rev-parse", "HEAD").strip(), 1


def build(where: Path) -> Release:
    """The previous release's wheel, built and installed under `where`."""
    commit, withheld = choose()
    tree = where / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", commit], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    migrations = tree / MIGRATIONS_PATH
    source = migrations.read_text()
    if withheld:
        assert source.count(_LATEST) == 1, f"{MIGRATIONS_PATH} no longer says {_LATEST!r}"
        withhold = f"MIGRATIONS = MIGRATIONS[:-{withheld}]  # tests/support/previous_release.py"
        migrations.write_text(source.replace(_LATEST, f"{withhold}\n{_LATEST}"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "-w", str(where / "dist"), str(tree)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (where / "dist").glob("hookinbox-*.whl")
    site = where / "site"
    subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    # What the installed wheel says of itself, from the directory its processes import.
    probe = "import hookinbox, hookinbox._storage as s; print(hookinbox.__file__, s.LATEST_VERSION)"
    where, schema = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert Path(where).is_relative_to(site), where  # the wheel's code, not this tree's
    described = f"commit {commit[:12]}, schema {schema}"
    if withheld:
        described += " (HEAD with its newest step withheld: no earlier commit has the range)"
    return Release(site, int(schema), described)
