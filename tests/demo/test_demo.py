"""`hookinbox demo` end to end: it passes on the shop, and it can fail."""

from __future__ import annotations

import json

from tests.support.server import run_cli


def test_the_demo_proves_exactly_once(db_url: str, backend: str) -> None:
    args = ["demo", "--events", "150", "--seed", "3", "--json"]
    if backend != "sqlite":
        args += ["--database-url", db_url]  # SQLite: the demo's own temporary file
    result = run_cli(*args, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    document = json.loads(result.stdout)
    verification = document["verification"]
    assert document["ok"] is True
    assert verification["expected"] == 150  # every valid event was acknowledged
    assert verification["processed"] == 150
    assert (verification["lost"], verification["doubled"], verification["invalid_accepted"]) == (
        0,
        0,
        0,
    )
    assert verification["effects_found"] == verification["effects_expected"] > 0
    assert document["report"]["invalid"]  # the storm did include forged and malformed ones
    receipts = document["receipts"]
    assert receipts["sent"] == receipts["expected"] == verification["effects_expected"]


def test_the_demo_fails_on_a_broken_handler() -> None:
    result = run_cli(
        "demo",
        "--events",
        "60",
        "--seed",
        "5",
        "--json",
        "tests.apps.broken_shop:inbox",
        timeout=240,
    )
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert document["verification"]["doubled"] > 0
