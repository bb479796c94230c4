"""Each page's examples import only what the page's own install line brings.

A reader who pastes a page's `pip install ...` line into a fresh virtual environment must be
able to run the page's examples: every import statement of the page's ```python blocks is
run in an environment of exactly that line (`tests/docs/installs.py`), where a package the
line does not bring is not there, and a feature of hookinbox whose extra it does not name
raises `MissingExtra`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.docs.blocks import PAGES, ROOT
from tests.docs.installs import (
    check_command,
    closure,
    environment,
    imports,
    requirements,
    top_level,
)

PYTHON_BLOCK = re.compile(
    r"(?P<skip><!--\s*skip: next[^>]*-->\s*\n)?^```python\n(?P<code>.*?)^```",
    re.MULTILINE | re.DOTALL,
)
FILE_DIRECTIVE = re.compile(r"<!--\s*(?:file|append):\s*(\S+)\s*-->")
WITH_CODE = [page for page in PAGES if PYTHON_BLOCK.search(page.read_text())]

pytestmark = pytest.mark.slow  # each test installs into a virtual environment


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", WITH_CODE, ids=_page_id)
def test_a_pages_imports_come_with_its_install_line(page: Path, tmp_path: Path) -> None:
    text = page.read_text()
    local = {Path(path).parts[0].removesuffix(".py") for path in FILE_DIRECTIVE.findall(text)}
    statements = [
        line
        for line in imports(
            match["code"] for match in PYTHON_BLOCK.finditer(text) if not match["skip"]
        )  # a skipped block says why it cannot run here (a live API key, a service)
        if top_level(line) not in local  # the page's own project files (mysite, shop, ...)
    ]
    wanted = requirements(text)
    site = environment(closure(wanted), tmp_path / "site-packages")

    result = subprocess.run(
        check_command(statements),
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    failed = json.loads(result.stdout)
    assert failed == [], (
        f"{_page_id(page)}: pip install {' '.join(wanted[1:])} does not bring: "
        + ("; ".join(failed))
    )


def test_the_check_sees_what_is_missing(tmp_path: Path) -> None:
    """The environment really is that narrow: the core alone has neither stripe nor redis,
    and `hookinbox.claims` says which extra it needs."""
    site = environment(closure(["hookinbox"]), tmp_path / "site-packages")
    statements = ["import sqlalchemy", "import stripe", "from hookinbox.claims import ClaimInbox"]
    result = subprocess.run(
        check_command(statements),
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    failed = json.loads(result.stdout)
    assert [line.split(":")[0] for line in failed] == [statements[1], statements[2]], failed
    assert "hookinbox[redis]" in failed[1]
    assert closure(["hookinbox[server]"]) >= {"uvicorn", "prometheus-client", "sqlalchemy"}
