"""The operator commands' errors: one `error: ...` line on stderr, exit 1 when the operation
failed (database unavailable), exit 2 for bad usage; never a traceback.

These need no database of their own (or one that is never reached), so they run once rather
than on each backend, and all at once.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import APP, UNREACHABLE, error_line, hookinbox_all
from tests.support.server import run_cli


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
        (["prune", "--older-than", "1e300d"], "not a duration: '1e300d'"),
        (["prune", "--older-than", "90"], "'90' has no unit: write 90d for days (or h, m, s)"),
        (["prune", "--older-than", "999999d"], "'999999d' reaches outside the calendar"),
        (["prune", "--older-than", "0d"], "the retention must be positive"),
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


def test_a_sqlite_file_that_cannot_be_opened_names_its_path_and_why(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "shop.db"
    in_a_file = tmp_path / "a-file" / "shop.db"
    (tmp_path / "a-file").write_text("not a directory")

    results = hookinbox_all(
        ["migrate", "--database-url", f"sqlite:///{missing}"],
        ["migrate", "--database-url", f"sqlite:///{in_a_file}"],
    )

    assert error_line(results[0], 1) == (
        f"error: database unavailable: cannot open the SQLite file {missing}: "
        f"no directory {missing.parent}"
    )
    assert error_line(results[1], 1).endswith(f"{in_a_file}: no directory {in_a_file.parent}")


def test_a_secret_from_an_unset_variable_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "unset_secret.py").write_text(
        "import os\n"
        "from hookinbox import Inbox\n"
        "from hookinbox.sources import Stripe\n"
        "inbox = Inbox('sqlite:///never.db')\n"
        "inbox.add_source(Stripe(secret=os.environ.get('HOOKINBOX_TEST_NEVER_SET')))\n"
    )
    result = run_cli("status", "unset_secret:inbox", env={"PYTHONPATH": str(tmp_path)})
    assert error_line(result, 2).endswith(
        "unset_secret.py:5: a secret must be a string, or a list of strings to rotate; "
        "got None (an unset environment variable?)"
    )
