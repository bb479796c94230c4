"""The operator commands' errors: one `error: ...` line on stderr, exit 1 when the operation
failed (database unavailable), exit 2 for bad usage; never a traceback.

These need no database of their own (or one that is never reached), so they run once rather
than on each backend, and all at once.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import APP, UNREACHABLE, error_line, hookinbox_all


def test_an_unreachable_database_fails_with_one_line() -> None:
    commands = [
        ["status", "--check"],  # what a monitoring probe runs
        ["events", "list"],
        ["events", "show", "stripe", "evt_1"],
        ["replay", "stripe", "evt_1"],
        ["replay", "--status", "failed"],
        ["prune", APP],
    ]

    results = hookinbox_all(*([*args, "--database-url", UNREACHABLE] for args in commands))

    for args, result in zip(commands, results, strict=True):
        line = error_line(result, 1)
        assert line.startswith("error: database unavailable"), (args, line)


def test_without_app_or_database_url_is_a_usage_error() -> None:
    commands = [
        ["status"],
        ["events", "list"],
        ["replay", "stripe", "evt_1"],
        ["prune"],
    ]

    for args, result in zip(commands, hookinbox_all(*commands), strict=True):
        expected = "error: give APP (or set HOOKINBOX_APP) or --database-url"
        assert error_line(result, 2) == expected, args


GIVE = "give [APP] SOURCE EVENT_ID, or --status"


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'never-opened.db'}"
    cases = [
        (["events", "list", "--since", "yesterday"], "not a duration: 'yesterday'"),
        (["events", "list", "--since", "999999d"], "'999999d' reaches outside the calendar"),
        (["prune", "--older-than", "ninety"], "not a duration: 'ninety'"),
        (["prune", "--older-than", "1e300"], "not a duration: '1e300'"),
        (["prune", "--older-than", "999999d"], "'999999d' reaches outside the calendar"),
        (["prune", "--older-than", "0"], "the retention must be positive"),
        (["status", "--check", "--max-pending-age", "15 minutes"], "not a duration"),
        (["replay"], GIVE),
        (["replay", APP, "stripe", "evt_1", "extra"], GIVE),
        (["replay", APP, "stripe", "--status", "failed"], GIVE),
        (["replay", "--status", "processing"], "cannot be replayed"),
    ]

    results = hookinbox_all(*([*args, "--database-url", url] for args, _ in cases))

    for (args, message), result in zip(cases, results, strict=True):
        assert message in error_line(result, 2), args
    assert not (tmp_path / "never-opened.db").exists()  # refused before touching anything
