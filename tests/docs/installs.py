"""What a page's install line brings, as an environment of exactly that.

Each page names what its examples need beyond `pip install hookinbox` in a `pip install ...`
line of its own (README.md, "Documentation"). A reader who runs that line in a fresh virtual
environment gets those distributions and what they require, nothing else. `environment`
builds that environment from the one the tests run in, without installing anything: the
closure of the page's requirements (markers and extras evaluated, as pip would), each
distribution's top-level files linked into one directory, which becomes the only
site-packages of a `python -S` (no site: the test environment's packages are out of reach).
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tests.docs.blocks import ROOT

CORE = "hookinbox"
INSTALL_LINE = re.compile(r"pip install (?P<arguments>[^`\n#]+)")
SOURCE_TREE = ROOT / "src"


def requirements(text: str) -> list[str]:
    """The requirements of every `pip install ...` in a page (flags left out); the core's
    alone where it names none."""
    found = [CORE]
    for match in INSTALL_LINE.finditer(text):
        found += [word for word in shlex.split(match["arguments"]) if _is_requirement(word)]
    return found


def _is_requirement(word: str) -> bool:
    """A requirement (`stripe`, `'hookinbox[redis]'`), not a flag or prose (`...`)."""
    try:
        Requirement(word)
    except InvalidRequirement:
        return False
    return not word.startswith("-")


def closure(wanted: Iterable[str]) -> set[str]:
    """Every distribution a fresh `pip install WANTED...` would bring (normalised names)."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = [Requirement(text) for text in wanted]
    while queue:
        requirement = queue.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: only a skipped block may use it (its import fails)
        found.add(name)
        for text in requires:
            needed = Requirement(text)
            if _applies(needed.marker, requirement.extras):
                queue.append(needed)
    return found


def _applies(marker: Marker | None, extras: set[str]) -> bool:
    if marker is None:
        return True
    return any(marker.evaluate({"extra": extra}) for extra in (extras or {""}))


def environment(distributions: Iterable[str], into: Path) -> Path:
    """A directory holding just `distributions` (their top-level files, linked), hookinbox
    from the source tree; the site-packages of a fresh environment with them installed."""
    into.mkdir(parents=True, exist_ok=True)
    for name in distributions:
        if name == CORE:
            (into / "hookinbox").symlink_to(SOURCE_TREE / "hookinbox")
            continue
        for entry in _top_level(metadata.distribution(name)):
            link = into / entry.name
            if not link.exists():
                link.symlink_to(entry)
    return into


def _top_level(distribution: metadata.Distribution) -> Iterator[Path]:
    tops = {Path(str(file)).parts[0] for file in distribution.files or []}
    for top in sorted(tops):
        if top in ("..", "__pycache__") or top.endswith(".pth"):
            continue
        path = Path(str(distribution.locate_file(top)))
        if path.exists():
            yield path


def imports(sources: Iterable[str]) -> list[str]:
    """The import statements of `sources` (Python code), each as a line of code."""
    statements: list[str] = []
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
                line = ast.unparse(node)
                if line not in statements:
                    statements.append(line)
    return statements


def top_level(statement: str) -> str:
    node = ast.parse(statement).body[0]
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0]
    assert isinstance(node, ast.Import)
    return node.names[0].name.split(".")[0]


CHECK = """
import json, sys
failed = []
for statement in json.loads(sys.argv[1]):
    try:
        exec(statement, {})
    except ImportError as error:  # MissingExtra is one
        failed.append(f"{statement}: {type(error).__name__}: {error}")
print(json.dumps(failed))
"""


def check_command(statements: list[str]) -> list[str]:
    """`python -S` running `statements` in an environment of their own (set PYTHONPATH)."""
    import json

    return [sys.executable, "-S", "-c", CHECK, json.dumps(statements)]
