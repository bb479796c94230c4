"""The source distribution carries the docs README.md links to, the licence, and the metadata
a package index shows (licence, classifiers, project URLs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.docs.blocks import ROOT

# Not copied: build output and caches would only slow the copy, and the tree is built as a
# fresh checkout would be (the copy keeps the build off the working tree other tests import).
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "dist", "build"
)


def test_the_sdist_carries_docs_licence_and_metadata(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=IGNORED)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (archive,) = (tmp_path / "dist").glob("hookinbox-*.tar.gz")
    with tarfile.open(archive) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        names = {name.removeprefix(f"{top}/") for name in sdist.getnames()}
        metadata = sdist.extractfile(f"{top}/PKG-INFO")
        assert metadata is not None
        info = metadata.read().decode()

    pages = [*ROOT.glob("docs/*.md"), *ROOT.glob("docs/sources/*.md")]
    expected = {str(page.relative_to(ROOT)) for page in pages} | {"LICENSE", "README.md"}
    assert len(pages) > 20
    assert sorted(expected - names) == []
    assert "docs/openapi.yaml" in names
    assert not any(name.startswith("tests/") for name in names)  # all of them or none

    assert "License-Expression: MIT" in info
    assert "License-File: LICENSE" in info
    assert "Classifier: Typing :: Typed" in info
    for label in ("Homepage", "Documentation", "Issues", "Changelog"):
        assert f"Project-URL: {label}, https://github.com/hookinbox/hookinbox" in info
