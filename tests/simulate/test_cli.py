"""`hookinbox simulate` on the command line: help, errors, JSON, exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import click
import pytest

from hookinbox.cli._simulate import simulate_command
from tests.simulate.conftest import Receivers
from tests.support.server import run_cli

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`


def test_help_shows_every_flags_environment_variable() -> None:
    result = run_cli("simulate", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # click wraps long lines
    options = [p for p in simulate_command.params if isinstance(p, click.Option)]
    assert len(options) == 22
    for option in options:
        assert option.envvar and str(option.envvar).startswith("HOOKINBOX_SIMULATE_")
        assert str(option.envvar) in text.replace("- ", "-")


def test_an_unreachable_target_is_one_line_and_exit_1() -> None:
    result = run_cli(
        "simulate", "--provider", "stripe", "--secret", "whsec_x",
        "--target", "http://127.0.0.1:1/webhooks/stripe",
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach http://127.0.0.1:1/webhooks/stripe")
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_usage_is_one_line_and_exit_2() -> None:
    for args in (
        ["--provider", "standard", "--secret", "not base64!", "--target", "http://x/y"],
        ["--provider", "stripe", "--secret", "whsec_x"],  # no --target
        ["--provider", "paypal", "--secret", "x", "--target", "http://x/y"],
    ):
        result = run_cli("simulate", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error:")
        assert len(result.stderr.strip().splitlines()) == 1


def test_json_output_parses_and_exit_0(receivers: Receivers) -> None:
    result = run_cli(
        "simulate", "--provider", "github", "--secret", "s",
        "--target", f"{receivers.base_url}/flaky/0",
        "--events", "50", "--seed", "41", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    report = document["report"]
    assert document["ok"] is True and document["verification"] is None
    assert report["seed"] == 41 and report["events"] == 50 and report["complete"]
    assert report["by_status"] == {"200": report["deliveries"]}
    assert set(report["latency_ms"]) == {"p50", "p95", "p99", "max"}


def test_verify_with_nothing_to_read_fails_and_writes_nothing(
    receivers: Receivers, tmp_path: Path
) -> None:
    database = tmp_path / "theirs.db"
    sqlite3.connect(database).execute("CREATE TABLE unrelated (x INTEGER)").connection.close()
    result = run_cli(
        "simulate", "--provider", "shopify", "--secret", "s",
        "--target", f"{receivers.base_url}/flaky/0", "--events", "5",
        "--verify", f"sqlite:///{database}", "--drain-timeout", "1",
    )  # fmt: skip
    assert result.returncode == 1
    assert "nothing could be verified" in result.stderr
    with sqlite3.connect(database) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
        journal = connection.execute("PRAGMA journal_mode").fetchone()
    assert tables == [("unrelated",)]  # no hookinbox schema created in the user's database
    assert journal == ("delete",)  # nor its journal switched to WAL


def test_invalid_deliveries_answered_2xx_fail_the_run_without_verify(receivers: Receivers) -> None:
    """docs/simulate.md: any invalid delivery answered 2xx is a receiver failure, so `ok` is
    false and the exit code 1, with or without --verify (the flaky receiver checks nothing)."""
    result = run_cli(
        "simulate", "--provider", "stripe", "--secret", "whsec_x",
        "--target", f"{receivers.base_url}/flaky/0",
        "--events", "20", "--seed", "7", "--forged-rate", "0.5", "--json",
    )  # fmt: skip
    document = json.loads(result.stdout)
    accepted = document["report"]["invalid_accepted"]
    assert accepted > 0 and document["verification"] is None
    assert (document["ok"], result.returncode) == (False, 1)
    assert f"{accepted} invalid deliveries (forged, expired or malformed) answered 2xx" in (
        result.stderr
    )
