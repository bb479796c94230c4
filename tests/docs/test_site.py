"""The documentation site (`make docs`, mkdocs.yml, docs-site/hooks.py): built strictly, so a
broken link or anchor fails it; its API reference covers the modules docs/api.md lists.

The build runs in the docs tools' own venv (`make .venv-docs/bin/.installed`: the docs lock),
made here if CI's `make docs` has not made it already.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT

MKDOCS = ROOT / ".venv-docs" / "bin" / "mkdocs"


def _public_modules() -> list[str]:
    """docs-site/hooks.py's PUBLIC_MODULES, read without importing MkDocs."""
    tree = ast.parse((ROOT / "docs-site" / "hooks.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PUBLIC_MODULES":
            return list(ast.literal_eval(node.value))
    raise AssertionError("no PUBLIC_MODULES in docs-site/hooks.py")


def test_the_reference_covers_every_module_api_md_lists() -> None:
    listed = re.findall(r"^## `(hookinbox[\w.]*)`", (ROOT / "docs" / "api.md").read_text(), re.M)
    # hookinbox itself comes first; hookinbox.cli is a command, documented in cli.md.
    assert listed == ["hookinbox", *_public_modules(), "hookinbox.cli"]


@pytest.fixture(scope="module")
def mkdocs() -> Path:
    if not MKDOCS.exists():
        made = subprocess.run(
            ["make", ".venv-docs/bin/.installed"], cwd=ROOT, capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr[-3000:]
    return MKDOCS


def _copy(into: Path) -> Path:
    """The repository's files, as the site is built from them (no venvs, caches or builds)."""
    skipped = (".git", ".venv*", "site", "__pycache__", "*.egg-info", "*_cache", ".hypothesis")
    shutil.copytree(ROOT, into, ignore=shutil.ignore_patterns(*skipped, "node_modules", "*.db"))
    return into


def _build(mkdocs: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tree / "site")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.slow  # builds the site with mkdocs, twice
def test_the_site_builds_and_a_broken_link_or_anchor_fails_it(mkdocs: Path, tmp_path: Path) -> None:
    tree = _copy(tmp_path / "repository")
    built = _build(mkdocs, tree)
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (tree / "site" / "reference.html").read_text()
    for name in ("hookinbox.Inbox", "hookinbox.sources.Stripe", "hookinbox.testing.sign"):
        assert f'id="{name}"' in reference, name
    assert (tree / "site" / "search" / "search_index.json").exists()

    with (tree / "docs" / "install.md").open("a") as page:
        page.write("\n[gone](no-such-page.md) and [astray](ingest.md#no-such-heading)\n")
    broken = _build(mkdocs, tree)

    assert broken.returncode != 0
    assert "'no-such-page.md'" in broken.stderr
    assert "'#no-such-heading'" in broken.stderr
