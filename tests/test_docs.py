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


REDIS_PREFIX = re.compile(r'prefix="([^"]+)"')


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    text = page.read_text()
    blocks = BLOCK.findall(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOOKINBOX_DATABASE_URL", raising=False)
    if "hookinbox.claims" in text:  # a Redis claims page: its examples run on the test Redis
        redis_url = request.getfixturevalue("redis_url")
        monkeypatch.setenv("REDIS_URL", redis_url)
        prefixes = set(REDIS_PREFIX.findall(text))
        _delete_keys(redis_url, prefixes)  # a run that crashed may have left some
        request.addfinalizer(lambda: _delete_keys(redis_url, prefixes))
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, source in enumerate(blocks, 1):
        code = compile(source, f"{page.name} block {number}", "exec")
        exec(code, namespace)
    inbox = namespace.get("inbox")
    close = getattr(inbox, "close", None)
    if callable(close):
        close()
    assert os.getcwd() == str(tmp_path)


def _delete_keys(redis_url: str, prefixes: set[str]) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for prefix in prefixes:
            keys = list(client.scan_iter(match=f"{prefix}:*"))
            if keys:
                client.delete(*keys)
    finally:
        client.close()
