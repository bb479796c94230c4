"""The source distribution carries the docs README.md links to, the changelog, the licence, and
the metadata a package index shows (licence, classifiers, project URLs, the page of its own).

What is built from it is run by `make dist` (tests/packaging/dist_check.py): the wheel, built
from the sdist, installed into a fresh venv, runs README.md's example and the demo."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT

# Not copied: build output and caches would only slow the copy, and the tree is built as a
# fresh checkout would be (the copy keeps the build off the working tree other tests import).
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "dist", "build"
)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build --sdist` of a copy of the working tree."""
    work = tmp_path_factory.mktemp("sdist")
    tree = work / "tree"
    shutil.copytree(ROOT, tree, ignore=IGNORED)
    _run(sys.executable, "-m", "build", "--sdist", "--outdir", str(work / "dist"), str(tree))
    (archive,) = (work / "dist").glob("hookinbox-*.tar.gz")
    return archive


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}{done.stderr}"
    return done


def test_the_sdist_carries_docs_licence_and_metadata(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
        metadata = archive.extractfile(f"{top}/PKG-INFO")
        assert metadata is not None
        info = metadata.read().decode()

    pages = [*ROOT.glob("docs/*.md"), *ROOT.glob("docs/sources/*.md")]
    expected = {str(page.relative_to(ROOT)) for page in pages}
    expected |= {"LICENSE", "README.md", "CHANGELOG.md", "README.pypi.md"}
    assert len(pages) > 20
    assert sorted(expected - names) == []
    assert "docs/openapi.yaml" in names
    assert not any(name.startswith("tests/") for name in names)  # all of them or none

    assert "License-Expression: MIT" in info
    assert "License-File: LICENSE" in info
    assert "Classifier: Typing :: Typed" in info
    for label in ("Homepage", "Documentation", "Issues", "Changelog"):
        assert f"Project-URL: {label}, https://github.com/hookinbox/hookinbox" in info
    # The index's page is README.pypi.md, not README.md (docs/releases.md says why).
    assert "Description-Content-Type: text/markdown" in info
    assert info.rstrip().endswith((ROOT / "README.pypi.md").read_text().rstrip())
