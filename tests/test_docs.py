"""Every ```python block in the README and docs runs, page by page, in a fresh directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = [
    page
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if BLOCK.search(page.read_text())
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(page.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKINBOX_DATABASE_URL", raising=False)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, source in enumerate(blocks, 1):
        code = compile(source, f"{page.name} block {number}", "exec")
        exec(code, namespace)
    inbox = namespace.get("inbox")
    close = getattr(inbox, "close", None)
    if callable(close):
        close()
    assert os.getcwd() == str(tmp_path)
