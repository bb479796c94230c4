"""Every number a setting takes has a finite range, refused outside it in one line (issue 45).

`nan` passed click's `FloatRange` (every comparison with it is false) and every Python
constructor: `HOOKINBOX_LEASE_SECONDS=nan` started a worker that processed nothing,
`POLL_INTERVAL=nan` busy-looped, `BUSY_TIMEOUT=nan` exited 1 with "unexpected ValueError",
and `RetryPolicy(first_delay=1e300)` raised `OverflowError` out of the worker's first retry.

The command line is walked from the click commands themselves, so a new option is covered
the day it is added: every numeric option, given on the command line or by its variable, is
fed `nan`, infinities, a negative, huge numbers, an empty string and garbage, and must be
refused before the command runs (its callback is replaced by one that says it was reached),
exit 2, one `error:` line naming the option and its variable. The Python side is walked from
the dataclasses' fields the same way. The subprocess runs are in tests/cli/test_hostile_settings.py.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import types
import typing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from hookinbox import (
    ConfigurationError,
    GroupCommit,
    Inbox,
    RetryPolicy,
    StoreOptions,
    WorkerOptions,
)
from hookinbox._operations import Thresholds
from hookinbox._settings import ReceiverSettings
from hookinbox.cli._commands import COMMANDS
from hookinbox.cli._main import main
from hookinbox.outbox import HTTPDestination, RabbitMQDestination
from hookinbox.simulate import SimulationConfig

DOCS = Path(__file__).parent.parent / "docs"
REACHED = 99
"""The exit code of a command whose callback ran: the value under test was not refused."""

HOSTILE_NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "1e300", "1" + "0" * 30, "", "garbage"]
"""Given on the command line; in a variable, all but the empty string (click, and every
shell convention, reads an empty variable as unset: tested on its own below)."""

REQUIRED = {
    "app": "nowhere_at_all:inbox",
    "provider": "stripe",
    "secret": "whsec_walk",
    "target": "http://127.0.0.1:9/webhooks/stripe",
    "source": "orders",
}
"""A valid value for each required parameter, so that the one under test is what fails."""

NAMES = {
    "app": "a module:attribute, refused where it is imported (tests/cli/test_errors.py)",
    "app_option": "the deprecated --app, the same",
    "arguments": "[APP] SOURCE EVENT_ID, refused where they are looked up",
    "source": "a source name, refused where it is looked up when APP is given",
    "source_filter": "the same, for replay",
    "event_type": "any provider's type name: free text",
    "reason": "an operator's note for the audit trail: free text",
    "secret": "the signing secret the target expects: free text",
    "effects_sql": "the user's own query, run read-only against the user's database",
    "wake_socket": "hidden; set by serve to a path it made",
    "key_id": "an encryption key's name (encryption new-key): 1-32 letters, digits, . _ -",
    "error_contains": "free text found in an event's last error (% and _ match themselves)",
    "queue": "a RabbitMQ queue's name, refused by the broker where it is looked up (exit 2)",
    "stream": "a JetStream stream's name, refused where it is looked up (exit 2)",
    "consumer": "a JetStream consumer's name, refused where it is looked up (exit 2)",
    "dead_letter_subject": "a NATS subject, refused where a stream must keep it (exit 2)",
}
"""String parameters whose value is a name or free text: no value is hostile by its form."""

CHECKED_BY_COMMAND = {
    # parameter: (a command that takes it, its other arguments)
    "database_url": ("migrate", []),
    "max_pending_age": ("status", ["--database-url", "{url}", "--check"]),
    "since": ("events list", ["--database-url", "{url}"]),
    "until": ("replay", ["--database-url", "{url}", "--status", "failed", "--dry-run"]),
    "older_than": ("prune", ["--database-url", "{url}", "--dry-run"]),
    "reconcile_every": ("worker", ["nowhere_at_all:inbox"]),
    "reconcile_timeout": ("worker", ["nowhere_at_all:inbox"]),
    "reconcile_page_timeout": ("worker", ["nowhere_at_all:inbox"]),
    "page_timeout": ("reconcile", ["nowhere_at_all:inbox", "stripe"]),
    "run_timeout": ("reconcile", ["nowhere_at_all:inbox", "stripe"]),
    "verify_url": ("simulate", ["--provider", "stripe", "--secret", "s", "--target", "{target}"]),
    "admin_token": ("dashboard", ["--database-url", "{url}"]),
    "target": ("simulate", ["--provider", "stripe", "--secret", "s"]),
    "length": ("trust", ["--database-url", "{url}", "asana"]),
    "payload_filter": ("expunge", ["--database-url", "{url}", "--source", "stripe", "--dry-run"]),
    "rabbitmq": ("consume", ["nowhere_at_all:inbox", "--source", "s", "--queue", "q"]),
    "jetstream": ("consume", ["nowhere_at_all:inbox", "--source", "s", "--stream", "s"]),
}
"""String parameters checked by the command's body before it touches anything."""

