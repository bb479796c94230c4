"""`hookinbox migrate --check` and `--plan`: where the schema stands and what would run, read
without a write; every bad input one line and a documented exit (docs/cli.md)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._migrations import migrate
from hookinbox._storage._schema import schema_versions
from tests.cli.conftest import UNREACHABLE
from tests.support.server import run_cli


def _at(path: Path, version: int) -> str:
    url = f"sqlite:///{path}"
    store = Store(url)
    migrate(store.engine, target=version)
    store.dispose()
    return url


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_check_and_plan_on_an_older_schema_say_what_is_pending_and_write_nothing(
    tmp_path: Path,
) -> None:
    database = tmp_path / "inbox.db"
    url = _at(database, LATEST_VERSION - 2)
    before = _digest(database)
    check = run_cli("migrate", "--check", "--database-url", url)
    plan = run_cli("migrate", "--plan", "--database-url", url)
    plan_json = run_cli("migrate", "--plan", "--json", "--database-url", url)
    assert _digest(database) == before  # not a byte written
    assert check.returncode == 1, check.stderr
    pending = f"{LATEST_VERSION - 1}, {LATEST_VERSION}"
    assert check.stdout.strip().endswith(f"2 migrations pending ({pending})")
    assert check.stderr == ""
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[1].split() == ["version", "kind", "then", "runs", "with", "what", "it", "changes"]
    assert [line.split()[:2] for line in lines[2:]] == [
        [str(LATEST_VERSION - 1), "contract"],  # schema 15: the queue beside the outbox
        [str(LATEST_VERSION), "expand"],  # schema 16: paused sources
    ]
    document = json.loads(plan_json.stdout)
    assert document["state"] == "pending"
    assert [m["version"] for m in document["migrations"]] == [LATEST_VERSION - 1, LATEST_VERSION]
    assert run_cli("migrate", "--database-url", url).returncode == 0
    after = run_cli("migrate", "--check", "--json", "--database-url", url)
    assert after.returncode == 0
    assert json.loads(after.stdout) | {"pending": []} == {
        "ok": True,
        "state": "current",
        "schema_version": LATEST_VERSION,
        "code_schema_version": LATEST_VERSION,
        "min_code_version": None,
        "pending": [],
    }
    plan_after = run_cli("migrate", "--plan", "--database-url", url)
    assert plan_after.stdout.startswith("nothing to run: ")


@pytest.mark.parametrize(("needs", "state"), [(1, "newer_compatible"), (99, "newer_incompatible")])
def test_check_on_a_newer_schema_says_whether_this_hookinbox_runs_on_it(
    tmp_path: Path, needs: int, state: str
) -> None:
    url = _at(tmp_path / "inbox.db", LATEST_VERSION)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            schema_versions.insert().values(
                version=LATEST_VERSION + 1, applied_at=sa.func.now(), min_code_version=needs
            )
        )
    engine.dispose()
    check = run_cli("migrate", "--check", "--database-url", url)
    assert check.returncode == 1
    assert f"version {LATEST_VERSION + 1}, newer than this hookinbox's" in check.stdout
    document = json.loads(run_cli("migrate", "--check", "--json", "--database-url", url).stdout)
    assert (document["state"], document["min_code_version"]) == (state, needs)
    upgrade = run_cli("migrate", "--database-url", url)
    if state == "newer_compatible":
        assert upgrade.returncode == 0
        assert upgrade.stdout.startswith("nothing to migrate: ")
    else:  # as serve and worker refuse to start: a configuration to change, not a retry
        assert upgrade.returncode == 2
        assert upgrade.stderr.strip().endswith("or later: upgrade hookinbox")


@pytest.mark.parametrize("flag", ["--check", "--plan"])
def test_bad_inputs_are_one_line_and_a_documented_exit(tmp_path: Path, flag: str) -> None:
    missing = tmp_path / "missing.db"
    cases = [
        (["--database-url", UNREACHABLE], 1, "error: database unavailable: "),
        (["--database-url", "foo://x"], 2, "error: unsupported database 'foo'"),
        (["--database-url", f"sqlite:///{missing}"], 2, "error: no database at "),
        ([], 2, "error: give APP"),
    ]
    for args, code, start in cases:
        result = run_cli("migrate", flag, *args, env={"HOOKINBOX_APP": ""})
        assert (result.returncode, result.stdout) == (code, ""), result.stderr
        assert result.stderr.startswith(start) and result.stderr.count("\n") == 1, result.stderr
    assert not missing.exists()  # a check creates no database
    both = run_cli("migrate", "--check", "--plan", "--database-url", "sqlite:///x.db")
    assert both.returncode == 2 and "give one" in both.stderr
