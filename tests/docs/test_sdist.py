"""The source distribution carries the docs README.md links to, the licence, and the metadata
a package index shows (licence, classifiers, project URLs); installed into a fresh venv with
what README.md says its example needs, it runs that example, twice."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, parse, section

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


def _run(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
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


@pytest.mark.slow
def test_the_readme_example_runs_in_a_fresh_venv_with_what_it_names(
    sdist: Path, tmp_path: Path
) -> None:
    readme = parse(ROOT / "README.md")
    named = re.search(r"It needs (?:only )?`pip install ([^`]+)`", readme.text)
    assert named is not None, "the README says what its example needs"
    requirements = [str(sdist) if name == "hookinbox" else name for name in named[1].split()]
    assert str(sdist) in requirements
    _run(sys.executable, "-m", "venv", str(tmp_path / "venv"))
    python = str(tmp_path / "venv" / "bin" / "python")
    _run(python, "-m", "pip", "install", "--quiet", *requirements)

    script = tmp_path / "readme_example.py"
    script.write_text("\n".join(example.parsed for example in section(readme, "A full example")))
    for _ in range(2):  # the second run must pass as well: the example leaves nothing behind
        _run(python, str(script), cwd=tmp_path)