HOSTILE_TEXT = ["nan", "inf", "-inf", "-1", "-1d", "1e300", "1e300d", "", "garbage!"]


def leaf_commands() -> Iterator[tuple[list[str], click.Command]]:
    context = click.Context(main)
    for name in COMMANDS:
        yield from _leaves([name], main.get_command(context, name))


def _leaves(path: list[str], command: click.Command | None) -> Iterator[tuple[list[str], Any]]:
    assert command is not None, path
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaves([*path, name], sub)
    else:
        yield path, command


def is_numeric(param: click.Parameter) -> bool:
    return isinstance(param.type, click.types._NumberParamTypeBase)


def numeric_options() -> list[tuple[list[str], click.Command, click.Option]]:
    return [
        (path, command, param)
        for path, command in leaf_commands()
        for param in command.params
        if is_numeric(param) and isinstance(param, click.Option)
    ]


def option_id(case: tuple[list[str], click.Command, click.Option]) -> str:
    path, _, param = case
    return f"{' '.join(path)} {param.opts[0]}"


def required_arguments(command: click.Command, skip: click.Parameter) -> list[str]:
    args: list[str] = []
    for param in command.params:
        if param is skip or not param.required:
            continue
        assert param.name in REQUIRED, f"no valid value for required {param.name!r}"
        if isinstance(param, click.Option):
            args += [param.opts[0], REQUIRED[param.name]]
        else:
            args.append(REQUIRED[param.name])
    return args


