"""`simulate --verify URL` reads the database before sending: a run whose check cannot happen
sends nothing, and says why in one line (a missing driver, a missing file, a silent server)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.loopback import Loopback, Request, serving
from tests.support.server import ROOT, run_cli

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

HIDE_PYMYSQL = (
    # As if hookinbox[mysql] were not installed: `find_spec` answers None for a module that
    # `sys.modules` maps to None, and importing it fails, as for one never installed.
    "import sys; sys.modules['pymysql'] = None; from hookinbox.cli import main; main()"
)


def _ok(_request: Request) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "application/json"}, b'{"status":"accepted"}'


@pytest.fixture
def target() -> Iterator[Loopback]:
    with serving(_ok) as loopback:
        yield loopback


def _run(
    target: Loopback, *verify: str, python: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    args = (
        "simulate", "--provider", "stripe", "--secret", "whsec_x", "--events", "5",
        "--target", f"{target.url}/webhooks/stripe", *verify,
    )  # fmt: skip
    if not python:
        return run_cli(*args)
    command = [sys.executable, "-c", *python, *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_the_loopback_target_counts_what_a_run_sends(target: Loopback) -> None:
    result = _run(target)  # the control: the same run, without --verify, sends its deliveries
    assert result.returncode == 0, result.stderr
    assert target.count("/webhooks/stripe") >= 5


def test_a_missing_driver_sends_nothing_and_names_the_extra(target: Loopback) -> None:
    result = _run(target, "--verify", "mysql://shop:pw@127.0.0.1:1/shop", python=(HIDE_PYMYSQL,))
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "hookinbox[mysql]" in line, line
    assert target.requests == []


def test_an_unreachable_database_sends_nothing(target: Loopback) -> None:
    result = _run(target, "--verify", "postgresql://postgres@127.0.0.1:1/none")
    assert result.returncode == 1
    assert "database unavailable" in _one_error_line(result)
    assert target.requests == []


def test_a_missing_sqlite_file_sends_nothing(target: Loopback, tmp_path: Path) -> None:
    result = _run(target, "--verify", f"sqlite:///{tmp_path / 'absent.db'}")
    assert result.returncode == 2
    assert "no SQLite database" in _one_error_line(result)
    assert target.requests == []
    assert not (tmp_path / "absent.db").exists()
