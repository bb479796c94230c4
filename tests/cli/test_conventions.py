"""The CLI's conventions (docs/cli.md): APP first (or $HOOKINBOX_APP) in every command, no
traceback anywhere, only documented exit codes, output that scripts can read, confirmation
before large replays, hints for misspelt sources, shell completion.

Each command runs as `python -m hookinbox ...` in a subprocess, as a person or a script would.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import click
import httpx
import pytest

from hookinbox import Status
from tests.cli.conftest import APP, Shop, error_line, hookinbox, hookinbox_all, invoice, parsed
from tests.cli.terminal import run_on_a_terminal
from tests.processing.conftest import checkout
from tests.support.server import ROOT, free_port, hookinbox_command, run_cli

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
TOKEN = "an-admin-token-long-enough-0123456789"


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another process listens on."""
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        yield port


@pytest.fixture
def user_modules(tmp_path: Path) -> Path:
    """A directory of the user's own modules, each broken in its own way."""
    files = {
        "raises_at_import.py": """
            from hookinbox import Inbox

            inbox = Inbox("sqlite:///never.db")
            settings = load_settings()  # line 4: no such function
        """,
        "empty_secret.py": """
            from hookinbox import Inbox
            from hookinbox.sources import Stripe

            inbox = Inbox("sqlite:///never.db")
            inbox.add_source(Stripe(secret=""))  # line 5: hookinbox refuses it
        """,
        "reads_a_missing_file.py": """
            from pathlib import Path

            SECRET = Path("/nonexistent/shop-config/secret.txt").read_text()  # line 3
        """,
        "not_python.py": """
            from hookinbox import Inbox
            inbox = Inbox(
        """,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"))
    return tmp_path


# -- one way to name the app -------------------------------------------------------------------


@SQLITE_ONLY
def test_every_command_takes_app_first_or_from_the_environment(shop: Shop) -> None:
    shop.deliver(checkout(1))
    shop.process()
    url = ["--database-url", shop.db_url]

    commands = [
        ["status", APP, "--json", *url],
        ["events", "list", APP, "--json", *url],
        ["events", "show", APP, "stripe", "evt_1", "--json", *url],
        ["replay", APP, "stripe", "evt_1", "--force", "--dry-run", "--json", *url],
        ["replay", APP, "--status", "failed", "--dry-run", "--json", *url],
        ["prune", APP, "--dry-run", "--json", *url],
        ["migrate", APP, "--json", *url],
    ]
    results = hookinbox_all(*commands[:4]) + hookinbox_all(*commands[4:])
    from_environment = [
        run_cli(*[a for a in args if a != APP], env={"HOOKINBOX_APP": APP}, timeout=60)
        for args in commands[:4]
    ]

    for args, result in zip(commands + commands[:4], results + from_environment, strict=True):
        assert (result.returncode, result.stderr) == (0, ""), (args, result.stderr)
        json.loads(result.stdout)
    assert parsed(results[2])["event_id"] == "evt_1"
    assert shop.event("evt_1").status is Status.PROCESSED  # dry runs changed nothing


@SQLITE_ONLY
def test_app_option_still_works_with_a_deprecation_warning(shop: Shop) -> None:
    url = ["--database-url", shop.db_url]

    old, twice = hookinbox_all(
        ["status", "--app", APP, "--json", *url],
        ["status", APP, "--app", "tests.apps.basic:inbox", *url],
    )

    assert old.returncode == 0
    json.loads(old.stdout)
    assert old.stderr.startswith("warning: --app is deprecated")
    assert len(old.stderr.splitlines()) == 1
    assert twice.returncode == 2
    assert "APP is given twice" in twice.stderr.splitlines()[-1]


# -- no traceback --------------------------------------------------------------------------


def test_a_busy_port_is_one_line_and_exit_1(busy_port: int, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    port = str(busy_port)
    serve, dashboard, worker = hookinbox_all(
        ["serve", "tests.apps.basic:inbox", "--database-url", url, "--port", port],
        ["dashboard", "tests.apps.basic:inbox", "--database-url", url, "--port", port,
         "--admin-token", TOKEN],
        ["worker", "tests.apps.basic:inbox", "--database-url", url, "--metrics-port", port],
    )  # fmt: skip

    address = f"127.0.0.1:{busy_port}"
    assert error_line(serve, 1) == (
        f"error: hookinbox serve cannot listen on {address}: Address already in use"
    )
    assert error_line(dashboard, 1) == (
        f"error: hookinbox dashboard cannot listen on {address}: Address already in use"
    )
    assert error_line(worker, 1) == (
        f"error: cannot serve metrics on {address}: Address already in use"
    )


def test_an_error_in_the_users_module_names_its_file_and_line(user_modules: Path) -> None:
    env = {"PYTHONPATH": str(user_modules)}
    cases = {
        "raises_at_import": (
            2,
            f"{user_modules / 'raises_at_import.py'}:4: NameError: name 'load_settings'",
        ),
        "empty_secret": (
            2,
            f"{user_modules / 'empty_secret.py'}:5: a source needs at least one non-empty secret",
        ),
        "reads_a_missing_file": (
            2,
            f"{user_modules / 'reads_a_missing_file.py'}:3: cannot read "
            "/nonexistent/shop-config/secret.txt: No such file or directory",
        ),
        "not_python": (2, f"{user_modules / 'not_python.py'}:2: SyntaxError: "),
    }
    for module, (code, expected) in cases.items():
        for command in (["serve", f"{module}:inbox"], ["status", f"{module}:inbox"]):
            result = run_cli(*command, env=env, timeout=60)
            line = error_line(result, code)
            assert expected in line, (command, line)
            assert "importlib" not in line and "src/hookinbox" not in line, line


def test_a_file_path_as_app_gets_a_hint() -> None:
    relative, here = hookinbox_all(
        ["serve", "../shop/app.py:inbox"],
        ["worker", "app.py:inbox"],
    )

    assert error_line(relative, 2) == (
        "error: APP is module:attribute, not a file path: use app:inbox from ../shop "
        "(cd ../shop, or PYTHONPATH=../shop)"
    )
    assert error_line(here, 2) == "error: APP is module:attribute, not a file path: use app:inbox"


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    garbage = tmp_path / "inbox.db"
    garbage.write_bytes(b"not a database, whatever its name says " * 100)

    results = hookinbox_all(
        ["status", "--database-url", f"sqlite:///{garbage}"],
        ["migrate", "--database-url", f"sqlite:///{garbage}"],
    )

    for result in results:
        assert error_line(result, 1) == (
            "error: database unavailable: DatabaseError: file is not a database (SQLITE_NOTADB)"
        )


# -- output --------------------------------------------------------------------------------


def test_dashboard_prints_its_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    assert hookinbox("migrate", "--database-url", url).returncode == 0
    port = free_port()
    command = hookinbox_command("dashboard", APP, "--database-url", url, "--port", str(port))
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "HOOKINBOX_ADMIN_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], 60)
            assert ready, "the dashboard printed nothing within 60 s"
            first = process.stdout.readline().strip()
            assert first == f"hookinbox dashboard: http://127.0.0.1:{port}/admin/"
            answer = _get_when_up(first.partition(": ")[2])
            assert answer.status_code == 303
            assert answer.headers["location"].endswith("/admin/login")
        finally:
            process.terminate()
            process.wait(timeout=30)


def _get_when_up(url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@SQLITE_ONLY
def test_piped_output_is_plain_columns_never_wrapped(shop: Shop) -> None:
    long_id = "evt_" + "x" * 150
    shop.deliver({**checkout(1), "id": long_id, "type": "checkout.session.completed"})
    shop.deliver(invoice(2))

    listed, status = shop.cli_all(["events", "list"], ["status"])

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3  # the header and one line per event, however long
    assert re.split(r"\s{2,}", lines[0]) == [
        "received", "source", "event id", "type", "status", "attempts", "deliveries",
        "outcome / last error",
    ]  # fmt: skip
    assert long_id in lines[2] and len(lines[2]) > 200
    column = lines[0].index("event id")
    assert [line[column:].split()[0] for line in lines[1:]] == ["evt_2", long_id]
    assert status.returncode == 0, status.stderr
    for text in (listed.stdout, status.stdout):
        assert not set(text) & set("│┃━─┏┓┗┛╭╮╰╯"), text  # no box drawing off a terminal
        assert "\x1b[" not in text  # no colour codes either
    assert "stripe" in status.stdout and "Events by source and status:" in status.stdout


@SQLITE_ONLY
def test_on_a_terminal_tables_are_drawn(shop: Shop) -> None:
    shop.deliver(checkout(1))
    output = _on_a_terminal(["events", "list", "--database-url", shop.db_url])
    assert "evt_1" in output
    assert set(output) & set("│┃━─┏┓┗┛╭╮╰╯"), output  # rich draws the table


def _on_a_terminal(args: list[str], answer: bytes | None = None) -> str:
    """The command's output on a terminal 200 columns wide, and its exit code on a last line."""
    output, code = run_on_a_terminal(args, answer=answer)
    return f"{output}\nexit {code}"


# -- replay: confirmation, dry run, hints --------------------------------------------------


@SQLITE_ONLY
def test_a_large_replay_asks_first(shop: Shop) -> None:
    for number in (1, 2, 3):
        shop.fail(number)
    threshold = {"HOOKINBOX_REPLAY_CONFIRM_ABOVE": "2"}
    url = ["--database-url", shop.db_url]

    piped = run_cli("replay", "--status", "failed", *url, env=threshold, timeout=60)
    dry_run = run_cli("replay", "--status", "failed", "--dry-run", *url, env=threshold)

    assert "more than --confirm-above 2: add --yes" in error_line(piped, 2)
    assert dry_run.returncode == 0, dry_run.stderr
    assert dry_run.stdout.splitlines() == [
        "would replay 3 failed events (dry run: nothing changed)",
        *(f"  stripe evt_{n} invoice.paid: RuntimeError: payments API down" for n in (3, 2, 1)),
    ]  # the count, then the newest matches with their last error
    assert {shop.event(f"evt_{n}").status for n in (1, 2, 3)} == {Status.FAILED}

    declined = _on_a_terminal(
        ["replay", "--status", "failed", "--confirm-above", "2", *url], answer=b"n\n"
    )
    assert "Replay 3 failed events? [y/N]" in declined
    assert declined.endswith("exit 1")
    assert {shop.event(f"evt_{n}").status for n in (1, 2, 3)} == {Status.FAILED}

    confirmed = _on_a_terminal(
        ["replay", "--status", "failed", "--confirm-above", "2", *url], answer=b"y\n"
    )
    assert "replayed 3 failed events" in confirmed and confirmed.endswith("exit 0")
    assert {shop.event(f"evt_{n}").status for n in (1, 2, 3)} == {Status.PENDING}

    shop.catch_up()  # the CLI replayed them as of the wall clock
    shop.process()
    shop.clock.advance(10)
    shop.process()
    assert {shop.event(f"evt_{n}").status for n in (1, 2, 3)} == {Status.FAILED}
    yes = run_cli("replay", "--status", "failed", "--yes", "--json", *url, env=threshold)
    assert parsed(yes) == {"dry_run": False, "matched": 3, "replayed": 3, "status": "failed"}


def test_the_replay_threshold_default_is_documented() -> None:
    shown = run_cli("replay", "--help")
    assert shown.returncode == 0
    option = shown.stdout.rsplit("--confirm-above", 1)[1].split("--json", 1)[0]
    assert "HOOKINBOX_REPLAY_CONFIRM_ABOVE" in option and re.search(r"default:\s+100\b", option)
    documented = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "(default 100, `HOOKINBOX_REPLAY_CONFIRM_ABOVE`)" in documented


@SQLITE_ONLY
def test_misspelt_sources_get_a_hint(shop: Shop) -> None:
    shop.fail(1)

    one, bulk, listed = shop.cli_all(
        ["replay", "strpe", "evt_1"],
        ["replay", "--status", "failed", "--source", "Stripe"],
        ["events", "list", "--source", "stirpe"],
    )

    assert error_line(one, 2) == "error: no source is named 'strpe' (did you mean 'stripe'?)"
    assert error_line(bulk, 2) == "error: no source is named 'Stripe' (did you mean 'stripe'?)"
    assert error_line(listed, 2) == "error: no source is named 'stirpe' (did you mean 'stripe'?)"
    assert shop.event("evt_1").status is Status.FAILED


# -- help, completion, names ---------------------------------------------------------------


def test_help_imports_no_heavy_module() -> None:
    result = subprocess.run(
        [*hookinbox_command("--help")[:1], "-X", "importtime", *hookinbox_command("--help")[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines()
    }
    heavy = {"sqlalchemy", "alembic", "uvicorn", "rich", "starlette", "httpx", "anyio",
             "prometheus_client", "psycopg", "jinja2", "cryptography"}  # fmt: skip
    assert not imported & heavy, imported & heavy
    assert "click" in imported


def test_every_command_is_listed_with_its_own_short_help() -> None:
    from hookinbox.cli._commands import COMMANDS
    from hookinbox.cli._main import main

    listing = run_cli("--help").stdout
    context = click.Context(main)
    for name, entry in COMMANDS.items():
        command = main.get_command(context, name)
        assert command is not None
        assert command.short_help == entry.short_help, name
        assert re.search(rf"^  {name}\s+{re.escape(entry.short_help)}$", listing, re.M), name


def _commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    from hookinbox.cli._main import main

    context = click.Context(main)
    for name in main.list_commands(context):
        command = main.get_command(context, name)
        assert command is not None, name
        yield (name,), command
        if isinstance(command, click.Group):
            for sub in command.list_commands(context):
                subcommand = command.get_command(context, sub)
                assert subcommand is not None, (name, sub)
                yield (name, sub), subcommand


def test_every_help_fits_80_columns() -> None:
    from click.testing import CliRunner

    from hookinbox.cli._main import main

    runner = CliRunner()
    for path, _command in [((), main), *_commands()]:
        result = runner.invoke(main, [*path, "--help"], prog_name="hookinbox", terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        too_wide = [line for line in result.output.splitlines() if len(line) > 80]
        assert not too_wide, (path, too_wide)


def test_database_url_help_names_every_database() -> None:
    from hookinbox._settings import DATABASE_URL_ENV

    taking = [
        (path, option)
        for path, command in _commands()
        for option in command.params
        if isinstance(option, click.Option) and option.envvar == DATABASE_URL_ENV
    ]
    assert len(taking) >= 8, taking  # every operator command
    for path, option in taking:
        for scheme in ("sqlite:///", "postgresql://", "mysql://"):
            assert scheme in (option.help or ""), (path, option.help)


def test_shell_completion_is_clicks() -> None:
    script = run_cli(env={"_HOOKINBOX_COMPLETE": "bash_source"})
    completed = run_cli(
        env={"_HOOKINBOX_COMPLETE": "bash_complete", "COMP_WORDS": "hookinbox sta",
             "COMP_CWORD": "1"},
    )  # fmt: skip

    assert script.returncode == 0 and "_hookinbox_completion" in script.stdout
    assert completed.returncode == 0
    assert completed.stdout.split() == ["plain,status"]


def test_the_cli_reads_the_variables_the_library_reads() -> None:
    from hookinbox._model import Status as Statuses
    from hookinbox._settings import DATABASE_URL_ENV
    from hookinbox.cli import _options
    from hookinbox.cli._events import STATUSES

    assert _options.DATABASE_URL_ENV == DATABASE_URL_ENV
    assert list(STATUSES.choices) == [s.value for s in Statuses]


def test_a_misspelt_command_gets_a_hint() -> None:
    (misspelt,) = hookinbox_all(["stauts"])
    assert error_line(misspelt, 2) == (
        "error: No such command 'stauts'. Did you mean 'status'?; see `hookinbox --help`"
    )


HOSTILE = "[/bold] \x1b]0;owned\x07 \x1b[2J \x9b31m"
"""Text a sender chose: rich markup, a terminal title, a screen wipe, a C1 CSI."""


@SQLITE_ONLY
def test_untrusted_text_reaches_a_terminal_escaped(shop: Shop) -> None:
    shop.deliver({**checkout(1), "note": HOSTILE})
    show = ["events", "show", "stripe", "evt_1", "--database-url", shop.db_url]
    on_terminal = _on_a_terminal(show)
    assert on_terminal.endswith("exit 0"), on_terminal  # rich read no markup in it
    plain = shop.cli("events", "show", "stripe", "evt_1")
    assert plain.returncode == 0, plain.stderr
    for shown in (on_terminal, plain.stdout):
        # JSON escapes C0 controls itself; hookinbox escapes DEL and C1 as well.
        assert "[/bold] \\u001b]0;owned\\u0007 \\u001b[2J \\x9b31m" in shown
        assert not {"\x07", "\x9b"} & set(shown), shown
        assert "\x1b]0;" not in shown and "\x1b[2J" not in shown