@pytest.fixture
def walk(monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    """A runner whose commands never run: each callback exits `REACHED` instead, so a value
    that is not refused while the command line is parsed shows as that exit code. No
    HOOKINBOX_* variable of any option leaks in from outside."""
    for _, command in leaf_commands():

        def reached(**_kwargs: object) -> None:
            raise SystemExit(REACHED)

        monkeypatch.setattr(command, "callback", reached)
        for param in command.params:
            if isinstance(param.envvar, str):
                monkeypatch.delenv(param.envvar, raising=False)
    yield CliRunner()


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# -- the command line --------------------------------------------------------------------


@pytest.mark.parametrize("case", numeric_options(), ids=option_id)
def test_every_numeric_option_refuses_hostile_values(
    walk: CliRunner, case: tuple[list[str], click.Command, click.Option]
) -> None:
    path, command, option = case
    base = [*path, *required_arguments(command, option)]
    for value in HOSTILE_NUMBERS:
        line = one_error_line(walk.invoke(main, [*base, option.opts[0], value]))
        assert option.opts[0] in line, (value, line)
        if option.envvar:
            assert option.envvar in line, (value, line)  # the variable is named too
    if not isinstance(option.envvar, str):
        return
    for value in HOSTILE_NUMBERS:
        if not value:
            continue
        line = one_error_line(walk.invoke(main, base, env={option.envvar: value}))
        assert option.envvar in line and option.opts[0] in line, (value, line)


@pytest.mark.parametrize("case", numeric_options(), ids=option_id)
def test_every_numeric_option_has_one_shared_bounded_type(
    case: tuple[list[str], click.Command, click.Option],
) -> None:
    """No option is a bare `click.FloatRange`, `IntRange`, `int` or `float`: each takes its
    range from the one table the Python constructors check too (`hookinbox._ranges`)."""
    from hookinbox._ranges import Range
    from hookinbox.cli._types import BoundedFloat, BoundedInt

    _, _, option = case
    assert isinstance(option.type, BoundedInt | BoundedFloat), option.type
    limits = option.type.limits
    assert isinstance(limits, Range)
    assert math.isfinite(limits.low) and math.isfinite(limits.high)
    if limits.seconds:
        assert limits.high <= threading.TIMEOUT_MAX  # Event.wait(high) would not overflow
        datetime.now(UTC) + timedelta(seconds=limits.high)  # nor a deadline in the calendar


def test_an_empty_variable_is_read_as_unset(
    walk: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`HOOKINBOX_LEASE_SECONDS=` (a template's `${X:-}`) leaves the default: click and the
    shells read an empty variable as unset. On the command line, `--lease-seconds ''` is
    refused (above)."""
    seen: dict[str, Any] = {}
    from hookinbox.cli._worker import worker

    monkeypatch.setattr(worker, "callback", lambda **given: seen.update(given))
    result = walk.invoke(main, ["worker", "app:inbox"], env={"HOOKINBOX_LEASE_SECONDS": ""})
    assert result.exit_code == 0, result.output
    assert seen["lease_seconds"] == 60.0


def choice_and_flag_options() -> list[tuple[list[str], click.Command, click.Option]]:
    return [
        (path, command, param)
        for path, command in leaf_commands()
        for param in command.params
        if isinstance(param, click.Option)
        and isinstance(param.type, click.Choice | click.types.BoolParamType)
        and not (param.is_flag and not param.envvar)  # a flag alone takes no value
    ]


@pytest.mark.parametrize("case", choice_and_flag_options(), ids=option_id)
def test_every_choice_and_flag_variable_refuses_garbage(
    walk: CliRunner, case: tuple[list[str], click.Command, click.Option]
) -> None:
    path, command, option = case
    base = [*path, *required_arguments(command, option)]
    for value in ("nan", "-1", "garbage"):
        if not option.is_flag:
            line = one_error_line(walk.invoke(main, [*base, option.opts[0], value]))
            assert option.opts[0] in line, line
        if isinstance(option.envvar, str):
            line = one_error_line(walk.invoke(main, base, env={option.envvar: value}))
            assert option.envvar in line, line


def test_every_other_parameter_is_accounted_for() -> None:
    """A string parameter is a name or free text, checked by its command, or checked while
    the command line is parsed by a type of its own (the host): a new one must say which."""
    from hookinbox.cli._types import Host

    for path, command in leaf_commands():
        for param in command.params:
            if is_numeric(param) or isinstance(
                param.type, click.Choice | click.types.BoolParamType
            ):
                continue
            if isinstance(param.type, Host):
                continue
            assert param.name in NAMES or param.name in CHECKED_BY_COMMAND, (path, param.name)


@pytest.mark.parametrize("name", sorted(CHECKED_BY_COMMAND))
def test_strings_checked_by_their_command_refuse_hostile_values(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run for real (in this process), before any file is touched: exit 2, one line that
    names the value, the option or its variable."""
    for _, command in leaf_commands():
        for param in command.params:
            if isinstance(param.envvar, str):
                monkeypatch.delenv(param.envvar, raising=False)
    monkeypatch.delenv("HOOKINBOX_ADMIN_TOKEN", raising=False)
    url = f"sqlite:///{tmp_path / 'never.db'}"
    command, others = CHECKED_BY_COMMAND[name]
    option = next(
        param
        for _, leaf in leaf_commands()
        for param in leaf.params
        if param.name == name and isinstance(param, click.Option)
    )
    for value in HOSTILE_TEXT:
        given = (a.format(url=url, target=REQUIRED["target"]) for a in others)
        args = [*command.split(), *given, option.opts[0], value]
        line = one_error_line(CliRunner().invoke(main, args))
        words = str(option.name).replace("_", " ")  # "the admin token must be ..."
        named = [repr(value.strip()), option.opts[0], str(option.envvar), words]
        assert any(text in line for text in named), (value, line)
    assert not (tmp_path / "never.db").exists()


def test_a_garbage_host_is_refused_while_parsing(walk: CliRunner) -> None:
    for command in ("serve", "dashboard"):
        base = [command, *(["app:inbox"] if command == "serve" else [])]
        for value in ("no such host!", "-1", "", "a..b", "[::1]", "x" * 300, "1.2.3.4.5"):
            line = one_error_line(walk.invoke(main, [*base, "--host", value]))
            assert "--host" in line, line
        if command == "serve":
            line = one_error_line(walk.invoke(main, base, env={"HOOKINBOX_HOST": "no such!"}))
            assert "HOOKINBOX_HOST" in line, line
        for value in ("127.0.0.1", "::1", "0.0.0.0", "localhost", "api.internal"):
            assert walk.invoke(main, [*base, "--host", value]).exit_code == REACHED, value


# -- the Python API ----------------------------------------------------------------------

SIMULATION = {"provider": "stripe", "secret": "whsec_walk", "target": "http://127.0.0.1:9/"}

HOSTILE_PYTHON: list[object] = [
    math.nan,
    math.inf,
    -math.inf,
    -1,
    -1.0,
    1e300,
    10**30,
    True,
    "5",
]


def numeric_fields(kind: type) -> list[str]:
    import httpx  # named by HTTPDestination's annotations, under TYPE_CHECKING

    hints = typing.get_type_hints(kind, localns={"httpx": httpx})
    found = []
    for field in dataclasses.fields(kind):
        hint = hints[field.name]
        members = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if int in members or float in members:
            found.append(field.name)
    return found


SETTINGS: list[tuple[type, dict[str, Any]]] = [
    (WorkerOptions, {}),
    (StoreOptions, {}),
    (ReceiverSettings, {}),
    (RetryPolicy, {}),
    (GroupCommit, {}),
    (SimulationConfig, SIMULATION),
    (Thresholds, {}),
    (HTTPDestination, {"name": "shop", "url": "http://127.0.0.1:9/"}),
    (RabbitMQDestination, {"name": "bus", "url": "amqp://127.0.0.1:9/", "routing_key": "q"}),
]


def field_cases() -> list[tuple[type, dict[str, Any], str]]:
    return [(kind, base, name) for kind, base in SETTINGS for name in numeric_fields(kind)]


@pytest.mark.parametrize(
    ("kind", "base", "name"),
    [pytest.param(*case, id=f"{case[0].__name__}.{case[2]}") for case in field_cases()],
)
def test_every_numeric_field_refuses_hostile_values(
    kind: type, base: dict[str, Any], name: str
) -> None:
    for value in HOSTILE_PYTHON:
        with pytest.raises(ConfigurationError, match=rf"^{name} must be ") as refused:
            kind(**base, **{name: value})
        assert "\n" not in str(refused.value)
    kind(**base)  # the defaults themselves are in range


def test_the_inbox_constructor_refuses_them_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    for setting in ("body_timeout", "ack_deadline", "retry_after", "max_body_size"):
        with pytest.raises(ConfigurationError, match=rf"^{setting} must be "):
            Inbox(url, **{setting: math.nan})
    with pytest.raises(ConfigurationError, match=r"^busy_timeout must be "):
        Inbox(url, store_options=StoreOptions(busy_timeout=math.nan))
    with pytest.raises(ConfigurationError, match=r"^first_delay must be "):
        Inbox(url, retry=RetryPolicy(first_delay=1e300))
    with pytest.raises(ConfigurationError, match=r"^retention must be .* at most 36500 days"):
        Inbox(url, retention=timedelta(days=999_999))  # `now - retention`: OverflowError
    inbox = Inbox(url)
    with pytest.raises(ConfigurationError, match=r"^retention must be "):
        inbox.with_settings(retention=timedelta.max)
    with pytest.raises(ConfigurationError, match=r"^timeout must be "):
        inbox.process_due(timeout=math.nan)
    assert not (tmp_path / "inbox.db").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e300", "1" + "0" * 30, "²", "x"])
@pytest.mark.parametrize("variable", ["HOOKINBOX_MAX_FAILED", "HOOKINBOX_MIN_WORKERS"])
def test_thresholds_from_the_environment_refuse_hostile_values(variable: str, value: str) -> None:
    """The dashboard (and serve's /admin) read them from the environment, not from click."""
    with pytest.raises(ConfigurationError, match=variable):
        Thresholds.from_environment({variable: value})


@pytest.mark.parametrize("value", ["-1d", "-1", "nan", "inf"])
def test_a_negative_pending_age_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError):
        Thresholds.from_environment({"HOOKINBOX_MAX_PENDING_AGE": value})


# -- the documentation -------------------------------------------------------------------


def ranges_table() -> list[str]:
    """The rows of docs/cli.md's "Ranges" table."""
    section = (DOCS / "cli.md").read_text().split("\n## Ranges\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def test_every_numeric_option_is_in_the_ranges_table() -> None:
    rows = ranges_table()
    for path, _, option in numeric_options():
        if option.hidden:
            continue
        flag, takes = f"`{option.opts[0]}`", option.type.limits.describe()
        assert any(flag in row and takes in row for row in rows), (path, flag, takes)


PUBLIC = {
    "WorkerOptions", "StoreOptions", "RetryPolicy", "GroupCommit", "SimulationConfig",
    "HTTPDestination", "RabbitMQDestination",
}  # fmt: skip


def test_every_public_numeric_field_is_in_the_ranges_table() -> None:
    """`WorkerOptions.lease_seconds`, `Inbox(ack_deadline=)`, ... each with its range, in the
    words its `ConfigurationError` says."""
    from hookinbox import _ranges
    from hookinbox._processing._policy import _POLICY_RANGES
    from hookinbox._processing._worker import _WORKER_RANGES
    from hookinbox._storage._options import _RANGES as STORE_RANGES
    from hookinbox.simulate._config import RANGES as SIMULATION_RANGES

    limits = {
        "WorkerOptions": {
            **_WORKER_RANGES,
            "poll_interval": _ranges.POLL_INTERVAL,
            "sweep_interval": _ranges.SWEEP_INTERVAL,
            "parent_pid": _ranges.PROCESS_ID,
        },
        "StoreOptions": STORE_RANGES,
        "RetryPolicy": _POLICY_RANGES,
        "GroupCommit": {
            "max_rows": _ranges.GROUP_MAX_ROWS,
            "max_wait": _ranges.GROUP_MAX_WAIT,
            "writers": _ranges.GROUP_WRITERS,
        },
        "SimulationConfig": SIMULATION_RANGES,
        "HTTPDestination": {"timeout": _ranges.DESTINATION_TIMEOUT},
        "RabbitMQDestination": {"timeout": _ranges.DESTINATION_TIMEOUT},
        "ReceiverSettings": {
            "max_body_size": _ranges.MAX_BODY_SIZE,
            "body_timeout": _ranges.BODY_TIMEOUT,
            "retry_after": _ranges.RETRY_AFTER,
            "ack_deadline": _ranges.ACK_DEADLINE,
        },
    }
    rows = ranges_table()
    for kind, _, name in field_cases():
        if kind.__name__ not in {*PUBLIC, "ReceiverSettings"}:
            continue
        shown = f"`Inbox({name}=)`" if kind is ReceiverSettings else f"`{kind.__name__}.{name}`"
        takes = limits[kind.__name__][name].describe()
        assert any(shown in row and takes in row for row in rows), (shown, takes)
        with pytest.raises(ConfigurationError, match=re.escape(takes)):
            kind(**dict(SETTINGS)[kind], **{name: math.nan})  # the words of its error
