"""MkDocs hooks: the documentation site built from the repository as GitHub shows it.

The pages keep the links they have on GitHub (`docs/ingest.md` links `../README.md`,
`../bench/README.md`), so the site is laid out as the repository is: README.md is the home
page, docs/ keeps its paths, and any file of the repository a page links to (a benchmark's
README, an example's source) is in the site too. MkDocs then checks every link and anchor of
every page (`make docs` builds with --strict: a broken one fails). The API reference is one
generated page, `reference.md`, of every public name docs/api.md lists, from its docstring.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(?<!!)\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
EXTERNAL = ("http://", "https://", "mailto:")
FOLDER_LINK = re.compile(r"(\]\()([^)\s#:]+/)([#)])")
PUBLIC_MODULES = (
    "hookinbox.sources", "hookinbox.outbox", "hookinbox.http", "hookinbox.brokers",
    "hookinbox.claims", "hookinbox.fastapi", "hookinbox.flask", "hookinbox.django",
    "hookinbox.dashboard", "hookinbox.simulate", "hookinbox.testing",
)  # fmt: skip
"""docs/api.md's modules after `hookinbox` itself (tests/docs/test_site.py checks they agree)."""


def on_config(config: MkDocsConfig, **_: Any) -> MkDocsConfig:
    """Every source page under "Sources", after their index (read from docs/sources/)."""
    index = "docs/sources/README.md"
    pages = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs" / "sources").glob("*.md"))
    for position, entry in enumerate(config.nav or []):
        if isinstance(entry, dict) and entry.get("Sources") == index:
            config.nav[position] = {"Sources": [index, *(p for p in pages if p != index)]}
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """A link to a folder (`docs/sources/`) is to its README.md, as on GitHub."""
    here = (ROOT / page.file.src_uri).parent

    def to_readme(match: re.Match[str]) -> str:
        target = match[2]
        if (here / target / "README.md").is_file():
            return f"{match[1]}{target}README.md{match[3]}"
        return match[0]

    return FOLDER_LINK.sub(to_readme, markdown)


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    site = Files([])
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wanted = {page.resolve() for page in pages}
    for page in pages:  # and whatever they link to inside the repository
        text = _outside_code(page.read_text())
        for target in LINK.findall(text):
            if target.startswith(EXTERNAL):
                continue
            linked = (page.parent / target).resolve()
            if linked.is_dir():  # a folder: its README.md, as GitHub shows it
                linked = linked / "README.md"
            if linked.is_file() and linked.is_relative_to(ROOT):
                wanted.add(linked)
    for path in sorted(wanted):
        site.append(_file(path, config))
    for asset in files:  # the theme's own files (fonts, scripts) come in through `files`
        if not asset.src_uri.endswith(".md") and asset.inclusion is not InclusionLevel.EXCLUDED:
            if not (ROOT / "docs" / asset.src_uri).exists():
                site.append(asset)
    site.append(File.generated(config, "reference.md", content=reference()))
    return site


def _file(path: Path, config: MkDocsConfig) -> File:
    return File(
        str(path.relative_to(ROOT)),
        src_dir=str(ROOT),
        dest_dir=config.site_dir,
        use_directory_urls=config.use_directory_urls,
    )


def _outside_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def reference() -> str:
    """The API reference page: `hookinbox`'s names, then each public module's."""
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings of the public API that [api.md](docs/api.md) lists "
        "(what each name is for, and what is deprecated, are there).",
        "",
        "## `hookinbox`",
        "",
    ]
    for name in _all("hookinbox"):
        lines += [f"::: hookinbox.{name}", ""]
    for module in PUBLIC_MODULES:
        lines += [f"## `{module}`", "", f"::: {module}", "    options:", "      members:"]
        lines += [f"        - {name}" for name in _all(module)]
        lines.append("")
    return "\n".join(lines)


def _all(module: str) -> list[str]:
    """`__all__` of a module of src/, read without importing it."""
    parts = module.split(".")
    package = ROOT / "src" / Path(*parts)
    path = package / "__init__.py" if package.is_dir() else package.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(element) for element in node.value.elts]  # type: ignore[attr-defined]
    return []
